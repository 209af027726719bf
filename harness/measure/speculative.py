"""Speculative decoding as a measured claim (issue 26): counts, cycle time, break-even, targets.

Pure: plain values in, plain values out; no I/O, no clocks. Vocabulary and formulas are those of
docs/speculative.md:

- k: draft tokens proposed per verify step; a verify step ("cycle") emits 1 + accepted tokens
  (the +1 is the bonus token).
- tokens per step ``a = 1 + accepted / steps`` (bonus included); acceptance rate
  ``accepted / proposed`` (bonus excluded); SGLang's ``spec_accept_length = completion_tokens /
  steps`` (counts the prefill token too).
- useful throughput ``C * a / T_SD``; speculation beats native AR only if ``T_SD / T_AR < a``
  (report, "Acceptance, timing, and drift"). Acceptance alone is never a speed verdict.

Units: times in seconds unless a name ends in ``_ms``; rates in output tokens per second.
Errors: :class:`~harness.errors.MeasurementError` for counts or measurements that cannot be true,
:class:`~harness.errors.SpecError` for user-chosen parameters (goals, noise, tolerance).
"""

from __future__ import annotations

import itertools
import math
import re
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Literal

from harness.errors import MeasurementError, SpecError

__all__ = ["SpecCounts", "Targets", "sum_counts", "targets"]

SOURCES = ("sglang-meta-info", "vllm-request-metrics", "vllm-metrics-delta", "stream")

# SGLang meta_info names, newest first: (new, old, alias).
SGLANG_ACCEPTED = ("spec_num_correct_drafts", "spec_accept_token_num", "spec_accepted_drafts")
SGLANG_PROPOSED = ("spec_num_proposed_drafts", "spec_draft_token_num", "spec_proposed_drafts")
SGLANG_HISTOGRAM = ("spec_correct_drafts_histogram", "spec_accept_histogram")

VLLM_DRAFTS = "vllm:spec_decode_num_drafts_total"
VLLM_DRAFT_TOKENS = "vllm:spec_decode_num_draft_tokens_total"
VLLM_ACCEPTED = "vllm:spec_decode_num_accepted_tokens_total"
VLLM_PER_POS = "vllm:spec_decode_num_accepted_tokens_per_pos_total"
_PER_POS_KEY = re.compile(r'^vllm:spec_decode_num_accepted_tokens_per_pos_total\{position="(\d+)"\}$')

Verdict = Literal["sd-faster", "sd-slower", "inconclusive"]


@dataclass(frozen=True)
class SpecCounts:
    """Speculative counts of one request, or a sum over requests.

    ``steps``: verify steps; ``proposed``: draft tokens proposed; ``accepted``: draft tokens
    accepted (bonus excluded); ``completion_tokens``: output tokens (0 = unknown, e.g. a vLLM
    counter delta); ``source``: one of :data:`SOURCES`. Derived values are NaN when their
    denominator is 0 (or unknown).
    """

    steps: int
    proposed: int
    accepted: int
    completion_tokens: int
    source: str

    @property
    def tokens_per_step(self) -> float:
        """``a = 1 + accepted / steps``: tokens emitted per verify step, bonus included."""
        return 1.0 + self.accepted / self.steps if self.steps > 0 else math.nan

    @property
    def acceptance_rate(self) -> float:
        """``accepted / proposed``: fraction of drafts accepted, bonus excluded, in [0, 1]."""
        return self.accepted / self.proposed if self.proposed > 0 else math.nan

    @property
    def sglang_accept_length(self) -> float:
        """SGLang's ``completion_tokens / steps`` (counts the prefill token; NaN if either is 0)."""
        if self.steps <= 0 or self.completion_tokens <= 0:
            return math.nan
        return self.completion_tokens / self.steps


def _count(value: Any, name: str) -> int:
    """A non-negative integer count from a JSON value (ints, or floats with no fraction)."""
    if isinstance(value, bool) or not isinstance(value, int | float):
        raise MeasurementError(f"{name} is not a number: {value!r}",
                               hint="the server's speculative fields must be counts")
    if isinstance(value, float) and (not math.isfinite(value) or value != int(value)):
        raise MeasurementError(f"{name} is not a whole count: {value!r}",
                               hint="the server's speculative fields must be counts")
    if value < 0:
        raise MeasurementError(f"{name} is negative: {value!r}", hint="a count cannot be negative")
    return int(value)


