"""Client at scale: CPU per event, received/offered and receive lag p99, one process vs load workers.

Server (``--server``): ``native`` (default) is ``benchmarks/native/event_server`` (C, epoll, one token
per stream per step on one fixed grid, built by ``benchmarks/native/build.sh`` when missing), with
``--server-threads`` threads pinned to the first CPUs; ``sim`` is ``dsv4h sim serve --profile scale-20ms
--stream-mode delta`` (``--processes K`` on one port). Both stamp every event with ``sim_emit_ns``
(CLOCK_MONOTONIC). One wave of C streams per tier goes through ``harness.load`` in this process
(``single``, pinned to the last CPU, with the loop monitor a campaign runs around each wave) or through
``WorkerLoadClient`` (``workers``, pinned to the last CPUs, each with its loop probe), on the ``wire`` or
``aiohttp`` transport (``--transports``). Reported per wave: offered events/s (C / step), emitted events/s
(server stamps), received events/s, client CPU per event (this process, or the sum of the workers) and receive lag
(event_ns - sim_emit_ns) p50/p99, over the wave's common window; with the native server the window's
edges sit half a step between grid instants (whole steps only), and the server's own counters for the
wave (events emitted, burst lateness p50/p99/max vs the grid, late and missed steps) are in ``server``.

    python benchmarks/bench_scale.py --out benchmarks/results/scale.json [--server native|sim] [--tiers 64,256]
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
import urllib.request
from pathlib import Path
from typing import Any

import numpy as np

from harness.load import LoadClient, WaveRequest, run_wave
from harness.load.driver import Transport
from harness.load.workers import SIZING, WorkerLoadClient, auto_workers
from harness.records import RequestRecord
from harness.run.selfcheck import LoopMonitor

SIM_EVENTS_PER_PROCESS = 16_000.0
NATIVE = Path(__file__).resolve().parent / "native"
NATIVE_EVENTS_PER_THREAD = 50_000.0


def _wait_ready(proc: subprocess.Popen[bytes], ready: Path, settle_s: float) -> str:
    for _ in range(600):
        if ready.exists():
            time.sleep(settle_s)
            return ready.read_text().strip()
        if proc.poll() is not None:
            break
        time.sleep(0.05)
    proc.kill()
    raise RuntimeError("server did not start: " + (proc.stderr.read().decode() if proc.stderr else ""))


def start_native(binary: Path, step_ms: float, threads: int, cpus: list[int]) -> tuple[subprocess.Popen[bytes], str]:
    """The native event server on a free port, its threads pinned to ``cpus`` (when given)."""
    if not binary.exists():
        subprocess.run(["bash", str(NATIVE / "build.sh"), str(binary)], check=True, stdout=subprocess.DEVNULL)
    ready = Path(tempfile.mkdtemp()) / "url"
    argv = [str(binary), "--port", "0", "--step-ms", repr(step_ms), "--threads", str(threads), "--ready-file",
            str(ready)]
    if cpus:
        argv = ["taskset", "-c", ",".join(map(str, cpus)), *argv]
    proc = subprocess.Popen(argv, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    return proc, _wait_ready(proc, ready, 0.1)


def http_json(url: str, path: str) -> dict[str, Any]:
    with urllib.request.urlopen(url + path, timeout=10) as resp:  # loopback only
        out: dict[str, Any] = json.loads(resp.read())
    return out


def start_sim(step_ms: float, processes: int, cpus: list[int]) -> tuple[subprocess.Popen[bytes], str]:
    ready = Path(tempfile.mkdtemp()) / "url"
    argv = [sys.executable, "-m", "harness.cli", "sim", "serve", "--profile", "scale-20ms", "--stream-mode", "delta",
            "--step-factor", repr(step_ms / 20.0), "--port", "0", "--processes", str(processes),
            "--ready-file", str(ready)]
    if cpus and hasattr(os, "sched_setaffinity"):
        argv = ["taskset", "-c", ",".join(map(str, cpus)), *argv]
    proc = subprocess.Popen(argv, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    return proc, _wait_ready(proc, ready, 0.5 + 0.3 * processes)  # the others start after the first listens


def summarize(recs: list[RequestRecord], concurrency: int, step_s: float,
              grid_t0_ns: int | None = None) -> dict[str, Any]:
    """Rates and lag over the window in which every stream is resident: from the latest second event
    to the earliest second-to-last one; with a grid (``grid_t0_ns``), both edges move to half a step
    past a grid instant, so the window holds whole steps only (no partial burst at either edge)."""
    ok = [r for r in recs if r.error is None and len(r.event_ns) > 2]
    start = max(int(r.event_ns[1]) for r in ok)
    end = min(int(r.event_ns[-2]) for r in ok)
    if grid_t0_ns is not None:
        step_ns = round(step_s * 1e9)
        start = grid_t0_ns + ((start - grid_t0_ns) // step_ns) * step_ns + step_ns // 2
        end = grid_t0_ns + ((end - grid_t0_ns) // step_ns) * step_ns + step_ns // 2
    ev = np.concatenate([np.asarray(r.event_ns, dtype=np.int64) for r in ok])
    em = np.concatenate([np.asarray(r.emit_ns, dtype=np.int64) for r in ok])
    inside = (em >= start) & (em <= end)
    dur = max((end - start) / 1e9, 1e-9)
    lag = (ev[inside] - em[inside]) / 1e6
    recv = ((ev >= start) & (ev <= end)).sum() / dur
    return {"errors": len(recs) - len(ok), "window_s": dur, "offered_per_s": concurrency / step_s,
            "emitted_per_s": float(inside.sum() / dur), "received_per_s": float(recv),
            "lag_p50_ms": float(np.percentile(lag, 50)), "lag_p99_ms": float(np.percentile(lag, 99)),
            "lag_max_ms": float(lag.max()), "events": int(ev.size)}


async def one_wave(url: str, concurrency: int, steps: int, workers: int,
                   pin: bool, transport: Transport = "wire") -> tuple[list[RequestRecord], float]:
    rng = np.random.default_rng(concurrency)
    reqs = [WaveRequest([int(x) for x in rng.integers(1000, 30000, 64)], steps,
                        rid=f"w{concurrency}-{i}-{time.time_ns()}",
                        ignore_eos=True, cache_salt=f"s{i}-{time.time_ns()}") for i in range(concurrency)]
    client: LoadClient = (WorkerLoadClient(url, workers=workers, pin_cpus=pin, concurrency=concurrency, timeout_s=60,
                                           transport=transport)
                          if workers > 1 else
                          LoadClient(url, concurrency=concurrency, timeout_s=60, transport=transport))
    async with client:
        monitor = LoopMonitor() if workers == 1 else None  # what a campaign runs around every wave (workers probe)
        if monitor is not None:
            monitor.start()
        cpu0 = time.process_time()
        recs = await run_wave(client, reqs)
        cpu = time.process_time() - cpu0
        if monitor is not None:
            monitor.stop()
        check = client.take_check()
    if check is not None:
        cpu = float(check.get("worker_cpu_s", 0.0))
    return recs, cpu


def lag_workers(concurrency: int, step_s: float, free_cpus: int, target: float = 0.1, transport: str = "wire") -> int:
    """Workers such that each drains its share of a step's burst (C / N events at the transport's CPU per
    event, ``SIZING``) within ``target`` of the step: at least 2, at most one per free CPU."""
    cpu_per_event = SIZING[transport][0]
    return max(2, min(math.ceil(concurrency * cpu_per_event / (target * step_s)), max(2, free_cpus)))


def _server_cpus(cpus: list[int], n: int) -> list[int]:
    """The first ``n`` CPUs for the server (none pinned on a machine of two CPUs or fewer)."""
    return cpus[:n] if len(cpus) > 2 else []


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--server", choices=("native", "sim"), default="native")
    ap.add_argument("--native-bin", type=Path, default=NATIVE / "build" / "event_server")
    ap.add_argument("--server-threads", type=int, default=0,
                    help="native server threads (0: offered / 50k events/s, 1..4, 1 on <= 2 CPUs) or simulator "
                    "processes (0: offered / 16k events/s, at most half the CPUs)")
    ap.add_argument("--workers", default="auto",
                    help="worker counts of the workers mode, comma-separated: N, auto (auto_workers, at least 2) "
                    "or lag (enough that one worker drains its share of a step's burst in 10%% of the step)")
    ap.add_argument("--tiers", default="64,256,512,1024,2048")
    ap.add_argument("--steps-ms", default="20,10")
    ap.add_argument("--modes", default="single,workers")
    ap.add_argument("--seconds", type=float, default=2.0)
    ap.add_argument("--transports", default="wire",
                    help="client transports, comma-separated: wire (harness.load.wire) and/or aiohttp")
    ap.add_argument("--out", type=Path, default=Path("benchmarks/results/scale.json"))
    args = ap.parse_args()
    cpus = sorted(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else list(range(os.cpu_count() or 1))
    rows: list[dict[str, Any]] = []
    for step_ms in (float(x) for x in args.steps_ms.split(",")):
        for c in (int(x) for x in args.tiers.split(",")):
            offered = c / (step_ms / 1000)
            if args.server == "native":
                k = args.server_threads or (1 if len(cpus) <= 2 else
                                            max(1, min(4, math.ceil(offered / NATIVE_EVENTS_PER_THREAD))))
                proc, url = start_native(args.native_bin, step_ms, k, _server_cpus(cpus, k))
            else:
                k = args.server_threads or max(1, min(math.ceil(offered / SIM_EVENTS_PER_PROCESS),
                                                      max(1, len(cpus) // 2)))
                proc, url = start_sim(step_ms, k, _server_cpus(cpus, k))
            sizes = {t: {"auto": max(2, auto_workers(offered, cpus=len(cpus) - k + 1, transport=t)),
                         "lag": lag_workers(c, step_ms / 1000, len(cpus) - k, transport=t)}
                     for t in args.transports.split(",")}
            runs = [(m, 1 if m == "single" else sizes[t].get(n) or int(n), t)
                    for t in args.transports.split(",")
                    for m in args.modes.split(",") for n in (["1"] if m == "single" else args.workers.split(","))]
            try:
                for mode, w, transport in runs:
                    if len(cpus) > 2 and mode == "single":
                        os.sched_setaffinity(0, {cpus[-1]})
                    steps = int(args.seconds / (step_ms / 1000)) + 10
                    stats0 = http_json(url, "/stats/reset") if args.server == "native" else {}
                    t0 = time.perf_counter()
                    recs, cpu = asyncio.run(one_wave(url, c, steps, w, len(cpus) > 2,
                                                     transport))
                    if hasattr(os, "sched_setaffinity"):
                        os.sched_setaffinity(0, set(cpus))
                    server = http_json(url, "/stats") if stats0 else None
                    grid = int(server["grid_t0_ns"]) if server else None
                    row = {"step_ms": step_ms, "C": c, "mode": mode, "workers": w, "transport": transport,
                           "server": args.server,
                           "server_procs": k, "wall_s": time.perf_counter() - t0,
                           "events_expected": c * steps} | summarize(recs, c, step_ms / 1000, grid)
                    row["cpu_us_per_event"] = cpu / max(row["events"], 1) * 1e6
                    row["lag_p99_over_step"] = row["lag_p99_ms"] / step_ms
                    row["server_stats"] = server
                    rows.append(row)
                    print(json.dumps(row), flush=True)
            finally:
                proc.terminate()
                proc.wait(10)
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps({"machine": platform.node(), "cpus": len(cpus), "python": platform.python_version(),
                                    "server": args.server, "seconds": args.seconds, "rows": rows}, indent=1))
    print("| step | C | transport | mode | workers | server thr/procs | offered/s | emitted/s | received/s "
          "| events recv/expected "
          "| CPU us/event | lag p50 ms | lag p99 ms | p99/step | server burst late p99 / max ms | late/missed steps "
          "| errors |")
    print("|---|---:|---|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|")
    for r in rows:
        s = r["server_stats"] or {}
        late = (f"{1e3 * s['emit_lateness_p99_s']:.2f} / {1e3 * s['emit_lateness_max_s']:.2f} | "
                f"{s['late_steps']}/{s['missed_steps']}") if s else "- | -"
        print(f"| {r['step_ms']:g} ms | {r['C']} | {r['transport']} | {r['mode']} | {r['workers']} | "
              f"{r['server_procs']} | "
              f"{r['offered_per_s']:,.0f} | {r['emitted_per_s']:,.0f} | {r['received_per_s']:,.0f} | "
              f"{r['events']}/{r['events_expected']} | "
              f"{r['cpu_us_per_event']:.1f} | {r['lag_p50_ms']:.2f} | {r['lag_p99_ms']:.2f} | "
              f"{r['lag_p99_over_step']:.3f} | {late} | {r['errors']} |")


if __name__ == "__main__":
    main()
