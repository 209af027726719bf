"""Load from several worker processes on one host (edge module: processes, pipes, clock).

One process drains a step's burst of C events serially, so its receive lag grows as C x (CPU per
event). ``WorkerLoadClient`` spreads a wave's streams over N worker processes, each with its own
uvloop loop and ``LoadClient`` (connection pool of its share of the wave):

- **one clock**: every timestamp is ``time.perf_counter_ns()``, which on Linux is the system-wide
  ``CLOCK_MONOTONIC``, so records from different processes of one host share one time axis;
- **synchronized start**: the parent sends each worker its requests and one start instant; each
  worker prepares its bodies, sleeps, then spins to the instant and sends. The spread of the actual
  send instants (``send_skew_s``) and the latest start after the instant are recorded per wave;
- **merge**: records come back in request order, unchanged, before any metric is computed;
- **failure**: a worker that dies (or answers with an error) fails its wave with a
  ``MeasurementError`` naming the worker, its PID and exit code; the pool is then unusable;
- **no unbounded wait**: each worker bounds its wave like an in-process client
  (``harness.load.driver.gather_wave``) and publishes, in memory shared with the parent, a heartbeat
  (its event loop ran: every probe tick, ~5 ms) and its wave's current deadline. The parent waits for
  a worker until that deadline plus ``WAVE_MARGIN_S`` (before the first one is published: the
  requests' limit before any output, send + two silences, plus margins), and no longer than
  ``WORKER_SILENCE_S`` without a heartbeat. A worker past either (stopped, hung, descheduled) is killed
  (SIGKILL: its process is the pool's own), its requests are recorded as failed with the reason, the
  other workers' records are kept, and the pool is unusable from then on; the wave, having failed
  requests, is never counted. The longest heartbeat gap the parent saw is ``worker_silence_max_s`` of
  the wave's self-check (judged by the ``client-stalled`` evidence rule);
- **live tally**: the same shared memory carries each worker's live tally of its streams
  (``harness.load.live``), written at its watch ticks under a sequence counter; the parent merges the
  workers' tallies and hands them to the wave's ``on_live`` sink at the same interval;
- **self-check**: each worker measures its own event-loop delay and CPU share during the wave
  (same keys as ``harness.run.selfcheck``); ``take_check`` returns the worst worker's figures with
  the worker count, CPU pinning and send skew, for ``wave_checks.jsonl``.

``auto_workers`` sizes a pool from the offered event rate and the client's CPU per event.
"""

from __future__ import annotations

import asyncio
import contextlib
import gc
import math
import multiprocessing as mp
import os
import threading
import time
from collections.abc import Sequence
from dataclasses import dataclass, replace
from multiprocessing.connection import Connection
from types import TracebackType
from typing import Any

import numpy as np

from harness import aio
from harness.errors import MeasurementError
from harness.load.client import Protocol, StreamLimits, make_record
from harness.load.driver import (
    DEFAULT_CONNECT_TIMEOUT_S,
    DEFAULT_TIMEOUT_S,
    WATCH_INTERVAL_S,
    WAVE_MARGIN_S,
    LiveSink,
    LoadClient,
    OpenAIOptions,
    Transport,
    WaveRequest,
    gather_wave,
)
from harness.load.live import FIELDS, LiveTally, merge
from harness.records import RequestRecord

__all__ = ["WorkerLoadClient", "auto_workers"]

CPU_PER_EVENT_S = 18e-6
"""Client CPU per streamed event on the ``wire`` transport, used by ``auto`` (measured on an H200 host's
cores, load workers at C1024-C2048: 17.6-20.9 us; benchmarks/RESULTS.md)."""

TARGET_CPU_SHARE = 0.30
"""``auto`` keeps each ``wire`` worker's expected CPU share at or below this. A decode step sends one event
per stream at once; the wire transport stamps a read as soon as the loop hands it over and parses in
short slices between polls (``harness.load.wire``), so a worker busy 30% of the time still stamps a burst
within 10% of the step. Measured on the H200 host: shares of 0.23-0.46 gave receive lag p99 of 0.03-0.11
of the step at C1024-C2048 (0.31 at C2048 @ 10 ms: 0.086) (benchmarks/RESULTS.md)."""

