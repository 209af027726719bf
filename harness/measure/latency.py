"""Latency percentiles, one definition each (pure). Units: seconds.

Per successful request *i* (notation of :mod:`harness.measure.metrics`: ``s_i`` send, ``f_i`` first
event with >= 1 token, ``e_i`` last event that raised the count, ``d_i`` end of response, ``N_i`` output
tokens, ``n_i(t)`` tokens received by ``t``):

- **TTFT** ``f_i - s_i``.
- **E2E** ``d_i - s_i``.
- **TPOT** (dsv4h) ``(e_i - f_i) / (N_i - n_i(f_i))``: decode time per token after the first event,
  counting only tokens that arrived after it (a first event carrying several tokens does not shorten
  the denominator wrongly); requests with no token after the first event have no TPOT.
- **ITL** (dsv4h, per token): each gap between consecutive count-raising events divided by the tokens
  that event delivered, once per token, so an event carrying k tokens contributes k equal gaps.

Peer variants, by name (``variant="bench-serving"``), as ``vllm bench serve`` defines them (and
sglang.bench_serving on its OpenAI backends): ITL is the gap between consecutive *chunks* (one value
per event, whatever it carried) and TPOT is ``(d_i - f_i) / (N_i - 1)`` (end of response, not last
token; every token after the first in the denominator). sglang.bench_serving 0.5.23 on its native
backend (``/generate``) takes that TPOT but spreads a chunk's gap over the tokens it carried, which is
the dsv4h ITL. With one token per event the ITLs agree; multi-token events make the per-chunk ITL
larger and its count of samples smaller.

Statistics: ``p50``, ``p90``, ``p99`` (numpy's linear interpolation), ``mean``, ``max`` (observed, not a
bound) and ``n`` (number of values). No values gives NaN statistics and ``n = 0``. Other percentiles
(any in (0, 100], e.g. ``--percentiles 50,95``) by :func:`percentiles` and :func:`columns_at`, named
``p<value>`` (``p95``, ``p99.9``); the stored columns keep the three above.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import Literal

import numpy as np
import numpy.typing as npt

from harness.errors import SpecError
from harness.records import RequestRecord

__all__ = ["parse_percentiles"]

NS = 1e9
METRICS = ("ttft", "itl", "tpot", "e2e")
STATS = ("p50", "p90", "p99", "mean", "max", "n")
Variant = Literal["dsv4h", "bench-serving"]
VARIANTS: tuple[Variant, ...] = ("dsv4h", "bench-serving")
F64 = npt.NDArray[np.float64]
DEFAULT_PERCENTILES: tuple[float, ...] = (50.0, 90.0, 99.0)
MAX_PERCENTILES = 12


def _ok(records: Sequence[RequestRecord]) -> list[RequestRecord]:
    return [r for r in records if r.ok and r.event_tokens.size and int(r.event_tokens[-1]) > 0]


def ttft(records: Sequence[RequestRecord]) -> F64:
    """TTFT of every successful request that produced a token."""
    return np.asarray([(int(r.first_token_ns or 0) - r.send_ns) / NS for r in _ok(records)], dtype=np.float64)


def e2e(records: Sequence[RequestRecord]) -> F64:
    """E2E of every successful request that produced a token."""
    return np.asarray([(r.done_ns - r.send_ns) / NS for r in _ok(records)], dtype=np.float64)


def _first_index(r: RequestRecord) -> int:
    return int(np.searchsorted(r.event_tokens, 1, side="left"))


def tpot(records: Sequence[RequestRecord], variant: Variant = "dsv4h") -> F64:
    """TPOT per request (see the module docstring for both definitions)."""
    out: list[float] = []
    for r in _ok(records):
        k = _first_index(r)
        f = int(r.event_ns[k])
        total = int(r.event_tokens[-1])
        if variant == "bench-serving":
            if total > 1:
                out.append((r.done_ns - f) / NS / (total - 1))
            continue
        after = total - int(r.event_tokens[k])
        e = int(r.last_token_ns or f)
        if after > 0:
            out.append((e - f) / NS / after)
    return np.asarray(out, dtype=np.float64)


def itl(records: Sequence[RequestRecord], variant: Variant = "dsv4h") -> F64:
    """ITL samples pooled over requests (see the module docstring for both definitions)."""
    parts: list[F64] = []
    for r in _ok(records):
        tok = r.event_tokens.astype(np.int64)
        k = _first_index(r)
        grew = np.flatnonzero(np.diff(tok) > 0) + 1
        idx = np.concatenate(([k], grew[grew > k]))
        if idx.size < 2:
            continue
        gaps = np.diff(r.event_ns[idx]).astype(np.float64) / NS
        if variant == "bench-serving":
            parts.append(gaps)
        else:
            dtok = np.diff(tok[idx])
            parts.append(np.repeat(gaps / dtok, dtok))
    return np.concatenate(parts) if parts else np.zeros(0, dtype=np.float64)


def percentile_name(p: float) -> str:
    """The statistic's name of percentile ``p``: ``p50``, ``p95``, ``p99.9``."""
    return f"p{p:g}"


