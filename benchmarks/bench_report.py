"""Benchmark: ``dsv4h report build`` over N synthetic archives (formal matrices and ABBA screens).

Issue target: a report over 20 archives in seconds.

    .venv/bin/python benchmarks/bench_report.py [--archives 20] [--repeats 3] [--jobs N]

Half the archives are seven-tier formal matrices (every third with 8 devices x 120 GPU memory
samples), half ABBA screens, plus a historical ledger of 12 entries; all synthetic and labelled
simulated (``tests/synthetic_archives.py``). Times the phases of a build (select + verify + load +
evidence + freeze; figures; templates) and a rebuild from the snapshot alone, checks that the
rebuild is byte-identical apart from the build time, prints a table and writes
``benchmarks/results/report.json``.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import statistics
import sys
import tempfile
import time
from pathlib import Path

from harness.report import figures as figs
from harness.report.build import build_from_snapshot, build_report
from harness.report.collect import collect
from harness.report.config import ReportConfig
from harness.report.render import draw_figures, normalize_build_time
from harness.report.snapshot import snapshot_bytes

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "tests"))

from synthetic_archives import (
    synthetic_historical_entries,
    write_abba_archive,
    write_formal_archive,
    write_historical_ledger,
)

BUILD_TIME = "2026-11-29T00:00:00Z"


def make_workspace(ws: Path, n: int) -> None:
    """``n`` archives: even indices formal matrices, odd ones ABBA screens."""
    for i in range(n):
        wall = f"2026-11-{1 + i % 28:02d}T{i % 24:02d}:00:00+0000"
        if i % 2 == 0:
            mem = i % 6 == 0
            write_formal_archive(ws, campaign=f"matrix-{i:02d}", seed=i, created_wall=wall,
                                 memory_devices=8 if mem else 0, memory_samples=120 if mem else 0, oracles=True)
        else:
            write_abba_archive(ws, campaign=f"screen-{i:02d}", seed=i, created_wall=wall)
    write_historical_ledger(ws, synthetic_historical_entries(12))


def tree(root: Path) -> dict[str, bytes]:
    out = {}
    for p in sorted(root.rglob("*")):
        if p.is_file():
            data = p.read_bytes()
            if p.suffix in (".html", ".md"):
                data = normalize_build_time(data.decode()).encode()
            out[p.relative_to(root).as_posix()] = data
    return out


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--archives", type=int, default=20)
    ap.add_argument("--repeats", type=int, default=3)
    ap.add_argument("--jobs", type=int, default=None, help="figure processes (default: automatic)")
    ap.add_argument("--out", type=Path, default=Path(__file__).parent / "results" / "report.json")
    args = ap.parse_args()
    phases: dict[str, list[float]] = {k: [] for k in (
        "synthesize archives", "collect (select, verify, load, evidence, freeze)",
        "figures (draw + png/svg/pdf)", "full build (dsv4h report build)", "rebuild --from-snapshot")}
    identical = True
    sizes: dict[str, int] = {}
    n_figures = 0
    with tempfile.TemporaryDirectory() as tmp:
        for rep in range(args.repeats):
            ws = Path(tmp) / f"ws{rep}"
            t = time.perf_counter()
            make_workspace(ws, args.archives)
            phases["synthesize archives"].append(time.perf_counter() - t)

            t = time.perf_counter()
            snap = collect(ws, ReportConfig())
            phases["collect (select, verify, load, evidence, freeze)"].append(time.perf_counter() - t)
            assert len(snap["archives"]) == args.archives
            snapshot_bytes(snap)

            t = time.perf_counter()
            drawn = draw_figures(figs.figure_jobs(snap), jobs=args.jobs)
            phases["figures (draw + png/svg/pdf)"].append(time.perf_counter() - t)
            n_figures = len(drawn)

            t = time.perf_counter()
            built = build_report(ws, ws / "report", latex=True, build_time=BUILD_TIME, jobs=args.jobs)
            phases["full build (dsv4h report build)"].append(time.perf_counter() - t)

            t = time.perf_counter()
            again = build_from_snapshot(built.out_dir / "results.json", Path(tmp) / f"again{rep}", latex=True,
                                        build_time="2027-01-01T00:00:00Z", jobs=args.jobs)
            phases["rebuild --from-snapshot"].append(time.perf_counter() - t)
            identical = identical and tree(built.out_dir) == tree(again.out_dir)
            sizes = {name: (built.out_dir / name).stat().st_size for name in ("report.html", "report.md",
                                                                              "results.json", "tables.tex")}
    result = {
        "archives": args.archives,
        "figures": n_figures,
        "repeats": args.repeats,
        "jobs": args.jobs or "auto",
        "timings_s": {k: {"median": statistics.median(v), "min": min(v)} for k, v in phases.items()},
        "rebuild_identical": identical,
        "output_bytes": sizes,
        "machine": platform.platform(),
        "cpus": os.cpu_count(),
    }
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps(result, indent=1) + "\n")
    print(f"report over {args.archives} archives ({n_figures} figures), {args.repeats} repeats, "
          f"jobs {result['jobs']}, {os.cpu_count()} CPUs")
    print(f"{'phase':52s} {'median s':>9s} {'min s':>8s}")
    for k, v in phases.items():
        print(f"{k:52s} {statistics.median(v):9.3f} {min(v):8.3f}")
    print(f"rebuild from snapshot byte-identical (build time normalised): {identical}")
    print("sizes: " + ", ".join(f"{k} {v / 1024:.0f} KiB" for k, v in sizes.items()))


if __name__ == "__main__":
    main()
