"""Known-answer tests for harness.measure.metrics: hand-computed traces, literal numbers."""

from __future__ import annotations

import math

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

from harness.measure import metrics as m
from harness.records import RequestRecord

MS = 1_000_000


def rec(rid: str, events: list[tuple[int, int]], *, send: int = 0, done: int | None = None,
        prompt: int = 100, wave: str = "w0", error: str | None = None) -> RequestRecord:
    """A record from (ms, cumulative tokens) pairs."""
    ns = [t * MS for t, _ in events]
    return RequestRecord(
        rid=rid, send_ns=send * MS, done_ns=(done if done is not None else events[-1][0] + 10) * MS,
        event_ns=np.array(ns), event_tokens=np.array([c for _, c in events]), prompt_tokens=prompt, wave_id=wave,
        error=error,
    )


R1 = rec("r1", [(100, 1), (200, 2), (300, 3), (400, 4)], done=410, prompt=100)
R2 = rec("r2", [(150, 1), (250, 3), (350, 4), (450, 5), (550, 6)], done=560, prompt=200)


def test_resident_two_requests_with_multi_token_event() -> None:
    w = m.resident_window([R1, R2])
    # t_s = max(100, 150) = 150 ms; t_e = min(400, 550) = 400 ms
    # n1: 4 - 1 = 3; n2: n(400) = 4 (event at 350), n(150) = 1 -> 3; 6 tokens / 0.25 s
    assert w.start_ns == 150 * MS and w.end_ns == 400 * MS
    assert w.tokens == 6
    assert w.seconds == pytest.approx(0.25)
    assert w.rate == pytest.approx(24.0)


def test_http_and_prefill_known_answers() -> None:
    h = m.http_output_rate([[R1, R2]])
    assert h.tokens == 10
    assert h.seconds == pytest.approx(0.560)
    assert h.rate == pytest.approx(10 / 0.56)
    p = m.prefill_rate([[R1, R2]])
    assert p.tokens == 300
    assert p.seconds == pytest.approx(0.150)
    assert p.rate == pytest.approx(2000.0)


def test_aggregate_is_sum_over_sum_not_mean_of_rates() -> None:
    w2a = rec("a", [(0, 1), (1000, 11)], wave="w1")
    w2b = rec("b", [(0, 1), (1000, 1), (1000, 11)], wave="w1")  # identical timestamps
    r = m.resident_decode_rate([[R1, R2], [w2a, w2b]])
    # wave 1: 6 tokens / 0.25 s; wave 2: t_s = 0, t_e = 1000 ms, 10 + 10 tokens / 1 s
    assert r.tokens == 26
    assert r.seconds == pytest.approx(1.25)
    assert r.rate == pytest.approx(20.8)
    assert r.n_contributing == 2


def test_identical_timestamps_step_function_is_right_continuous() -> None:
    r = rec("x", [(100, 2), (100, 3), (200, 5)])
    assert m.tokens_at(r, 99 * MS) == 0
    assert m.tokens_at(r, 100 * MS) == 3
    assert m.tokens_at(r, 150 * MS) == 3
    assert r.first_token_ns == 100 * MS
    assert r.last_token_ns == 200 * MS


def test_request_finishing_before_another_first_token_gives_no_window() -> None:
    a = rec("a", [(100, 1), (200, 5)])
    b = rec("b", [(300, 1), (400, 5)])
    w = m.resident_window([a, b])
    assert not w.contributes
    assert math.isnan(w.rate)
    agg = m.resident_decode_rate([[a, b]])
    assert math.isnan(agg.rate)
    assert agg.n_contributing == 0


def test_empty_intersection_equal_times_does_not_contribute() -> None:
    a = rec("a", [(100, 1), (200, 5)])
    b = rec("b", [(200, 1), (300, 5)])
    assert not m.resident_window([a, b]).contributes


def test_failed_requests_are_excluded_and_counted() -> None:
    bad = rec("bad", [(120, 1), (130, 2)], error="disconnected after 2 events")
    w = m.resident_window([R1, R2, bad])
    assert w.tokens == 6
    assert w.n_failed == 1 and w.n_requests == 3
    assert m.http_output_rate([[R1, R2, bad]]).tokens == 10