def _checked(counts: SpecCounts) -> SpecCounts:
    if counts.accepted > counts.proposed:
        raise MeasurementError(f"{counts.source}: {counts.accepted} drafts accepted of only {counts.proposed} "
                               "proposed", hint="the server's counts are inconsistent; do not use them")
    return counts


def _first(meta: Mapping[str, Any], names: Sequence[str]) -> tuple[str, Any] | None:
    for name in names:
        if meta.get(name) is not None:
            return name, meta[name]
    return None


def sglang_counts(meta: Mapping[str, Any]) -> SpecCounts | None:
    """Counts from SGLang's FINAL ``meta_info`` (every alias: new, old and the
    ``spec_accepted_drafts`` pair); None when ``spec_verify_ct`` is absent or 0 (native AR).

    Derived fields (``spec_accept_length``, ``spec_accept_rate``) are never read: they are 0 on
    older builds and are recomputed from the counts. Without an accepted-draft count the
    histogram (index i = steps that accepted i drafts) gives it; without a proposed count the
    value cannot be known and a :class:`MeasurementError` names the missing fields.
    """
    raw_steps = meta.get("spec_verify_ct")
    if raw_steps is None:
        return None
    steps = _count(raw_steps, "spec_verify_ct")
    if steps == 0:
        return None
    completion = _count(meta.get("completion_tokens") or 0, "completion_tokens")
    acc = _first(meta, SGLANG_ACCEPTED)
    if acc is not None:
        accepted = _count(acc[1], acc[0])
    else:
        hist = _first(meta, SGLANG_HISTOGRAM)
        if hist is None or not isinstance(hist[1], list | tuple):
            raise MeasurementError(f"meta_info has spec_verify_ct={steps} but no accepted-draft count "
                                   f"({', '.join(SGLANG_ACCEPTED)}) or histogram",
                                   hint="use a server build that reports speculative counts")
        accepted = sum(i * _count(n, f"{hist[0]}[{i}]") for i, n in enumerate(hist[1]))
    prop = _first(meta, SGLANG_PROPOSED)
    if prop is None:
        raise MeasurementError(f"meta_info has spec_verify_ct={steps} but no proposed-draft count "
                               f"({', '.join(SGLANG_PROPOSED)})",
                               hint="use a server build that reports speculative counts")
    return _checked(SpecCounts(steps=steps, proposed=_count(prop[1], prop[0]), accepted=accepted,
                               completion_tokens=completion, source="sglang-meta-info"))


def vllm_request_counts(metrics: Mapping[str, Any], completion_tokens: int) -> SpecCounts | None:
    """Counts from vLLM's per-request ``metrics.speculative_decoding`` (final usage chunk, server
    flag ``--per-request-spec-decode-metrics``); the enclosing ``metrics`` dict is accepted too.
    None when absent or when ``num_spec_steps`` is 0. ``mean_acceptance_length`` is not read."""
    spec = metrics if "num_spec_steps" in metrics else metrics.get("speculative_decoding")
    if not isinstance(spec, Mapping) or spec.get("num_spec_steps") is None:
        return None
    steps = _count(spec["num_spec_steps"], "num_spec_steps")
    if steps == 0:
        return None
    for name in ("num_draft_tokens", "num_accepted_draft_tokens"):
        if spec.get(name) is None:
            raise MeasurementError(f"speculative_decoding has num_spec_steps={steps} but no {name}",
                                   hint="the per-request metrics are incomplete; do not use them")
    return _checked(SpecCounts(
        steps=steps, proposed=_count(spec["num_draft_tokens"], "num_draft_tokens"),
        accepted=_count(spec["num_accepted_draft_tokens"], "num_accepted_draft_tokens"),
        completion_tokens=_count(completion_tokens, "completion_tokens"), source="vllm-request-metrics"))


def _delta(before: Mapping[str, float], after: Mapping[str, float], name: str) -> float | None:
    """``after - before`` of one counter; None when missing, not finite, or gone down (a reset)."""
    b, a = before.get(name), after.get(name)
    if b is None or a is None or not (math.isfinite(b) and math.isfinite(a)) or a < b:
        return None
    return a - b


