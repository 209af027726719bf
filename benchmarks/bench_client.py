"""Benchmark: streaming-client CPU per event and receive lag against the simulator, C1..C64.

Starts ``dsv4h sim serve --profile paper-tp8 --port 0`` as a separate process (so client and
server never share a GIL), then for each concurrency tier sends waves of C requests (512-token
inputs, ignore_eos, enough new tokens for about ``--seconds`` of decode) twice: once through a
minimal aiohttp loop (read chunk, timestamp, split on ``\\n\\n``, ``json.loads`` every event),
the floor, and once through ``harness.load`` (``LoadClient`` + ``run_wave``). Measured:

(a) client CPU per streamed event: ``time.process_time_ns()`` of this process over the wave
    divided by the events received; target: harness <= 1.5x the floor;
(b) receive lag ``event_ns - emit_ns`` (client arrival minus the simulator's emit time, same
    monotonic clock), p50 and p99 pooled over the repeats (plus the median of the per-repeat
    p99s, which one disturbed repeat cannot move); target: pooled p99 < 10% of the model's
    decode step ``step(C) = C / rate(C)`` at every tier.

Kinds alternate order between repeats. CPU per event is the minimum over repeats. The
simulator and this process are pinned to two different CPUs (``--no-pin`` to disable): left
alone, the scheduler tends to wake the client on the simulator's CPU, behind its burst of C
event writes. The involuntary context switches of this process per wave are recorded: on a
shared machine they show when the client was kept off the CPU by other work, which inflates
lag tails.

Writes ``benchmarks/results/client.json`` and prints a table. Usage::

    .venv/bin/python benchmarks/bench_client.py [--tiers 1,2,4,8,16,32,64] [--seconds 4]
        [--repeats 3] [--no-pin] [--url http://127.0.0.1:PORT]   # --url: use a running server
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import importlib.metadata
import json
import math
import os
import platform
import re
import resource
import signal
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from time import perf_counter_ns, process_time_ns
from typing import IO, Any

import aiohttp
import numpy as np
import uvloop

from harness.load import LoadClient, WaveRequest, run_wave, sglang_body

# paper-tp8 resident decode rates (tok/s), docs/simulator.md#table-2-numbers / report Table 2
RATES = {1: 88.63, 2: 107.41, 4: 187.13, 8: 333.38, 16: 598.11, 32: 1041.78, 64: 1327.10}
INPUT_LEN = 512
CPU_TARGET = 1.5
LAG_TARGET = 0.10
ROOT = Path(__file__).resolve().parent.parent


def step_ms(c: int) -> float:
    """Analytic decode step (ms) of the paper-tp8 model with ``c`` running requests."""
    return 1000.0 * c / RATES[c]


@contextmanager
def sim_process(profile: str, cpus: set[int] | None = None) -> Iterator[str]:
    """Run the simulator as a child process; yield its base URL; stop its process group.

    With ``cpus``, every thread of the simulator is pinned to those CPUs once it listens. Its
    stderr goes to a temporary file whose tail is shown if it fails to start.
    """
    cmd = [sys.executable, "-c", "from harness.cli import main; main()"]
    cmd += ["sim", "serve", "--profile", profile, "--port", "0"]
    with tempfile.TemporaryFile("w+") as err:
        proc = subprocess.Popen(cmd, cwd=ROOT, stdout=subprocess.PIPE, stderr=err, text=True, start_new_session=True)
        try:
            url = _read_url(proc, err)
            if cpus is not None:
                for tid in os.listdir(f"/proc/{proc.pid}/task"):
                    os.sched_setaffinity(int(tid), cpus)
            yield url
        finally:
            _stop(proc)


def _read_url(proc: subprocess.Popen[str], err: IO[str]) -> str:
    assert proc.stdout is not None
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        line = proc.stdout.readline()
        if not line:
            break
        m = re.search(r"listening on (http://\S+)", line)
        if m:
            return m.group(1).rstrip("/")
    time.sleep(0.5)
    err.seek(0)
    tail = err.read()[-2000:]
    raise RuntimeError(f"simulator did not print its URL (rc={proc.poll()}); stderr:\n{tail}")


def _stop(proc: subprocess.Popen[str]) -> None:
    with contextlib.suppress(ProcessLookupError):
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


@dataclass
class Wave:
    """One measured wave: client CPU (ns), events received, receive lags (ns), and the
    involuntary context switches of this process during it (a sign of CPU contention)."""

    cpu_ns: int
    events: int
    lags: list[int]
    nivcsw: int


@contextmanager
def measured() -> Iterator[dict[str, int]]:
    """Process CPU time and involuntary context switches spent inside the block."""
    out: dict[str, int] = {}
    cpu0, sw0 = process_time_ns(), resource.getrusage(resource.RUSAGE_SELF).ru_nivcsw
    yield out
    out["cpu_ns"] = process_time_ns() - cpu0
    out["nivcsw"] = resource.getrusage(resource.RUSAGE_SELF).ru_nivcsw - sw0


async def run_floor(base: str, reqs: Sequence[WaveRequest]) -> Wave:
    """One wave through the minimal loop (bodies built inside the measurement, as the harness does)."""
    connector = aiohttp.TCPConnector(limit=len(reqs))
    timeout = aiohttp.ClientTimeout(total=None, sock_read=600)
    async with aiohttp.ClientSession(connector=connector, timeout=timeout) as session:
        url = base + "/generate"
        with measured() as m:
            bodies = [
                sglang_body(r.input_ids, r.max_new_tokens, rid=r.rid, ignore_eos=True, cache_salt=r.cache_salt)
                for r in reqs
            ]
            results = await asyncio.gather(*(floor_one(session, url, b) for b in bodies))
    lags = [x for _, lag in results for x in lag]
    return Wave(m["cpu_ns"], sum(n for n, _ in results), lags, m["nivcsw"])


async def run_harness(base: str, reqs: Sequence[WaveRequest]) -> Wave:
    """One wave through ``LoadClient`` + ``run_wave``; raises if any request failed."""
    async with LoadClient(base, concurrency=len(reqs)) as client:
        with measured() as m:
            records = await run_wave(client, reqs)
    bad = [r.error for r in records if r.error]
    if bad:
        raise RuntimeError(f"{len(bad)} requests failed, first: {bad[0]}")
    lags: list[int] = []
    for r in records:
        if r.emit_ns.size == r.event_ns.size:
            lags.extend((r.event_ns - r.emit_ns).tolist())
    return Wave(m["cpu_ns"], sum(r.event_ns.size for r in records), lags, m["nivcsw"])


def pct(values: Sequence[int], q: float) -> float:
    """The ``q``-th percentile of nanosecond values, in ms."""
    return float(np.percentile(np.asarray(values, dtype=np.float64), q)) / 1e6 if values else math.nan


KINDS = ("floor", "harness")


def summarise(c: int, max_new: int, waves: dict[str, list[Wave]]) -> dict[str, Any]:
    """One tier's row: CPU per event (min over repeats), lag percentiles pooled and per repeat."""
    row: dict[str, Any] = {"concurrency": c, "max_new_tokens": max_new, "step_ms": step_ms(c)}
    for kind in KINDS:
        ws = waves[kind]
        pooled = [x for w in ws for x in w.lags]
        p99s = [pct(w.lags, 99) for w in ws]
        row[kind] = {
            "events": sum(w.events for w in ws),
            "cpu_us_per_event_runs": [w.cpu_ns / w.events / 1000 for w in ws],
            "cpu_us_per_event": min(w.cpu_ns / w.events / 1000 for w in ws),
            "lag_p50_ms": pct(pooled, 50),
            "lag_p99_ms": pct(pooled, 99),
            "lag_max_ms": pct(pooled, 100),
            "lag_p99_ms_runs": p99s,
            "lag_p99_ms_median_run": float(np.median(p99s)),
            "involuntary_switches_runs": [w.nivcsw for w in ws],
        }
    h = row["harness"]
    row["cpu_ratio"] = h["cpu_us_per_event"] / row["floor"]["cpu_us_per_event"]
    row["lag_p99_over_step"] = h["lag_p99_ms"] / row["step_ms"]
    row["lag_p99_median_run_over_step"] = h["lag_p99_ms_median_run"] / row["step_ms"]
    row["pass_cpu"] = row["cpu_ratio"] <= CPU_TARGET
    row["pass_lag_pooled"] = row["lag_p99_over_step"] < LAG_TARGET
    row["pass_lag_median_run"] = row["lag_p99_median_run_over_step"] < LAG_TARGET
    return row


