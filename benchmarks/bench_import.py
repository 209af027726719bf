"""Benchmark: memory and time of ``dsv4h import`` (harness.store.peers) on large peer result files.

Generates a ``vllm bench serve --save-detailed``-shaped JSON (or an sglang JSONL line, or AIPerf records)
of about ``--mb`` MB (per-request ITL lists of ``--itls`` gaps, as a long-output run writes them), then
imports it in a fresh child process (so its peak RSS is the import's) with ``--max-bytes`` raised above the
file, and prints size, seconds and peak RSS, with the RSS of a child that only imports the modules as the
baseline. Writes ``benchmarks/results/import_<tool>.json``. Usage::

    .venv/bin/python benchmarks/bench_import.py [--mb 120] [--tool vllm-bench|sglang-bench|aiperf] [--itls 200]
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import random
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
FIX = ROOT / "tests" / "fixtures" / "peers"

_CHILD = """
import json, resource, sys, time
from pathlib import Path
t0 = time.perf_counter()
from harness.store.peers import import_peer
t1 = time.perf_counter()
if sys.argv[1] != "-":
    arch = import_peer(Path(sys.argv[1]), sys.argv[2], Path(sys.argv[3]), max_bytes=int(sys.argv[4]))
    n = arch.json("external.json")["n_requests"]
else:
    n = 0
t2 = time.perf_counter()
# this process image's peak: ru_maxrss keeps the parent's across fork and exec
hwm = [ln for ln in open("/proc/self/status") if ln.startswith("VmHWM:")]
peak = int(hwm[0].split()[1]) * 1024 if hwm else resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024
print(json.dumps({"import_s": t2 - t1, "modules_s": t1 - t0, "n_requests": n, "peak_rss_bytes": peak}))
"""


def _requests(n: int, itls: int, rng: random.Random) -> dict[str, list[Any]]:
    return {"input_lens": [rng.randint(64, 8192) for _ in range(n)],
            "output_lens": [itls + 1] * n,
            "ttfts": [rng.uniform(0.005, 0.5) for _ in range(n)],
            "itls": [[rng.uniform(0.002, 0.02) for _ in range(itls)] for _ in range(n)],
            "errors": [""] * n}


def generate(path: Path, tool: str, mb: float, itls: int) -> int:
    """Write a file of about ``mb`` MB; returns the request count."""
    rng = random.Random(1)
    per_request = len(json.dumps(_requests(1, itls, rng)))  # bytes one request adds, roughly
    n = max(1, int(mb * 1e6 / per_request))
    if tool == "aiperf":
        with path.open("w") as fh:
            for i in range(n):
                gaps = [rng.uniform(2.0, 20.0) for _ in range(itls)]
                fh.write(json.dumps({"metadata": {"request_start_ns": 10**18 + i * 10**6}, "metrics": {
                    "input_sequence_length": {"value": rng.randint(64, 8192), "unit": "tokens"},
                    "output_sequence_length": {"value": itls + 1, "unit": "tokens"},
                    "time_to_first_token": {"value": rng.uniform(5, 500), "unit": "ms"},
                    "request_latency": {"value": sum(gaps) + 10, "unit": "ms"},
                    "inter_chunk_latency": {"value": gaps, "unit": "ms"}}}) + "\n")
        return n
    src = FIX / ("vllm-bench-0.32.0.json" if tool == "vllm-bench" else "sglang-bench-0.5.23.jsonl")
    base = json.loads(src.read_text().splitlines()[-1])
    doc = {k: v for k, v in base.items() if not isinstance(v, list)} | _requests(n, itls, rng)
    doc |= {"completed": n}
    if tool == "vllm-bench":
        doc |= {"failed": 0, "latencies": [t + sum(g) for t, g in zip(doc["ttfts"], doc["itls"], strict=True)],
                "start_times": [1000.0 + i * 0.01 for i in range(n)]}
    path.write_text(json.dumps(doc) + ("\n" if tool == "sglang-bench" else ""))
    return n


def _child(args: list[str]) -> dict[str, Any]:
    out = subprocess.run([sys.executable, "-c", _CHILD, *args], capture_output=True, text=True, cwd=ROOT,
                         check=True, env=os.environ | {"PYTHONPATH": str(ROOT)})
    return dict(json.loads(out.stdout.splitlines()[-1]))


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--mb", type=float, default=120.0)
    ap.add_argument("--tool", default="vllm-bench", choices=["vllm-bench", "sglang-bench", "aiperf"])
    ap.add_argument("--itls", type=int, default=200, help="ITL gaps per request")
    args = ap.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        src = Path(tmp) / ("profile_export.jsonl" if args.tool == "aiperf" else
                           "result.jsonl" if args.tool == "sglang-bench" else "result.json")
        t0 = time.perf_counter()
        n = generate(src, args.tool, args.mb, args.itls)
        gen_s = time.perf_counter() - t0
        size = src.stat().st_size
        base = _child(["-", args.tool, tmp, "1"])
        run = _child([str(src), args.tool, str(Path(tmp) / "ws"), str(size)])
    row = {"tool": args.tool, "file_bytes": size, "requests": n, "itls_per_request": args.itls,
           "generate_s": round(gen_s, 2), "import_s": round(run["import_s"], 2),
           "peak_rss_bytes": run["peak_rss_bytes"], "baseline_rss_bytes": base["peak_rss_bytes"],
           "rss_over_baseline_per_file_byte": round((run["peak_rss_bytes"] - base["peak_rss_bytes"]) / size, 2)}
    print(f"{'tool':<13}{'file MB':>9}{'requests':>10}{'import s':>10}{'peak RSS MB':>13}{'baseline MB':>13}"
          f"{'(RSS-base)/file':>17}")
    print(f"{args.tool:<13}{size / 1e6:>9.1f}{n:>10}{row['import_s']:>10.2f}{row['peak_rss_bytes'] / 1e6:>13.0f}"
          f"{row['baseline_rss_bytes'] / 1e6:>13.0f}{row['rss_over_baseline_per_file_byte']:>17.2f}")
    out = ROOT / "benchmarks" / "results" / f"import_{args.tool}.json"
    out.write_text(json.dumps({"benchmark": "bench_import", "python": sys.version.split()[0],
                               "machine": platform.machine(), "cpus": os.cpu_count(), **row}, indent=1) + "\n")
    print(f"wrote {out.relative_to(ROOT)}")


if __name__ == "__main__":
    main()