def parse_percentiles(text: str, *, flag: str = "--percentiles") -> tuple[float, ...]:
    """Comma-separated percentiles (each a number in (0, 100]), sorted, duplicates dropped. A bad list
    is a ``SpecError`` naming ``flag`` and the offending item."""
    items = [t.strip() for t in text.split(",")]
    if not text.strip() or any(not t for t in items):
        raise SpecError(f"{flag} {text!r}: give a comma-separated list of numbers, e.g. 50,90,95,99",
                        hint=f"{flag} takes percentiles in (0, 100] separated by commas, without spaces or "
                        "empty items")
    out: set[float] = set()
    for t in items:
        try:
            p = float(t)
        except ValueError:
            raise SpecError(f"{flag} {text!r}: {t!r} is not a number",
                            hint=f"{flag} takes numbers in (0, 100], e.g. 50,90,95,99") from None
        if not (math.isfinite(p) and 0 < p <= 100):
            raise SpecError(f"{flag} {text!r}: {t} is outside (0, 100]",
                            hint=f"{flag} takes numbers in (0, 100] (p0 is not a percentile; use 100 for the "
                            "maximum)")
        out.add(p)
    if len(out) > MAX_PERCENTILES:
        raise SpecError(f"{flag} {text!r}: {len(out)} percentiles, at most {MAX_PERCENTILES}",
                        hint=f"give {flag} at most {MAX_PERCENTILES} percentiles")
    return tuple(sorted(out))


def percentiles(values: F64, ps: Sequence[float]) -> dict[str, float]:
    """``p<value>`` of ``values`` for each ``p`` in ``ps`` (numpy's linear interpolation; NaN when empty)."""
    if values.size == 0:
        return {percentile_name(p): math.nan for p in ps}
    got: F64 = np.asarray(np.percentile(values, list(ps)) if ps else [], dtype=np.float64)
    return {percentile_name(p): float(v) for p, v in zip(ps, got, strict=True)}


def stats(values: F64, ps: Sequence[float] = DEFAULT_PERCENTILES) -> dict[str, float]:
    """The ``ps`` percentiles (default ``p50 p90 p99``), ``mean max n`` of ``values`` (NaN statistics and
    n = 0 when empty)."""
    out = percentiles(values, ps)
    if values.size == 0:
        return out | {"mean": math.nan, "max": math.nan, "n": 0.0}
    return out | {"mean": float(values.mean()), "max": float(values.max()), "n": float(values.size)}


def summary(records: Sequence[RequestRecord], variant: Variant = "dsv4h",
            ps: Sequence[float] = DEFAULT_PERCENTILES) -> dict[str, float]:
    """Flat columns ``<metric>_<stat>_s`` (``<metric>_n`` for counts) over ``records``, e.g.
    ``ttft_p99_s``, ``itl_n``; with the peer variant the names carry ``_bench``: ``itl_bench_p50_s``;
    ``ps`` the percentiles (default ``p50 p90 p99``, the stored columns)."""
    values = {"ttft": ttft(records), "itl": itl(records, variant), "tpot": tpot(records, variant),
              "e2e": e2e(records)}
    tag = "" if variant == "dsv4h" else "_bench"
    out: dict[str, float] = {}
    for metric in METRICS:
        if tag and metric in ("ttft", "e2e"):
            continue  # same definition for the peers
        for stat, v in stats(values[metric], ps).items():
            out[f"{metric}{tag}_n" if stat == "n" else f"{metric}{tag}_{stat}_s"] = v
    return out


def columns(records: Sequence[RequestRecord]) -> dict[str, float]:
    """Every latency column a result row carries: dsv4h definitions plus the peers' ITL and TPOT."""
    return summary(records, "dsv4h") | summary(records, "bench-serving")


def columns_at(records: Sequence[RequestRecord], ps: Sequence[float]) -> dict[str, float]:
    """:func:`columns` with the percentiles ``ps`` instead of ``p50 p90 p99`` (console tables, quick
    screens; never a ledger column), e.g. ``ttft_p95_s``, ``itl_bench_p95_s``."""
    return summary(records, "dsv4h", ps) | summary(records, "bench-serving", ps)
