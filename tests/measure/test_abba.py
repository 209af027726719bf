"""ABBA arithmetic (known answers) and profile identity checks."""

from __future__ import annotations

import math

import pytest

from harness.measure.abba import LegSummary, match_outputs, profile_differences, summarize


def legs(a1: list[float], b1: list[float], b2: list[float], a2: list[float]) -> dict[str, LegSummary]:
    return {k: LegSummary(k, tuple(v), tuple(x / 2 for x in v))
            for k, v in (("A1", a1), ("B1", b1), ("B2", b2), ("A2", a2))}


def test_report_section_8_4_pilot_numbers() -> None:
    # leg medians from the report: 1047.763 / 1060.206 / 1061.203 / 1041.459
    r = summarize(legs([1047.763], [1060.206], [1061.203], [1041.459]))
    assert r.control_mean == pytest.approx(1044.611)
    assert r.candidate_mean == pytest.approx(1060.7045)
    assert r.change_pct == pytest.approx(1.541, abs=0.001)
    assert r.drift_pct == pytest.approx(-0.602, abs=0.001)
    assert r.spread_pct == pytest.approx(0.094, abs=0.001)
    assert r.separated
    assert r.verdict == "faster"


def test_report_section_8_3_c1_screen() -> None:
    r = summarize(legs([79.558], [87.583], [87.504], [79.151]))
    assert r.change_pct == pytest.approx(10.32, abs=0.01)


def test_drift_larger_than_effect_is_inconclusive() -> None:
    r = summarize(legs([100.0, 101.0], [103.5, 104.5], [103.0, 104.0], [103.0, 104.0]))
    assert abs(r.drift_pct) > abs(r.change_pct)
    assert r.verdict == "inconclusive"
    assert "not clearly larger than the drift" in r.reason
    # an effect between one and two times the drift is still inconclusive
    r2 = summarize(legs([100.0], [102.0], [102.0], [101.0]))
    assert abs(r2.drift_pct) < r2.change_pct < 2 * abs(r2.drift_pct) and r2.verdict == "inconclusive"


def test_identical_is_no_difference_and_missing_leg_inconclusive() -> None:
    r = summarize(legs([100.0, 100.1], [100.05, 100.0], [100.1, 100.0], [100.0, 100.05]))
    assert r.verdict == "no-difference"
    partial = {k: v for k, v in legs([1.0], [2.0], [2.0], [1.0]).items() if k != "A2"}
    r2 = summarize(partial)
    assert r2.verdict == "inconclusive" and math.isnan(r2.change_pct) and "A2" in r2.reason


def test_slower_candidate_separation() -> None:
    r = summarize(legs([100.0, 101.0], [90.0, 91.0], [90.5, 90.0], [100.5, 100.0]))
    assert r.verdict == "slower" and r.separated


def test_match_outputs() -> None:
    k1, k2 = (0, 0, "c0"), (0, 1, "c1")
    out = {"A1": {k1: "h", k2: "x"}, "B1": {k1: "h", k2: "y"}, "B2": {k1: "h", k2: "y"},
           "A2": {k1: "h", k2: "x"}}
    m = match_outputs(out)
    assert (m.compared, m.identical_all_legs, m.differing) == (2, 1, 1)
    assert (m.identical_within_control, m.identical_within_candidate, m.identical_across_arms) == (2, 2, 1)


def test_profile_differences_declared_and_not() -> None:
    a = {"name": "a", "backend": "sim", "sim": {"step_factor": 1.0, "profile": "p"}, "env": {}, "tp_size": 8}
    b = {"name": "b", "backend": "sim", "sim": {"step_factor": 0.9, "profile": "p"}, "env": {"X": "1"},
         "tp_size": 4}
    declared, undeclared = profile_differences(a, b, ["sim.step_factor", "env"])
    # flat profiles and keys (spec format 1) are compared and named in the sectioned spelling
    assert declared == ["launch.env.X: control '<absent>', candidate '1'",
                        "sim.step_factor: control 1.0, candidate 0.9"]
    assert undeclared == ["identity.tp_size: control 8, candidate 4"]


def test_profile_differences_between_a_flat_and_a_sectioned_profile() -> None:
    old = {"name": "old", "backend": "sim", "port": 30001, "startup_timeout_s": 60, "env": {"NCCL_ALGO": "ring"},
           "tp_size": 8}
    new = {"name": "new", "backend": "sim", "launch": {"port": 30002, "startup_timeout_s": 90,
                                                       "env": {"NCCL_ALGO": "tree"}}, "identity": {"tp_size": 8}}
    assert profile_differences(old, new, ["launch.env.NCCL_ALGO"]) == (
        ["launch.env.NCCL_ALGO: control 'ring', candidate 'tree'"], [])
    assert profile_differences(old, new, []) == ([], ["launch.env.NCCL_ALGO: control 'ring', candidate 'tree'"])
