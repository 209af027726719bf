"""Benchmark: is the SLA search's result independent of machine load (issue 37 item 6)?

Runs the SLA demo (``campaigns/sla-demo.yaml``: the simulator's ``single-slot`` profile, capacity
10 req/s, TTFT limit 60 ms, so the highest passing rate lies between 10 and 10.3 req/s) with ``dsv4h sla
run`` under background loads of 0, 2 and 4 busy processes (``python -c 'while True: pass'`` children
started here and stopped by their pid afterwards). With ``--cpus 0,1`` the search and the busy
processes are pinned with ``taskset -c`` to those CPUs, so a bigger host emulates a 2-core one. Per
load it prints one row: the bracket, how the search ended (converged, or why not: ``invalid-load`` with
the reason when a probe had no valid measurement), the measurements (probes measured, re-measured,
invalid for load), the wall time and the 1-minute load average before and after (other users of the
machine show there: "load 0" is only as idle as the machine was). **Pass** per row: the bracket holds
10 req/s, or the search says it did not converge; a converged bracket that misses 10 req/s fails.

``--quick`` is a smoke test: loads 0 and 1, 6 requests per round, at most 3 probes (its brackets are
not expected to converge). Writes ``benchmarks/results/sla_load.json`` (``--quick``:
``sla_load_quick.json``) and prints a table. Usage::

    .venv/bin/python benchmarks/bench_sla_load.py [--loads 0,2,4] [--cpus 0,1] [--quick]
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[1]
DEMO = REPO / "campaigns" / "sla-demo.yaml"
CAPACITY_REQ_S = 10.0  # single-slot, 10 output tokens: 1 / (0.01 + 9 x 0.01 s)
BUSY = "while True: pass"


def pinned(cmd: Sequence[str], cpus: str | None) -> list[str]:
    """``cmd`` under ``taskset -c cpus`` when CPUs are given."""
    return ["taskset", "-c", cpus, *cmd] if cpus else list(cmd)


@contextmanager
def busy_processes(n: int, cpus: str | None) -> Iterator[list[int]]:
    """``n`` busy-looping Python children (pinned to ``cpus``); each is stopped by its pid on exit."""
    procs = [subprocess.Popen(pinned([sys.executable, "-c", BUSY], cpus)) for _ in range(n)]
    try:
        yield [p.pid for p in procs]
    finally:
        for p in procs:
            p.send_signal(signal.SIGTERM)
        for p in procs:
            try:
                p.wait(timeout=10)
            except subprocess.TimeoutExpired:
                p.kill()
                p.wait()


def spec_text(quick: bool) -> str:
    """The demo spec with absolute paths (it runs from a temporary workspace); ``quick``: smaller."""
    text = (DEMO.read_text().replace("service: profiles/", f"service: {REPO}/campaigns/profiles/")
            .replace("corpus: ../corpora", f"corpus: {REPO}/corpora"))
    if quick:
        text = text.replace("count: 20", "count: 6").replace("max_probes: 10", "max_probes: 3")
    return text


def verdict(result: dict[str, Any]) -> tuple[bool, str]:
    """(pass, why) of one search's ``sla.json`` (module docstring: the pass criterion)."""
    b = result.get("bracket") or {}
    lo, hi = b.get("highest_passing_req_s"), b.get("lowest_failing_req_s")
    if not result.get("converged"):
        return True, f"not converged ({result.get('end')}): the search says so"
    if lo is not None and hi is not None and lo <= CAPACITY_REQ_S <= hi:
        return True, f"the bracket holds {CAPACITY_REQ_S:g} req/s"
    return False, f"converged on [{lo}, {hi}], which misses {CAPACITY_REQ_S:g} req/s"


