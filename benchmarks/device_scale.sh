#!/bin/bash
# Runs on the 16-core H200 host (device tool): the scale benchmark and the C1024 campaign.
# Usage there: bash benchmarks/device_scale.sh   (writes into $OUT)
python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site .whl/*.whl || exit 1
export PYTHONPATH=/tmp/site:$PWD
OUT=${OUT:-/tmp/out}; mkdir -p "$OUT"
nproc; python3 -c "import harness.cli" || exit 1
timeout 330 python3 benchmarks/bench_scale.py --out "$OUT/scale_h200.json" --seconds 2 > "$OUT/scale_h200.txt" 2>&1
tail -25 "$OUT/scale_h200.txt"
timeout 150 python3 -m harness.cli campaign run campaigns/scale-c1024.yaml -w /tmp/ws > "$OUT/campaign.txt" 2>&1
echo "campaign rc=$?"; tail -30 "$OUT/campaign.txt"
python3 -m harness.cli evidence check -w /tmp/ws > "$OUT/evidence.txt" 2>&1; tail -20 "$OUT/evidence.txt"
A=$(ls -d /tmp/ws/archives/*/ | head -1); cp "$A/results.json" "$A/wave_checks.jsonl" "$OUT/" 2>/dev/null
python3 - "$A" <<'PY' > "$OUT/campaign_summary.txt"
import json, sys
a = sys.argv[1]
r = json.load(open(a + "/results.json"))
for c in r["cells"]:
    print(c["cell_id"], c["status"], "median", c["median"], "rounds", c["round_rates"], "vs 51200:", c["median"] / 51200 - 1)
for line in open(a + "/wave_checks.jsonl"):
    w = json.loads(line)
    print({k: w.get(k) for k in ("wave_id", "phase", "workers", "send_skew_s", "loop_lag_p50_s", "loop_lag_p99_s",
                                 "loop_cpu_share", "sim_late_steps", "sim_lateness_s")})
PY
cat "$OUT/campaign_summary.txt"