SIZING: dict[str, tuple[float, float]] = {"wire": (CPU_PER_EVENT_S, TARGET_CPU_SHARE), "aiohttp": (25e-6, 0.10)}
"""(CPU per event in seconds, target CPU share) per transport. The aiohttp transport parses each read in
the task that awaits it, so its lag grows with its whole CPU per event (12-40 us measured): 0.10."""

START_LEAD_S = 0.05
"""How far ahead of now a wave's start instant is set (bodies are built and pickled before it)."""

WORKER_SILENCE_S = 5.0
"""Longest a worker may go without a heartbeat (its event loop ran) during a wave before the parent
kills it and fails its requests (module docstring): a thousand probe intervals; a loop that did not
run for that long stamped nothing on time, and the ``client-stalled`` rule would invalidate the wave
anyway (its floor is 1 s)."""

_SPIN_S = 0.002
_PROBE_S = 0.005
_BEAT, _DEADLINE = 0, 1  # slots of the shared heartbeat array (perf_counter_ns values)
_SEQ, _LIVE = 2, 3  # then the live tally: a sequence counter (odd while written) and FIELDS from _LIVE on
_SLOTS = _LIVE + len(FIELDS)


def publish_tally(beat: Any, t: LiveTally) -> None:
    """Write ``t`` into a worker's shared array (the sequence counter is odd while it is written)."""
    beat[_SEQ] += 1
    beat[_LIVE:_SLOTS] = t.values()
    beat[_SEQ] += 1


def read_tally(beat: Any, n: int) -> LiveTally | None:
    """A worker's last published tally; ``LiveTally(n)`` before its first, None while it is being written."""
    seq = int(beat[_SEQ])
    if seq % 2:
        return None
    vals = [int(v) for v in beat[_LIVE:_SLOTS]]
    if int(beat[_SEQ]) != seq:
        return None
    return LiveTally(*vals) if seq else LiveTally(n)


def available_cpus() -> list[int]:
    """CPUs this process may run on (affinity mask where the OS has one)."""
    try:
        return sorted(os.sched_getaffinity(0))
    except AttributeError:  # pragma: no cover - not Linux
        return list(range(os.cpu_count() or 1))


def auto_workers(offered_events_per_s: float, *, cpu_per_event_s: float | None = None,
                 cpus: int | None = None, target_share: float | None = None, transport: str = "wire") -> int:
    """Worker processes for an offered event rate (pure): enough that each stays below the target
    share of a core at the given CPU per event (both default to ``SIZING[transport]``), at most one
    per CPU but one (the server or the parent needs one); 1 (in process) when one process suffices."""
    default_cpu, default_share = SIZING[transport]
    cpu_per_event_s = default_cpu if cpu_per_event_s is None else cpu_per_event_s
    target_share = default_share if target_share is None else target_share
    if offered_events_per_s < 0 or cpu_per_event_s <= 0 or not 0 < target_share <= 1:
        raise ValueError("offered rate >= 0, CPU per event > 0 and 0 < target share <= 1 required")
    n = math.ceil(offered_events_per_s * cpu_per_event_s / target_share)
    limit = max(1, (cpus if cpus is not None else len(available_cpus())) - 1)
    return max(1, min(n, limit))


@dataclass(frozen=True)
class WorkerSetup:
    """What a worker needs to build its own ``LoadClient`` (picklable)."""

    base_url: str
    protocol: Protocol
    concurrency: int
    model: str | None
    timeout_s: float
    connect_timeout_s: float
    openai: OpenAIOptions
    limits: StreamLimits
    cpu: int | None
    transport: Transport


