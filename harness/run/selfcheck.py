"""The client's self-check during each wave (edge module: threads, clock, HTTP).

Works against any server: while a wave runs, a watchdog thread asks the event loop to run a
callback every ``interval_s`` and records how long the loop took to run it (the *loop delay*: what
a socket read that became ready at that moment waited before the client stamped it). The loop
thread's CPU time over the wave's wall time is its *CPU share* (near 1 means the client was
saturated). The delays around the instants that define a wave's rate (its window edges) are kept
apart (``edge_delay_s``): a stall between events moves no measured instant. Against the built-in
simulator its own late-step counters (``/server_info`` ``internal_states``) are read before and
after the wave, so lateness is known per wave. The longest gap between two probe callbacks
(``loop_gap_max_s``) shows a loop that ran nothing at all (the process stopped or descheduled: no
probe is even posted then, so no delay is measured); ``client_stall_s``, the larger of it and the
longest delay, is the client's worst stall (with load workers: the worst worker's, or the longest
heartbeat gap the parent saw). The evidence rules ``client-bound``, ``client-stalled`` and
``sim-lateness`` judge the rows (``wave_checks.jsonl``, one per measured unit: a wave of a formal
matrix, ABBA screen or matched run, a round of a rate sweep or SLA-search probe, a trace replay's one
window). Every runner measures a unit the same way, through :meth:`WaveSelfCheck.around`.
"""

from __future__ import annotations

import asyncio
import json
import threading
import time
from collections.abc import Awaitable, Callable, Sequence
from typing import Any, TypeVar

import numpy as np

from harness.errors import DsvError
from harness.load.driver import LoadClient
from harness.service.launch.manager import RunningService, http_get

T = TypeVar("T")

LOOP_INTERVAL_S = 0.005
"""How often the watchdog thread probes the event loop while a wave runs."""


class LoopMonitor:
    """Loop delay (watchdog thread) and loop-thread CPU share over one interval of a running loop.

    ``start()`` and ``stop()`` must be called from the loop's own thread (inside a coroutine)."""

    def __init__(self, interval_s: float = LOOP_INTERVAL_S) -> None:
        self.interval_s = interval_s
        self.delays_ns: list[int] = []
        self.posted_ns: list[int] = []  # when each probe was posted (parallel to delays_ns)
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        self._t0 = 0
        self._cpu0 = 0.0
        self._pcpu0 = 0.0
        self._generation = 0

    def start(self) -> None:
        """Begin sampling the running loop."""
        loop = asyncio.get_running_loop()
        self.delays_ns, self.posted_ns = [], []
        self._generation += 1
        self._stop.clear()
        self._t0, self._cpu0, self._pcpu0 = time.perf_counter_ns(), time.thread_time(), time.process_time()
        self._thread = threading.Thread(target=self._watch, args=(loop,), name="dsv4h-loop-monitor", daemon=True)
        self._thread.start()

    def _watch(self, loop: asyncio.AbstractEventLoop) -> None:
        while not self._stop.wait(self.interval_s):
            try:
                loop.call_soon_threadsafe(self._record, self._generation, time.perf_counter_ns())
            except RuntimeError:  # the loop closed
                return

    def _record(self, generation: int, t0_ns: int) -> None:
        if generation == self._generation:  # not a late callback of an earlier interval
            self.delays_ns.append(time.perf_counter_ns() - t0_ns)
            self.posted_ns.append(t0_ns)

    def stop(self) -> dict[str, Any]:
        """Stop sampling; the interval's loop delays and CPU shares (``loop_summary``)."""
        wall_s = (time.perf_counter_ns() - self._t0) / 1e9
        cpu_s, pcpu_s = time.thread_time() - self._cpu0, time.process_time() - self._pcpu0
        self._stop.set()
        if self._thread is not None:
            self._thread.join(timeout=1.0)
            self._thread = None
        ran = [p + d for p, d in zip(self.posted_ns, self.delays_ns, strict=True)]
        return loop_summary(self.delays_ns, wall_s, cpu_s, pcpu_s,
                            gap_s=callback_gap_s([self._t0, *ran, time.perf_counter_ns()], self.interval_s))


