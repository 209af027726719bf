"""The live tally of a wave in flight (pure): what its streams have received so far.

Read from the decoders' own live lists (``event_ns`` / ``event_tokens``, which they keep anyway), so the
streaming path does no extra work per event; the driver samples it at its watch interval (~4 Hz), and a
sample costs one read of each stream's latest count (the window's start and end are found once each).

The resident window starts where ``harness.measure.metrics.resident_window`` starts it, ``t_s = max f_i``
(each request's first event with >= 1 output token), once every request of the wave has its first token.
While no request has ended it runs to the latest event received; once one has ended it stops at the
earliest last increase ``e_i`` of the ended ones, as the recorded window does (so on finished streams the
two agree). Tokens in it: ``sum n_i(end) - n_i(t_s)``. The figures are provisional: the recorded ones are
computed after the wave from its records (failed requests excluded there, not here); running to the
latest arrival, the live window can hold up to one step more than the recorded one on the same data.
Merging workers' tallies (``merge``) sums their counts and takes the sum of their local window rates
over the common window, an estimate. Times are client monotonic ns; seconds and tok/s where named so.
"""

from __future__ import annotations

import math
from bisect import bisect_left, bisect_right
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

__all__ = ["LiveTally"]

FIELDS = ("n", "tokens", "first", "done", "start_ns", "end_ns", "window_tokens")
"""The integer fields of a ``LiveTally`` in the order load workers publish them (shared memory)."""


@dataclass(frozen=True, slots=True)
class LiveTally:
    """A wave's progress so far. ``n`` requests; ``tokens`` output tokens received (events, for a
    decoder that keeps no live counts); ``first`` requests with their first output token; ``done``
    requests ended (any outcome); ``start_ns`` / ``end_ns`` the resident window so far (0: not open);
    ``window_tokens`` the tokens inside it."""

    n: int = 0
    tokens: int = 0
    first: int = 0
    done: int = 0
    start_ns: int = 0
    end_ns: int = 0
    window_tokens: int = 0

    @property
    def in_flight(self) -> int:
        """Requests not ended yet."""
        return self.n - self.done

    @property
    def resident_s(self) -> float:
        """Seconds of the resident window so far (0 while it is not open)."""
        return max(self.end_ns - self.start_ns, 0) / 1e9 if self.start_ns else 0.0

    @property
    def rate(self) -> float:
        """Output tok/s inside the window so far; NaN while it is empty."""
        s = self.resident_s
        return self.window_tokens / s if s > 0 else math.nan

    def values(self) -> tuple[int, ...]:
        """The fields in ``FIELDS`` order."""
        return (self.n, self.tokens, self.first, self.done, self.start_ns, self.end_ns, self.window_tokens)


class LiveWave:
    """The tally of one process's streams, updated from their decoders (anything with ``n_events`` and,
    where the decoder keeps them, the live lists ``event_ns`` / ``event_tokens``; a decoder without
    them has its events counted as tokens and keeps the window closed). See the module docstring."""

    def __init__(self, decoders: Sequence[Any]) -> None:
        self.decoders = decoders
        self.lists: list[tuple[Sequence[int], Sequence[int]] | None] = []
        for d in decoders:
            ns, counts = getattr(d, "event_ns", None), getattr(d, "event_tokens", None)
            self.lists.append(None if ns is None or counts is None else (ns, counts))
        self.first_ns = [0] * len(decoders)  # f_i once seen
        self.t_s = 0
        self.base = 0  # sum n_i(t_s)
        self.stop: tuple[int, int] | None = None  # (end ns, sum n_i(end)) once a request has ended

    def update(self, done: Sequence[bool]) -> LiveTally:
        """The tally now; ``done[i]``: whether request i has ended."""
        tokens = first = latest = 0
        first_ns = self.first_ns
        for i, pair in enumerate(self.lists):
            if pair is None:
                e = self.decoders[i].n_events
                tokens += e
                first += e > 0
                continue
            ns, counts = pair
            k = min(len(ns), len(counts))
            if k == 0 or counts[k - 1] < 1:
                continue
            tokens += counts[k - 1]
            first += 1
            latest = max(latest, ns[k - 1])
            if not first_ns[i]:
                first_ns[i] = ns[bisect_left(counts, 1, 0, k)]
        n, ended = len(self.lists), sum(done)
        if first < n or any(p is None for p in self.lists):
            return LiveTally(n, tokens, first, ended)
        if not self.t_s:
            self.t_s = max(first_ns)
            self.base = sum(_at(*p, self.t_s) for p in self.lists if p is not None)
        if self.stop is None and ended:
            end = min(_last_increase(*p) for p, d in zip(self.lists, done, strict=True) if p is not None and d)
            self.stop = (end, sum(_at(*p, end) for p in self.lists if p is not None))
        end, at_end = self.stop if self.stop is not None else (latest, tokens)
        if end <= self.t_s:
            return LiveTally(n, tokens, first, ended, self.t_s, self.t_s, 0)
        return LiveTally(n, tokens, first, ended, self.t_s, end, at_end - self.base)


def _last_increase(ns: Sequence[int], counts: Sequence[int]) -> int:
    """``e_i``: the time of the event that brought the stream to its latest count."""
    k = min(len(ns), len(counts))
    return ns[bisect_left(counts, counts[k - 1], 0, k)]


def _at(ns: Sequence[int], counts: Sequence[int], t_ns: int) -> int:
    """``n_i(t)``: the cumulative count at or before ``t_ns`` (0 before any event)."""
    i = bisect_right(ns, t_ns, 0, min(len(ns), len(counts))) - 1
    return counts[i] if i >= 0 else 0


def merge(parts: Sequence[LiveTally]) -> LiveTally:
    """One wave's tally from its processes' tallies (module docstring: the window tokens are the sum
    of the local rates over the common window, an estimate)."""
    n, tokens, first, done = (sum(getattr(p, f) for p in parts) for f in ("n", "tokens", "first", "done"))
    live = [p for p in parts if p.n > 0]
    if not live or first < n or any(not p.start_ns for p in live):
        return LiveTally(n, tokens, first, done)
    t_s = max(p.start_ns for p in live)
    t_e = min(p.end_ns for p in live)
    if t_e <= t_s:
        return LiveTally(n, tokens, first, done, t_s, t_s, 0)
    rates = [p.rate for p in live]
    if any(math.isnan(r) for r in rates):
        return LiveTally(n, tokens, first, done, t_s, t_s, 0)
    return LiveTally(n, tokens, first, done, t_s, t_e, round(sum(rates) * (t_e - t_s) / 1e9))