class _Probe:
    """Event-loop delay (a watchdog thread's callbacks), the longest gap between two callbacks (a
    stopped or descheduled process delays no callback: it runs none), CPU share of one worker over
    one wave; each callback is also the worker's heartbeat in ``beat``."""

    def __init__(self, loop: asyncio.AbstractEventLoop, beat: Any = None) -> None:
        self.loop = loop
        self.beat = beat
        self.delays: list[int] = []
        self._last_ns = time.perf_counter_ns()
        self.gap_ns = 0
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._watch, daemon=True)
        self._t0, self._cpu0 = time.perf_counter_ns(), time.process_time()
        self._thread.start()

    def _watch(self) -> None:
        while not self._stop.wait(_PROBE_S):
            try:
                self.loop.call_soon_threadsafe(self._record, time.perf_counter_ns())
            except RuntimeError:
                return

    def _record(self, t0: int) -> None:
        now = time.perf_counter_ns()
        self.delays.append(now - t0)
        self.gap_ns = max(self.gap_ns, now - self._last_ns)
        self._last_ns = now
        if self.beat is not None:
            self.beat[_BEAT] = now

    def stop(self) -> dict[str, Any]:
        wall = max((time.perf_counter_ns() - self._t0) / 1e9, 1e-9)
        cpu = time.process_time() - self._cpu0
        self._stop.set()
        self._thread.join(timeout=1.0)
        d = np.asarray(self.delays, dtype=np.float64) / 1e9
        gap = max(0.0, max(self.gap_ns, time.perf_counter_ns() - self._last_ns) / 1e9 - _PROBE_S)
        return {"loop_samples": int(d.size), "loop_gap_max_s": gap,
                "client_stall_s": max(gap, float(d.max()) if d.size else 0.0),
                "loop_lag_p50_s": float(np.percentile(d, 50)) if d.size else None,
                "loop_lag_p99_s": float(np.percentile(d, 99)) if d.size else None,
                "loop_lag_max_s": float(d.max()) if d.size else None,
                "loop_cpu_share": cpu / wall, "process_cpu_share": cpu / wall, "cpu_s": cpu}


async def _worker_wave(client: LoadClient, start_ns: int, wave_size: int, requests: Sequence[WaveRequest],
                       beat: Any = None) -> tuple[list[RequestRecord], int, dict[str, Any]]:
    bodies = []
    for k, r in enumerate(requests):
        bodies.append(client.body(r))
        if beat is not None and k % 64 == 0:
            beat[_BEAT] = time.perf_counter_ns()
    probe = _Probe(asyncio.get_running_loop(), beat)
    while (left := start_ns - time.perf_counter_ns()) > _SPIN_S * 1e9:
        await asyncio.sleep((left / 1e9) - _SPIN_S)
    while time.perf_counter_ns() < start_ns:
        pass
    sent_ns = time.perf_counter_ns()

    def publish(deadline_ns: int) -> None:
        if beat is not None:
            beat[_DEADLINE] = deadline_ns

    def live(t: LiveTally) -> None:
        if beat is not None:
            publish_tally(beat, t)

    records = await gather_wave(client, requests, bodies, wave_size, on_tick=publish, on_live=live)
    return records, sent_ns, probe.stop()


async def _worker_loop(conn: Connection, setup: WorkerSetup, beat: Any = None) -> None:
    loop = asyncio.get_running_loop()
    async with LoadClient(setup.base_url, protocol=setup.protocol, concurrency=setup.concurrency,
                          model=setup.model, timeout_s=setup.timeout_s, connect_timeout_s=setup.connect_timeout_s,
                          pause_gc=False, openai=setup.openai, limits=setup.limits,
                          transport=setup.transport) as client:
        conn.send(("ready", os.getpid(), setup.cpu))
        while True:
            msg = await loop.run_in_executor(None, conn.recv)
            if msg[0] == "stop":
                return
            _, start_ns, wave_size, requests = msg
            try:
                records, sent_ns, check = await _worker_wave(client, start_ns, wave_size, requests, beat)
            except Exception as exc:  # reported to the parent, which fails the wave
                conn.send(("error", f"{type(exc).__name__}: {exc}"))
                continue
            if beat is not None:
                beat[_BEAT] = time.perf_counter_ns()  # alive while the records are pickled and sent
            conn.send(("ok", records, sent_ns, check))


