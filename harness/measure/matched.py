"""Matched AR/SD arithmetic (pure; docs/speculative.md): legs of a native autoregressive arm (AR1,
AR2, ...) and a speculative arm (SD1, SD2, ...) that ran the same fixed waves on freshly started
services.

Per leg: its measured waves' resident and HTTP rates (leg value = median of its waves), the step time
measured from the stream (mean gap between consecutive token-carrying events of one request inside
the resident windows, :func:`~harness.measure.speculative.step_time`: one event is one step when the
server streams every step) and, for SD legs,
the speculative counts summed over the measured requests (withheld, never summed from the rest, when
any request's counts contradict: harness.measure.claims). The result: the arm means, SD/AR ratios at
both boundaries, the AR drift and SD spread (the noise), tokens per step ``a`` and the acceptance
rate, ``T_AR``, ``T_SD`` (measured, and implied by ``C * a / R``, which must agree: a disagreement
is a finding), the break-even verdict of :func:`harness.measure.speculative.break_even` (T_SD/T_AR
against a, never acceptance alone) and the greedy outputs compared token by token with the first AR
leg (a full-target arm must reproduce them; each difference keeps its first differing position)."""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, replace

import numpy as np

from harness.measure.speculative import (
    BreakEven,
    SpecCounts,
    break_even,
    reconcile,
    step_time,
    sum_counts,
    window_gaps,
)
from harness.measure.table_model import TableModel

__all__ = ["LegData", "MatchedResult", "compare_outputs", "step_gaps", "summarize_matched"]

RECONCILE_TOLERANCE = 0.10
"""How far useful throughput ``C * a / T_SD`` (T_SD from event gaps) may differ from the resident rate
before the disagreement is a finding (relative)."""


@dataclass(frozen=True)
class LegData:
    """One leg's measured waves: rates (tok/s), step-time samples (s) and SD counts (``counts_withheld``:
    a request's counts contradicted themselves or the stream, harness.measure.claims; counts is then None)."""

    leg: str
    resident_rates: tuple[float, ...]
    http_rates: tuple[float, ...]
    step_gaps_s: tuple[float, ...] = ()
    counts: SpecCounts | None = None
    counts_withheld: bool = False

    @property
    def arm(self) -> str:
        """``AR`` or ``SD``."""
        return self.leg[:2]

    @property
    def median(self) -> float:
        """Median resident rate of the leg's waves (NaN if none)."""
        return float(np.median(self.resident_rates)) if self.resident_rates else math.nan

    @property
    def http_median(self) -> float:
        """Median whole-wave HTTP rate of the leg's waves (NaN if none)."""
        return float(np.median(self.http_rates)) if self.http_rates else math.nan

    @property
    def step_s(self) -> float:
        """Step time from the stream (s; the mean gap, NaN without gaps)."""
        return step_time(self.step_gaps_s)


@dataclass(frozen=True)
class OutputDiff:
    """Greedy outputs of every leg compared token by token with the first AR leg's, request by request
    (matched by wave index, position and case). ``first_differences``: (leg, wave index, case id,
    first differing token position) of the first few differences."""

    reference_leg: str
    compared: int
    identical: int
    first_differences: tuple[tuple[str, int, str, int], ...]

    @property
    def differing(self) -> int:
        """Compared outputs that differ from the reference."""
        return self.compared - self.identical


def first_difference(a: Sequence[int], b: Sequence[int]) -> int | None:
    """The first token position where ``a`` and ``b`` differ (a length difference counts at the
    shorter length); None when identical."""
    for i, (x, y) in enumerate(zip(a, b, strict=False)):
        if x != y:
            return i
    return None if len(a) == len(b) else min(len(a), len(b))


def compare_outputs(outputs: Mapping[str, Mapping[tuple[int, int, str], Sequence[int]]], order: Sequence[str],
                    keep: int = 20) -> OutputDiff:
    """``outputs[leg][(wave_index, position, case_id)] = output token ids``; every leg after the first
    AR leg is compared with it on the keys both have."""
    ref = next(leg for leg in order if leg.startswith("AR"))
    base = outputs.get(ref, {})
    compared = identical = 0
    diffs: list[tuple[str, int, str, int]] = []
    for leg in order:
        if leg == ref:
            continue
        for key, ids in sorted(outputs.get(leg, {}).items()):
            if key not in base:
                continue
            compared += 1
            pos = first_difference(base[key], ids)
            if pos is None:
                identical += 1
            elif len(diffs) < keep:
                diffs.append((leg, key[0], key[2], pos))
    return OutputDiff(ref, compared, identical, tuple(diffs))


def _pct(a: float, b: float) -> float:
    return (a / b - 1.0) * 100.0 if b and not math.isnan(a) and not math.isnan(b) else math.nan


def _mean(values: Sequence[float]) -> float:
    vals = [v for v in values if not math.isnan(v)]
    return sum(vals) / len(vals) if vals else math.nan


def _rel_change(legs: Sequence[LegData]) -> float:
    """Last leg's median vs the first's, percent (0 for one leg: no drift was measurable)."""
    return _pct(legs[-1].median, legs[0].median) if len(legs) > 1 else 0.0


