"""Benchmark: does the simulator emit tokens in real time at its model's rate, C1..C64?

Starts ``dsv4h sim serve --profile paper-tp8 --port 0`` as a subprocess, then for each tier C sends
one wave of C requests together (512-token ``input_ids``, ``ignore_eos``, enough ``max_new_tokens``
for a common resident window of at least ``--seconds`` and ``--min-steps`` decode steps; request i
asks for ``max_new + i`` tokens, so requests end one step apart as with natural EOS) and computes the
resident decode rate from the server's ``sim_emit_ns`` exactly as docs/metrics.md#resident-decode-window defines it
(``t_s = max f_i``, ``t_e = min e_i``, tokens ``sum n_i(t_e) - n_i(t_s)``).  A second figure trims
the window by half a step at each end, so no step's burst of events can be split by an edge.
``late steps`` / ``lost_s`` are the server's own count of steps it could not start on time (the OS
did not run it) and the model time lost to them.
Target: the strict figure within 1% of ``analytic_decode_rate`` at every tier.

``--prefill`` adds the report's prefill protocol (8192-token prompts, fresh salts, one output
token) against a second server run at ``--prefill-scale`` time scale, compared with
``analytic_prefill_rate`` and the report's column.

Writes ``benchmarks/results/sim_realtime.json`` and prints a table.  Usage::

    .venv/bin/python benchmarks/bench_sim_realtime.py [--tiers 1,2,4,8,16,32,64] [--seconds 5]
        [--min-steps 300] [--prefill] [--prefill-scale 0.25]
"""

from __future__ import annotations

import argparse
import asyncio
import json
import math
import os
import platform
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import aiohttp
import uvloop

from harness.sim import analytic_decode_rate, analytic_prefill_rate, get_profile
from harness.sim.profiles import PAPER_PREFILL

ROOT = Path(__file__).resolve().parent.parent
PROFILE = "paper-tp8"
INPUT_LEN = 512
TARGET = 0.01
Timeline = list[tuple[int, int]]


@contextmanager
def sim_process(*args: str) -> Iterator[str]:
    """Run the simulator CLI in a subprocess; yields its URL; SIGTERM on exit."""
    cmd = [sys.executable, "-c", "from harness.cli import main; main()", "sim", "serve", "--port", "0", *args]
    proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, text=True, cwd=ROOT)
    try:
        assert proc.stdout is not None
        line = proc.stdout.readline()
        if not line.startswith("dsv4h-sim listening on "):
            raise SystemExit(f"simulator did not start: {line!r}")
        yield line.split()[-1]
    finally:
        proc.send_signal(signal.SIGTERM)
        try:
            proc.wait(timeout=15)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()
        if proc.stdout is not None:
            proc.stdout.close()


def prompt(n: int, seed: int) -> list[int]:
    """Deterministic prompt of ``n`` token IDs."""
    return [(seed * 7919 + i * 104729) % 120_000 + 2 for i in range(n)]


async def one_stream(s: aiohttp.ClientSession, payload: dict[str, Any]) -> tuple[int, int, Timeline]:
    """Stream one request; returns (send ns, end ns, [(sim_emit_ns, cumulative tokens)])."""
    timeline: Timeline = []
    t_send = time.perf_counter_ns()
    async with s.post("/generate", json={**payload, "stream": True}) as resp:
        resp.raise_for_status()
        async for line in resp.content:
            if not line.startswith(b"data: {"):
                continue
            meta = json.loads(line[6:])["meta_info"]
            n = int(meta["completion_tokens"])
            if not timeline or n > timeline[-1][1]:
                timeline.append((int(meta["sim_emit_ns"]), n))
    return t_send, time.perf_counter_ns(), timeline


def _n_at(tl: Timeline, t: int) -> int:
    n = 0
    for ts, count in tl:
        if ts > t:
            break
        n = count
    return n


def resident(timelines: list[Timeline], trim_ns: int = 0) -> tuple[float, float, int]:
    """(rate tok/s, window s, tokens) over [max f_i + trim, min e_i - trim] (docs/metrics.md#resident-decode-window)."""
    t_s = max(tl[0][0] for tl in timelines) + trim_ns
    t_e = min(tl[-1][0] for tl in timelines) - trim_ns
    tokens = sum(_n_at(tl, t_e) - _n_at(tl, t_s) for tl in timelines)
    seconds = (t_e - t_s) / 1e9
    return tokens / seconds, seconds, tokens


async def server_state(s: aiohttp.ClientSession) -> dict[str, Any]:
    async with s.get("/server_info") as r:
        state: dict[str, Any] = (await r.json())["internal_states"][0]
    return state