def _worker_main(conn: Connection, setup: WorkerSetup, beat: Any = None) -> None:
    """Entry point of one worker process (``beat``: the heartbeat array shared with the parent)."""
    if setup.cpu is not None and hasattr(os, "sched_setaffinity"):
        os.sched_setaffinity(0, {setup.cpu})
    gc.disable()  # reference counting frees records; no collection pause delays a timestamp
    with contextlib.suppress(EOFError, KeyboardInterrupt, BrokenPipeError):
        aio.run(_worker_loop(conn, setup, beat))


@dataclass
class _Worker:
    index: int
    process: Any  # multiprocessing.context.SpawnProcess
    conn: Connection
    cpu: int | None
    beat: Any = None  # shared int64 [heartbeat ns, wave deadline ns, live tally] (multiprocessing RawArray)

    def died(self) -> str:
        code = self.process.exitcode
        return f"load worker {self.index} (pid {self.process.pid}) died" + (
            f" with exit code {code}" if code is not None else " (its pipe closed)")


def _merge_checks(checks: Sequence[dict[str, Any]]) -> dict[str, Any]:
    """The worst worker's loop delay and CPU share (pure)."""
    out: dict[str, Any] = {}
    for key in ("loop_lag_p50_s", "loop_lag_p99_s", "loop_lag_max_s", "loop_cpu_share", "process_cpu_share",
                "loop_gap_max_s", "client_stall_s"):
        vals = [c[key] for c in checks if c.get(key) is not None]
        out[key] = max(vals) if vals else None
    out["loop_samples"] = sum(int(c.get("loop_samples", 0)) for c in checks)
    out["worker_cpu_s"] = sum(float(c.get("cpu_s", 0.0)) for c in checks)
    return out


