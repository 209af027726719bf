"""Benchmark: streaming-client CPU per event and receive lag against the simulator, C1..C64.

Starts ``dsv4h sim serve --profile paper-tp8 --port 0`` as a separate process (so client and
server never share a GIL), then for each concurrency tier sends waves of C requests (512-token
inputs, ignore_eos, enough new tokens for about ``--seconds`` of decode) twice: once through a
minimal aiohttp loop (read chunk, timestamp, split on ``\\n\\n``, ``json.loads`` every event),
the floor, and once through ``harness.load`` (``LoadClient`` + ``run_wave``). Measured:

(a) client CPU per streamed event: ``time.process_time_ns()`` of this process over the wave
    divided by the events received; target: harness <= 1.5x the floor;
(b) receive lag ``event_ns - emit_ns`` (client arrival minus the simulator's emit time, same
    monotonic clock), p50 and p99; target: p99 < 10% of the model's decode step
    ``step(C) = C / rate(C)`` at every tier.

Writes ``benchmarks/results/client.json`` and prints a table. Usage::

    .venv/bin/python benchmarks/bench_client.py [--tiers 1,2,4,8,16,32,64] [--seconds 4]
        [--repeats 2] [--url http://127.0.0.1:PORT]   # --url: use a running server instead
"""

from __future__ import annotations

import argparse
import asyncio
import json
import math
import os
import platform
import re
import signal
import subprocess
import sys
import time
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from pathlib import Path
from time import perf_counter_ns, process_time_ns
from typing import Any

import aiohttp
import numpy as np
import uvloop

from harness.load import LoadClient, WaveRequest, run_wave, sglang_body

# paper-tp8 resident decode rates (tok/s), GUIDE section 6 / report Table 2
RATES = {1: 88.63, 2: 107.41, 4: 187.13, 8: 333.38, 16: 598.11, 32: 1041.78, 64: 1327.10}
INPUT_LEN = 512
CPU_TARGET = 1.5
LAG_TARGET = 0.10
ROOT = Path(__file__).resolve().parent.parent


def step_ms(c: int) -> float:
    """Analytic decode step (ms) of the paper-tp8 model with ``c`` running requests."""
    return 1000.0 * c / RATES[c]


@contextmanager
def sim_process(profile: str) -> Iterator[str]:
    """Run the simulator as a child process; yield its base URL; stop its process group."""
    cmd = [sys.executable, "-c", "from harness.cli import main; main()"]
    cmd += ["sim", "serve", "--profile", profile, "--port", "0"]
    proc = subprocess.Popen(
        cmd, cwd=ROOT, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True, start_new_session=True
    )
    try:
        assert proc.stdout is not None
        deadline = time.monotonic() + 60
        url = None
        while url is None and time.monotonic() < deadline:
            line = proc.stdout.readline()
            if not line:
                raise RuntimeError(f"simulator exited (rc={proc.poll()}) before printing its URL")
            m = re.search(r"listening on (http://\S+)", line)
            url = m.group(1) if m else None
        if url is None:
            raise RuntimeError("simulator did not print its URL within 60 s")
        yield url.rstrip("/")
    finally:
        os.killpg(proc.pid, signal.SIGTERM)
        try:
            proc.wait(10)
        except subprocess.TimeoutExpired:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.wait()


def make_requests(c: int, max_new: int, tag: str) -> list[WaveRequest]:
    """C distinct 512-token inputs with fresh cache salts (same prefill work for every run)."""
    rng = np.random.default_rng(c)
    return [
        WaveRequest(
            input_ids=rng.integers(100, 120_000, INPUT_LEN).tolist(),
            max_new_tokens=max_new,
            rid=f"{tag}-c{c}-{i}",
            ignore_eos=True,
            cache_salt=f"{tag}-{i}",
        )
        for i in range(c)
    ]


# ---------------------------------------------------------------- the floor


