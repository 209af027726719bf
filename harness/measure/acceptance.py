"""Speculative acceptance per request, per wave and per cell from raw records (pure; definitions in
docs/speculative.md).

A request's counts are what its server reported on it (record schema 4: ``spec_steps``,
``spec_proposed``, ``spec_accepted``, ``spec_source``: SGLang's final ``meta_info`` or vLLM's
per-request metrics); a wave's are the sum over its measured requests that reported any (never
mixing sources); a cell's the sum over its measured waves. Rows of the ``acceptance`` table
(harness.measure.rows.AcceptanceRow) are one per measured wave with counts. Tokens per step include
the bonus token; the acceptance rate excludes it.

Every count is a claim checked first (:mod:`harness.measure.claims`; ``draft_tokens``: k when the
served configuration says it): a wave or cell holding a request whose counts contradict themselves or
the stream has its acceptance withheld (no counts, no row of that source), never summed from the
others; a wave whose ``/metrics`` counter deltas contradict has no counter row.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping, Sequence
from typing import Any

from harness.measure import metrics as m
from harness.measure.claims import Contradiction, record_contradictions, record_row, wave_counter_contradictions
from harness.measure.matched import RECONCILE_TOLERANCE, raising_events, step_gaps
from harness.measure.speculative import SpecCounts, reconcile, step_time, sum_counts, vllm_counter_delta
from harness.records import RequestRecord

__all__ = ["acceptance_rows", "cell_cycles", "contradictions_of", "counts_of"]


def record_counts(rec: RequestRecord) -> SpecCounts | None:
    """One request's speculative counts as its server reported them (None when it reported none)."""
    if rec.spec_steps is None or rec.spec_accepted is None or rec.spec_steps <= 0:
        return None
    return SpecCounts(steps=rec.spec_steps, proposed=rec.spec_proposed or 0, accepted=rec.spec_accepted,
                      completion_tokens=rec.completion_tokens or 0, source=rec.spec_source or "unknown")


def contradictions_of(recs: Iterable[RequestRecord], draft_tokens: int | None = None) -> list[Contradiction]:
    """Every contradiction among the counts ``recs`` reported (:func:`harness.measure.claims.record_contradictions`)."""
    return [c for r in recs for c in record_contradictions(r, draft_tokens)]


def counts_of(recs: Iterable[RequestRecord], draft_tokens: int | None = None) -> SpecCounts | None:
    """The sum over ``recs`` of what each reported; None when none reported, or withheld when any
    request's counts contradict (:func:`contradictions_of`)."""
    recs = list(recs)
    if contradictions_of(recs, draft_tokens):
        return None
    counts = [c for c in (record_counts(r) for r in recs) if c is not None]
    return sum_counts(counts) if counts else None


def _f(v: float) -> float | None:
    return None if math.isnan(v) else float(v)


def counter_counts(readings: Mapping[str, Any] | None, recs: Sequence[RequestRecord],
                   draft_tokens: int | None = None) -> SpecCounts | None:
    """A wave's counts from vLLM's ``/metrics`` counters read before and after it (the ``spec_counters``
    of ``server_metrics.jsonl``: ``before`` / ``after`` dicts; ``recs``: the wave's requests); None
    without both readings, after a reset, without a verify step, or withheld when the deltas contradict
    themselves or the wave's stream (:func:`harness.measure.claims.counter_contradictions`)."""
    if not readings or not isinstance(readings.get("before"), Mapping) or not isinstance(readings.get("after"),
                                                                                       Mapping):
        return None
    wave_id = recs[0].wave_id if recs else ""
    if wave_counter_contradictions({wave_id: readings}, [record_row(r) for r in recs], draft_tokens):
        return None
    tokens = sum(r.completion_tokens or 0 for r in recs)
    return vllm_counter_delta(readings["before"], readings["after"], completion_tokens=tokens)


def acceptance_rows(records: Sequence[RequestRecord], common: Mapping[str, Any] | None = None,
                    counters: Mapping[str, Mapping[str, Any]] | None = None,
                    draft_tokens: int | None = None) -> list[dict[str, Any]]:
    """``acceptance`` rows of the measured waves, in first-seen order: one per wave whose requests
    reported counts (their sum), and one per wave whose server's counters moved across it
    (``counters``: wave id -> before/after readings; source ``vllm-metrics-delta``). A wave with both
    has both rows: two sources of one quantity, never added together. A source whose counts
    contradict (module docstring) gives no row."""
    waves: dict[str, list[RequestRecord]] = {}
    for r in records:
        if r.phase == "measured":
            waves.setdefault(r.wave_id, []).append(r)
    out: list[dict[str, Any]] = []
    for wave_id, recs in waves.items():
        hist = tokens_per_event(recs)
        found = [c for c in (counts_of(recs, draft_tokens),
                             counter_counts((counters or {}).get(wave_id), recs, draft_tokens)) if c is not None]
        for c in found:
            out.append(_row(wave_id, recs, c, common) | _stream(hist))
        if not found and len(hist) > 2:  # no counts, but events carrying several tokens: the stream's view
            out.append(_stream_row(wave_id, recs, hist, common))
    return out