async def bench(base: str, tiers: Sequence[int], seconds: float, repeats: int) -> list[dict[str, Any]]:
    """Measure every tier; kinds alternate order between repeats (ABBA...)."""
    rows: list[dict[str, Any]] = []
    await run_harness(base, make_requests(2, 8, "warm"))
    await run_floor(base, make_requests(2, 8, "warm2"))
    for c in tiers:
        max_new = max(16, math.ceil(seconds * RATES[c] / c))
        waves: dict[str, list[Wave]] = {k: [] for k in KINDS}
        for rep in range(repeats):
            for kind in KINDS if rep % 2 == 0 else KINDS[::-1]:
                fn = run_floor if kind == "floor" else run_harness
                waves[kind].append(await fn(base, make_requests(c, max_new, f"{kind}{rep}")))
        row = summarise(c, max_new, waves)
        rows.append(row)
        print_row(row)
    return rows


HEADER = (
    f"{'C':>3} {'tokens':>6} {'events':>6} {'floor':>6} {'harness':>7} {'ratio':>5} | "
    f"{'p50':>6} {'p99':>6} {'p99 med':>7} {'floor p99':>9} {'step':>6} {'p99/step':>8} | {'invcsw':>7}  ok\n"
    f"{'':>3} {'':>6} {'':>6} {'us/ev':>6} {'us/ev':>7} {'':>5} | "
    f"{'ms':>6} {'ms':>6} {'ms':>7} {'ms':>9} {'ms':>6} {'':>8} | {'':>7}"
)


