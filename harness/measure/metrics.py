"""Rate and latency metrics, exactly as docs/metrics.md (the report's section 10.1) defines them.

Pure numpy over ``RequestRecord`` lists. A *wave* is a list of records sent together; ``waves`` is a
list of waves. Only successful records (``error is None``) are counted; failed ones are reported
in ``n_failed`` so callers can mark the wave, never silently counted as tokens.

Notation per request i: ``s_i`` send, ``f_i`` first event with >= 1 output token, ``e_i`` last event
that increased the output count, ``d_i`` end of response, ``n_i(t)`` cumulative output tokens
received at or before t (right-continuous step function of the server's cumulative counts).

- resident decode: ``t_s = max f_i``, ``t_e = min e_i``; tokens = sum n_i(t_e) - n_i(t_s);
  a wave contributes only if ``t_e > t_s``; aggregate = sum tokens / sum seconds.
- whole-wave HTTP: all output tokens / (max d_i - min s_i); aggregate likewise.
- prefill: all prompt tokens / (max f_i - min s_i); aggregate likewise.

All rates are tokens per second; all durations are seconds unless named ``*_ns``.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
import numpy.typing as npt
import pyarrow as pa

from harness.records import RequestRecord

__all__ = [
    "NS", "Rate", "RequestTimings", "Summary", "Wave", "WaveRate", "decode_rate_1_100", "e2e_seconds",
    "flat_list_column", "http_output_rate", "http_window", "itl_seconds", "median_of_rounds", "prefill_rate",
    "prefill_window", "receive_lag_seconds", "request_timings", "resident_decode_rate", "resident_window",
    "single_stream_decode", "token_time_ns", "tokens_at", "ttft_seconds",
]

Wave = Sequence[RequestRecord]
NS = 1e9


@dataclass(frozen=True)
class WaveRate:
    """One wave's window and tokens for one metric.

    ``contributes`` is False when the window is empty (``seconds <= 0``) or no request succeeded;
    such a wave adds nothing to aggregates.
    """

    wave_id: str
    tokens: int
    seconds: float
    start_ns: int
    end_ns: int
    n_requests: int
    n_failed: int
    contributes: bool

    @property
    def rate(self) -> float:
        """Tokens per second, NaN when the wave does not contribute."""
        return self.tokens / self.seconds if self.contributes else math.nan


@dataclass(frozen=True)
class Rate:
    """An aggregate over waves: ``rate = tokens / seconds`` over contributing waves (NaN if none)."""

    tokens: int
    seconds: float
    waves: tuple[WaveRate, ...]

    @property
    def rate(self) -> float:
        """Tokens per second over the contributing waves; NaN when none contributes."""
        return self.tokens / self.seconds if self.seconds > 0 else math.nan

    @property
    def n_contributing(self) -> int:
        """How many waves had a non-empty window."""
        return sum(1 for w in self.waves if w.contributes)

    @property
    def n_failed(self) -> int:
        """Failed requests across all waves."""
        return sum(w.n_failed for w in self.waves)


def _aggregate(per_wave: list[WaveRate]) -> Rate:
    used = [w for w in per_wave if w.contributes]
    return Rate(
        tokens=sum(w.tokens for w in used),
        seconds=sum(w.seconds for w in used),
        waves=tuple(per_wave),
    )


def tokens_at(record: RequestRecord, t_ns: int) -> int:
    """``n_i(t)``: cumulative output tokens received at or before ``t_ns`` (0 before any event)."""
    idx = int(np.searchsorted(record.event_ns, t_ns, side="right")) - 1
    return int(record.event_tokens[idx]) if idx >= 0 else 0


def _wave_id(wave: Wave) -> str:
    return wave[0].wave_id if wave else ""


def resident_window(wave: Wave) -> WaveRate:
    """Resident decode window of one wave (docs/metrics.md#resident-decode-window)."""
    ok = [r for r in wave if r.ok and r.n_tokens >= 1]
    n_failed = sum(1 for r in wave if not r.ok)
    if not ok:
        return WaveRate(_wave_id(wave), 0, 0.0, 0, 0, len(wave), n_failed, False)
    t_s = max(r.first_token_ns for r in ok)  # type: ignore[type-var]
    t_e = min(r.last_token_ns for r in ok)  # type: ignore[type-var]
    assert t_s is not None and t_e is not None
    if t_e <= t_s:
        return WaveRate(_wave_id(wave), 0, 0.0, t_s, t_e, len(wave), n_failed, False)
    tokens = sum(tokens_at(r, t_e) - tokens_at(r, t_s) for r in ok)
    return WaveRate(_wave_id(wave), tokens, (t_e - t_s) / NS, t_s, t_e, len(wave), n_failed, True)


def http_window(wave: Wave) -> WaveRate:
    """Whole-wave HTTP output window: all output tokens over first send to last response end."""
    ok = [r for r in wave if r.ok]
    n_failed = len(wave) - len(ok)
    if not ok:
        return WaveRate(_wave_id(wave), 0, 0.0, 0, 0, len(wave), n_failed, False)
    start = min(r.send_ns for r in ok)
    end = max(r.done_ns for r in ok)
    tokens = sum(r.n_tokens for r in ok)
    good = end > start and tokens > 0
    return WaveRate(_wave_id(wave), tokens, (end - start) / NS, start, end, len(wave), n_failed, good)


def _prompt_tokens(r: RequestRecord) -> int:
    return r.prompt_tokens if r.prompt_tokens is not None else r.input_len


def prefill_window(wave: Wave) -> WaveRate:
    """Prefill window: all prompt tokens over first send to the last first-token arrival."""
    ok = [r for r in wave if r.ok and r.first_token_ns is not None]
    n_failed = sum(1 for r in wave if not r.ok)
    if not ok:
        return WaveRate(_wave_id(wave), 0, 0.0, 0, 0, len(wave), n_failed, False)
    start = min(r.send_ns for r in ok)
    end = max(r.first_token_ns for r in ok)  # type: ignore[type-var]
    assert end is not None
    tokens = sum(_prompt_tokens(r) for r in ok)
    good = end > start and tokens > 0
    return WaveRate(_wave_id(wave), tokens, (end - start) / NS, start, end, len(wave), n_failed, good)


def resident_decode_rate(waves: Sequence[Wave]) -> Rate:
    """Resident decode rate over waves: sum of window tokens / sum of window seconds."""
    return _aggregate([resident_window(w) for w in waves])


def http_output_rate(waves: Sequence[Wave]) -> Rate:
    """Whole-wave HTTP output rate over waves: sum of tokens / sum of wave durations."""
    return _aggregate([http_window(w) for w in waves])


def prefill_rate(waves: Sequence[Wave]) -> Rate:
    """Prefill input rate over waves: sum of prompt tokens / sum of send-to-last-first-token."""
    return _aggregate([prefill_window(w) for w in waves])


def median_of_rounds(rates: Sequence[float]) -> float:
    """A formal cell: the median of its round rates (NaN rounds make the cell NaN)."""
    if not rates:
        return math.nan
    arr = np.asarray(rates, dtype=np.float64)
    if np.isnan(arr).any():
        return math.nan
    return float(np.median(arr))


def token_time_ns(record: RequestRecord, k: int) -> int | None:
    """Arrival time of the event at which the cumulative count first reached ``k`` (1-based)."""
    idx = int(np.searchsorted(record.event_tokens, k, side="left"))
    return int(record.event_ns[idx]) if idx < record.event_tokens.size else None


def decode_rate_1_100(record: RequestRecord, last: int = 100) -> float | None:
    """Single-stream decode: ``(last - 1) / (t(token last) - t(token 1))`` in tok/s (record notes).

    None when the request produced fewer than ``last`` tokens or both tokens arrived together.
    """
    t1 = token_time_ns(record, 1)
    tn = token_time_ns(record, last)
    if t1 is None or tn is None or tn <= t1:
        return None
    return (last - 1) / ((tn - t1) / NS)


@dataclass(frozen=True)
class Summary:
    """Distribution summary of a sample (seconds or tok/s): count, median, p10, p90, p99, min, max.

    min/max are observed ranges, not confidence intervals.
    """

    n: int
    median: float
    p10: float
    p90: float
    p99: float
    min: float
    max: float

    @staticmethod
    def of(values: npt.ArrayLike) -> Summary:
        """Summarise values (NaN-free); an empty sample gives NaNs and n = 0."""
        arr = np.asarray(values, dtype=np.float64)
        if arr.size == 0:
            nan = math.nan
            return Summary(0, nan, nan, nan, nan, nan, nan)
        p10, p50, p90, p99 = np.percentile(arr, [10, 50, 90, 99])
        return Summary(int(arr.size), float(p50), float(p10), float(p90), float(p99),
                       float(arr.min()), float(arr.max()))


def single_stream_decode(records: Sequence[RequestRecord], last: int = 100) -> Summary:
    """Tokens 1..``last`` after TTFT over successful records: median and p10 (record notes)."""
    vals = [v for r in records if r.ok and (v := decode_rate_1_100(r, last)) is not None]
    return Summary.of(vals)


def ttft_seconds(records: Sequence[RequestRecord]) -> npt.NDArray[np.float64]:
    """``f_i - s_i`` in seconds for successful records that produced a token."""
    vals = [(f - r.send_ns) / NS for r in records if r.ok and (f := r.first_token_ns) is not None]
    return np.asarray(vals, dtype=np.float64)


def e2e_seconds(records: Sequence[RequestRecord]) -> npt.NDArray[np.float64]:
    """``d_i - s_i`` in seconds for successful records."""
    return np.asarray([(r.done_ns - r.send_ns) / NS for r in records if r.ok], dtype=np.float64)


def itl_seconds(records: Sequence[RequestRecord]) -> npt.NDArray[np.float64]:
    """Per-token gaps in seconds: each gap between token-carrying events divided by the tokens it
    delivered, repeated once per token (so multi-token events weigh by their tokens)."""
    out: list[npt.NDArray[np.float64]] = []
    for r in records:
        if not r.ok or r.event_tokens.size < 2:
            continue
        tok = r.event_tokens.astype(np.int64)
        grew = np.flatnonzero(np.diff(tok) > 0) + 1
        first = int(np.searchsorted(tok, 1, side="left"))
        grew = grew[grew > first]
        if grew.size == 0:
            continue
        idx = np.concatenate(([first], grew))
        gaps = np.diff(r.event_ns[idx]).astype(np.float64) / NS
        dtok = np.diff(tok[idx])
        out.append(np.repeat(gaps / dtok, dtok))
    return np.concatenate(out) if out else np.zeros(0, dtype=np.float64)


def receive_lag_seconds(records: Sequence[RequestRecord]) -> npt.NDArray[np.float64]:
    """Client receive lag (event arrival minus the simulator's emit time), seconds; empty without
    simulator emit stamps."""
    parts = [
        (r.event_ns - r.emit_ns).astype(np.float64) / NS
        for r in records
        if r.emit_ns.size and r.emit_ns.size == r.event_ns.size
    ]
    return np.concatenate(parts) if parts else np.zeros(0, dtype=np.float64)


# ----------------------------------------------------------------------------------------------------
# The same per-request instants over a raw-record table (vectorised; ledgers use this)
# ----------------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class RequestTimings:
    """Per-row instants and counts of a raw-record table, one array entry per request.

    ``first_ns`` (``f_i``) and ``last_ns`` (``e_i``, the last event that increased the count) are -1
    when the request produced no token; ``ttft_s`` is NaN then. ``e2e_s`` is ``d_i - s_i`` for every
    row, failed ones included (callers filter on ``ok``). Same definitions as the record-level
    functions above (``RequestRecord.first_token_ns`` / ``last_token_ns``).
    """

    send_ns: npt.NDArray[np.int64]
    first_ns: npt.NDArray[np.int64]
    last_ns: npt.NDArray[np.int64]
    done_ns: npt.NDArray[np.int64]
    n_tokens: npt.NDArray[np.int64]
    n_events: npt.NDArray[np.int64]
    first_tokens: npt.NDArray[np.int64]  # n_i(f_i): tokens carried by the first counting event (0 if none)

    @property
    def ttft_s(self) -> npt.NDArray[np.float64]:
        """``f_i - s_i`` in seconds (NaN without a token)."""
        return np.where(self.first_ns >= 0, (self.first_ns - self.send_ns) / NS, np.nan)

    @property
    def e2e_s(self) -> npt.NDArray[np.float64]:
        """``d_i - s_i`` in seconds."""
        return ((self.done_ns - self.send_ns) / NS).astype(np.float64)


def flat_list_column(col: pa.ChunkedArray) -> tuple[npt.NDArray[np.int64], npt.NDArray[Any]]:
    """A list column as (row offsets starting at 0, flattened values)."""
    arr = col.combine_chunks()
    offsets = np.asarray(arr.offsets, dtype=np.int64)
    values = np.asarray(arr.values.to_numpy(zero_copy_only=False))
    return offsets - offsets[0], values[offsets[0]:offsets[-1]] if offsets.size else values


def request_timings(records: pa.Table) -> RequestTimings:
    """``RequestTimings`` of every row of a raw-record table (``records.RECORD_SCHEMA``)."""
    off, tok = flat_list_column(records.column("event_tokens"))
    _, ev = flat_list_column(records.column("event_ns"))
    tok = tok.astype(np.int64, copy=False)
    ev = ev.astype(np.int64, copy=False)
    starts, ends = off[:-1], off[1:]
    n_events = ends - starts
    has = n_events > 0
    last_tok = np.where(has, tok[np.maximum(ends - 1, 0)] if tok.size else 0, 0)
    # f_i: the first event with >= 1 token, searched from each row's start
    pos = np.flatnonzero(tok >= 1)
    k = np.searchsorted(pos, starts)
    first_idx = np.where(k < pos.size, pos[np.minimum(k, max(pos.size - 1, 0))] if pos.size else 0, -1)
    valid = (first_idx >= 0) & (first_idx < ends) & has
    first_ns = np.where(valid, ev[np.where(valid, first_idx, 0)] if ev.size else 0, -1)
    first_tokens = np.where(valid, tok[np.where(valid, first_idx, 0)] if tok.size else 0, 0)
    # e_i: the last event whose count is above the previous event's (within the row)
    grew = np.zeros(tok.size, dtype=bool)
    if tok.size:
        grew[1:] = tok[1:] > tok[:-1]
        grew[starts[has]] = tok[starts[has]] > 0
    gpos = np.flatnonzero(grew)
    kk = np.searchsorted(gpos, ends) - 1
    cand = gpos[np.maximum(kk, 0)] if gpos.size else np.zeros_like(ends)
    lvalid = valid & (kk >= 0) & (cand >= starts) & (cand < ends) if gpos.size else np.zeros_like(valid)
    last_ns = np.where(lvalid, ev[np.where(lvalid, cand, 0)] if ev.size else 0, -1)
    return RequestTimings(
        send_ns=records.column("send_ns").to_numpy().astype(np.int64),
        first_ns=first_ns.astype(np.int64), last_ns=last_ns.astype(np.int64),
        done_ns=records.column("done_ns").to_numpy().astype(np.int64),
        n_tokens=last_tok.astype(np.int64), n_events=n_events.astype(np.int64),
        first_tokens=first_tokens.astype(np.int64))