def tokens_per_event(recs: Iterable[RequestRecord]) -> list[int]:
    """Histogram of tokens per token-carrying event, each request's first (prefill) event left out:
    ``hist[i]`` events carried ``i`` tokens (index 0 always 0). From the stream alone, for any server."""
    hist = [0]
    for r in recs:
        for _, n in raising_events(r.event_ns, r.event_tokens)[1:]:
            hist.extend([0] * (n + 1 - len(hist)))
            hist[n] += 1
    return hist


def _stream(hist: list[int]) -> dict[str, Any]:
    return {"stream_events": sum(hist), "tokens_per_event_hist": hist}


def _stream_row(wave_id: str, recs: Sequence[RequestRecord], hist: list[int], common: Mapping[str, Any] | None
                ) -> dict[str, Any]:
    return {"wave_id": wave_id, "cell_id": recs[0].cell_id, "concurrency": recs[0].concurrency,
            "source": "stream", "requests_reporting": 0, "requests": len(recs),
            "tokens_per_step": None} | _stream(hist) | dict(common or {})  # events are not steps: see the histogram


def _row(wave_id: str, recs: Sequence[RequestRecord], c: SpecCounts, common: Mapping[str, Any] | None
         ) -> dict[str, Any]:
    reporting = len(recs) if c.source == "vllm-metrics-delta" else sum(1 for r in recs if record_counts(r) is not None)
    return {"wave_id": wave_id, "cell_id": recs[0].cell_id, "concurrency": recs[0].concurrency,
            "source": c.source, "requests_reporting": reporting,
            "requests": len(recs), "verify_steps": c.steps, "drafts_proposed": c.proposed,
            "drafts_accepted": c.accepted, "completion_tokens": c.completion_tokens,
            "tokens_per_step": _f(c.tokens_per_step), "acceptance_rate": _f(c.acceptance_rate),
            "sglang_accept_length": _f(c.sglang_accept_length)} | dict(common or {})


def cell_acceptance(records: Sequence[RequestRecord], draft_tokens: int | None = None) -> dict[str, SpecCounts]:
    """Per cell id, the sum over its measured requests that reported counts (cells without any, or
    whose counts are withheld by a contradiction, are absent)."""
    cells: dict[str, list[RequestRecord]] = {}
    for r in records:
        if r.phase == "measured":
            cells.setdefault(r.cell_id, []).append(r)
    return {cid: c for cid, recs in cells.items() if (c := counts_of(recs, draft_tokens)) is not None}


def cell_cycles(records: Sequence[RequestRecord], cell_rates: Mapping[str, float],
                draft_tokens: int | None = None) -> list[dict[str, Any]]:
    """Per cell whose requests reported counts, the cycle within its resident windows
    (docs/speculative.md "Cycle time"): tokens per step a and acceptance (the cell's summed counts),
    T_SD from the stream (mean gap between token-carrying events of one request inside each measured
    wave's resident window), verify steps per second per request (1 / T_SD), T_SD implied by the
    cell's resident rate ``cell_rates[cell]`` (tok/s: ``C * a / R``) and whether useful throughput
    ``C * a / T_SD`` agrees with that rate (:func:`harness.measure.speculative.reconcile`)."""
    out: list[dict[str, Any]] = []
    for cell_id, counts in cell_acceptance(records, draft_tokens).items():
        waves: dict[str, list[RequestRecord]] = {}
        for r in records:
            if r.phase == "measured" and r.cell_id == cell_id:
                waves.setdefault(r.wave_id, []).append(r)
        gaps: list[float] = []
        for recs in waves.values():
            win = m.resident_window(recs)
            if win.contributes:
                gaps += step_gaps([r.event_ns for r in recs], [r.event_tokens for r in recs], win.start_ns,
                                  win.end_ns)
        c = next(iter(waves.values()))[0].concurrency if waves else 0
        rate = float(cell_rates.get(cell_id, math.nan))
        a = counts.tokens_per_step
        t_sd = step_time(gaps)
        implied = c * a / rate if rate > 0 and c else math.nan
        agree, rel = (reconcile(rate, c, a, t_sd, RECONCILE_TOLERANCE) if c and rate > 0 and not math.isnan(t_sd)
                      else (None, math.nan))
        out.append({"cell_id": cell_id, "concurrency": c, "source": counts.source, "tokens_per_step": _f(a),
                    "acceptance_rate": _f(counts.acceptance_rate), "t_sd_stream_s": _f(t_sd),
                    "verify_steps_per_s_per_request": _f(1.0 / t_sd) if t_sd > 0 else None,
                    "t_sd_implied_s": _f(implied), "resident_rate_tok_s": _f(rate), "reconciled": agree,
                    "reconcile_rel": _f(rel), "step_samples": len(gaps)})
    return out