def vllm_counter_delta(before: Mapping[str, float], after: Mapping[str, float], *,
                       completion_tokens: int = 0) -> SpecCounts | None:
    """Counts over one wave from two ``/metrics`` scrapes (each counter summed over its label
    sets, keyed by the names in :data:`VLLM_DRAFTS` etc.). None when a counter is missing, any
    counter went down (a server restart resets them: the wave has no speculative evidence) or
    no verify step happened. ``completion_tokens`` (the wave's output tokens) is optional."""
    deltas = [_delta(before, after, n) for n in (VLLM_DRAFTS, VLLM_DRAFT_TOKENS, VLLM_ACCEPTED)]
    if any(d is None for d in deltas):
        return None
    steps, proposed, accepted = (_count(d, n) for d, n in
                                 zip(deltas, (VLLM_DRAFTS, VLLM_DRAFT_TOKENS, VLLM_ACCEPTED), strict=True))
    if steps == 0:
        return None
    return _checked(SpecCounts(steps=steps, proposed=proposed, accepted=accepted,
                               completion_tokens=_count(completion_tokens, "completion_tokens"),
                               source="vllm-metrics-delta"))


def vllm_position_acceptance(before: Mapping[str, float], after: Mapping[str, float]) -> tuple[float, ...] | None:
    """Per-position conditional acceptance ``p_1..p_k`` from a counter delta: ``p_i =
    accepted_at(i-1) / accepted_at(i-2)`` with ``accepted_at(-1) = drafts``. Keys of the per-
    position counter are ``vllm:spec_decode_num_accepted_tokens_per_pos_total{position="i"}``.
    None when the counters are missing, reset, or no verify step happened; NaN after a position
    nothing reached."""
    drafts = _delta(before, after, VLLM_DRAFTS)
    if drafts is None or drafts <= 0:
        return None
    positions = sorted(int(m.group(1)) for key in after if (m := _PER_POS_KEY.match(key)))
    if not positions or positions != list(range(len(positions))):
        return None
    reached = [drafts]
    for pos in positions:
        d = _delta(before, after, f'{VLLM_PER_POS}{{position="{pos}"}}')
        if d is None:
            return None
        reached.append(d)
    return tuple(reached[i + 1] / reached[i] if reached[i] > 0 else math.nan for i in range(len(positions)))


def stream_counts(event_tokens: Sequence[int], draft_tokens: int) -> SpecCounts | None:
    """Counts inferred from one request's stream when the server sends one event per verify step
    (SGLang ``stream_interval`` 1): ``event_tokens`` are the tokens each count-raising event
    added; the first event is the prefill token, each later one a step of ``1 + accepted``
    tokens with ``draft_tokens`` (k) proposed. None with fewer than two events. An event of more
    than k + 1 tokens means steps were coalesced: :class:`MeasurementError`."""
    if draft_tokens < 1:
        raise SpecError(f"draft_tokens must be >= 1, got {draft_tokens}", hint="pass k, the drafts per step")
    if len(event_tokens) < 2:
        return None
    later = [_count(n, "event tokens") for n in event_tokens[1:]]
    bad = [n for n in later if not 1 <= n <= draft_tokens + 1]
    if bad:
        raise MeasurementError(f"an event carried {bad[0]} tokens: not one verify step of 1..{draft_tokens + 1}",
                               hint="steps were coalesced into events; use the server's counts instead")
    total = _count(sum(event_tokens), "completion tokens")
    return SpecCounts(steps=len(later), proposed=len(later) * draft_tokens, accepted=sum(later) - len(later),
                      completion_tokens=total, source="stream")


def sum_counts(counts: Iterable[SpecCounts]) -> SpecCounts | None:
    """The sum over requests (None for none). Counts of different sources are never mixed: a
    per-request and a counter-delta figure of the same wave would count the same steps twice."""
    items = list(counts)
    if not items:
        return None
    sources = sorted({c.source for c in items})
    if len(sources) > 1:
        raise MeasurementError(f"speculative counts from different sources cannot be summed: {', '.join(sources)}",
                               hint="sum each source separately")
    return SpecCounts(steps=sum(c.steps for c in items), proposed=sum(c.proposed for c in items),
                      accepted=sum(c.accepted for c in items),
                      completion_tokens=sum(c.completion_tokens for c in items), source=sources[0])