async def floor_one(session: aiohttp.ClientSession, url: str, body: bytes) -> tuple[int, list[int]]:
    """Minimal streaming read: chunk, timestamp, split on blank line, json.loads every event."""
    events = 0
    lags: list[int] = []
    buf = b""
    async with session.post(url, data=body, headers={"Content-Type": "application/json"}) as resp:
        async for chunk in resp.content.iter_any():
            t = perf_counter_ns()
            buf += chunk
            *done, buf = buf.split(b"\n\n")
            for ev in done:
                data = ev[6:]
                if data == b"[DONE]":
                    continue
                obj = json.loads(data)
                events += 1
                emit = obj["meta_info"].get("sim_emit_ns")
                if emit is not None:
                    lags.append(t - emit)
    return events, lags


async def run_floor(base: str, reqs: Sequence[WaveRequest]) -> tuple[int, int, list[int]]:
    """(cpu ns, events, lags ns) of one floor wave."""
    connector = aiohttp.TCPConnector(limit=len(reqs))
    timeout = aiohttp.ClientTimeout(total=None, sock_read=600)
    async with aiohttp.ClientSession(connector=connector, timeout=timeout) as session:
        url = base + "/generate"
        cpu0 = process_time_ns()
        bodies = [
            sglang_body(r.input_ids, r.max_new_tokens, rid=r.rid, ignore_eos=True, cache_salt=r.cache_salt)
            for r in reqs
        ]
        results = await asyncio.gather(*(floor_one(session, url, b) for b in bodies))
        cpu = process_time_ns() - cpu0
    return cpu, sum(n for n, _ in results), [x for _, lags in results for x in lags]


async def run_harness(base: str, reqs: Sequence[WaveRequest]) -> tuple[int, int, list[int]]:
    """(cpu ns, events, lags ns) of one harness wave; raises if any request failed."""
    async with LoadClient(base, concurrency=len(reqs)) as client:
        cpu0 = process_time_ns()
        records = await run_wave(client, reqs)
        cpu = process_time_ns() - cpu0
    bad = [r.error for r in records if r.error]
    if bad:
        raise RuntimeError(f"{len(bad)} requests failed, first: {bad[0]}")
    lags: list[int] = []
    for r in records:
        if r.emit_ns.size == r.event_ns.size:
            lags.extend((r.event_ns - r.emit_ns).tolist())
    return cpu, sum(r.event_ns.size for r in records), lags


def pct(values: Sequence[int], q: float) -> float:
    return float(np.percentile(np.asarray(values, dtype=np.float64), q)) / 1e6 if values else math.nan


async def bench(base: str, tiers: Sequence[int], seconds: float, repeats: int) -> list[dict[str, Any]]:
    rows: list[dict[str, Any]] = []
    await run_harness(base, make_requests(2, 8, "warm"))
    for c in tiers:
        max_new = max(16, math.ceil(seconds * RATES[c] / c))
        cpu: dict[str, list[float]] = {"floor": [], "harness": []}
        lags: dict[str, list[int]] = {"floor": [], "harness": []}
        events: dict[str, int] = {"floor": 0, "harness": 0}
        for rep in range(repeats):
            order = ("floor", "harness") if rep % 2 == 0 else ("harness", "floor")
            for kind in order:
                reqs = make_requests(c, max_new, f"{kind}{rep}")
                fn = run_floor if kind == "floor" else run_harness
                cpu_ns, n, lag = await fn(base, reqs)
                cpu[kind].append(cpu_ns / n / 1000)
                lags[kind].extend(lag)
                events[kind] += n
        row = {
            "concurrency": c,
            "max_new_tokens": max_new,
            "events": events,
            "cpu_us_per_event": {k: min(v) for k, v in cpu.items()},
            "cpu_us_per_event_runs": cpu,
            "lag_ms": {k: {"p50": pct(v, 50), "p99": pct(v, 99), "n": len(v)} for k, v in lags.items()},
            "step_ms": step_ms(c),
        }
        row["cpu_ratio"] = row["cpu_us_per_event"]["harness"] / row["cpu_us_per_event"]["floor"]
        row["lag_p99_over_step"] = row["lag_ms"]["harness"]["p99"] / row["step_ms"]
        row["pass_cpu"] = row["cpu_ratio"] <= CPU_TARGET
        row["pass_lag"] = row["lag_p99_over_step"] < LAG_TARGET
        rows.append(row)
        print_row(row)
    return rows


