"""Trace-replay measures (harness.measure.replay) with literal numbers: offsets, lateness, cache figures."""

from __future__ import annotations

import math

import numpy as np
import pytest

from harness.measure.replay import cache_rows, cache_stats, offsets_s, replay_row, schedule_stats
from harness.records import RequestRecord

MS = 1_000_000


def rec(rid: str, send_ms: int, done_ms: int, prompt: int, cached: int | None, error: str | None = None
        ) -> RequestRecord:
    return RequestRecord(rid=rid, send_ns=send_ms * MS, done_ns=done_ms * MS,
                         event_ns=np.asarray([(send_ms + 10) * MS, done_ms * MS], dtype=np.int64),
                         event_tokens=np.asarray([1, 2], dtype=np.int32), prompt_tokens=prompt, cached_tokens=cached,
                         error=error)


def test_offsets_divide_the_trace_time_by_the_speed() -> None:
    assert offsets_s([1000, 1000, 1500, 3000], 2.0) == [0.0, 0.0, 0.25, 1.0]
    assert offsets_s([], 1.0) == []
    with pytest.raises(ValueError, match="speed"):
        offsets_s([0], 0.0)


def test_lateness_leaves_out_the_cap_wait() -> None:
    sched = [{"lag_s": 0.001, "client_lag_s": 0.001, "cap_wait_s": 0.0},
             {"lag_s": 0.300, "client_lag_s": 0.010, "cap_wait_s": 0.290},
             {"lag_s": 0.120, "client_lag_s": 0.120, "cap_wait_s": 0.0}]
    s = schedule_stats(sched, 0.1)
    assert s["late_requests"] == 1 and s["schedule_kept"] is False and s["capped_requests"] == 1
    assert s["lateness_max_s"] == 0.3 and s["client_lateness_max_s"] == 0.12 and s["lateness_p50_s"] == 0.12
    assert schedule_stats(sched, 0.2)["schedule_kept"] is True
    assert schedule_stats([], 0.1)["schedule_kept"] is True


def test_cache_totals_ratios_and_tolerance() -> None:
    recs = [rec("a", 0, 100, 1000, 0), rec("b", 10, 200, 1000, 500), rec("c", 20, 300, 2000, 1490),
            rec("d", 30, 40, 800, None, error="http 500")]
    rows = cache_rows(recs, [0, 512, 1500, 700])
    s = cache_stats(rows, 5.0)
    assert (s["prompt_tokens"], s["expected_cached_tokens"], s["reported_cached_tokens"]) == (4000, 2012, 1990)
    assert s["cached_mismatch_requests"] == 2 and s["cached_reported_requests"] == 3  # the failed one is left out
    assert s["expected_hit_ratio"] == 2012 / 4000 and s["reported_hit_ratio"] == 1990 / 4000
    assert s["cached_agree"] is True  # 22 tokens off, 5% of 2012 is 100.6
    assert cache_stats(rows, 1.0)["cached_agree"] is False  # 1% is 20.12
    none = cache_stats(cache_rows([rec("a", 0, 1, 10, None)], [5]), 5.0)
    assert none["reported_cached_tokens"] is None and none["cached_agree"] is False
    assert math.isnan(none["reported_hit_ratio"])


def test_replay_row_has_throughput_schedule_and_cache() -> None:
    recs = [rec("a", 0, 1000, 100, 0), rec("b", 500, 2000, 100, 50)]
    sched = [{"lag_s": 0.0, "client_lag_s": 0.0, "cap_wait_s": 0.0}, {"lag_s": 0.002, "client_lag_s": 0.002}]
    row = replay_row(recs, start_ns=0, sched=sched, expected=[0, 50], lateness_tolerance_s=0.05,
                     cached_tolerance_pct=5.0, status="ok", header={"speed": 1.0})
    assert row["replay_id"] == "replay" and row["n_ok"] == 2 and row["duration_s"] == 2.0
    assert row["output_throughput_tok_s"] == 2.0 and row["schedule_kept"] is True and row["cached_agree"] is True
    assert "goodput_req_s" not in row and row["speed"] == 1.0 and row["ttft_p50_s"] == pytest.approx(0.01)