@dataclass(frozen=True)
class MatchedResult:
    """The matched run's outcome (module docstring). Rates tok/s; times s; percentages plain percent."""

    concurrency: int
    ar_rate: float
    sd_rate: float
    change_pct: float
    http_change_pct: float
    ar_drift_pct: float
    sd_spread_pct: float
    counts: SpecCounts | None
    t_ar_s: float
    t_sd_s: float
    t_sd_implied_s: float
    reconcile_rel: float
    reconciled: bool | None
    break_even: BreakEven
    outputs: OutputDiff
    legs: tuple[LegData, ...] = ()

    @property
    def tokens_per_step(self) -> float:
        """``a = 1 + accepted / steps`` of the SD arm (NaN without counts)."""
        return self.counts.tokens_per_step if self.counts is not None else math.nan

    @property
    def acceptance_rate(self) -> float:
        """Accepted / proposed drafts of the SD arm (bonus excluded; NaN without counts)."""
        return self.counts.acceptance_rate if self.counts is not None else math.nan

    @property
    def verdict(self) -> str:
        """``sd-faster``, ``sd-slower`` or ``inconclusive`` (the break-even rule)."""
        return self.break_even.verdict


def summarize_matched(legs: Sequence[LegData], order: Sequence[str], concurrency: int,
                      outputs: OutputDiff, noise_floor_pct: float = 0.5) -> MatchedResult:
    """Combine the legs (module docstring). The noise of the break-even rule is the larger of
    |AR drift| and |SD spread| (and at least ``noise_floor_pct``), as a fraction."""
    by = {leg.leg: leg for leg in legs}
    ar = [by[x] for x in order if x.startswith("AR") and x in by and by[x].resident_rates]
    sd = [by[x] for x in order if x.startswith("SD") and x in by and by[x].resident_rates]
    ar_rate, sd_rate = float(_mean([x.median for x in ar])), float(_mean([x.median for x in sd]))
    drift, spread = _rel_change(ar) if ar else math.nan, _rel_change(sd) if sd else math.nan
    withheld = [x.leg for x in sd if x.counts_withheld]
    counts_list = [x.counts for x in sd if x.counts is not None]
    counts = sum_counts(counts_list) if counts_list and not withheld else None
    a = counts.tokens_per_step if counts is not None else math.nan
    t_ar = step_time([g for x in ar for g in x.step_gaps_s])
    t_sd = step_time([g for x in sd for g in x.step_gaps_s])
    implied = concurrency * a / sd_rate if sd_rate > 0 and not math.isnan(a) else math.nan
    if math.isnan(t_sd) or math.isnan(a) or not sd_rate > 0:
        reconciled: bool | None = None
        rel = math.nan
    else:
        reconciled, rel = reconcile(sd_rate, concurrency, a, t_sd, RECONCILE_TOLERANCE)
    noise_pct = max(abs(drift) if not math.isnan(drift) else 0.0, abs(spread) if not math.isnan(spread) else 0.0,
                    noise_floor_pct)
    be = break_even(t_sd, t_ar, a, noise_pct / 100.0)
    if withheld:
        be = replace(be, reason=f"a withheld: the speculative counts of {', '.join(withheld)} contradict themselves "
                     "or the stream (evidence rule reported-counts); no verdict from them")
    http = _pct(_mean([x.http_median for x in sd]), _mean([x.http_median for x in ar]))
    return MatchedResult(concurrency, ar_rate, sd_rate, _pct(sd_rate, ar_rate), http, drift, spread, counts,
                         t_ar, t_sd, implied, rel, reconciled, be, outputs,
                         tuple(by[x] for x in order if x in by))


def raising_events(event_ns: Iterable[int], cumulative_tokens: Iterable[int]) -> list[tuple[int, int]]:
    """(arrival ns, tokens it added) of each event that raised a request's cumulative token count
    (``RequestRecord.event_tokens`` is cumulative; an event adding nothing, e.g. a keep-alive, is
    dropped)."""
    out: list[tuple[int, int]] = []
    last = 0
    for t, n in zip(event_ns, cumulative_tokens, strict=False):
        if int(n) > last:
            out.append((int(t), int(n) - last))
            last = int(n)
    return out


def step_gaps(event_ns: Sequence[Iterable[int]], event_tokens: Sequence[Iterable[int]], start_ns: int,
              end_ns: int) -> list[float]:
    """Gaps (s) between consecutive token-carrying events of each request inside ``[start_ns,
    end_ns]`` (a wave's resident window), pooled (never across requests); ``event_tokens`` are the
    records' cumulative counts."""
    times = [[t / 1e9 for t, _ in raising_events(ts, ns)] for ts, ns in zip(event_ns, event_tokens, strict=False)]
    return window_gaps(times, start_ns / 1e9, end_ns / 1e9)


@dataclass(frozen=True, kw_only=True)
class MatchedSdRow:
    """``matched_sd``: one matched AR/SD run (harness.measure.matched): both arms' rates (tokens/s),
    the speculative arm's tokens per step and acceptance, step times (s), the break-even verdict and
    the greedy outputs compared with the first AR leg. ``change_pct``: (SD / AR resident rate - 1) x 100
    (ledger schema 6; before, ``change_pct`` and step times in ms)."""

    run: str
    order: str
    concurrency: int
    ar_rate_tok_s: float | None = None
    sd_rate_tok_s: float | None = None
    change_pct: float | None = None
    http_change_pct: float | None = None
    ar_drift_pct: float | None = None
    sd_spread_pct: float | None = None
    tokens_per_step: float | None = None
    acceptance_rate: float | None = None
    spec_source: str | None = None
    t_ar_s: float | None = None
    t_sd_s: float | None = None
    t_sd_implied_s: float | None = None
    t_sd_over_t_ar: float | None = None
    reconcile_rel: float | None = None
    reconciled: bool | None = None
    verdict: str
    reason: str
    outputs_compared: int | None = None
    outputs_identical: int | None = None
    outputs_differing: int | None = None
    sd_claim: str
    status: str
    verdict_as_measured: str | None = None  # ``verdict`` is ``withheld`` when a blocking finding invalidates the run


TABLES: dict[str, TableModel] = {"matched_sd": TableModel(MatchedSdRow, verdict=True)}
"""A matched AR/SD run's ledger table (its descriptor's ``row_models``)."""
