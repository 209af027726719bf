"""The trace-replay rules (harness.evidence.rules.replay) on hand-built archive data."""

from __future__ import annotations

from typing import Any

from harness.evidence.findings import ArchiveData
from harness.evidence.rules import check, rule_replay_cache, rule_replay_saturated, rule_replay_schedule


def data(**row: Any) -> ArchiveData:
    base = {"replay_id": "replay", "n_requests": 20, "late_requests": 0, "schedule_kept": True,
            "lateness_tolerance_s": 0.05, "client_lateness_max_s": 0.004, "client_lateness_p99_s": 0.003,
            "expected_cached_tokens": 1000, "reported_cached_tokens": 1000, "cached_reported_requests": 20,
            "cached_mismatch_requests": 0, "cached_tolerance_pct": 5.0, "cached_agree": True}
    return ArchiveData("a1", {"protocol_class": "trace-replay"}, {}, extra={"replay": [base | row]})


def test_a_kept_schedule_and_agreeing_cache_give_no_finding() -> None:
    assert rule_replay_schedule(data()) == [] and rule_replay_cache(data()) == []
    other = ArchiveData("a1", {"protocol_class": "rate-sweep"}, {}, extra={"replay": [{"schedule_kept": False}]})
    assert not {f.rule for f in check(other)} & {"replay-schedule", "replay-cache", "replay-saturated"}  # kind


def test_a_late_request_blocks_the_run() -> None:
    (f,) = rule_replay_schedule(data(late_requests=2, schedule_kept=False, client_lateness_max_s=0.2))
    assert (f.rule, f.severity, f.scope, f.rows) == ("replay-schedule", "blocking", "run", ("replay",))
    assert f.message.startswith("2 of 20 requests were sent more than 50 ms after their trace time (client "
                                "lateness max 200.0 ms")


def test_cache_disagreement_blocks_and_no_report_warns() -> None:
    (f,) = rule_replay_cache(data(reported_cached_tokens=700, cached_mismatch_requests=3, cached_agree=False))
    assert (f.rule, f.severity) == ("replay-cache", "blocking")
    assert f.message.startswith("the server reported 700 cached prompt tokens, the trace implies 1000 (tolerance 5%")
    (g,) = rule_replay_cache(data(reported_cached_tokens=None, cached_reported_requests=0, cached_agree=False))
    assert g.severity == "warning" and "reported no cached_tokens" in g.message


def test_registered() -> None:
    rules = {f.rule for f in check(data(schedule_kept=False, late_requests=1, cached_agree=False))}
    assert {"replay-schedule", "replay-cache"} <= rules


def test_a_saturated_replay_warns_with_its_slopes() -> None:
    assert rule_replay_saturated(data(saturated=False)) == [] and rule_replay_saturated(data(saturated=None)) == []
    (f,) = rule_replay_saturated(data(saturated=True, inflight_slope_req_per_s=12.5, inflight_slope_se_req_per_s=0.5,
                                      ttft_slope_s_per_s=0.8, ttft_slope_se_s_per_s=0.05))
    assert (f.rule, f.severity, f.rows) == ("replay-saturated", "warning", ("replay",))
    assert f.message.startswith("replay: over-saturated: in flight rose 12.50 +/- 0.50 requests/s and TTFT 800 +/- "
                                "50 ms per s")
