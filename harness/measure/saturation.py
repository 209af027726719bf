"""Over-saturation of an open-loop round (pure; docs/saturation.md): the server no longer keeps up with
the offered rate when, over the round's sending period, both the requests in flight and the TTFT keep
rising (GuideLLM's over-saturation detection looks for the same pair of trends).

- **In flight** is the client's count of requests sent and not yet ended (queued at the server
  included), a step function of the round's send and end instants; it is read at every send and every
  end inside the **sending period** (first send to last send; after the last send the count can only
  fall, so the drain is left out).
- **TTFT** is ``f_i - s_i`` of every request with a first token, against its send instant ``s_i``.

Each series gets an ordinary least-squares line with the slope's standard error
``se = sqrt(SSR / (n - 2) / Sxx)``. A round is **saturated** when, for both series, the slope is more
than ``T_MIN`` standard errors above zero *and* its rise over the sending period is material: in flight
by at least ``INFLIGHT_RISE_MIN`` requests and ``REL_RISE_MIN`` of the period's mean in flight, TTFT by
at least ``REL_RISE_MIN`` of the median TTFT. The in-flight readings are autocorrelated (each differs
from the last by one), so the standard error understates the uncertainty; the magnitude thresholds,
not the t-value alone, keep a noisy round below saturation from being flagged. Fewer than
``MIN_REQUESTS`` requests with a first token: not judged (``saturated`` None).
"""

from __future__ import annotations

import math
import statistics
from collections.abc import Sequence
from dataclasses import dataclass

from harness.records import RequestRecord

__all__ = ["saturation"]

NS = 1e9
T_MIN = 3.0
"""Slope / standard error above which a trend counts (both series)."""
REL_RISE_MIN = 0.5
"""Least rise over the sending period, relative to the period's mean in flight and to the median TTFT."""
INFLIGHT_RISE_MIN = 2.0
"""Least rise of the in-flight count over the sending period (requests)."""
MIN_REQUESTS = 8
"""Fewest requests with a first token for a round to be judged."""


@dataclass(frozen=True)
class Trend:
    """An OLS line through ``(x, y)`` points: slope, its standard error, the points and the x span."""

    slope: float
    se: float
    n: int
    span: float

    @property
    def t(self) -> float:
        """slope / se (inf for a perfect positive line, nan without a slope)."""
        if math.isnan(self.slope):
            return math.nan
        if self.se == 0:
            return math.inf if self.slope > 0 else (-math.inf if self.slope < 0 else math.nan)
        return self.slope / self.se

    @property
    def rise(self) -> float:
        """slope x span: how much the line rises over the points' x range."""
        return self.slope * self.span


def trend(xs: Sequence[float], ys: Sequence[float]) -> Trend:
    """The least-squares trend of ``ys`` on ``xs`` (NaN slope with fewer than 3 points or no x spread)."""
    n = len(xs)
    if n != len(ys):
        raise ValueError(f"{n} x values for {len(ys)} y values")
    if n < 3:
        return Trend(math.nan, math.nan, n, 0.0)
    mx, my = sum(xs) / n, sum(ys) / n
    sxx = sum((x - mx) ** 2 for x in xs)
    if sxx == 0:
        return Trend(math.nan, math.nan, n, 0.0)
    slope = sum((x - mx) * (y - my) for x, y in zip(xs, ys, strict=True)) / sxx
    ssr = sum((y - my - slope * (x - mx)) ** 2 for x, y in zip(xs, ys, strict=True))
    return Trend(slope, math.sqrt(ssr / (n - 2) / sxx), n, max(xs) - min(xs))


def inflight_series(records: Sequence[RequestRecord]) -> tuple[list[float], list[float]]:
    """(seconds since the first send, requests in flight after each send or end inside the sending
    period); an end and another request's send at the same instant count the end first."""
    if not records:
        return [], []
    first = min(r.send_ns for r in records)
    last = max(r.send_ns for r in records)
    # (instant, order, change): at one instant ends (0) before sends (1), but a request that ended
    # at its own send instant ends after it (2)
    events = sorted([(r.send_ns, 1, 1) for r in records]
                    + [(r.done_ns, 2 if r.done_ns == r.send_ns else 0, -1) for r in records if r.done_ns >= r.send_ns])
    xs: list[float] = []
    ys: list[float] = []
    n = 0
    for t, _, d in events:
        n += d
        if first <= t <= last:
            xs.append((t - first) / NS)
            ys.append(float(n))
    return xs, ys


@dataclass(frozen=True)
class Saturation:
    """The two trends of one round and the verdict (module docstring); ``saturated`` None: not judged."""

    inflight: Trend
    ttft: Trend
    mean_inflight: float
    median_ttft_s: float
    saturated: bool | None
    reason: str

    def columns(self) -> dict[str, float | bool | None]:
        """The ``sweep_rounds`` columns (units in the names)."""
        return {"inflight_slope_req_per_s": self.inflight.slope, "inflight_slope_se_req_per_s": self.inflight.se,
                "ttft_slope_s_per_s": self.ttft.slope, "ttft_slope_se_s_per_s": self.ttft.se,
                "saturated": self.saturated}


def saturation(records: Sequence[RequestRecord]) -> Saturation:
    """Judge one round's records (module docstring)."""
    timed = sorted((r for r in records if r.ok and r.first_token_ns is not None), key=lambda r: r.send_ns)
    xs, ys = inflight_series(records)
    inflight = trend(xs, ys)
    first = min((r.send_ns for r in records), default=0)
    ttft = trend([(r.send_ns - first) / NS for r in timed],
                 [(r.first_token_ns - r.send_ns) / NS for r in timed if r.first_token_ns is not None])
    mean_in = statistics.fmean(ys) if ys else math.nan
    med = statistics.median([(r.first_token_ns - r.send_ns) / NS for r in timed
                             if r.first_token_ns is not None]) if timed else math.nan
    if len(timed) < MIN_REQUESTS:
        return Saturation(inflight, ttft, mean_in, med, None,
                          f"{len(timed)} requests with a first token; {MIN_REQUESTS} needed to judge")
    rising_in = inflight.t > T_MIN and inflight.rise >= max(INFLIGHT_RISE_MIN, REL_RISE_MIN * mean_in)
    rising_ttft = ttft.t > T_MIN and ttft.rise >= REL_RISE_MIN * med
    saturated = bool(rising_in and rising_ttft)
    reason = (f"in flight {inflight.slope:+.2f}/s (se {inflight.se:.2f}, rise {inflight.rise:.1f} over a mean "
              f"of {mean_in:.1f}); TTFT {ttft.slope * 1e3:+.1f} ms/s (se {ttft.se * 1e3:.1f}, rise "
              f"{ttft.rise * 1e3:.0f} ms over a median of {med * 1e3:.0f} ms)")
    return Saturation(inflight, ttft, mean_in, med, saturated, reason)
