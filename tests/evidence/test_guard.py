"""The comparisons guard refuses arithmetic across claims, protocols and experiments."""

from __future__ import annotations

import pytest

from harness.errors import EvidenceError
from harness.evidence.guard import LabeledPercent, LabeledRate, add_percentages, compound_percentages, ratio_pct


def rate(v: float, claim: str = "native-ar", proto: str = "formal", **kw: object) -> LabeledRate:
    return LabeledRate(v, claim, proto, **kw)  # type: ignore[arg-type]


def test_ratio_same_labels() -> None:
    r = ratio_pct(rate(110.0, experiment="e"), rate(100.0, experiment="e"))
    assert r.value == pytest.approx(10.0) and r.experiment == "e"


def test_ratio_refuses_claim_classes_citing_rule_1() -> None:
    with pytest.raises(EvidenceError, match="rule 1"):
        ratio_pct(rate(1127.48, "speculative-full-target"), rate(1044.32))


def test_ratio_refuses_protocols_boundaries_and_sim() -> None:
    with pytest.raises(EvidenceError, match="rule 3"):
        ratio_pct(rate(1060.7, proto="abba-screen"), rate(1041.78))
    with pytest.raises(EvidenceError, match="boundar"):
        ratio_pct(rate(1.0, boundary="http"), rate(1.0))
    with pytest.raises(EvidenceError, match="simulated"):
        ratio_pct(rate(1.0, simulated=True), rate(1.0))


def test_percentages_from_different_experiments_refused() -> None:
    tiles = LabeledPercent(259.9, "empty-c4-tiles-abba")
    gemv = LabeledPercent(10.32, "c1-gemv-abba")
    with pytest.raises(EvidenceError, match="rule 3: percentages"):
        add_percentages([tiles, gemv])
    with pytest.raises(EvidenceError, match="multiply"):
        compound_percentages([tiles, gemv])
    same = compound_percentages([LabeledPercent(10.0, "x"), LabeledPercent(10.0, "x")])
    assert same.value == pytest.approx(21.0)
    assert add_percentages([LabeledPercent(1.0, "x"), LabeledPercent(2.0, "x")]).value == 3.0


def test_approximate_counts_never_compare_with_exact() -> None:
    from harness.evidence.guard import LabeledRate, check_comparable

    exact = LabeledRate(100.0, "native-ar", "formal")
    approx = LabeledRate(100.0, "native-ar", "formal", counts="approximate")
    check_comparable(approx, LabeledRate(90.0, "native-ar", "formal", counts="approximate"))
    with pytest.raises(EvidenceError, match="approximate token counts never share a claim"):
        check_comparable(exact, approx)