def callback_gap_s(ran_ns: Sequence[int], interval_s: float) -> float:
    """The longest time between consecutive instants ``ran_ns`` beyond one probe interval (pure)."""
    if len(ran_ns) < 2:
        return 0.0
    return max(0.0, float(np.diff(np.asarray(ran_ns, dtype=np.int64)).max()) / 1e9 - interval_s)


def loop_summary(delays_ns: Sequence[int], wall_s: float, loop_cpu_s: float, process_cpu_s: float,
                 gap_s: float | None = None) -> dict[str, Any]:
    """Per-wave self-check numbers (pure): loop delay p50/p99/max in seconds (None without
    samples), loop-thread CPU seconds and shares of the wall time, the longest gap between probe
    callbacks (``gap_s``, when known) and the worst stall (the larger of it and the longest delay)."""
    d = np.asarray(delays_ns, dtype=np.float64) / 1e9
    wall = max(wall_s, 1e-9)
    stall = max(gap_s or 0.0, float(d.max()) if d.size else 0.0)
    return {
        "wall_s": wall_s, "loop_samples": int(d.size), "loop_gap_max_s": gap_s, "client_stall_s": stall,
        "loop_lag_p50_s": float(np.percentile(d, 50)) if d.size else None,
        "loop_lag_p99_s": float(np.percentile(d, 99)) if d.size else None,
        "loop_lag_max_s": float(d.max()) if d.size else None,
        "loop_cpu_s": loop_cpu_s, "loop_cpu_share": loop_cpu_s / wall, "process_cpu_share": process_cpu_s / wall,
    }


def edge_delay_s(posted_ns: Sequence[int], delays_ns: Sequence[int], instants_ns: Sequence[int],
                 interval_ns: int = int(LOOP_INTERVAL_S * 1e9)) -> float | None:
    """The longest loop delay that spans one of ``instants_ns`` (pure): a probe posted at ``t0`` and
    run ``d`` later shows the loop unresponsive over ``[t0, t0 + d]``, so a socket read stamped at an
    instant inside it may have waited up to ``d`` (probes within one interval before the instant
    count too). None without probes."""
    if not delays_ns:
        return None
    t0 = np.asarray(posted_ns, dtype=np.int64)
    d = np.asarray(delays_ns, dtype=np.int64)
    worst = 0
    for t in instants_ns:
        near = (t0 <= t) & (t0 + d + interval_ns >= t)
        if near.any():
            worst = max(worst, int(d[near].max()))
    return worst / 1e9


def sim_lateness(info: Any) -> tuple[int, float, int, float] | None:
    """(late steps, model seconds lost, late decode steps, decode seconds lost) from a simulator's
    ``/server_info`` body (pure); None when the body has no simulator counters. Simulators older than
    the decode counters report their late steps as decode steps (the conservative reading)."""
    states = info.get("internal_states") if isinstance(info, dict) else None
    state = states[0] if isinstance(states, list) and states and isinstance(states[0], dict) else {}
    steps, lost = state.get("sim_late_steps"), state.get("sim_lateness_total_s")
    if not isinstance(steps, int) or not isinstance(lost, int | float):
        return None
    dsteps, dlost = state.get("sim_late_decode_steps"), state.get("sim_decode_lateness_total_s")
    if not isinstance(dsteps, int) or not isinstance(dlost, int | float):
        dsteps, dlost = steps, lost
    return steps, float(lost), dsteps, float(dlost)


def _read_lateness(url: str) -> tuple[int, float, int, float] | None:
    try:
        status, body = http_get(url + "/server_info", timeout_s=5.0)
        return sim_lateness(json.loads(body)) if status == 200 else None
    except (DsvError, ValueError, OSError):
        return None


