#!/usr/bin/env bash
# A real GPU engine in dsv4h's loop (issue 16), on the H200 host through the device tool:
#   carry [".whl"] (the serving wheels, see benchmarks/gpu/README.md); command:
#   bash benchmarks/gpu/run_transformers.sh
# Makes the local Llama, then runs the formal decode matrix C1..C64 and the ABBA screen (CUDA graphs on vs
# off) through the generic OpenAI path; dsv4h launches, checks GPU owners, owns and stops every server.
# Brings back the console output and the whole workspace (archives + ledgers) as ws.tar.gz.
set -uo pipefail
OUT="${OUT:-/tmp/out}"; mkdir -p "$OUT"
python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site .whl/*.whl \
  || exit 1
export PYTHONPATH=/tmp/site:$PWD PYTHONUNBUFFERED=1 HF_HUB_OFFLINE=1 COLUMNS=120
WS=/tmp/ws-gpu
nvidia-smi --query-gpu=name,driver_version,memory.used,memory.total --format=csv | tee "$OUT/gpu.txt"
python3 benchmarks/gpu/make_llama.py /tmp/llama8 --layers 8 --hidden 1024 | tee -a "$OUT/gpu.txt" || exit 1
time python3 -m harness.cli campaign run campaigns/gpu/transformers-matrix.yaml -w "$WS" 2>&1 | tee "$OUT/matrix.txt"
time python3 -m harness.cli campaign run campaigns/gpu/transformers-abba.yaml -w "$WS" 2>&1 | tee "$OUT/abba.txt"
python3 -m harness.cli archive list -w "$WS" 2>&1 | tee -a "$OUT/abba.txt"
tar czf "$OUT/ws-gpu.tar.gz" -C /tmp ws-gpu
ls -la "$OUT"
