"""Latency definitions with literal answers, multi-token events included, and the peers' variants."""

from __future__ import annotations

import math

import numpy as np
import pytest

from harness.measure import latency as L
from harness.records import RequestRecord

MS = 1_000_000


def rec(events: list[tuple[int, int]], *, send: int = 0, done: int, error: str | None = None) -> RequestRecord:
    """(ms, cumulative tokens) events."""
    return RequestRecord(rid="r", send_ns=send * MS, done_ns=done * MS,
                         event_ns=np.array([t * MS for t, _ in events], dtype=np.int64),
                         event_tokens=np.array([c for _, c in events], dtype=np.int32), error=error)


# send 0; first event at 100 ms carries 2 tokens; then +1 at 110, +3 at 140, +1 at 150; done at 160.
MULTI = rec([(100, 2), (110, 3), (140, 6), (150, 7)], done=160)


def test_ttft_and_e2e() -> None:
    assert L.ttft([MULTI]).tolist() == [0.1]
    assert L.e2e([MULTI]).tolist() == [0.16]


def test_tpot_counts_only_tokens_after_the_first_event() -> None:
    # (150 - 100) ms over the 5 tokens that came after the first event
    assert L.tpot([MULTI]) == pytest.approx([0.010])
    # peers: (done - first) / (N - 1) = 60 ms / 6
    assert L.tpot([MULTI], "bench-serving") == pytest.approx([0.010])


def test_itl_per_token_vs_per_event() -> None:
    # gaps 10 ms (1 token), 30 ms (3 tokens -> 3 x 10 ms), 10 ms (1 token)
    assert L.itl([MULTI]) == pytest.approx([0.010, 0.010, 0.010, 0.010, 0.010])
    # peers: one value per chunk
    assert L.itl([MULTI], "bench-serving") == pytest.approx([0.010, 0.030, 0.010])


def test_non_counting_events_and_failures_are_excluded() -> None:
    r = rec([(5, 0), (20, 1), (25, 1), (40, 2)], done=50)  # an empty event first, a repeat count later
    assert L.ttft([r]).tolist() == [0.02]
    assert L.itl([r]) == pytest.approx([0.020])
    failed = rec([(10, 1), (20, 2)], done=30, error="http 500")
    silent = rec([], done=5)
    assert L.ttft([failed, silent]).size == 0 and L.itl([failed]).size == 0


def test_single_token_answer_has_no_tpot() -> None:
    one = rec([(30, 1)], done=31)
    assert L.tpot([one]).size == 0 and L.tpot([one], "bench-serving").size == 0
    assert L.ttft([one]).tolist() == [0.03]


def test_stats_and_empty_samples() -> None:
    s = L.stats(np.arange(1, 101, dtype=np.float64))
    got = (s["p50"], s["p90"], s["p99"], s["mean"], s["max"], s["n"])
    assert got == pytest.approx((50.5, 90.1, 99.01, 50.5, 100.0, 100.0))
    e = L.stats(np.zeros(0))
    assert e["n"] == 0 and all(math.isnan(e[k]) for k in ("p50", "p90", "p99", "mean", "max"))


def test_columns_name_the_peer_variant() -> None:
    cols = L.columns([MULTI])
    assert cols["ttft_p50_s"] == pytest.approx(0.1) and cols["ttft_n"] == 1
    assert cols["itl_n"] == 5 and cols["itl_bench_n"] == 3
    assert cols["itl_bench_max_s"] == pytest.approx(0.03) and cols["tpot_bench_p50_s"] == pytest.approx(0.01)
    assert "ttft_bench_p50_s" not in cols  # the peers define TTFT and E2E as dsv4h does
    assert len(cols) == 4 * 6 + 2 * 6
