"""Helpers for the simulator tests: a real server on 127.0.0.1:0 in the test's own event loop."""

from __future__ import annotations

import asyncio
import itertools
import json
import signal
import subprocess
import sys
from collections.abc import AsyncIterator, Coroutine, Iterator
from contextlib import asynccontextmanager, contextmanager
from dataclasses import dataclass
from typing import Any, TypeVar

import aiohttp

from harness.aio import new_event_loop
from harness.sim import SimOptions, SimServer

T = TypeVar("T")


def run(coro: Coroutine[Any, Any, T]) -> T:
    """Run a coroutine on a fresh uvloop loop (the simulator's production loop)."""
    with asyncio.Runner(loop_factory=new_event_loop) as runner:
        return runner.run(coro)


@asynccontextmanager
async def serving(**options: Any) -> AsyncIterator[tuple[SimServer, aiohttp.ClientSession]]:
    """Start a simulator (profile ``fast`` unless given) and a client session bound to its URL."""
    server = SimServer(SimOptions.build(**{"profile": "fast", **options}))
    url = await server.start()
    try:
        async with aiohttp.ClientSession(base_url=url) as session:
            yield server, session
    finally:
        await server.stop()


@dataclass
class Stream:
    """One streamed response: HTTP status, parsed events (without ``[DONE]``), whether it ended with
    ``[DONE]``, and the raw body."""

    status: int
    events: list[dict[str, Any]]
    done: bool
    raw: bytes

    @property
    def last(self) -> dict[str, Any]:
        return self.events[-1]

    @property
    def meta(self) -> dict[str, Any]:
        meta: dict[str, Any] = self.events[-1]["meta_info"]
        return meta


def parse_sse(raw: bytes) -> tuple[list[dict[str, Any]], bool]:
    """Strictly parse SSE ``data: <json>\\n\\n`` framing; returns (events, ended with [DONE])."""
    parts = raw.split(b"\n\n")
    assert parts[-1] == b"", f"stream does not end with a blank line: {raw[-80:]!r}"
    events: list[dict[str, Any]] = []
    done = False
    for part in parts[:-1]:
        assert part.startswith(b"data: "), part[:80]
        assert not done, "an event after [DONE]"
        payload = part[len(b"data: ") :]
        if payload == b"[DONE]":
            done = True
            continue
        events.append(json.loads(payload))
    return events, done


async def stream(session: aiohttp.ClientSession, payload: dict[str, Any]) -> Stream:
    """POST a streaming ``/generate`` and read the whole response."""
    return await stream_encoded(session, json.dumps({**payload, "stream": True}).encode())


async def stream_encoded(session: aiohttp.ClientSession, body: bytes) -> Stream:
    """POST an already encoded streaming ``/generate`` body (encoded before a clock starts) and read
    the whole response."""
    async with session.post("/generate", data=body, headers={"Content-Type": "application/json"}) as resp:
        raw = await resp.read()
        status = resp.status
    if status != 200 or not raw.startswith(b"data: "):
        return Stream(status, [], False, raw)
    events, done = parse_sse(raw)
    return Stream(status, events, done, raw)


async def unary(session: aiohttp.ClientSession, payload: dict[str, Any]) -> tuple[int, Any]:
    """POST a non-streaming ``/generate``; returns (status, parsed JSON body)."""
    async with session.post("/generate", json={**payload, "stream": False}) as resp:
        return resp.status, await resp.json(content_type=None)


def prompt(n: int, seed: int = 7) -> list[int]:
    """A deterministic prompt of ``n`` token IDs."""
    return [(seed * 7919 + i * 104729) % 120_000 + 2 for i in range(n)]


def token_timeline(events: list[dict[str, Any]]) -> list[tuple[int, int]]:
    """(sim_emit_ns, cumulative completion_tokens) for each event that carries output tokens."""
    out: list[tuple[int, int]] = []
    prev = 0
    for ev in events:
        meta = ev["meta_info"]
        n = int(meta["completion_tokens"])
        if n > prev:
            out.append((int(meta["sim_emit_ns"]), n))
            prev = n
    return out


def resident_rate(timelines: list[list[tuple[int, int]]], *, trim: bool = True) -> tuple[float, float]:
    """Resident decode rate (tok/s) of a wave (docs/metrics.md#resident-decode-window) from ``sim_emit_ns``,
    and the window (s).

    ``trim`` shrinks the common window [max f_i, min e_i] by half a step at each end so that no
    step's burst of events is split by a window edge (the step is the median gap of the timelines).
    """
    t_s = max(tl[0][0] for tl in timelines)
    t_e = min(tl[-1][0] for tl in timelines)
    if trim:
        gaps = sorted(b[0] - a[0] for tl in timelines for a, b in itertools.pairwise(tl))
        half = gaps[len(gaps) // 2] / 2
        t_s, t_e = int(t_s + half), int(t_e - half)
    assert t_e > t_s, "no common resident window"

    def n_at(tl: list[tuple[int, int]], t: int) -> int:
        n = 0
        for ts, count in tl:
            if ts > t:
                break
            n = count
        return n

    tokens = sum(n_at(tl, t_e) - n_at(tl, t_s) for tl in timelines)
    seconds = (t_e - t_s) / 1e9
    return tokens / seconds, seconds


@contextmanager
def spawned(*args: str) -> Iterator[tuple[subprocess.Popen[str], str]]:
    """Run ``dsv4h sim serve ARGS`` in a subprocess (its own core and GIL); yields (process, URL).

    The process is terminated (SIGTERM, then killed) on exit unless it already ended.
    """
    cmd = [sys.executable, "-c", "from harness.cli import main; main()", "sim", "serve", "--port", "0", *args]
    proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        assert proc.stdout is not None
        line = proc.stdout.readline()
        assert line.startswith("dsv4h-sim listening on http://127.0.0.1:"), (line, proc.stderr and proc.stderr.read())
        yield proc, line.split()[-1]
    finally:
        if proc.poll() is None:
            proc.send_signal(signal.SIGTERM)
            try:
                proc.wait(timeout=10)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait()
        for pipe in (proc.stdout, proc.stderr):
            if pipe is not None:
                pipe.close()


@asynccontextmanager
async def session(url: str) -> AsyncIterator[aiohttp.ClientSession]:
    """A client session bound to ``url``."""
    async with aiohttp.ClientSession(base_url=url) as s:
        yield s
