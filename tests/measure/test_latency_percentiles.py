"""Arbitrary latency percentiles (numpy linear interpolation) with literal answers, and parsing of
``--percentiles``."""

from __future__ import annotations

import math

import numpy as np
import pytest

from harness.errors import SpecError
from harness.measure import latency as L
from harness.records import RequestRecord

ONE_TO_TEN = np.arange(1, 11, dtype=np.float64)
MS = 1_000_000


def test_percentiles_of_one_to_ten_known_answers() -> None:
    # linear interpolation at rank (n - 1) * p / 100 over 1..10
    got = L.percentiles(ONE_TO_TEN, (50, 90, 95, 99, 99.9, 100, 0.5))
    assert got == pytest.approx({"p50": 5.5, "p90": 9.1, "p95": 9.55, "p99": 9.91, "p99.9": 9.991, "p100": 10.0,
                                 "p0.5": 1.045})
    assert list(got) == ["p50", "p90", "p95", "p99", "p99.9", "p100", "p0.5"]


def test_percentiles_of_nothing_are_nan() -> None:
    got = L.percentiles(np.zeros(0), (50, 95))
    assert list(got) == ["p50", "p95"] and all(math.isnan(v) for v in got.values())


def test_stats_keeps_its_stored_names_and_takes_others() -> None:
    s = L.stats(ONE_TO_TEN)
    assert s == pytest.approx({"p50": 5.5, "p90": 9.1, "p99": 9.91, "mean": 5.5, "max": 10.0, "n": 10.0})
    assert list(s) == list(L.STATS)
    assert L.stats(ONE_TO_TEN, (95,)) == pytest.approx({"p95": 9.55, "mean": 5.5, "max": 10.0, "n": 10.0})
    empty = L.stats(np.zeros(0), (95,))
    assert empty["n"] == 0 and math.isnan(empty["p95"]) and math.isnan(empty["mean"])


def _rec(rid: str, ttft_ms: int) -> RequestRecord:
    return RequestRecord(rid=rid, send_ns=0, done_ns=(ttft_ms + 10) * MS,
                         event_ns=np.array([ttft_ms * MS, (ttft_ms + 10) * MS], dtype=np.int64),
                         event_tokens=np.array([1, 2], dtype=np.int32))


def test_columns_at_names_the_chosen_percentiles() -> None:
    recs = [_rec(f"r{i}", 10 * i) for i in range(1, 11)]  # TTFT 10, 20, ..., 100 ms
    cols = L.columns_at(recs, (50, 95))
    assert cols["ttft_p50_s"] == pytest.approx(0.055) and cols["ttft_p95_s"] == pytest.approx(0.0955)
    assert cols["ttft_mean_s"] == pytest.approx(0.055) and cols["ttft_n"] == 10
    assert cols["itl_bench_p95_s"] == pytest.approx(0.010)
    assert "ttft_p99_s" not in cols
    # the stored columns are unchanged
    assert set(L.columns(recs)) >= {"ttft_p50_s", "ttft_p90_s", "ttft_p99_s", "itl_bench_p99_s"}
    assert not any("p95" in k for k in L.columns(recs))


@pytest.mark.parametrize(("text", "want"), [("50,90,99", (50.0, 90.0, 99.0)), ("99, 50", (50.0, 99.0)),
                                            ("95", (95.0,)), ("99.9,100,50,50", (50.0, 99.9, 100.0))])
def test_parse_percentiles(text: str, want: tuple[float, ...]) -> None:
    assert L.parse_percentiles(text) == want


@pytest.mark.parametrize(("text", "why"), [("", "comma-separated"), ("50,,99", "comma-separated"),
                                           ("50,abc", "'abc' is not a number"), ("0", "outside (0, 100]"),
                                           ("101", "outside (0, 100]"), ("-5", "outside (0, 100]"),
                                           ("nan", "outside (0, 100]"), ("inf", "outside (0, 100]"),
                                           (",".join(str(i) for i in range(1, 14)), "at most 12")])
def test_bad_percentiles_name_the_flag(text: str, why: str) -> None:
    with pytest.raises(SpecError) as exc:
        L.parse_percentiles(text)
    assert exc.value.message.startswith("--percentiles ") and why in exc.value.message
    assert exc.value.hint and "--percentiles" in exc.value.hint
