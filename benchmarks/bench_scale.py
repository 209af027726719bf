"""Client at scale: CPU per event, received/offered and receive lag p99, one process vs load workers.

Starts ``dsv4h sim serve --profile scale-20ms --stream-mode delta`` (one step every 20 ms, or 10 ms
with ``--step-factor 0.5``; ``--processes K`` simulator processes on one port when one cannot emit
the rate) pinned to the first CPUs, then sends one wave of C streams per tier through ``harness.load``
in this process (``single``) or through ``WorkerLoadClient`` (``workers``, pinned to the last CPUs).
Over the wave's common window it reports offered events/s (C / step), emitted events/s (from the
simulator's own ``sim_emit_ns`` stamps: proof the server kept up), received events/s, client CPU
per event (this process, or the sum of the workers) and receive lag (event_ns - sim_emit_ns) p50/p99.

    python benchmarks/bench_scale.py --out benchmarks/results/scale.json [--tiers 64,256] [--steps-ms 20,10]
"""

from __future__ import annotations

import argparse
import asyncio
import json
import math
import os
import platform
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import numpy as np

from harness.load import LoadClient, WaveRequest, run_wave
from harness.load.workers import WorkerLoadClient, auto_workers
from harness.records import RequestRecord

SIM_EVENTS_PER_PROCESS = 40_000.0


def start_sim(step_ms: float, processes: int, cpus: list[int]) -> tuple[subprocess.Popen[bytes], str]:
    ready = Path(tempfile.mkdtemp()) / "url"
    argv = [sys.executable, "-m", "harness.cli", "sim", "serve", "--profile", "scale-20ms", "--stream-mode", "delta",
            "--step-factor", repr(step_ms / 20.0), "--port", "0", "--processes", str(processes),
            "--ready-file", str(ready)]
    if cpus and hasattr(os, "sched_setaffinity"):
        argv = ["taskset", "-c", ",".join(map(str, cpus)), *argv]
    proc = subprocess.Popen(argv, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    for _ in range(600):
        if ready.exists():
            time.sleep(0.5 + 0.3 * processes)  # the other processes start after the first listens
            return proc, ready.read_text().strip()
        time.sleep(0.05)
    proc.kill()
    raise RuntimeError("simulator did not start: " + (proc.stderr.read().decode() if proc.stderr else ""))


def summarize(recs: list[RequestRecord], concurrency: int, step_s: float) -> dict[str, Any]:
    ok = [r for r in recs if r.error is None and len(r.event_ns) > 2]
    start = max(int(r.event_ns[1]) for r in ok)
    end = min(int(r.event_ns[-2]) for r in ok)
    ev = np.concatenate([np.asarray(r.event_ns, dtype=np.int64) for r in ok])
    em = np.concatenate([np.asarray(r.emit_ns, dtype=np.int64) for r in ok])
    inside = (em >= start) & (em <= end)
    dur = max((end - start) / 1e9, 1e-9)
    lag = (ev[inside] - em[inside]) / 1e6
    recv = ((ev >= start) & (ev <= end)).sum() / dur
    return {"errors": len(recs) - len(ok), "window_s": dur, "offered_per_s": concurrency / step_s,
            "emitted_per_s": float(inside.sum() / dur), "received_per_s": float(recv),
            "lag_p50_ms": float(np.percentile(lag, 50)), "lag_p99_ms": float(np.percentile(lag, 99)),
            "events": int(ev.size)}


async def one_wave(url: str, concurrency: int, steps: int, workers: int,
                   pin: bool) -> tuple[list[RequestRecord], float]:
    rng = np.random.default_rng(concurrency)
    reqs = [WaveRequest([int(x) for x in rng.integers(1000, 30000, 64)], steps,
                        rid=f"w{concurrency}-{i}-{time.time_ns()}",
                        ignore_eos=True, cache_salt=f"s{i}-{time.time_ns()}") for i in range(concurrency)]
    client: LoadClient = (WorkerLoadClient(url, workers=workers, pin_cpus=pin, concurrency=concurrency, timeout_s=60)
                          if workers > 1 else LoadClient(url, concurrency=concurrency, timeout_s=60))
    async with client:
        cpu0 = time.process_time()
        recs = await run_wave(client, reqs)
        cpu = time.process_time() - cpu0
        check = client.take_check()
    if check is not None:
        cpu = float(check.get("worker_cpu_s", 0.0))
    return recs, cpu


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--tiers", default="64,256,512,1024,2048")
    ap.add_argument("--steps-ms", default="20,10")
    ap.add_argument("--modes", default="single,workers")
    ap.add_argument("--seconds", type=float, default=2.0)
    ap.add_argument("--out", type=Path, default=Path("benchmarks/results/scale.json"))
    args = ap.parse_args()
    cpus = sorted(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else list(range(os.cpu_count() or 1))
    rows: list[dict[str, Any]] = []
    for step_ms in (float(x) for x in args.steps_ms.split(",")):
        for c in (int(x) for x in args.tiers.split(",")):
            offered = c / (step_ms / 1000)
            k = max(1, min(math.ceil(offered / SIM_EVENTS_PER_PROCESS), max(1, len(cpus) // 2)))
            sim_cpus = cpus[:k] if len(cpus) > 2 else []
            proc, url = start_sim(step_ms, k, sim_cpus)
            try:
                for mode in args.modes.split(","):
                    w = 1 if mode == "single" else max(2, auto_workers(offered, cpus=len(cpus) - k + 1))
                    if len(cpus) > 2 and mode == "single":
                        os.sched_setaffinity(0, {cpus[-1]})
                    steps = int(args.seconds / (step_ms / 1000)) + 10
                    t0 = time.perf_counter()
                    recs, cpu = asyncio.run(one_wave(url, c, steps, w, len(cpus) > 2))
                    if hasattr(os, "sched_setaffinity"):
                        os.sched_setaffinity(0, set(cpus))
                    row = {"step_ms": step_ms, "C": c, "mode": mode, "workers": w, "sim_processes": k,
                           "wall_s": time.perf_counter() - t0} | summarize(recs, c, step_ms / 1000)
                    row["cpu_us_per_event"] = cpu / max(row["events"], 1) * 1e6
                    row["lag_p99_over_step"] = row["lag_p99_ms"] / step_ms
                    rows.append(row)
                    print(json.dumps(row), flush=True)
            finally:
                proc.terminate()
                proc.wait(10)
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps({"machine": platform.node(), "cpus": len(cpus), "python": platform.python_version(),
                                    "rows": rows}, indent=1))
    print("| step | C | mode | workers | sim procs | offered/s | emitted/s | received/s | CPU us/event | lag p50 ms "
          "| lag p99 ms | p99/step | errors |")
    print("|---|---:|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|")
    for r in rows:
        print(f"| {r['step_ms']:g} ms | {r['C']} | {r['mode']} | {r['workers']} | {r['sim_processes']} | "
              f"{r['offered_per_s']:,.0f} | {r['emitted_per_s']:,.0f} | {r['received_per_s']:,.0f} | "
              f"{r['cpu_us_per_event']:.1f} | {r['lag_p50_ms']:.2f} | {r['lag_p99_ms']:.2f} | "
              f"{r['lag_p99_over_step']:.3f} | {r['errors']} |")


if __name__ == "__main__":
    main()
