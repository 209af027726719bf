"""The SLA search planner (harness.measure.sla): literal pass/fail sequences and a monotone-oracle property."""

from __future__ import annotations

import math

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from harness.measure.sla import Bracket, Probe, SearchSettings, bracket, end_of, judge, next_rate


def _run(s: SearchSettings, oracle: list[bool]) -> list[Probe]:
    """Drive the planner with a literal sequence of verdicts."""
    probes: list[Probe] = []
    verdicts = iter(oracle)
    while (rate := next_rate(probes, s)) is not None:
        probes.append(Probe(rate, next(verdicts)))
    return probes


def test_double_then_bisect_known_answer() -> None:
    s = SearchSettings(start_req_s=1, precision=0.5)
    probes = _run(s, [True, True, True, False, True, False, True])
    assert [p.rate_req_s for p in probes] == [1, 2, 4, 8, 6, 7, 6.5]
    assert bracket(probes) == Bracket(6.5, 7)
    assert end_of(probes, s) == "converged"


def test_first_probe_fails_halves() -> None:
    s = SearchSettings(start_req_s=8, precision=1)
    probes = _run(s, [False, False, True, True])
    assert [p.rate_req_s for p in probes] == [8, 4, 2, 3]
    assert bracket(probes) == Bracket(3, 4)
    assert end_of(probes, s) == "converged"


def test_relative_precision() -> None:
    s = SearchSettings(start_req_s=10, precision=0.1, relative=True)
    probes = _run(s, [True, False, True, True, True])
    assert [p.rate_req_s for p in probes] == [10, 20, 15, 17.5, 18.75]
    assert bracket(probes).width(relative=True) == pytest.approx(1.25 / 18.75)
    assert end_of(probes, s) == "converged"


def test_probe_cap_ends_unconverged() -> None:
    s = SearchSettings(start_req_s=1, precision=0.01, max_probes=3)
    probes = _run(s, [True, True, False])
    assert [p.rate_req_s for p in probes] == [1, 2, 4]
    assert end_of(probes, s) == "probe-cap"
    assert bracket(probes) == Bracket(2, 4)
    assert next_rate(probes, s) is None


def test_max_rate_passed_ends() -> None:
    s = SearchSettings(start_req_s=3, precision=0.5, max_rate_req_s=10)
    probes = _run(s, [True, True, True])
    assert [p.rate_req_s for p in probes] == [3, 6, 10]
    assert end_of(probes, s) == "max-rate-passed"
    assert bracket(probes) == Bracket(10, None)


def test_non_monotone_uses_lowest_failure() -> None:
    b = bracket([Probe(1, True), Probe(4, False), Probe(2, True), Probe(3, False), Probe(5, True)])
    assert b == Bracket(2, 3, monotone=False)
    assert math.isinf(Bracket(None, 3).width(False))


def test_settings_refused() -> None:
    with pytest.raises(ValueError, match="precision"):
        SearchSettings(start_req_s=1, precision=0)
    with pytest.raises(ValueError, match="max_rate"):
        SearchSettings(start_req_s=5, precision=1, max_rate_req_s=2)


def test_judge_known_answers() -> None:
    ok = {"status": "ok", "ttft_p99_s": 0.2, "tpot_bench_p99_s": 0.01, "e2e_p99_s": 1.0}
    assert judge([ok, ok], {"ttft": 0.25, "tpot": None, "e2e": None}) == (True, [])
    slow = ok | {"ttft_p99_s": 0.3}
    assert judge([ok, slow], {"ttft": 0.25, "e2e": 2.0}) == (False, ["ttft"])
    assert judge([ok | {"status": "failed"}], {"ttft": 0.25}) == (False, ["round-not-ok"])
    assert judge([ok | {"e2e_p99_s": math.nan}], {"e2e": 5.0}) == (False, ["e2e"])
    assert judge([], {"ttft": 1.0}) == (False, ["no-rounds"])
    assert judge([ok], {"ttft": 0.2}) == (True, [])  # at the limit passes


@settings(max_examples=300, deadline=None)
@given(threshold=st.floats(0.05, 500), start=st.floats(0.1, 100), precision=st.floats(0.01, 2),
       relative=st.booleans(), cap=st.integers(1, 60))
def test_bracket_contains_threshold_of_monotone_oracle(threshold: float, start: float, precision: float,
                                                      relative: bool, cap: int) -> None:
    s = SearchSettings(start_req_s=start, precision=precision, relative=relative, max_probes=cap)
    probes: list[Probe] = []
    while (rate := next_rate(probes, s)) is not None:
        assert rate not in [p.rate_req_s for p in probes]
        probes.append(Probe(rate, rate <= threshold))
    assert len(probes) <= cap
    b = bracket(probes)
    assert b.monotone
    if b.lo_req_s is not None:
        assert b.lo_req_s <= threshold
    if b.hi_req_s is not None:
        assert threshold < b.hi_req_s
    end = end_of(probes, s)
    assert end in ("converged", "probe-cap")
    if end == "converged":
        assert b.width(relative) <= precision
    if cap >= 60:
        assert end == "converged"


def test_resolution_limit_ends_when_no_rate_fits_inside() -> None:
    s = SearchSettings(start_req_s=100000, precision=1e-9)
    probes = [Probe(100000, True), Probe(100001, False)]
    assert end_of(probes, s) == "resolution-limit" and next_rate(probes, s) is None
    assert next_rate([Probe(100000, True), Probe(100002, False)], s) == 100001