class WorkerLoadClient(LoadClient):
    """A ``LoadClient`` whose waves run in ``workers`` processes (module docstring). With ``pin_cpus``
    worker k is pinned to the k-th allowed CPU counted from the end (the parent and a co-located
    server keep the first ones). ``tokenize`` callables cannot cross processes and are refused."""

    def __init__(  # noqa: PLR0913 - LoadClient's options plus workers and pinning
            self, base_url: str, *, workers: int, pin_cpus: bool = False, protocol: Protocol = "sglang",
                 concurrency: int = 64, model: str | None = None, timeout_s: float = DEFAULT_TIMEOUT_S,
                 connect_timeout_s: float = DEFAULT_CONNECT_TIMEOUT_S, openai: OpenAIOptions | None = None,
                 limits: StreamLimits | None = None, pause_gc: bool = True, transport: Transport | None = None) -> None:
        super().__init__(base_url, protocol=protocol, concurrency=concurrency, model=model, timeout_s=timeout_s,
                         connect_timeout_s=connect_timeout_s, pause_gc=pause_gc, openai=openai, limits=limits,
                         transport=transport)
        if workers < 1:
            raise ValueError(f"workers must be >= 1, got {workers}")
        if self.openai.tokenize is not None:
            raise ValueError("load workers cannot re-tokenize text (the tokenizer stays in the parent); use workers: 1")
        self.workers = workers
        self.pin_cpus = pin_cpus
        self._workers: list[_Worker] = []
        self._broken: str | None = None
        self._check: dict[str, Any] | None = None
        self.wave_runner = self._run_wave

    def _cpus(self) -> list[int | None]:
        if not self.pin_cpus:
            return [None] * self.workers
        cpus = available_cpus()
        return [cpus[-1 - (k % len(cpus))] for k in range(self.workers)]

    async def __aenter__(self) -> WorkerLoadClient:
        await super().__aenter__()
        ctx = mp.get_context("spawn")
        per_worker = max(1, math.ceil(self.concurrency / self.workers))
        try:
            for k, cpu in enumerate(self._cpus()):
                setup = WorkerSetup(self.base_url, self.protocol, per_worker, self.model, self.timeout_s,
                                    self.connect_timeout_s, replace(self.openai, tokenize=None), self.limits, cpu,
                                    self.transport)
                parent, child = ctx.Pipe()
                beat = ctx.RawArray("q", _SLOTS)
                proc = ctx.Process(target=_worker_main, args=(child, setup, beat), name=f"dsv4h-load-{k}",
                                   daemon=True)
                proc.start()
                child.close()
                self._workers.append(_Worker(k, proc, parent, cpu, beat))
            for w in self._workers:
                msg = await self._recv(w, 60.0)
                if msg[0] != "ready":
                    raise MeasurementError(f"load worker {w.index} did not start: {msg}")
        except BaseException:
            await self.__aexit__(None, None, None)
            raise
        return self

    async def __aexit__(self, et: type[BaseException] | None, ev: BaseException | None,
                        tb: TracebackType | None) -> None:
        for w in self._workers:
            with contextlib.suppress(OSError, ValueError):
                w.conn.send(("stop",))
        for w in self._workers:
            await asyncio.to_thread(w.process.join, 5.0)
            if w.process.is_alive():
                w.process.kill()
                await asyncio.to_thread(w.process.join, 5.0)
            w.conn.close()
        self._workers = []
        await super().__aexit__(et, ev, tb)

    async def _poll(self, w: _Worker) -> tuple[bool, Any]:
        """(True, the worker's next message) when one arrives within 0.25 s, else (False, None); a dead
        worker raises ``MeasurementError`` with the reason."""
        try:
            ready = await asyncio.to_thread(w.conn.poll, 0.25)
        except (OSError, EOFError):
            ready = True
        if ready:
            try:
                return True, w.conn.recv()
            except (EOFError, OSError):
                await asyncio.to_thread(w.process.join, 1.0)
                raise MeasurementError(w.died(), hint="the wave failed; see the worker's exit code") from None
        if not w.process.is_alive():
            raise MeasurementError(w.died(), hint="the wave failed; see the worker's exit code")
        return False, None

    async def _recv(self, w: _Worker, timeout_s: float | None) -> Any:
        """The worker's next message; a dead worker raises ``MeasurementError`` with the reason."""
        deadline = None if timeout_s is None else time.monotonic() + timeout_s
        while True:
            ready, msg = await self._poll(w)
            if ready:
                return msg
            if deadline is not None and time.monotonic() > deadline:
                raise MeasurementError(f"load worker {w.index} (pid {w.process.pid}) did not answer in {timeout_s} s")

    async def _await_wave(self, w: _Worker, start_ns: int, n_requests: int) -> tuple[Any, int]:
        """The worker's answer to the wave sent to it, and the longest heartbeat gap seen meanwhile (ns).
        A worker silent longer than ``WORKER_SILENCE_S``, or still busy past its wave's deadline (module
        docstring), is killed: the answer is then ``("stalled", reason)``. A dead worker raises
        ``MeasurementError``."""
        silence_ns, margin_ns = int(WORKER_SILENCE_S * 1e9), int(WAVE_MARGIN_S * 1e9)
        first_ns = start_ns + 2 * int(self.timeout_s * 1e9) + margin_ns  # before any deadline is published
        sent_ns, worst = time.perf_counter_ns(), 0
        while True:
            ready, msg = await self._poll(w)
            if ready:
                return msg, worst
            now = time.perf_counter_ns()
            gap = now - max(int(w.beat[_BEAT]), sent_ns)
            worst = max(worst, gap)
            published = int(w.beat[_DEADLINE])
            deadline = (published if published > 0 else first_ns) + margin_ns
            why = None
            if gap > silence_ns:
                why = (f"was silent for {gap / 1e9:.1f} s during the wave (no heartbeat for more than "
                       f"{WORKER_SILENCE_S:g} s: stopped or hung)")
            elif now > deadline:
                why = (f"did not answer by the wave deadline, {(deadline - start_ns) / 1e9:.1f} s after the start "
                       "(its requests' latest limit plus margins)")
            if why is not None:
                w.process.kill()  # the pool's own process; SIGKILL ends a stopped one too
                await asyncio.to_thread(w.process.join, 5.0)
                return ("stalled", f"load worker {w.index} (pid {w.process.pid}) {why}; the parent killed it and "
                        f"failed its {n_requests} request(s)"), worst

    async def _relay(self, shares: Sequence[Sequence[int]], on_live: LiveSink) -> None:
        """Hand ``on_live`` the workers' merged tally every ``WATCH_INTERVAL_S`` until cancelled (a
        worker caught mid-write keeps its previous tally)."""
        last = [LiveTally(len(idx)) for idx in shares]
        while True:
            for k, (w, idx) in enumerate(zip(self._workers, shares, strict=True)):
                t = read_tally(w.beat, len(idx))
                if t is not None:
                    last[k] = t
            on_live(merge(last))
            await asyncio.sleep(WATCH_INTERVAL_S)

    async def _run_wave(self, requests: Sequence[WaveRequest], on_live: LiveSink | None = None
                        ) -> list[RequestRecord]:
        if self._broken is not None:
            raise MeasurementError(f"the load worker pool is broken: {self._broken}",
                                   hint="a worker died or was killed in an earlier wave; restart the run")
        n, start_ns = len(requests), time.perf_counter_ns() + int(START_LEAD_S * 1e9)
        shares = [list(range(k, n, self.workers)) for k in range(self.workers)]
        for w, idx in zip(self._workers, shares, strict=True):
            w.beat[0:_SLOTS] = [0] * _SLOTS
            try:
                w.conn.send(("wave", start_ns, n, [requests[i] for i in idx]))
            except (OSError, ValueError):
                await asyncio.to_thread(w.process.join, 1.0)
                self._broken = w.died()
                raise MeasurementError(w.died(), hint="the wave failed; see the worker's exit code") from None
        relay = asyncio.ensure_future(self._relay(shares, on_live)) if on_live is not None else None
        try:
            answers = await asyncio.gather(*(self._await_wave(w, start_ns, len(idx))
                                             for w, idx in zip(self._workers, shares, strict=True)),
                                           return_exceptions=True)
        finally:
            if relay is not None:
                relay.cancel()
                with contextlib.suppress(asyncio.CancelledError):
                    await relay
        results = [a if isinstance(a, BaseException) else a[0] for a in answers]
        silence = max((a[1] for a in answers if not isinstance(a, BaseException)), default=0) / 1e9
        errors = [r for r in results if isinstance(r, BaseException)]
        errors += [MeasurementError(f"load worker {w.index}: {r[1]}")
                   for w, r in zip(self._workers, results, strict=True)
                   if not isinstance(r, BaseException) and r[0] == "error"]
        if errors:
            self._broken = str(errors[0])
            raise errors[0]
        answered: list[Any] = list(results)
        out: list[RequestRecord | None] = [None] * n
        sent, checks, stalled = [], [], []
        end_ns = time.perf_counter_ns()
        for w, idx, res in zip(self._workers, shares, answered, strict=True):
            if res[0] == "stalled":  # its requests failed with the reason; the others' records are kept
                stalled.append(w.index)
                self._broken = res[1]
                for i in idx:
                    r = requests[i]
                    out[i] = make_record(self.new_decoder(), r.rid, start_ns, end_ns, None, res[1], r.record_fields(n))
                continue
            _, recs, sent_ns, check = res
            for i, rec in zip(idx, recs, strict=True):
                out[i] = rec
            if idx:
                sent.append(sent_ns)
                checks.append(check)
        merged = _merge_checks(checks)
        self._check = merged | {
            "workers": self.workers, "worker_cpus": [w.cpu for w in self._workers],
            "worker_pids": [w.process.pid for w in self._workers],
            "send_skew_s": (max(sent) - min(sent)) / 1e9 if sent else 0.0,
            "send_start_late_s": (max(sent) - start_ns) / 1e9 if sent else 0.0,
            "worker_silence_max_s": silence, "stalled_workers": stalled,
            "client_stall_s": max(silence, merged.get("client_stall_s") or 0.0)}
        return [r for r in out if r is not None]

    def take_check(self) -> dict[str, Any] | None:
        """The last wave's worker self-check (worst worker) with workers, pinning and send skew, once."""
        out, self._check = self._check, None
        return out
