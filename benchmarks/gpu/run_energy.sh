#!/usr/bin/env bash
# Energy per output token of a real GPU engine (issue 28 item 2), on the H200 host through the device tool:
#   carry [".whl"] (the serving wheels, see benchmarks/gpu/README.md); command:
#   bash benchmarks/gpu/run_energy.sh
# Makes the local Llama and runs campaigns/gpu/transformers-energy.yaml (NVML power/energy sampled every
# 0.1 s); brings back the console output, the archive's energy.json / power.parquet / service.json and the
# NVML idle/load check of benchmarks/gpu/power_nvml.py.
set -uo pipefail
OUT="${OUT:-/tmp/out}"; mkdir -p "$OUT"
python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site .whl/*.whl \
  || exit 1
export PYTHONPATH=/tmp/site:$PWD PYTHONUNBUFFERED=1 HF_HUB_OFFLINE=1 COLUMNS=160
WS=/tmp/ws-energy
nvidia-smi --query-gpu=name,driver_version,power.limit,memory.used,memory.total --format=csv | tee "$OUT/gpu.txt"
python3 benchmarks/gpu/make_llama.py /tmp/llama8 --layers 8 --hidden 1024 | tee -a "$OUT/gpu.txt" || exit 1
time python3 -m harness.cli campaign run campaigns/gpu/transformers-energy.yaml -w "$WS" 2>&1 | tee "$OUT/energy.txt"
A=$(ls "$WS/archives" | grep -v '^\.' | head -1)
cp "$WS/archives/$A/energy.json" "$OUT/energy.json" 2>/dev/null
cp "$WS/archives/$A/power.parquet" "$OUT/power.parquet" 2>/dev/null
cp "$WS/archives/$A/results.json" "$OUT/results.json" 2>/dev/null
python3 benchmarks/gpu/power_nvml.py "$OUT/power_nvml.json" --seconds 10 --idle-s 5 --interval 0.1 2>&1 | tail -12
ls -la "$OUT"
