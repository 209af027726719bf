#!/bin/bash
# Runs on the 16-core H200 host (device tool) in one call of about 6-7 minutes, writing into $OUT:
#  1. the client benchmark matrix (C64/256/512/1024/2048 x 20 ms/10 ms x single/workers) against the native
#     event server (benchmarks/native) on the wire transport (harness.load.wire), workers sized by auto_workers
#     (CPU share) and by lag_workers (burst drain);
#  2. the wire transport's workers mode at C1024 and C2048 with 4, 8 and 12 workers (receive lag against count);
#  3. the same call's aiohttp transport at C1024 @ 20 ms and C2048 @ 10 ms (single and 12 workers), for comparison;
#  4. the C1024 campaign on the simulator cluster (campaigns/scale-c1024.yaml: sim.processes 8) and its evidence.
# Usage there (carry .whl and benchmarks/native/build): bash benchmarks/device_scale.sh 2>&1 | tee $OUT/device_log.txt
# .whl holds what the host's image lacks (docs/hosts.md#h200-host): pydantic's set and httptools, cp312 manylinux wheels.
python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site .whl/*.whl || exit 1
export PYTHONPATH=/tmp/site:$PWD PYTHONUNBUFFERED=1
OUT=${OUT:-/tmp/out}; mkdir -p "$OUT"
echo "cpus: $(nproc)  python: $(python3 -V 2>&1)  gcc: $(command -v gcc || echo none)"
python3 -c "import harness.cli, harness.load.wire" || exit 1
# The native server: built here when a compiler exists, else the static binary carried from the dev box.
BIN=benchmarks/native/build/event_server
if command -v gcc >/dev/null; then bash benchmarks/native/build.sh /tmp/event_server && BIN=/tmp/event_server; fi
[ -x "$BIN" ] || { echo "no native event server binary ($BIN)"; exit 1; }
echo "native server: $BIN"
timeout 280 python3 benchmarks/bench_scale.py --server native --native-bin "$BIN" --seconds 2 --workers auto,lag \
  --transports wire --out "$OUT/scale_h200_wire.json"
echo "bench rc=$?"
timeout 150 python3 benchmarks/bench_scale.py --server native --native-bin "$BIN" --seconds 2 --tiers 1024,2048 \
  --modes workers --workers 4,8,12 --transports wire --out "$OUT/scale_h200_wire_workers.json"
echo "bench (worker counts) rc=$?"
timeout 100 python3 benchmarks/bench_scale.py --server native --native-bin "$BIN" --seconds 2 --tiers 1024 --steps-ms 20 \
  --modes single,workers --workers 12 --transports aiohttp --out "$OUT/scale_h200_aiohttp_c1024.json"
timeout 100 python3 benchmarks/bench_scale.py --server native --native-bin "$BIN" --seconds 2 --tiers 2048 --steps-ms 10 \
  --modes single,workers --workers 12 --transports aiohttp --out "$OUT/scale_h200_aiohttp_c2048.json"
echo "bench (aiohttp) rc=$?"
rm -rf /tmp/ws
timeout 200 python3 -m harness.cli campaign run campaigns/scale-c1024.yaml -w /tmp/ws > "$OUT/campaign.txt" 2>&1
echo "campaign rc=$?"; tail -15 "$OUT/campaign.txt"
python3 -m harness.cli evidence check -w /tmp/ws > "$OUT/evidence.txt" 2>&1; cat "$OUT/evidence.txt"
A=$(ls -d /tmp/ws/archives/*/ | head -1)
python3 - "$A" <<'PY' > "$OUT/scale_c1024_campaign_h200.txt"
import json, sys
a = sys.argv[1]
r = json.load(open(a + "/results.json"))
for c in r["cells"]:
    print(c["cell_id"], c["status"], "median", c["median"], "rounds", c["round_rates"], "vs 51200:", c["median"] / 51200 - 1)
for line in open(a + "/wave_checks.jsonl"):
    w = json.loads(line)
    print({k: w.get(k) for k in ("wave_id", "phase", "workers", "transport", "send_skew_s", "loop_lag_p50_s",
                                 "loop_lag_p99_s", "loop_cpu_share", "sim_late_steps", "sim_lateness_s")})
PY
cat "$OUT/scale_c1024_campaign_h200.txt"