def expected_tokens_per_step(accept_probs: Sequence[float]) -> float:
    """``E[a] = 1 + sum_{i=1..k} prod_{j<=i} p_j`` for per-position conditional acceptance
    probabilities ``p_1..p_k`` (each in [0, 1]); 1.0 for k = 0 (native AR). In [1, k + 1]."""
    total, prefix = 1.0, 1.0
    for i, p in enumerate(accept_probs, start=1):
        if not (isinstance(p, int | float) and math.isfinite(p) and 0.0 <= p <= 1.0):
            raise SpecError(f"acceptance probability p_{i} = {p!r} is not in [0, 1]",
                            hint="give per-position conditional probabilities between 0 and 1")
        prefix *= p
        total += prefix
    return total


# --- cycle time within the resident window --------------------------------------------------------

def _positive(value: float, name: str) -> float:
    if not (math.isfinite(value) and value > 0):
        raise MeasurementError(f"{name} must be a positive finite number, got {value!r}",
                               hint="measure it over a resident window with t_e > t_s")
    return value


def implied_cycle(resident_rate: float, concurrency: int, tokens_per_step: float) -> float:
    """``T_SD = C * a / R`` seconds: the verify-step time for which useful throughput ``C * a /
    T_SD`` equals the resident rate ``R`` (aggregate tok/s). NaN if ``a`` or ``R`` is NaN."""
    if math.isnan(resident_rate) or math.isnan(tokens_per_step):
        return math.nan
    if concurrency < 1:
        raise MeasurementError(f"concurrency must be >= 1, got {concurrency}", hint="C is the resident requests")
    if tokens_per_step < 1:
        raise MeasurementError(f"tokens per step {tokens_per_step} < 1", hint="a = 1 + accepted/steps is >= 1")
    return concurrency * tokens_per_step / _positive(resident_rate, "resident rate")


def window_steps(resident_tokens: float, concurrency: int, tokens_per_step: float) -> float:
    """Verify steps per request inside the resident window when only whole-request totals exist:
    the window's tokens over ``C * a``, i.e. ``a`` (from the totals) is taken to hold inside the
    window. Equivalently steps/s per request = (R / C) / a."""
    if concurrency < 1:
        raise MeasurementError(f"concurrency must be >= 1, got {concurrency}", hint="C is the resident requests")
    if math.isnan(tokens_per_step) or tokens_per_step < 1:
        return math.nan
    return resident_tokens / (concurrency * tokens_per_step)


def window_gaps(event_times_s: Sequence[Sequence[float]], t_s: float, t_e: float) -> list[float]:
    """Gaps (s) between consecutive count-raising events of the same request, both inside the
    resident window ``[t_s, t_e]``, pooled over requests (never across requests)."""
    gaps: list[float] = []
    for times in event_times_s:
        inside = [t for t in times if t_s <= t <= t_e]
        gaps.extend(b - a for a, b in itertools.pairwise(inside))
    return gaps


def step_time(gaps: Sequence[float]) -> float:
    """The step time (s) the stream shows: the mean of the gaps (their sum over their number). When
    the client reads an event late, one gap grows and the next shrinks by as much: the mean keeps the
    step, a median drifts toward the long side (1.7% at 3 ms steps on the simulator). NaN for none."""
    return math.fsum(gaps) / len(gaps) if gaps else math.nan


def cycle_from_events(event_times_s: Sequence[Sequence[float]], t_s: float, t_e: float) -> float:
    """Independent ``T_SD`` (s): :func:`step_time` of :func:`window_gaps`. One event is one verify
    step only when the server streams every step (SGLang ``stream_interval`` 1) and the client
    reads them apart; NaN when there is no gap."""
    return step_time(window_gaps(event_times_s, t_s, t_e))


def reconcile(resident_rate: float, concurrency: int, tokens_per_step: float, t_sd_s: float,
              tolerance: float = 0.10) -> tuple[bool, float]:
    """Does useful throughput ``C * a / T_SD`` (T_SD measured independently, e.g. by
    :func:`cycle_from_events`) equal the resident rate ``R``? Returns (agree, rel_diff) with
    ``rel_diff = (C * a / T_SD - R) / R`` (signed) and agree when ``|rel_diff| <= tolerance``.
    NaN in any input gives (False, NaN): nothing was reconciled. Disagreement is a finding."""
    if not (math.isfinite(tolerance) and tolerance >= 0):
        raise SpecError(f"tolerance must be a non-negative fraction, got {tolerance!r}", hint="e.g. 0.10")
    if any(math.isnan(v) for v in (resident_rate, tokens_per_step, t_sd_s)):
        return False, math.nan
    useful = concurrency * tokens_per_step / _positive(t_sd_s, "T_SD")
    rel = float((useful - _positive(resident_rate, "resident rate")) / resident_rate)
    return bool(abs(rel) <= tolerance), rel


