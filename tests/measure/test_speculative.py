"""Known answers for harness.measure.speculative (issue 26): counts from every wire alias, cycle time
in the resident window, the report's break-even rule and the record note's target arithmetic."""

from __future__ import annotations

import math

import pytest
from hypothesis import given
from hypothesis import strategies as st

from harness.errors import MeasurementError, SpecError
from harness.measure import speculative as sp

# --- SGLang meta_info --------------------------------------------------------------------------


def test_sglang_new_names() -> None:
    meta = {"completion_tokens": 101, "spec_verify_ct": 40, "spec_num_correct_drafts": 60,
            "spec_num_proposed_drafts": 120, "spec_accept_length": 2.525, "spec_accept_rate": 0.5,
            "spec_correct_drafts_histogram": [10, 10, 10, 10]}
    c = sp.sglang_counts(meta)
    assert c == sp.SpecCounts(steps=40, proposed=120, accepted=60, completion_tokens=101, source="sglang-meta-info")
    assert c.tokens_per_step == 2.5  # 1 + 60/40, bonus included
    assert c.acceptance_rate == 0.5  # 60/120, bonus excluded
    assert c.sglang_accept_length == 2.525  # 101/40 counts the prefill token too


def test_sglang_old_names_recompute_the_zero_derived_fields() -> None:
    meta = {"completion_tokens": 31, "spec_verify_ct": 10, "spec_accept_token_num": 20,
            "spec_draft_token_num": 30, "spec_accept_length": 0, "spec_accept_rate": 0,
            "spec_accept_histogram": [0, 0, 10, 0]}
    c = sp.sglang_counts(meta)
    assert c is not None
    assert (c.steps, c.proposed, c.accepted) == (10, 30, 20)
    assert c.tokens_per_step == 3.0
    assert c.acceptance_rate == pytest.approx(2 / 3)
    assert c.sglang_accept_length == 3.1


def test_sglang_alias_pair_and_integral_floats() -> None:
    c = sp.sglang_counts({"completion_tokens": 9.0, "spec_verify_ct": 4.0, "spec_accepted_drafts": 4,
                          "spec_proposed_drafts": 8})
    assert c is not None
    assert (c.steps, c.proposed, c.accepted, c.completion_tokens) == (4, 8, 4, 9)
    assert c.tokens_per_step == 2.0


def test_sglang_histogram_gives_the_accepted_count_when_the_count_is_absent() -> None:
    c = sp.sglang_counts({"completion_tokens": 20, "spec_verify_ct": 6, "spec_num_proposed_drafts": 18,
                          "spec_correct_drafts_histogram": [1, 2, 0, 3]})
    assert c is not None and c.accepted == 0 * 1 + 1 * 2 + 2 * 0 + 3 * 3 == 11


@pytest.mark.parametrize("meta", [{"completion_tokens": 50}, {"completion_tokens": 50, "spec_verify_ct": 0},
                                  {"spec_verify_ct": None}])
def test_sglang_native_ar_has_no_counts(meta: dict[str, object]) -> None:
    assert sp.sglang_counts(meta) is None


@pytest.mark.parametrize(("meta", "word"), [
    ({"spec_verify_ct": 5, "spec_num_proposed_drafts": 15}, "accepted-draft"),
    ({"spec_verify_ct": 5, "spec_num_correct_drafts": 3}, "proposed-draft"),
    ({"spec_verify_ct": 5, "spec_num_correct_drafts": 16, "spec_num_proposed_drafts": 15}, "16 drafts accepted"),
    ({"spec_verify_ct": 5.5, "spec_num_correct_drafts": 1, "spec_num_proposed_drafts": 15}, "whole count"),
    ({"spec_verify_ct": True, "spec_num_correct_drafts": 1, "spec_num_proposed_drafts": 15}, "not a number"),
    ({"spec_verify_ct": 5, "spec_num_correct_drafts": -1, "spec_num_proposed_drafts": 15}, "negative"),
])
def test_sglang_impossible_counts_are_refused(meta: dict[str, object], word: str) -> None:
    with pytest.raises(MeasurementError, match=word):
        sp.sglang_counts(meta)


def test_zero_denominators_give_nan() -> None:
    c = sp.SpecCounts(steps=0, proposed=0, accepted=0, completion_tokens=0, source="stream")
    assert math.isnan(c.tokens_per_step) and math.isnan(c.acceptance_rate) and math.isnan(c.sglang_accept_length)
    unknown_tokens = sp.SpecCounts(steps=10, proposed=30, accepted=9, completion_tokens=0, source="vllm-metrics-delta")
    assert math.isnan(unknown_tokens.sglang_accept_length)
    assert unknown_tokens.tokens_per_step == 1.9


