#!/usr/bin/env bash
# Probe `transformers serve --continuous-batching` on the H200 host before measuring it: install the
# carried serving wheels, make the local Llama, start the server, and record what its endpoints
# answer (health paths, /v1/models, one streamed completion with a text prompt and one with token
# ids, one streamed chat completion). Output: $OUT/probe.txt. Run through the device tool with
# carry [".whl"]:  bash benchmarks/gpu/probe_transformers.sh
set -uo pipefail
OUT="${OUT:-/tmp/out}"; mkdir -p "$OUT"
python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site .whl/*.whl \
  || exit 1
export PYTHONPATH=/tmp/site:$PWD PYTHONUNBUFFERED=1 HF_HUB_OFFLINE=1
exec > >(tee "$OUT/probe.txt") 2>&1
nvidia-smi --query-gpu=name,memory.used,memory.total --format=csv
python3 -c "import transformers, torch; print('transformers', transformers.__version__, 'torch', torch.__version__)"
python3 benchmarks/gpu/make_llama.py /tmp/llama8 --layers 8 --hidden 1024 || exit 1
python3 -m transformers.cli.transformers serve --help | head -80
PORT=30777
setsid python3 -m transformers.cli.transformers serve /tmp/llama8 --continuous-batching --device cuda:0 \
  --host 127.0.0.1 --port $PORT > "$OUT/serve.log" 2>&1 &
for i in $(seq 1 120); do
  if curl -s -o /dev/null -w '%{http_code}' http://127.0.0.1:$PORT/v1/models | grep -q 200; then break; fi
  sleep 1
done
echo "== ready after ~${i}s"
for p in /health /v1/models /server_info /metrics; do
  echo "== GET $p -> $(curl -s -o /tmp/b -w '%{http_code}' http://127.0.0.1:$PORT$p)"; head -c 600 /tmp/b; echo
done
echo "== completions, text prompt"
curl -sN -m 60 http://127.0.0.1:$PORT/v1/completions -H 'Content-Type: application/json' -d \
  '{"model":"/tmp/llama8","prompt":"def add(a, b):","max_tokens":8,"temperature":0,"stream":true,"stream_options":{"include_usage":true,"continuous_usage_stats":true}}' | head -c 3000; echo
echo "== completions, token-id prompt"
curl -sN -m 60 http://127.0.0.1:$PORT/v1/completions -H 'Content-Type: application/json' -d \
  '{"model":"/tmp/llama8","prompt":[321,7138,13,93,306,336,772],"max_tokens":8,"temperature":0,"stream":true}' | head -c 2000; echo
echo "== chat"
curl -sN -m 60 http://127.0.0.1:$PORT/v1/chat/completions -H 'Content-Type: application/json' -d \
  '{"model":"/tmp/llama8","messages":[{"role":"user","content":"def add(a, b):"}],"max_tokens":8,"temperature":0,"stream":true,"stream_options":{"include_usage":true}}' | head -c 3000; echo
echo "== serve log tail"; tail -40 "$OUT/serve.log"
