"""The comparisons guard refuses arithmetic across claims, protocols and experiments."""

from __future__ import annotations

import pytest

from harness.errors import EvidenceError
from harness.evidence.guard import LabeledPercent, LabeledRate, add_percentages, change_pct, compound_percentages


def rate(v: float, claim: str = "native-ar", proto: str = "formal", **kw: object) -> LabeledRate:
    return LabeledRate(v, claim, proto, **kw)  # type: ignore[arg-type]


def test_ratio_same_labels() -> None:
    r = change_pct(rate(110.0, experiment="e"), rate(100.0, experiment="e"))
    assert r.value == pytest.approx(10.0) and r.experiment == "e"


def test_ratio_refuses_claim_classes_citing_rule_1() -> None:
    with pytest.raises(EvidenceError, match="rule 1"):
        change_pct(rate(1127.48, "speculative-full-target"), rate(1044.32))


def test_ratio_refuses_protocols_boundaries_and_sim() -> None:
    with pytest.raises(EvidenceError, match="rule 3"):
        change_pct(rate(1060.7, proto="abba-screen"), rate(1041.78))
    with pytest.raises(EvidenceError, match="boundar"):
        change_pct(rate(1.0, boundary="http"), rate(1.0))
    with pytest.raises(EvidenceError, match="simulated"):
        change_pct(rate(1.0, simulated=True), rate(1.0))


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


# --- issue 26: a speculative rate over a native-AR rate only inside one matched AR/SD run ---


def test_matched_sd_legs_give_a_speedup() -> None:
    sd = rate(1127.48, "speculative-full-target", "matched-sd", archive_id="m1", experiment="m1")
    ar = rate(1044.32, "native-ar", "matched-sd", archive_id="m1", experiment="m1")
    r = change_pct(sd, ar)
    assert r.value == pytest.approx((1127.48 / 1044.32 - 1.0) * 100.0)  # +7.963%
    assert r.value == pytest.approx(7.963, abs=1e-3) and r.experiment == "m1"
    assert change_pct(ar, sd).value == pytest.approx((1044.32 / 1127.48 - 1.0) * 100.0)


@pytest.mark.parametrize(("sd", "ar"), [
    # two different matched runs
    (rate(1127.48, "speculative-full-target", "matched-sd", archive_id="m1"),
     rate(1044.32, "native-ar", "matched-sd", archive_id="m2")),
    # a matched SD leg over a formal native record of the same archive id
    (rate(1127.48, "speculative-full-target", "matched-sd", archive_id="m1"),
     rate(1044.32, "native-ar", "formal", archive_id="m1")),
    # two formal results of one archive id are still not a matched run
    (rate(1127.48, "speculative-full-target", "formal", archive_id="m1"),
     rate(1044.32, "native-ar", "formal", archive_id="m1")),
    # no archive named: never matched
    (rate(1127.48, "speculative-full-target", "matched-sd"), rate(1044.32, "native-ar", "matched-sd")),
])
def test_speculative_over_native_refused_outside_one_matched_run(sd: LabeledRate, ar: LabeledRate) -> None:
    with pytest.raises(EvidenceError, match="only inside one matched AR/SD run") as exc:
        change_pct(sd, ar)
    assert exc.value.hint is not None and "matched-sd" in exc.value.hint


def test_matched_legs_still_need_one_boundary_origin_and_counting() -> None:
    sd = rate(1127.48, "speculative-full-target", "matched-sd", archive_id="m1")
    with pytest.raises(EvidenceError, match="boundar"):
        change_pct(sd, rate(1044.32, "native-ar", "matched-sd", archive_id="m1", boundary="http"))
    with pytest.raises(EvidenceError, match="simulated"):
        change_pct(sd, rate(1044.32, "native-ar", "matched-sd", archive_id="m1", simulated=True))
    with pytest.raises(EvidenceError, match="approximate token counts"):
        change_pct(sd, rate(1044.32, "native-ar", "matched-sd", archive_id="m1", counts="approximate"))


def test_approximate_target_never_over_native_even_matched() -> None:
    with pytest.raises(EvidenceError, match="approximate verification"):
        change_pct(rate(1500.0, "speculative-approximate", "matched-sd", archive_id="m1"),
                  rate(1044.32, "native-ar", "matched-sd", archive_id="m1"))


def test_comparison_across_claims_stays_refused_and_names_the_matched_protocol() -> None:
    from harness.evidence.guard import check_comparable

    sd = rate(1127.48, "speculative-full-target", "matched-sd", archive_id="m1")
    ar = rate(1044.32, "native-ar", "matched-sd", archive_id="m1")
    with pytest.raises(EvidenceError, match="rule 1") as exc:
        check_comparable(sd, ar)
    assert exc.value.hint is not None and "matched-sd" in exc.value.hint
    with pytest.raises(EvidenceError, match="rule 1"):  # full-target vs approximate: never
        change_pct(sd, rate(1500.0, "speculative-approximate", "matched-sd", archive_id="m1"))