# --- vLLM ----------------------------------------------------------------------------------------

SPEC = {"mean_acceptance_length": 2.8, "draft_acceptance_rate": 0.6, "acceptance_histogram": [2, 2, 2, 4],
        "num_spec_steps": 10, "num_accepted_draft_tokens": 18, "num_draft_tokens": 30, "num_spec_tokens": 3}


@pytest.mark.parametrize("metrics", [SPEC, {"time_to_first_token_ms": 12.0, "speculative_decoding": SPEC}])
def test_vllm_request_counts(metrics: dict[str, object]) -> None:
    c = sp.vllm_request_counts(metrics, 29)
    assert c == sp.SpecCounts(steps=10, proposed=30, accepted=18, completion_tokens=29, source="vllm-request-metrics")
    assert c.tokens_per_step == 2.8 and c.acceptance_rate == 0.6


def test_vllm_request_counts_absent_or_empty() -> None:
    assert sp.vllm_request_counts({"speculative_decoding": None}, 5) is None
    assert sp.vllm_request_counts({}, 5) is None
    assert sp.vllm_request_counts({**SPEC, "num_spec_steps": 0}, 1) is None
    with pytest.raises(MeasurementError, match="num_draft_tokens"):
        sp.vllm_request_counts({"num_spec_steps": 3, "num_accepted_draft_tokens": 1}, 5)


BEFORE = {sp.VLLM_DRAFTS: 1000.0, sp.VLLM_DRAFT_TOKENS: 3000.0, sp.VLLM_ACCEPTED: 1500.0,
          f'{sp.VLLM_PER_POS}{{position="0"}}': 700.0, f'{sp.VLLM_PER_POS}{{position="1"}}': 500.0,
          f'{sp.VLLM_PER_POS}{{position="2"}}': 300.0}
AFTER = {sp.VLLM_DRAFTS: 1100.0, sp.VLLM_DRAFT_TOKENS: 3300.0, sp.VLLM_ACCEPTED: 1644.0,
         f'{sp.VLLM_PER_POS}{{position="0"}}': 780.0, f'{sp.VLLM_PER_POS}{{position="1"}}': 548.0,
         f'{sp.VLLM_PER_POS}{{position="2"}}': 316.0}


def test_vllm_counter_delta() -> None:
    c = sp.vllm_counter_delta(BEFORE, AFTER, completion_tokens=250)
    assert c == sp.SpecCounts(steps=100, proposed=300, accepted=144, completion_tokens=250, source="vllm-metrics-delta")
    assert c.tokens_per_step == 2.44
    assert c.acceptance_rate == 0.48


def test_vllm_counter_reset_missing_or_idle_gives_none() -> None:
    reset = {**AFTER, sp.VLLM_DRAFTS: 50.0}  # the server restarted between the scrapes
    assert sp.vllm_counter_delta(BEFORE, reset) is None
    assert sp.vllm_counter_delta({}, AFTER) is None
    assert sp.vllm_counter_delta(BEFORE, BEFORE) is None
    assert sp.vllm_counter_delta(BEFORE, {**AFTER, sp.VLLM_ACCEPTED: math.nan}) is None


def test_vllm_position_acceptance_is_conditional() -> None:
    # drafts 100; position 0 accepted 80, position 1 48, position 2 16: p = 0.8, 0.6, 1/3
    p = sp.vllm_position_acceptance(BEFORE, AFTER)
    assert p == pytest.approx((0.8, 0.6, 16 / 48))
    assert sp.vllm_position_acceptance(BEFORE, {**AFTER, f'{sp.VLLM_PER_POS}{{position="1"}}': 1.0}) is None
    no_reach = {**AFTER, f'{sp.VLLM_PER_POS}{{position="1"}}': 500.0, f'{sp.VLLM_PER_POS}{{position="2"}}': 300.0}
    got = sp.vllm_position_acceptance(BEFORE, no_reach)
    assert got is not None and got[:2] == (0.8, 0.0) and math.isnan(got[2])


# --- stream and sums -----------------------------------------------------------------------------

def test_stream_counts_one_event_per_step() -> None:
    c = sp.stream_counts([1, 3, 1, 4], draft_tokens=3)  # prefill token, then steps of 3, 1, 4 tokens
    assert c == sp.SpecCounts(steps=3, proposed=9, accepted=5, completion_tokens=9, source="stream")
    assert sp.stream_counts([1], draft_tokens=3) is None
    with pytest.raises(MeasurementError, match="carried 5 tokens"):
        sp.stream_counts([1, 2, 5], draft_tokens=3)