class WaveSelfCheck:
    """One wave at a time: ``begin`` before the wave's requests are sent, ``end`` after the last
    finished; ``take()`` returns the summary (then None until the next wave)."""

    def __init__(self, interval_s: float = LOOP_INTERVAL_S) -> None:
        self.monitor = LoopMonitor(interval_s)
        self.probes: tuple[list[int], list[int]] = ([], [])  # the last wave's (posted, delay) ns
        self._late0: tuple[int, float, int, float] | None = None
        self._last: dict[str, Any] | None = None
        self._active = False

    async def begin(self, svc: RunningService) -> None:
        """Read the simulator's lateness counters (simulator only), then start the loop monitor."""
        self._late0 = await asyncio.to_thread(_read_lateness, svc.url) if "dsv4h_simulator" in svc.server_info \
            else None
        self._last = None
        self._active = True
        self.monitor.start()

    async def end(self, svc: RunningService, *, probe: bool = True) -> None:
        """Stop the monitor and read the counters again (``probe=False`` after a failed wave)."""
        if not self._active:
            return
        self._active = False
        summary = self.monitor.stop()
        self.probes = (self.monitor.posted_ns, self.monitor.delays_ns)
        late1 = await asyncio.to_thread(_read_lateness, svc.url) if probe and self._late0 is not None else None
        if self._late0 is not None and late1 is not None:
            summary |= {"sim_late_steps": late1[0] - self._late0[0],
                        "sim_lateness_s": late1[1] - self._late0[1],
                        "sim_late_decode_steps": late1[2] - self._late0[2],
                        "sim_decode_lateness_s": late1[3] - self._late0[3]}
        else:
            summary |= {"sim_late_steps": None, "sim_lateness_s": None, "sim_late_decode_steps": None,
                        "sim_decode_lateness_s": None}
        self._last = summary

    async def around(self, svc: RunningService, client: LoadClient, send: Callable[[], Awaitable[T]]) -> T:
        """Measure one unit (a wave, a sweep round, a replay): :meth:`begin`, await ``send()``, :meth:`end`
        (without reading the simulator's counters again when ``send`` raised, which is re-raised), then
        fold in ``client``'s own worker self-check (:meth:`merge`) and its transport. The summary waits
        for :meth:`take`."""
        await self.begin(svc)
        try:
            out = await send()
        except BaseException:
            await self.end(svc, probe=False)
            raise
        await self.end(svc)
        self.merge(client.take_check())
        self.note(transport=client.transport)
        return out

    def merge(self, extra: dict[str, Any] | None) -> None:
        """Fold the load workers' self-check into the last summary (``harness.load.workers``): the
        worst of this loop and every worker's loop delay and CPU share, plus the worker fields."""
        if extra is None or self._last is None:
            return
        for key in ("loop_lag_p50_s", "loop_lag_p99_s", "loop_lag_max_s", "loop_cpu_share", "process_cpu_share"):
            vals = [v for v in (self._last.get(key), extra.get(key)) if v is not None]
            self._last[key] = max(vals) if vals else None
        self.probes = ([], [])  # the workers read the streams: this loop's probes say nothing about edges
        self._last |= {k: v for k, v in extra.items() if not k.startswith(("loop_", "process_"))}
        self._last["loop_gap_max_s"] = extra.get("loop_gap_max_s")  # the workers' loops, not this one's

    def note(self, **fields: Any) -> None:
        """Add ``fields`` (e.g. the client transport) to the last summary."""
        if self._last is not None:
            self._last |= fields

    def take(self, edges_ns: Sequence[int] = ()) -> dict[str, Any] | None:
        """The last wave's summary, once, with ``loop_lag_edge_s``: the loop delay spanning one of
        ``edges_ns`` (the client instants that define the wave's rate; None when not known)."""
        out, self._last = self._last, None
        if out is not None:
            out["loop_lag_edge_s"] = edge_delay_s(*self.probes, edges_ns) if edges_ns else None
        return out