HEADER = (
    f"{'C':>3} {'tokens':>6} {'events':>7} {'floor us/ev':>11} {'harness us/ev':>13} {'ratio':>6} "
    f"{'lag p50 ms':>10} {'lag p99 ms':>10} {'floor p99':>9} {'step ms':>8} {'p99/step':>8}  ok"
)


def print_row(row: dict[str, Any]) -> None:
    lag = row["lag_ms"]["harness"]
    ok = "yes" if row["pass_cpu"] and row["pass_lag"] else "NO"
    print(
        f"{row['concurrency']:>3} {row['max_new_tokens']:>6} {row['events']['harness']:>7} "
        f"{row['cpu_us_per_event']['floor']:>11.1f} {row['cpu_us_per_event']['harness']:>13.1f} "
        f"{row['cpu_ratio']:>6.2f} {lag['p50']:>10.3f} {lag['p99']:>10.3f} "
        f"{row['lag_ms']['floor']['p99']:>9.3f} {row['step_ms']:>8.2f} {row['lag_p99_over_step']:>8.3f}  {ok}",
        flush=True,
    )


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--tiers", default="1,2,4,8,16,32,64")
    ap.add_argument("--seconds", type=float, default=4.0, help="decode seconds per wave (approximate)")
    ap.add_argument("--repeats", type=int, default=2, help="waves per client kind and tier")
    ap.add_argument("--profile", default="paper-tp8")
    ap.add_argument("--url", help="use this running server instead of starting the simulator")
    ap.add_argument("--out", type=Path, default=ROOT / "benchmarks" / "results" / "client.json")
    args = ap.parse_args()
    tiers = [int(t) for t in args.tiers.split(",")]
    unknown = [t for t in tiers if t not in RATES]
    if unknown:
        ap.error(f"tiers must be among {sorted(RATES)}: {unknown}")

    load_before = os.getloadavg()
    print(f"load average before: {load_before[0]:.2f} (1 min) on {os.cpu_count()} CPUs", flush=True)
    print(HEADER, flush=True)
    if args.url:
        rows = uvloop.run(bench(args.url.rstrip("/"), tiers, args.seconds, args.repeats))
    else:
        with sim_process(args.profile) as url:
            rows = uvloop.run(bench(url, tiers, args.seconds, args.repeats))
    result = {
        "benchmark": "bench_client",
        "command": " ".join([Path(sys.executable).name, *sys.argv]),
        "server": args.url or f"dsv4h sim serve --profile {args.profile} (separate process)",
        "date_utc": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
        "machine": {
            "python": platform.python_version(),
            "platform": platform.platform(),
            "cpus": os.cpu_count(),
            "aiohttp": aiohttp.__version__,
            "uvloop": uvloop.__version__,
            "loadavg_1min_before": round(load_before[0], 2),
            "loadavg_1min_after": round(os.getloadavg()[0], 2),
        },
        "targets": {"cpu_ratio_max": CPU_TARGET, "lag_p99_over_step_max": LAG_TARGET},
        "all_pass": all(r["pass_cpu"] and r["pass_lag"] for r in rows),
        "tiers": rows,
    }
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps(result, indent=2) + "\n")
    print(f"wrote {args.out.relative_to(ROOT) if args.out.is_relative_to(ROOT) else args.out}")


if __name__ == "__main__":
    main()