def test_all_failed_wave_does_not_contribute() -> None:
    bad = rec("bad", [(120, 1)], error="http 500")
    assert not m.resident_window([bad]).contributes
    assert not m.prefill_window([bad]).contributes
    assert not m.http_window([bad]).contributes


def test_prefill_uses_input_len_when_server_omits_prompt_tokens() -> None:
    r = RequestRecord(rid="p", send_ns=0, done_ns=2 * MS * 1000, event_ns=np.array([500 * MS]),
                      event_tokens=np.array([1]), prompt_tokens=None, input_len=8192)
    assert m.prefill_rate([[r]]).rate == pytest.approx(8192 / 0.5)


def test_median_of_rounds() -> None:
    assert m.median_of_rounds([3.0, 1.0, 2.0]) == 2.0
    assert math.isnan(m.median_of_rounds([]))
    assert math.isnan(m.median_of_rounds([1.0, math.nan, 2.0]))


def test_decode_rate_1_100() -> None:
    # token k arrives at 10 + k ms for k = 1..120 -> 99 tokens over 99 ms = 1000 tok/s
    r = rec("s", [(10 + k, k) for k in range(1, 121)])
    assert m.decode_rate_1_100(r) == pytest.approx(1000.0)
    short = rec("t", [(10 + k, k) for k in range(1, 50)])
    assert m.decode_rate_1_100(short) is None
    # multi-token events: tokens 1..4 at 10 ms, 5..100 arrive together at 109 ms
    multi = rec("u", [(10, 4), (109, 100)])
    assert m.decode_rate_1_100(multi) == pytest.approx(99 / 0.099)
    s = m.single_stream_decode([r, short, multi])
    assert s.n == 2


def test_latency_distributions() -> None:
    ttft = m.ttft_seconds([R1, R2])
    assert ttft.tolist() == pytest.approx([0.1, 0.15])
    assert m.e2e_seconds([R1, R2]).tolist() == pytest.approx([0.41, 0.56])
    itl = m.itl_seconds([R2])
    # gaps: 150->250 (2 tokens) = 50 ms each, 250->350, 350->450, 450->550 = 100 ms
    assert itl.tolist() == pytest.approx([0.05, 0.05, 0.1, 0.1, 0.1])
    assert m.Summary.of([]).n == 0
    s = m.Summary.of([1.0, 2.0, 3.0])
    assert (s.median, s.min, s.max) == (2.0, 1.0, 3.0)


def test_receive_lag() -> None:
    r = RequestRecord(rid="l", send_ns=0, done_ns=10, event_ns=np.array([100, 200]), event_tokens=np.array([1, 2]),
                      emit_ns=np.array([90, 150]))
    assert m.receive_lag_seconds([r]).tolist() == pytest.approx([10e-9, 50e-9])
    assert m.receive_lag_seconds([R1]).size == 0


@st.composite
def waves(draw: st.DrawFn) -> list[RequestRecord]:
    out = []
    for i in range(draw(st.integers(1, 6))):
        n = draw(st.integers(1, 20))
        gaps = draw(st.lists(st.integers(0, 50), min_size=n, max_size=n))
        incs = draw(st.lists(st.integers(1, 4), min_size=n, max_size=n))
        t = np.cumsum(gaps) + draw(st.integers(0, 100))
        c = np.cumsum(incs)
        out.append(RequestRecord(rid=f"r{i}", send_ns=0, done_ns=int(t[-1]) + 1,
                                 event_ns=t, event_tokens=c))
    return out


@given(waves())
def test_resident_tokens_bounded_by_emitted_tokens(wave: list[RequestRecord]) -> None:
    w = m.resident_window(wave)
    total = sum(r.n_tokens for r in wave)
    assert 0 <= w.tokens <= total
    if w.contributes:
        assert w.seconds > 0
        assert m.http_window(wave).tokens == total
