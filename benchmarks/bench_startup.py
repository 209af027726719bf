"""Benchmark: start-up wall time of ``dsv4h version`` and ``dsv4h --help`` (issue 24: under 0.5 s).

Runs each command ``--runs`` times in a fresh child process (``python -m harness.cli``, the console
script's code path) and prints median, min and max wall seconds; also the slowest modules of one
``python -X importtime`` start of ``dsv4h version`` (cumulative microseconds). Writes
``benchmarks/results/startup.json``. Usage::

    .venv/bin/python benchmarks/bench_startup.py [--runs 20] [--top 10]
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import statistics
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
COMMANDS: dict[str, list[str]] = {"version": ["version"], "--help": ["--help"]}
LIMIT_S = 0.5


def one_run(args: list[str]) -> float:
    """Wall seconds of one ``python -m harness.cli ARGS`` child, start to exit."""
    t0 = time.perf_counter()
    subprocess.run([sys.executable, "-m", "harness.cli", *args], cwd=ROOT, check=True,
                   stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, env=os.environ | {"COLUMNS": "80"})
    return time.perf_counter() - t0


def import_offenders(top: int) -> list[dict[str, Any]]:
    """The ``top`` modules with the largest cumulative import time in one ``dsv4h version`` start."""
    proc = subprocess.run([sys.executable, "-X", "importtime", "-m", "harness.cli", "version"], cwd=ROOT,
                          check=True, capture_output=True, text=True)
    rows: list[dict[str, Any]] = []
    for line in proc.stderr.splitlines():
        parts = line.removeprefix("import time:").split("|")
        if len(parts) == 3 and parts[1].strip().isdigit():
            rows.append({"module": parts[2].strip(), "cumulative_us": int(parts[1])})
    return sorted(rows, key=lambda r: -r["cumulative_us"])[:top]


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--runs", type=int, default=20)
    ap.add_argument("--top", type=int, default=10)
    args = ap.parse_args()
    one_run(["version"])  # warm the file cache and the bytecode
    results: dict[str, Any] = {}
    print(f"{'command':<16}{'median s':>10}{'min s':>10}{'max s':>10}  under {LIMIT_S} s")
    for name, argv in COMMANDS.items():
        times = [one_run(argv) for _ in range(args.runs)]
        med = statistics.median(times)
        results[name] = {"runs": args.runs, "median_s": med, "min_s": min(times), "max_s": max(times),
                         "under_limit": med < LIMIT_S}
        print(f"dsv4h {name:<10}{med:>10.3f}{min(times):>10.3f}{max(times):>10.3f}  {med < LIMIT_S}")
    offenders = import_offenders(args.top)
    print(f"\nslowest imports of 'dsv4h version' (cumulative, top {args.top}):")
    for row in offenders:
        print(f"  {row['cumulative_us'] / 1000:8.1f} ms  {row['module']}")
    out = ROOT / "benchmarks" / "results" / "startup.json"
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(json.dumps({"limit_s": LIMIT_S, "commands": results, "import_offenders": offenders,
                               "python": sys.version.split()[0], "machine": platform.machine(),
                               "cpus": os.cpu_count()}, indent=2) + "\n")
    print(f"\nwrote {out.relative_to(ROOT)}")


if __name__ == "__main__":
    main()