@dataclass(frozen=True)
class CycleAnalysis:
    """Cycle time of one resident window. Seconds; rates tok/s aggregate over C requests."""

    concurrency: int
    tokens_per_step: float          # a, from the server's counts
    window_s: float                 # t_e - t_s
    resident_rate: float            # R = window tokens / window_s
    t_sd_s: float                   # implied: C * a / R
    steps_per_request: float        # window_s / t_sd_s = window tokens / (C * a)
    t_sd_events_s: float            # independent: median event gap (NaN when not measured)
    agree: bool | None              # None when no independent T_SD
    rel_diff: float                 # see reconcile (NaN when not reconciled)


def cycle(concurrency: int, tokens_per_step: float, window_s: float, resident_tokens: float,
          t_sd_events_s: float = math.nan, tolerance: float = 0.10) -> CycleAnalysis:
    """Resident-window cycle analysis: ``R = resident_tokens / window_s``, implied ``T_SD = C *
    a / R``, steps per request in the window, and, when an independent ``T_SD`` (from event
    gaps) is given, whether the two agree within ``tolerance`` (a relative fraction)."""
    rate = resident_tokens / _positive(window_s, "resident window seconds")
    t_sd = implied_cycle(rate, concurrency, tokens_per_step)
    if math.isnan(t_sd_events_s):
        agree: bool | None = None
        rel = math.nan
    else:
        agree, rel = reconcile(rate, concurrency, tokens_per_step, t_sd_events_s, tolerance)
    return CycleAnalysis(concurrency=concurrency, tokens_per_step=tokens_per_step, window_s=window_s,
                         resident_rate=rate, t_sd_s=t_sd, steps_per_request=window_steps(
                             resident_tokens, concurrency, tokens_per_step),
                         t_sd_events_s=t_sd_events_s, agree=agree, rel_diff=rel)


# --- break-even and targets -----------------------------------------------------------------------

@dataclass(frozen=True)
class BreakEven:
    """The report's rule applied: ``ratio = T_SD / T_AR`` against ``a``; ``margin = |ratio - a| /
    a``; ``speedup = a / ratio`` (useful SD throughput over native AR, same C)."""

    ratio: float
    tokens_per_step: float
    margin: float
    speedup: float
    noise: float
    verdict: Verdict
    reason: str


def break_even(t_sd_s: float, t_ar_s: float, tokens_per_step: float, noise: float) -> BreakEven:
    """Speculation is faster than native AR only if ``T_SD / T_AR < a`` (report, "Acceptance,
    timing, and drift"). ``noise``: the relative spread of the matched runs (e.g. drift between
    the A1 and A2 controls, as a fraction); a margin within it is "inconclusive", as is any NaN.
    Needs both step times: acceptance alone never gives a verdict."""
    if not (math.isfinite(noise) and noise >= 0):
        raise SpecError(f"noise must be a non-negative fraction, got {noise!r}",
                        hint="give the matched runs' relative drift or spread, e.g. 0.02")
    missing = [n for n, v in (("T_SD", t_sd_s), ("T_AR", t_ar_s), ("a", tokens_per_step)) if math.isnan(v)]
    if missing:
        return BreakEven(math.nan, tokens_per_step, math.nan, math.nan, noise, "inconclusive",
                         f"{', '.join(missing)} not measured: no verdict from acceptance alone")
    _positive(t_sd_s, "T_SD")
    _positive(t_ar_s, "T_AR")
    if tokens_per_step < 1:
        raise MeasurementError(f"tokens per step {tokens_per_step} < 1", hint="a = 1 + accepted/steps is >= 1")
    ratio = t_sd_s / t_ar_s
    margin = abs(ratio - tokens_per_step) / tokens_per_step
    speedup = tokens_per_step / ratio
    rule = f"T_SD/T_AR = {ratio:.4g} vs a = {tokens_per_step:.4g} (margin {margin:.2%}, noise {noise:.2%})"
    if margin <= noise:
        verdict: Verdict = "inconclusive"
        reason = f"{rule}: within the noise"
    elif ratio < tokens_per_step:
        verdict, reason = "sd-faster", f"{rule}: ratio below a, useful throughput x{speedup:.3f}"
    else:
        verdict, reason = "sd-slower", f"{rule}: ratio not below a, useful throughput x{speedup:.3f}"
    return BreakEven(ratio, tokens_per_step, margin, speedup, noise, verdict, reason)


