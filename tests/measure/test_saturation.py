"""Over-saturation of an open-loop round (harness.measure.saturation): literal series with known slopes,
a queue that keeps growing (saturated) and a steady one (not)."""

from __future__ import annotations

import math

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

from harness.measure.saturation import MIN_REQUESTS, inflight_series, saturation, trend
from harness.records import RequestRecord

S = 1_000_000_000


def rec(i: int, send_s: float, ttft_s: float, done_s: float) -> RequestRecord:
    first, done = int((send_s + ttft_s) * S), int(done_s * S)
    return RequestRecord(rid=f"r{i}", send_ns=int(send_s * S), done_ns=done,
                         event_ns=np.array([first, done], dtype=np.int64),
                         event_tokens=np.array([1, 8], dtype=np.int32))


def test_trend_known_answers() -> None:
    t = trend([0.0, 1.0, 2.0, 3.0], [1.0, 3.0, 5.0, 7.0])
    assert (t.slope, t.se, t.n, t.span, t.rise) == (2.0, 0.0, 4, 3.0, 6.0) and t.t == math.inf
    # y = 1, 2, 2, 3 over x = 0..3: slope 0.6, residuals (-0.1, 0.3, -0.3, 0.1): SSR 0.2, Sxx 5
    t = trend([0.0, 1.0, 2.0, 3.0], [1.0, 2.0, 2.0, 3.0])
    assert t.slope == pytest.approx(0.6) and t.se == pytest.approx(math.sqrt(0.2 / 2 / 5))
    assert math.isnan(trend([1.0, 1.0, 1.0], [1.0, 2.0, 3.0]).slope) and math.isnan(trend([0.0, 1.0], [0, 1]).slope)


def test_inflight_counts_ends_before_sends_and_stops_at_the_last_send() -> None:
    recs = [rec(0, 0.0, 0.1, 1.0), rec(1, 1.0, 0.1, 3.0), rec(2, 2.0, 0.1, 2.5)]
    # events: send 0 (1), end 1.0 then send 1.0 (0 -> 1), send 2.0 (2); ends at 2.5 and 3.0 fall after the last send
    assert inflight_series(recs) == ([0.0, 1.0, 1.0, 2.0], [1.0, 0.0, 1.0, 2.0])


def test_a_growing_queue_is_saturated() -> None:
    # 10 req/s offered to a server finishing 5 req/s in order: request i ends at 0.2 (i + 1) s,
    # its first token 0.1 s before its end; in flight rises 5/s, TTFT 0.1 + 0.1 i s after send 0.1 i
    recs = [rec(i, 0.1 * i, 0.2 * (i + 1) - 0.1 - 0.1 * i, 0.2 * (i + 1)) for i in range(40)]
    s = saturation(recs)
    assert s.saturated is True
    assert s.ttft.slope == pytest.approx(1.0) and s.ttft.se == pytest.approx(0.0, abs=1e-9)
    assert s.inflight.slope == pytest.approx(5.0, rel=0.05)
    assert s.columns()["saturated"] is True and s.columns()["ttft_slope_s_per_s"] == pytest.approx(1.0)


def test_a_steady_server_is_not_saturated() -> None:
    # 10 req/s, each answered in 0.25 s with a 50 ms TTFT: about 2.5 in flight all along
    recs = [rec(i, 0.1 * i, 0.05, 0.1 * i + 0.25) for i in range(40)]
    s = saturation(recs)
    assert s.saturated is False and abs(s.inflight.slope) < 0.5 and s.ttft.slope == pytest.approx(0.0, abs=1e-9)


def test_rising_ttft_alone_or_too_few_requests() -> None:
    # TTFT rises (a cold cache warming the wrong way round) but the queue does not grow: not saturated
    recs = [rec(i, 0.1 * i, 0.01 + 0.002 * i, 0.1 * i + 0.09) for i in range(40)]
    assert saturation(recs).saturated is False
    few = [rec(i, 0.1 * i, 0.2 * (i + 1) - 0.1 - 0.1 * i, 0.2 * (i + 1)) for i in range(MIN_REQUESTS - 1)]
    s = saturation(few)
    assert s.saturated is None and "needed to judge" in s.reason


@given(st.lists(st.tuples(st.floats(0, 100), st.floats(0, 5), st.floats(0, 5)), min_size=0, max_size=40))
def test_any_round_gets_a_verdict_without_an_exception(rows: list[tuple[float, float, float]]) -> None:
    recs = [rec(i, s, t, s + t + d) for i, (s, t, d) in enumerate(rows)]
    got = saturation(recs)
    assert got.saturated in (True, False, None)
    xs, ys = inflight_series(recs)
    assert len(xs) == len(ys) and all(y >= 0 for y in ys)