async def decode_tiers(url: str, tiers: list[int], seconds: float, min_steps: int) -> list[dict[str, Any]]:
    prof = get_profile(PROFILE)
    rows = []
    timeout = aiohttp.ClientTimeout(total=None)
    async with aiohttp.ClientSession(base_url=url, timeout=timeout, connector=aiohttp.TCPConnector(limit=0)) as s:
        for c in tiers:
            model = analytic_decode_rate(prof, c)
            step = c / model
            max_new = math.ceil(max(seconds / step, min_steps)) + 10
            # Staggered lengths (max_new + i) as with natural EOS: one request ends the window per step.
            payloads = [
                {"input_ids": prompt(INPUT_LEN, seed=100 * c + i),
                 "sampling_params": {"max_new_tokens": max_new + i, "ignore_eos": True}}
                for i in range(c)
            ]
            before = await server_state(s)
            results = await asyncio.gather(*(one_stream(s, p) for p in payloads))
            after = await server_state(s)
            timelines = [tl for _, _, tl in results]
            assert all(tl[-1][1] == max_new + i for i, tl in enumerate(timelines))
            strict, window, tokens = resident(timelines)
            trimmed, _, _ = resident(timelines, trim_ns=int(step * 1e9 / 2))
            wave_s = (max(d for _, d, _ in results) - min(t for t, _, _ in results)) / 1e9
            rows.append({
                "tier": c,
                "max_new_tokens": max_new,
                "model_tok_s": model,
                "emitted_tok_s": strict,
                "error_pct": 100 * (strict / model - 1),
                "trimmed_tok_s": trimmed,
                "trimmed_error_pct": 100 * (trimmed / model - 1),
                "window_s": window,
                "window_tokens": tokens,
                "http_output_tok_s": sum(tl[-1][1] for tl in timelines) / wave_s,
                "late_steps": after["sim_late_steps"] - before["sim_late_steps"],
                "lost_s": after["sim_lateness_total_s"] - before["sim_lateness_total_s"],
                "pass": abs(strict / model - 1) < TARGET,
            })
            r = rows[-1]
            print(f"C{c:<3} model {model:9.2f}  emitted {strict:9.2f}  error {r['error_pct']:+6.3f}%  "
                  f"trimmed {r['trimmed_error_pct']:+6.3f}%  window {window:6.2f} s  "
                  f"late steps {r['late_steps']}", flush=True)
    return rows


async def prefill_tiers(url: str, tiers: list[int], scale: float) -> list[dict[str, Any]]:
    """Prefill protocol at ``scale``: measured (client send to last first token) vs the scaled model;
    the unscaled model is compared with the report's column."""
    prof = get_profile(PROFILE)
    rows = []
    async with aiohttp.ClientSession(base_url=url, connector=aiohttp.TCPConnector(limit=0)) as s:
        for c in tiers:
            payloads = [
                {"input_ids": prompt(8192, seed=10_000 * c + i), "cache_salt": f"bench-{c}-{i}-{time.time_ns()}",
                 "sampling_params": {"max_new_tokens": 1}}
                for i in range(c)
            ]
            results = await asyncio.gather(*(one_stream(s, p) for p in payloads))
            t0 = min(t for t, _, _ in results)
            last_first = max(tl[0][0] for _, _, tl in results)
            measured = c * 8192 / ((last_first - t0) / 1e9)
            scaled = analytic_prefill_rate(prof, c, 8192, time_scale=scale)
            model = analytic_prefill_rate(prof, c, 8192)
            rows.append({"tier": c, "report_tok_s": PAPER_PREFILL[c], "model_tok_s": model,
                         "model_vs_report_pct": 100 * (model / PAPER_PREFILL[c] - 1),
                         "scaled_model_tok_s": scaled, "measured_scaled_tok_s": measured,
                         "measured_vs_scaled_model_pct": 100 * (measured / scaled - 1)})
            r = rows[-1]
            print(f"prefill C{c:<3} report {PAPER_PREFILL[c]:9.2f}  model {model:9.2f} "
                  f"({r['model_vs_report_pct']:+.2f}%)  at x{scale}: model {scaled:9.2f} measured {measured:9.2f} "
                  f"({r['measured_vs_scaled_model_pct']:+.2f}%)", flush=True)
    return rows


def print_table(rows: list[dict[str, Any]]) -> None:
    print()
    print("| tier | model tok/s | emitted tok/s | error % | trimmed error % | window s | late steps |")
    print("|---|---:|---:|---:|---:|---:|---:|")
    for r in rows:
        print(f"| C{r['tier']} | {r['model_tok_s']:.2f} | {r['emitted_tok_s']:.2f} | {r['error_pct']:+.3f} | "
              f"{r['trimmed_error_pct']:+.3f} | {r['window_s']:.2f} | {r['late_steps']} |")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--tiers", default="1,2,4,8,16,32,64")
    ap.add_argument("--seconds", type=float, default=5.0, help="minimum common resident window per tier")
    ap.add_argument("--min-steps", type=int, default=300, help="minimum decode steps per window")
    ap.add_argument("--prefill", action="store_true", help="also run the prefill protocol")
    ap.add_argument("--prefill-scale", type=float, default=0.25)
    ap.add_argument("--out", type=Path, default=ROOT / "benchmarks" / "results" / "sim_realtime.json")
    args = ap.parse_args()
    tiers = [int(t) for t in args.tiers.split(",")]
    started = time.time()
    with sim_process("--profile", PROFILE) as url:
        rows = uvloop.run(decode_tiers(url, tiers, args.seconds, args.min_steps))
    prefill: list[dict[str, Any]] = []
    if args.prefill:
        with sim_process("--profile", PROFILE, "--time-scale", str(args.prefill_scale)) as url:
            prefill = uvloop.run(prefill_tiers(url, tiers, args.prefill_scale))
    print_table(rows)
    result = {
        "benchmark": "sim_realtime",
        "label": "simulated",
        "profile": get_profile(PROFILE).model_dump(mode="json"),
        "input_len": INPUT_LEN,
        "target_error_pct": 100 * TARGET,
        "all_pass": all(r["pass"] for r in rows),
        "decode": rows,
        "prefill": prefill,
        "prefill_time_scale": args.prefill_scale if args.prefill else None,
        "started_unix": started,
        "duration_s": time.time() - started,
        "host": {"python": platform.python_version(), "machine": platform.machine(), "cpus": os.cpu_count(),
                 "loadavg_1m": os.getloadavg()[0]},
    }
    args.out.parent.mkdir(parents=True, exist_ok=True)
    tmp = args.out.with_suffix(".json.tmp")
    tmp.write_text(json.dumps(result, indent=2) + "\n")
    tmp.replace(args.out)
    print(f"\nwrote {args.out.relative_to(ROOT)}; all tiers within {100 * TARGET:.0f}%: {result['all_pass']}")


if __name__ == "__main__":
    main()