def test_sum_counts() -> None:
    a = sp.SpecCounts(10, 30, 12, 23, "sglang-meta-info")
    b = sp.SpecCounts(5, 15, 9, 15, "sglang-meta-info")
    total = sp.sum_counts([a, b])
    assert total == sp.SpecCounts(15, 45, 21, 38, "sglang-meta-info")
    assert total.tokens_per_step == 2.4
    assert sp.sum_counts([]) is None
    with pytest.raises(MeasurementError, match="different sources"):
        sp.sum_counts([a, sp.SpecCounts(1, 3, 1, 3, "vllm-metrics-delta")])


# --- expected tokens per step --------------------------------------------------------------------

def test_expected_tokens_per_step_known_answers() -> None:
    assert sp.expected_tokens_per_step([0.8, 0.6, 0.4]) == pytest.approx(1 + 0.8 + 0.48 + 0.192)  # 2.472
    assert sp.expected_tokens_per_step([]) == 1.0
    assert sp.expected_tokens_per_step([1.0, 1.0, 1.0]) == 4.0
    assert sp.expected_tokens_per_step([0.0, 1.0]) == 1.0
    assert sp.expected_tokens_per_step([0.7768]) == pytest.approx(1.7768)  # the record note's MTP1


@pytest.mark.parametrize("bad", [[1.2], [-0.1], [math.nan], [0.5, math.inf]])
def test_expected_tokens_per_step_refuses_non_probabilities(bad: list[float]) -> None:
    with pytest.raises(SpecError, match="not in"):
        sp.expected_tokens_per_step(bad)


probs = st.lists(st.floats(min_value=0.0, max_value=1.0), max_size=8)


@given(probs)
def test_expected_tokens_per_step_is_between_1_and_k_plus_1(p: list[float]) -> None:
    e = sp.expected_tokens_per_step(p)
    assert 1.0 <= e <= len(p) + 1 + 1e-12


@given(probs.filter(bool), st.data())
def test_expected_tokens_per_step_is_monotone_in_each_p(p: list[float], data: st.DataObject) -> None:
    i = data.draw(st.integers(min_value=0, max_value=len(p) - 1))
    higher = data.draw(st.floats(min_value=p[i], max_value=1.0))
    raised = [*p[:i], higher, *p[i + 1:]]
    assert sp.expected_tokens_per_step(raised) >= sp.expected_tokens_per_step(p) - 1e-12


# --- cycle time within the resident window -------------------------------------------------------

def test_implied_cycle_and_window_steps() -> None:
    # C32, a = 2.5, R = 1000 tok/s: each request gets 31.25 tok/s = 12.5 steps/s -> 80 ms per step
    assert sp.implied_cycle(1000.0, 32, 2.5) == pytest.approx(0.08)
    assert sp.window_steps(8000.0, 32, 2.5) == 100.0  # 8000 window tokens / (32 x 2.5)
    assert math.isnan(sp.implied_cycle(1000.0, 32, math.nan))
    assert math.isnan(sp.window_steps(8000.0, 32, math.nan))
    with pytest.raises(MeasurementError, match="resident rate"):
        sp.implied_cycle(0.0, 32, 2.5)


def test_cycle_reconciles_an_independent_step_time() -> None:
    c = sp.cycle(32, 2.5, 8.0, 8000.0, t_sd_events_s=0.084)
    assert c.resident_rate == 1000.0
    assert c.t_sd_s == pytest.approx(0.08)
    assert c.steps_per_request == 100.0
    assert c.rel_diff == pytest.approx(32 * 2.5 / 0.084 / 1000 - 1)  # -4.76%
    assert c.agree is True
    assert sp.cycle(32, 2.5, 8.0, 8000.0, t_sd_events_s=0.084, tolerance=0.04).agree is False
    alone = sp.cycle(32, 2.5, 8.0, 8000.0)
    assert alone.agree is None and math.isnan(alone.rel_diff)


def test_reconcile() -> None:
    agree, rel = sp.reconcile(1000.0, 32, 2.5, 0.08)
    assert agree is True and rel == pytest.approx(0.0)
    agree, rel = sp.reconcile(1000.0, 32, 2.5, 0.1)  # useful 800 tok/s vs 1000 measured
    assert agree is False and rel == pytest.approx(-0.2)
    agree, rel = sp.reconcile(1000.0, 32, math.nan, 0.08)
    assert agree is False and math.isnan(rel)
    with pytest.raises(SpecError, match="tolerance"):
        sp.reconcile(1000.0, 32, 2.5, 0.08, tolerance=-1)