def print_row(row: dict[str, Any]) -> None:
    """One table line (harness lag figures; p99 med = median of the per-repeat p99s)."""
    h, f = row["harness"], row["floor"]
    ok = "yes" if row["pass_cpu"] and row["pass_lag_pooled"] else "NO"
    sw = "/".join(str(x) for x in h["involuntary_switches_runs"])
    print(
        f"{row['concurrency']:>3} {row['max_new_tokens']:>6} {h['events']:>6} {f['cpu_us_per_event']:>6.1f} "
        f"{h['cpu_us_per_event']:>7.1f} {row['cpu_ratio']:>5.2f} | {h['lag_p50_ms']:>6.3f} {h['lag_p99_ms']:>6.3f} "
        f"{h['lag_p99_ms_median_run']:>7.3f} {f['lag_p99_ms']:>9.3f} {row['step_ms']:>6.2f} "
        f"{row['lag_p99_over_step']:>8.3f} | {sw:>7}  {ok}",
        flush=True,
    )


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--tiers", default="1,2,4,8,16,32,64")
    ap.add_argument("--seconds", type=float, default=4.0, help="decode seconds per wave (approximate)")
    ap.add_argument("--repeats", type=int, default=3, help="waves per client kind and tier")
    ap.add_argument("--profile", default="paper-tp8")
    ap.add_argument("--url", help="use this running server instead of starting the simulator")
    ap.add_argument(
        "--no-pin",
        dest="pin",
        action="store_false",
        help="do not pin the simulator and the client to two different CPUs (pinned by default: the "
        "scheduler otherwise tends to wake the client on the simulator's CPU, behind its event burst)",
    )
    ap.add_argument("--out", type=Path, default=ROOT / "benchmarks" / "results" / "client.json")
    args = ap.parse_args()
    tiers = [int(t) for t in args.tiers.split(",")]
    unknown = [t for t in tiers if t not in RATES]
    if unknown:
        ap.error(f"tiers must be among {sorted(RATES)}: {unknown}")

    pin = args.pin and hasattr(os, "sched_setaffinity") and len(os.sched_getaffinity(0)) >= 2
    sim_cpus, client_cpus = None, None
    if pin:
        first, second = sorted(os.sched_getaffinity(0))[:2]
        sim_cpus, client_cpus = {first}, {second}
        os.sched_setaffinity(0, client_cpus)
    load_before = os.getloadavg()
    print(f"load average before: {load_before[0]:.2f} (1 min) on {os.cpu_count()} CPUs", flush=True)
    print(HEADER, flush=True)
    if args.url:
        rows = uvloop.run(bench(args.url.rstrip("/"), tiers, args.seconds, args.repeats))
    else:
        with sim_process(args.profile, sim_cpus) as url:
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
            "uvloop": importlib.metadata.version("uvloop"),
            "loadavg_1min_before": round(load_before[0], 2),
            "loadavg_1min_after": round(os.getloadavg()[0], 2),
        },
        "cpu_pinning": {"sim": sorted(sim_cpus), "client": sorted(client_cpus)}
        if pin and sim_cpus and client_cpus
        else None,
        "targets": {"cpu_ratio_max": CPU_TARGET, "lag_p99_over_step_max": LAG_TARGET},
        "all_pass": all(r["pass_cpu"] and r["pass_lag_pooled"] for r in rows),
        "tiers": rows,
    }
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps(result, indent=2) + "\n")
    print(f"wrote {args.out.relative_to(ROOT) if args.out.is_relative_to(ROOT) else args.out}")


if __name__ == "__main__":
    main()
