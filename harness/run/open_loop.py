"""The open-loop sender every rate-driven kind shares: rate sweeps, SLA-search probes, trace replays
(edge module: HTTP, clock).

:func:`send_open_loop` sends a planned schedule of requests open loop: request *i* is sent at the
unit's start + its planned offset whether or not earlier requests finished, unless the
``max_concurrency`` cap holds it back, and returns the records with each one's planned send and the
time the cap held it (:class:`Sent`). Around it, what the kinds build from one sent unit in the same
way: its ``schedule.jsonl`` rows (:func:`schedule_rows`), its ``wave_checks.jsonl`` key
(:func:`round_check`), the client instants that define its rate (:func:`unit_edges`) and how many
connections its client opens (:func:`connections`). It imports no kind's runner.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

from harness import ids
from harness.load.driver import LoadClient, WaveRequest
from harness.measure import sweep as sw
from harness.records import RequestRecord

NS = 1_000_000_000
START_LEAD_NS = 20_000_000  # the unit starts this long after planning its first send
MAX_CONNECTIONS = 4096


@dataclass
class Sent:
    """One sent unit: its records in request order, each request's planned send and time held by the
    cap (monotonic ns), and the unit's start."""

    records: list[RequestRecord] = field(default_factory=list)
    planned_ns: list[int] = field(default_factory=list)
    cap_wait_ns: list[int] = field(default_factory=list)
    start_ns: int = 0


async def send_open_loop(client: LoadClient, requests: Sequence[WaveRequest], offsets_s: Sequence[float],
                         cap: int | None) -> Sent:
    """Send ``requests[i]`` at start + ``offsets_s[i]`` (open loop), at most ``cap`` in flight; records
    in request order with each one's planned send and the time the cap held it. Cancelling cancels
    every request in flight."""
    out = Sent(start_ns=time.perf_counter_ns() + START_LEAD_NS)
    sem = asyncio.Semaphore(cap) if cap else None
    planned = [out.start_ns + round(o * NS) for o in offsets_s]
    waits = [0] * len(requests)

    async def one(i: int) -> RequestRecord:
        if sem is None:
            return await client.send(requests[i])
        t = time.perf_counter_ns()
        async with sem:
            waits[i] = time.perf_counter_ns() - t
            return await client.send(requests[i])

    tasks: list[asyncio.Task[RequestRecord]] = []
    try:
        for i, target in enumerate(planned):
            delay = (target - time.perf_counter_ns()) / NS
            if delay > 0:
                await asyncio.sleep(delay)
            tasks.append(asyncio.ensure_future(one(i)))
        out.records = list(await asyncio.gather(*tasks))
    except BaseException:
        for t in tasks:
            t.cancel()
        await asyncio.gather(*tasks, return_exceptions=True)
        raise
    out.planned_ns, out.cap_wait_ns = planned, waits
    return out


def connections(cap: int | None, requests: int) -> int:
    """The connections a unit's client opens: the cap, else one per request (at least 1, at most
    :data:`MAX_CONNECTIONS`)."""
    return cap or max(1, min(requests, MAX_CONNECTIONS))


def schedule_rows(planned_ns: Sequence[int], records: Sequence[RequestRecord], cap_wait_ns: Sequence[int],
                  fields: Callable[[int], dict[str, Any]] = lambda i: {}) -> list[dict[str, Any]]:
    """``schedule.jsonl`` rows of one sent unit (pure): per request the schedule row of
    ``harness.measure.sweep.schedule`` (planned and actual send, lag), then ``fields(i)``, then the
    time the cap held it (``cap_wait_s``) and the client's own lateness (``client_lag_s``: the lag less
    that wait)."""
    rows = sw.schedule(planned_ns, records)
    for i, (row, wait) in enumerate(zip(rows, cap_wait_ns, strict=True)):
        row.update(fields(i) | {"cap_wait_s": wait / NS, "client_lag_s": row["lag_s"] - wait / NS})
    return rows


def round_check(cell: str, round_index: int, concurrency: int, *, workload: str = "sweep",
                **fields: Any) -> tuple[str, dict[str, Any]]:
    """(wave id, unit fields) of the ``wave_checks.jsonl`` row of measured round ``round_index`` of
    ``cell`` (pure; a sweep round, an SLA-search probe's round, a trace replay's one window): keyed by
    the round's one wave id (``ids.wave_id(cell, round_index, 0)``, the id its requests carry), with
    its ``round_id``, ``cell_id``, ``phase`` ``measured``, ``workload`` and ``concurrency`` (the cap, 0
    without one) plus ``fields``. The self-check's own fields are added by
    ``ServiceSession.record_check``."""
    unit = {"round_id": ids.round_id(cell, round_index), "cell_id": cell, "phase": "measured",
            "workload": workload, "concurrency": concurrency} | fields
    return ids.wave_id(cell, round_index, 0), unit


def unit_edges(start_ns: int, records: Sequence[RequestRecord]) -> list[int]:
    """The client instants that define an open-loop unit's rate (pure): its start and its last response's
    end (``harness.measure.sweep.span_s``); none without records."""
    return [start_ns, max(r.done_ns for r in records)] if records else []