def test_cycle_from_events_takes_gaps_within_one_request_inside_the_window() -> None:
    r1 = [0.0, 0.1, 0.2, 0.35]
    r2 = [0.05, 0.15, 0.3]
    # inside [0.05, 0.3]: r1 0.1, 0.2 (gap 0.1); r2 0.05, 0.15, 0.3 (gaps 0.1, 0.15); mean 0.35 / 3.
    # Gaps across requests (0.05 apart) never count.
    assert sp.window_gaps([r1, r2], 0.05, 0.3) == pytest.approx([0.1, 0.1, 0.15])
    assert sp.cycle_from_events([r1, r2], 0.05, 0.3) == pytest.approx(0.35 / 3)
    assert sp.step_time([0.004, 0.002, 0.003]) == pytest.approx(0.003)  # a late read moves two gaps, not the sum
    assert math.isnan(sp.cycle_from_events([[0.0], [0.5]], 0.0, 1.0))


# --- break-even ----------------------------------------------------------------------------------

def test_break_even_sd_faster() -> None:
    b = sp.break_even(0.03, 0.02, 1.7768, noise=0.02)
    assert b.verdict == "sd-faster"
    assert b.ratio == pytest.approx(1.5)
    assert b.margin == pytest.approx((1.7768 - 1.5) / 1.7768)  # 15.58%
    assert b.speedup == pytest.approx(1.7768 / 1.5)
    assert "1.5" in b.reason and "below a" in b.reason


def test_break_even_sd_slower_and_inconclusive() -> None:
    assert sp.break_even(0.04, 0.02, 1.7768, noise=0.02).verdict == "sd-slower"  # ratio 2 >= a
    close = sp.break_even(0.0352, 0.02, 1.7768, noise=0.02)  # ratio 1.76, margin 0.95%
    assert close.verdict == "inconclusive" and close.margin == pytest.approx((1.7768 - 1.76) / 1.7768)
    assert sp.break_even(0.0352, 0.02, 1.7768, noise=0.005).verdict == "sd-faster"


def test_break_even_needs_both_step_times() -> None:
    b = sp.break_even(math.nan, 0.02, 3.5, noise=0.01)  # high acceptance, no speculative step time
    assert b.verdict == "inconclusive" and math.isnan(b.ratio)
    assert "T_SD" in b.reason and "acceptance alone" in b.reason
    with pytest.raises(SpecError, match="noise"):
        sp.break_even(0.03, 0.02, 1.7, noise=-0.1)
    with pytest.raises(MeasurementError, match="< 1"):
        sp.break_even(0.03, 0.02, 0.9, noise=0.01)


def test_ar_step() -> None:
    assert sp.ar_step(1044.32, 32) == pytest.approx(32 / 1044.32)


# --- targets: the record note of 2026-07-16 --------------------------------------------------------

def test_targets_at_the_three_suite_median() -> None:
    t = sp.targets(78.287226, None, [100])
    g = t.goals[0]
    assert g.time_cut == pytest.approx(1 - 78.287226 / 100)
    assert round(g.time_cut, 4) == 0.2171  # "about 21.7% less time per emitted token"
    assert t.cycle_ms is None and g.tokens_per_cycle_needed is None and g.cycle_needed_ms is None


def test_targets_at_the_mtp1_record() -> None:
    t = sp.targets(63.851301, 1.7768, [100, 200])
    assert t.cycle_ms is not None
    assert t.cycle_ms == pytest.approx(1000 * 1.7768 / 63.851301)
    assert round(t.cycle_ms, 2) == 27.83  # "a roughly 27.83 ms speculative cycle"
    g100, g200 = t.goals
    assert g100.cycle_needed_ms == pytest.approx(17.768)  # 1.7768 / 100 s
    assert round(g100.cycle_cut_ms or 0, 2) == 10.06  # "the full 10 ms gap to 100 tok/s"
    assert g200.tokens_per_cycle_needed == pytest.approx(200 * 1.7768 / 63.851301)
    assert round(g200.tokens_per_cycle_needed or 0, 3) == 5.565  # "roughly 5.6 emitted tokens per cycle"
    assert g200.time_cut == pytest.approx(1 - 63.851301 / 200)


def test_targets_goal_already_met_and_bad_numbers() -> None:
    assert sp.targets(120.0, None, [100]).goals[0].time_cut == pytest.approx(-0.2)
    with pytest.raises(SpecError, match="rate"):
        sp.targets(0.0, None, [100])
    with pytest.raises(SpecError, match="tokens per cycle"):
        sp.targets(60.0, 0.9, [100])
    with pytest.raises(SpecError, match="goal"):
        sp.targets(60.0, None, [100, -1])
    with pytest.raises(SpecError, match="no goal"):
        sp.targets(60.0, None, [])