def run_one(load: int, cpus: str | None, quick: bool) -> dict[str, Any]:
    """One search under ``load`` busy processes: its figures, verdict and timings."""
    ws = Path(tempfile.mkdtemp(prefix="bench-sla-load-"))
    try:
        spec = ws / "sla.yaml"
        spec.write_text(spec_text(quick))
        cmd = pinned([sys.executable, "-c", "from harness.cli import main; main()", "sla", "run", str(spec),
                      "-w", str(ws / "ws")], cpus)
        with busy_processes(load, cpus):
            time.sleep(1.0 if load else 0.0)  # let the busy children reach the scheduler first
            load_before = os.getloadavg()[0]
            t0 = time.perf_counter()
            proc = subprocess.run(cmd, capture_output=True, text=True, cwd=REPO, env=dict(os.environ), check=False)
            wall = time.perf_counter() - t0
            load_after = os.getloadavg()[0]
        docs = sorted((ws / "ws").rglob("sla.json"))
        if not docs:
            return {"load": load, "exit": proc.returncode, "wall_s": wall, "error": (proc.stdout + proc.stderr)[-2000:],
                    "pass": False, "why": "no sla.json written"}
        doc = json.loads(docs[0].read_text())
        ok, why = verdict(doc)
        b = doc["bracket"]
        return {"load": load, "exit": proc.returncode, "wall_s": round(wall, 1),
                "loadavg_1m_before": load_before, "loadavg_1m_after": load_after,
                "lo_req_s": b.get("highest_passing_req_s"), "hi_req_s": b.get("lowest_failing_req_s"),
                "end": doc.get("end"), "converged": doc.get("converged"), "withheld": doc.get("withheld"),
                "n_probes_counted": doc.get("n_probes"), "n_measurements": doc.get("n_measurements"),
                "n_remeasured": doc.get("n_remeasured"), "n_invalid": doc.get("n_invalid"),
                "probes": [{k: p.get(k) for k in ("probe_index", "arrival_rate_req_s", "passed", "reasons",
                                                   "ttft_p99_worst_s")} for p in doc.get("probes", [])],
                "pass": ok, "why": why}
    finally:
        shutil.rmtree(ws, ignore_errors=True)


def table(rows: Sequence[dict[str, Any]]) -> str:
    """The printed table, one row per load."""
    def rate(v: Any) -> str:
        return "-" if v is None else f"{float(v):g}"

    head = (f"{'load':>4}  {'low':>6}  {'high':>6}  {'result':<44}  {'measured':>8}  {'re-meas':>7}  "
            f"{'invalid':>7}  {'wall s':>6}  {'loadavg':>11}  pass")
    lines = [head, "-" * len(head)]
    for r in rows:
        res = "converged" if r.get("converged") else f"not converged ({r.get('end')})"
        la = f"{r.get('loadavg_1m_before', 0):.1f}->{r.get('loadavg_1m_after', 0):.1f}"
        lines.append(f"{r['load']:>4}  {rate(r.get('lo_req_s')):>6}  {rate(r.get('hi_req_s')):>6}  {res:<44}  "
                     f"{r.get('n_measurements', '-')!s:>8}  {r.get('n_remeasured', '-')!s:>7}  "
                     f"{r.get('n_invalid', '-')!s:>7}  {r['wall_s']:>6}  {la:>11}  "
                     f"{'PASS' if r['pass'] else 'FAIL'}: {r['why']}")
        if r.get("withheld"):
            lines.append(f"      withheld: {r['withheld']}")
    return "\n".join(lines)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n", 1)[0])
    ap.add_argument("--loads", default=None, help="busy processes per run, comma-separated (default 0,2,4)")
    ap.add_argument("--cpus", default=None, help="pin everything to these CPUs with taskset -c (e.g. 0,1)")
    ap.add_argument("--quick", action="store_true", help="smoke test: loads 0,1 and a small search")
    ap.add_argument("--out", type=Path, default=None, help="result JSON (default benchmarks/results/sla_load.json)")
    args = ap.parse_args()
    if args.cpus and shutil.which("taskset") is None:
        raise SystemExit("--cpus needs taskset (util-linux)")
    loads = [int(x) for x in (args.loads or ("0,1" if args.quick else "0,2,4")).split(",")]
    rows = []
    for n in loads:
        rows.append(run_one(n, args.cpus, args.quick))
        print("\n".join(table(rows[-1:]).splitlines()[2:]), flush=True)  # the row, without the header
    print()
    print(table(rows))
    out = args.out or REPO / "benchmarks" / "results" / ("sla_load_quick.json" if args.quick else "sla_load.json")
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(json.dumps({
        "benchmark": "bench_sla_load", "spec": str(DEMO.relative_to(REPO)), "quick": args.quick,
        "capacity_req_s": CAPACITY_REQ_S, "cpus": args.cpus, "host": platform.node(), "cpu_count": os.cpu_count(),
        "python": platform.python_version(), "date_utc": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
        "note": "load N = N busy processes started by the benchmark; other users of the machine are not counted "
                "(see loadavg_1m_before/after)",
        "rows": rows, "all_pass": all(r["pass"] for r in rows)}, indent=2) + "\n")
    print(f"\nwrote {out}")
    sys.exit(0 if all(r["pass"] for r in rows) else 1)


if __name__ == "__main__":
    main()