def ar_step(resident_rate: float, concurrency: int) -> float:
    """Native AR step time ``T_AR = C / R`` seconds (one token per request per step)."""
    if concurrency < 1:
        raise MeasurementError(f"concurrency must be >= 1, got {concurrency}", hint="C is the resident requests")
    return concurrency / _positive(resident_rate, "resident rate")


@dataclass(frozen=True)
class GoalTarget:
    """What one goal rate needs, from the current rate (tok/s of one generation).

    ``time_cut``: fraction less time per emitted token at unchanged acceptance, ``1 - rate/goal``
    (<= 0: already met). With tokens per cycle known: ``cycle_needed_ms = tokens_per_cycle /
    goal``, ``cycle_cut_ms`` = current cycle minus that, and ``tokens_per_cycle_needed = goal *
    cycle`` at the unchanged cycle time; None otherwise."""

    goal: float
    time_per_token_ms: float
    time_cut: float
    cycle_needed_ms: float | None
    cycle_cut_ms: float | None
    tokens_per_cycle_needed: float | None


@dataclass(frozen=True)
class Targets:
    """The record note's arithmetic for a rate: ``time_per_token_ms = 1000 / rate``; ``cycle_ms =
    1000 * tokens_per_cycle / rate`` (None without tokens per cycle); one :class:`GoalTarget`
    per goal, in the order given."""

    rate: float
    tokens_per_cycle: float | None
    time_per_token_ms: float
    cycle_ms: float | None
    goals: tuple[GoalTarget, ...]


def targets(rate_tok_s: float, tokens_per_cycle: float | None, goals: Sequence[float]) -> Targets:
    """Targets as in the record note of 2026-07-16: ``rate_tok_s`` is one active generation's
    decode rate; at unchanged acceptance a goal needs ``1 - rate/goal`` less time per emitted
    token; at the unchanged cycle (``tokens_per_cycle / rate``) it needs ``goal * cycle`` tokens
    per cycle. E.g. 63.851301 tok/s at 1.7768 tokens/cycle: cycle 27.83 ms; 200 tok/s needs 5.57."""
    if not (math.isfinite(rate_tok_s) and rate_tok_s > 0):
        raise SpecError(f"rate must be > 0 tok/s, got {rate_tok_s!r}", hint="give the measured decode rate")
    if tokens_per_cycle is not None and not (math.isfinite(tokens_per_cycle) and tokens_per_cycle >= 1):
        raise SpecError(f"tokens per cycle must be >= 1, got {tokens_per_cycle!r}",
                        hint="a verify step emits at least its bonus token")
    if not goals:
        raise SpecError("no goal rate given", hint="give at least one goal in tok/s")
    cycle_s = tokens_per_cycle / rate_tok_s if tokens_per_cycle is not None else None
    out = []
    for goal in goals:
        if not (math.isfinite(goal) and goal > 0):
            raise SpecError(f"goal must be > 0 tok/s, got {goal!r}", hint="give goal rates in tok/s")
        needed = None if tokens_per_cycle is None else 1000.0 * tokens_per_cycle / goal
        out.append(GoalTarget(
            goal=goal, time_per_token_ms=1000.0 / goal, time_cut=1.0 - rate_tok_s / goal,
            cycle_needed_ms=needed,
            cycle_cut_ms=None if cycle_s is None or needed is None else 1000.0 * cycle_s - needed,
            tokens_per_cycle_needed=None if cycle_s is None else goal * cycle_s))
    return Targets(rate=rate_tok_s, tokens_per_cycle=tokens_per_cycle, time_per_token_ms=1000.0 / rate_tok_s,
                   cycle_ms=None if cycle_s is None else 1000.0 * cycle_s, goals=tuple(out))
