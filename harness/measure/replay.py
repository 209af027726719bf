"""Trace-replay measures: the achieved schedule and the prefix-cache hits against the trace's (pure).

**Schedule.** Request *i* is scheduled at the replay's start + ``timestamp_i / speed`` (ms -> s). Its
*lateness* is its actual send minus its scheduled send (seconds, :func:`harness.measure.sweep.schedule`);
its *client lateness* leaves out the time a ``max_concurrency`` cap held it back (a cap is declared, so
waiting for it is the replay, not the client falling behind). The replay *kept its schedule* when no
request's client lateness exceeds the spec's ``lateness_tolerance_ms`` (``late_requests`` counts those
that did; rule ``replay-schedule``).

**Prefix-cache hits.** Per request the trace implies ``expected`` cached prompt tokens
(:func:`harness.inputs.trace.expected_cached`: an unbounded prefix cache, earlier prefills finished);
the server reports ``cached_tokens`` (SGLang's ``meta_info``, OpenAI's ``usage.prompt_tokens_details``).
Hit ratio = cached tokens / prompt tokens over the run's successful requests. The two *agree* when the
run's reported total is within ``cached_tolerance_pct`` percent of the implied total (a tolerance for
what the assumptions leave out: eviction, a prefix still in prefill when the next request came, a
server's page rounding, chance matches of leading ids); rule ``replay-cache``.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from harness.measure import sweep as sw
from harness.measure.table_model import TableModel
from harness.records import RequestRecord

REPLAY_ID = "replay"  # the one row id of a replay's replay_runs row (findings name it)


def offsets_s(timestamps_ms: Sequence[float], speed: float) -> list[float]:
    """Send offsets (s from the replay's start): the first timestamp at 0, later ones after it by their
    distance / ``speed``."""
    if not speed > 0:
        raise ValueError(f"speed must be > 0, got {speed}")
    if not timestamps_ms:
        return []
    t0 = float(timestamps_ms[0])
    return [(float(t) - t0) / 1000.0 / speed for t in timestamps_ms]


def schedule_stats(sched: Sequence[dict[str, Any]], tolerance_s: float) -> dict[str, Any]:
    """Lateness figures of the schedule rows (``lag_s``, ``client_lag_s``, ``cap_wait_s`` per request)."""
    lag = np.asarray([float(r["lag_s"]) for r in sched], dtype=np.float64)
    client = np.asarray([float(r["client_lag_s"]) for r in sched], dtype=np.float64)
    if lag.size == 0:
        nan = math.nan
        return {"lateness_p50_s": nan, "lateness_p99_s": nan, "lateness_max_s": nan, "client_lateness_p99_s": nan,
                "client_lateness_max_s": nan, "late_requests": 0, "schedule_kept": True, "capped_requests": 0}
    p50, p99 = np.percentile(lag, [50, 99])
    late = int((client > tolerance_s).sum())
    return {"lateness_p50_s": float(p50), "lateness_p99_s": float(p99), "lateness_max_s": float(lag.max()),
            "client_lateness_p99_s": float(np.percentile(client, 99)), "client_lateness_max_s": float(client.max()),
            "late_requests": late, "schedule_kept": late == 0,
            "capped_requests": sum(1 for r in sched if float(r.get("cap_wait_s", 0.0)) > 0)}


def cache_rows(records: Sequence[RequestRecord], expected: Sequence[int]) -> list[dict[str, Any]]:
    """Per request: rid, line order, prompt tokens, expected and reported cached tokens (None when the
    server reported none)."""
    if len(records) != len(expected):
        raise ValueError(f"{len(expected)} expected counts for {len(records)} records")
    return [{"rid": r.rid, "index": i, "ok": r.ok, "prompt_tokens": int(r.prompt_tokens or r.input_len),
             "expected_cached_tokens": int(e), "reported_cached_tokens": r.cached_tokens}
            for i, (r, e) in enumerate(zip(records, expected, strict=True))]


def cache_stats(rows: Sequence[dict[str, Any]], tolerance_pct: float) -> dict[str, Any]:
    """Totals and hit ratios of the successful requests' :func:`cache_rows` (module docstring)."""
    ok = [r for r in rows if r["ok"]]
    prompt = sum(int(r["prompt_tokens"]) for r in ok)
    exp = sum(int(r["expected_cached_tokens"]) for r in ok)
    reported = [r for r in ok if r["reported_cached_tokens"] is not None]
    got = sum(int(r["reported_cached_tokens"]) for r in reported)
    agree = bool(reported) and abs(got - exp) <= tolerance_pct / 100.0 * exp if ok else True
    return {"prompt_tokens": prompt, "expected_cached_tokens": exp,
            "reported_cached_tokens": got if reported else None, "cached_reported_requests": len(reported),
            "cached_mismatch_requests": sum(1 for r in reported
                                            if int(r["reported_cached_tokens"]) != int(r["expected_cached_tokens"])),
            "expected_hit_ratio": exp / prompt if prompt else math.nan,
            "reported_hit_ratio": got / prompt if prompt and reported else math.nan,
            "cached_tolerance_pct": tolerance_pct, "cached_agree": agree}


def replay_row(records: Sequence[RequestRecord], *, start_ns: int, sched: Sequence[dict[str, Any]],
               expected: Sequence[int], lateness_tolerance_s: float, cached_tolerance_pct: float,
               status: str, header: dict[str, Any]) -> dict[str, Any]:
    """The ``replay_runs`` row: ``header`` (trace, speed, ...), throughput and latency
    (:func:`harness.measure.sweep.rate_row`, without its SLO columns), schedule and cache figures."""
    rate = {k: v for k, v in sw.rate_row(records, start_ns=start_ns, slo=sw.Slo()).items()
            if k not in ("goodput_req_s", "slo_met")}
    return ({"replay_id": REPLAY_ID, "status": status} | header | rate
            | schedule_stats(sched, lateness_tolerance_s) | {"lateness_tolerance_s": lateness_tolerance_s}
            | cache_stats(cache_rows(records, expected), cached_tolerance_pct))


@dataclass(frozen=True, kw_only=True)
class ReplayRunRow:
    """``replay_runs``: one trace replay (harness.measure.replay): the trace, the replay speed, throughput,
    the achieved schedule (lateness = actual send - scheduled send, seconds; ``client_`` without the time
    the concurrency cap held a request) and prompt tokens found cached against those the trace implies."""

    replay_id: str
    status: str
    trace_sha256: str
    block_size_tokens: int
    speed: float
    max_concurrency: int | None = None
    trace_span_s: float | None = None
    n_requests: int
    n_ok: int
    n_failed: int
    duration_s: float
    request_throughput_req_s: float | None = None
    output_throughput_tok_s: float | None = None
    input_throughput_tok_s: float | None = None
    lateness_p50_s: float | None = None
    lateness_p99_s: float | None = None
    lateness_max_s: float | None = None
    client_lateness_p99_s: float | None = None
    client_lateness_max_s: float | None = None
    late_requests: int | None = None
    lateness_tolerance_s: float | None = None
    schedule_kept: bool | None = None
    capped_requests: int | None = None
    prompt_tokens: int | None = None
    expected_cached_tokens: int | None = None
    reported_cached_tokens: int | None = None
    cached_reported_requests: int | None = None
    cached_mismatch_requests: int | None = None
    expected_hit_ratio: float | None = None
    reported_hit_ratio: float | None = None
    cached_tolerance_pct: float | None = None
    cached_agree: bool | None = None
    inflight_slope_req_per_s: float | None = None
    inflight_slope_se_req_per_s: float | None = None
    ttft_slope_s_per_s: float | None = None
    ttft_slope_se_s_per_s: float | None = None
    saturated: bool | None = None
    latency: dict[str, float | int | None] = field(default_factory=dict)  # LATENCY_COLUMNS, flat in the table


TABLES: dict[str, TableModel] = {"replay_runs": TableModel(ReplayRunRow, latency=True)}
"""A trace replay's ledger table (its descriptor's ``row_models``)."""
