"""Matched AR/SD arithmetic (harness.measure.matched) and acceptance rows (harness.measure.acceptance),
with literal numbers."""

from __future__ import annotations

import math

import numpy as np
import pytest

from harness.measure.acceptance import acceptance_rows, cell_acceptance, counts_of
from harness.measure.matched import (
    LegData,
    OutputDiff,
    compare_outputs,
    first_difference,
    step_gaps,
    summarize_matched,
)
from harness.measure.speculative import SpecCounts
from harness.records import RequestRecord

ORDER = ("AR1", "SD1", "SD2", "AR2")
NO_DIFF = OutputDiff("AR1", 0, 0, ())


def sd_counts(steps: int, accepted: int, k: int = 3) -> SpecCounts:
    return SpecCounts(steps=steps, proposed=steps * k, accepted=accepted, completion_tokens=steps + accepted,
                      source="sglang-meta-info")


def legs(ar_rate: float, sd_rate: float, t_ar: float, t_sd: float, a_steps: tuple[int, int]) -> list[LegData]:
    steps, accepted = a_steps
    return [LegData("AR1", (ar_rate,) * 2, (ar_rate * 0.9,) * 2, (t_ar,) * 5),
            LegData("SD1", (sd_rate,) * 2, (sd_rate * 0.9,) * 2, (t_sd,) * 5, sd_counts(steps, accepted)),
            LegData("SD2", (sd_rate,) * 2, (sd_rate * 0.9,) * 2, (t_sd,) * 5, sd_counts(steps, accepted)),
            LegData("AR2", (ar_rate,) * 2, (ar_rate * 0.9,) * 2, (t_ar,) * 5)]


def test_sd_wins_when_the_step_ratio_is_below_tokens_per_step() -> None:
    # C=8: AR step 10 ms -> 800 tok/s; SD a = 1 + 120/100 = 2.2 tokens per 12.5 ms step -> 1408 tok/s
    r = summarize_matched(legs(800.0, 1408.0, 0.010, 0.0125, (100, 120)), ORDER, 8, NO_DIFF)
    assert r.tokens_per_step == pytest.approx(2.2)
    assert r.acceptance_rate == pytest.approx(120 / 300)
    assert r.change_pct == pytest.approx(76.0)
    assert (r.ar_drift_pct, r.sd_spread_pct) == (0.0, 0.0)
    assert r.t_sd_implied_s == pytest.approx(8 * 2.2 / 1408.0)  # = 12.5 ms
    assert r.reconciled is True and r.reconcile_rel == pytest.approx(0.0, abs=1e-12)
    assert r.break_even.ratio == pytest.approx(1.25) and r.verdict == "sd-faster"
    assert r.break_even.speedup == pytest.approx(2.2 / 1.25)


def test_sd_loses_when_the_step_costs_more_than_it_emits() -> None:
    # a = 1.3 but each verify step costs 1.5 AR steps: 8*1.3/0.015 = 693.3 tok/s < 800
    r = summarize_matched(legs(800.0, 8 * 1.3 / 0.015, 0.010, 0.015, (100, 30)), ORDER, 8, NO_DIFF)
    assert r.tokens_per_step == pytest.approx(1.3)
    assert r.break_even.ratio == pytest.approx(1.5) and r.verdict == "sd-slower"
    assert r.change_pct < 0


def test_drift_larger_than_the_margin_is_inconclusive() -> None:
    ls = legs(800.0, 8 * 1.3 / 0.0128, 0.010, 0.0128, (100, 30))  # ratio 1.28 vs a 1.3: margin 1.5%
    ls[3] = LegData("AR2", (824.0,) * 2, (741.6,) * 2, (0.010,) * 5)  # AR drift +3%
    r = summarize_matched(ls, ORDER, 8, NO_DIFF)
    assert r.ar_drift_pct == pytest.approx(3.0)
    assert r.break_even.noise == pytest.approx(0.03) and r.verdict == "inconclusive"


def test_event_gaps_that_disagree_with_the_rate_are_not_reconciled() -> None:
    # the stream says 20 ms per step, the rate implies 12.5 ms: useful throughput 880 vs 1408 tok/s
    r = summarize_matched(legs(800.0, 1408.0, 0.010, 0.020, (100, 120)), ORDER, 8, NO_DIFF)
    assert r.reconciled is False and r.reconcile_rel == pytest.approx(880.0 / 1408.0 - 1.0)


def test_no_counts_no_verdict_from_rates_alone() -> None:
    ls = [LegData(x.leg, x.resident_rates, x.http_rates, x.step_gaps_s) for x in
          legs(800.0, 1408.0, 0.010, 0.0125, (100, 120))]
    r = summarize_matched(ls, ORDER, 8, NO_DIFF)
    assert r.counts is None and math.isnan(r.tokens_per_step) and r.verdict == "inconclusive"


def test_a_leg_with_withheld_counts_withholds_the_run_s_a() -> None:
    # SD2's counts contradicted (issue 37): SD1's are never used alone, a is not computed, no verdict
    ls = legs(800.0, 1408.0, 0.010, 0.0125, (100, 120))
    ls[2] = LegData("SD2", ls[2].resident_rates, ls[2].http_rates, ls[2].step_gaps_s, None, counts_withheld=True)
    r = summarize_matched(ls, ORDER, 8, NO_DIFF)
    assert r.counts is None and math.isnan(r.tokens_per_step) and r.reconciled is None
    assert r.verdict == "inconclusive" and r.break_even.reason.startswith("a withheld: the speculative counts of SD2")


def test_outputs_compared_token_by_token_with_the_first_ar_leg() -> None:
    assert first_difference([1, 2, 3], [1, 2, 3]) is None
    assert first_difference([1, 2, 3], [1, 9, 3]) == 1
    assert first_difference([1, 2, 3], [1, 2]) == 2
    outs = {"AR1": {(0, 0, "c0"): [1, 2, 3], (0, 1, "c1"): [4, 5]},
            "SD1": {(0, 0, "c0"): [1, 2, 3], (0, 1, "c1"): [4, 6]},
            "AR2": {(0, 0, "c0"): [1, 2, 3], (0, 1, "c1"): [4, 5]}}
    d = compare_outputs(outs, ("AR1", "SD1", "AR2"))
    assert (d.reference_leg, d.compared, d.identical, d.differing) == ("AR1", 4, 3, 1)
    assert d.first_differences == (("SD1", 0, "c1", 1),)


def test_step_gaps_stay_within_one_request_and_the_window() -> None:
    ns = [[0, 10, 20, 30, 40], [5, 25, 45]]
    tok = [[1, 3, 3, 6, 7], [1, 2, 3]]  # cumulative counts: the event at 20 adds nothing (a keep-alive)
    gaps = step_gaps(ns, tok, 10, 45)
    assert sorted(round(g * 1e9) for g in gaps) == [10, 20, 20]


def rec(i: int, wave: str, cell: str, steps: int | None, accepted: int | None, phase: str = "measured"
        ) -> RequestRecord:
    return RequestRecord(rid=f"r{i}", send_ns=0, done_ns=1, event_ns=np.array([1], dtype=np.int64),
                         event_tokens=np.array([1], dtype=np.int32), completion_tokens=(steps or 0) + (accepted or 0),
                         wave_id=wave, cell_id=cell, phase=phase, concurrency=2, spec_steps=steps,
                         spec_proposed=None if steps is None else steps * 3, spec_accepted=accepted,
                         spec_source=None if steps is None else "sglang-meta-info")


def test_acceptance_rows_per_measured_wave_and_per_cell() -> None:
    recs = [rec(0, "c.r0.w000", "c", 10, 12), rec(1, "c.r0.w000", "c", 10, 8),
            rec(2, "c.r1.w000", "c", None, None), rec(3, "c.warmup.w000", "c", 50, 50, phase="warmup"),
            rec(4, "c.r1.w000", "c", None, None)]
    rows = acceptance_rows(recs, {"protocol_class": "formal"})
    assert len(rows) == 1  # the wave without counts and the warmup give none
    row = rows[0]
    assert (row["wave_id"], row["requests_reporting"], row["requests"]) == ("c.r0.w000", 2, 2)
    assert (row["verify_steps"], row["drafts_proposed"], row["drafts_accepted"]) == (20, 60, 20)
    assert row["tokens_per_step"] == pytest.approx(2.0) and row["acceptance_rate"] == pytest.approx(1 / 3)
    assert row["sglang_accept_length"] == pytest.approx(40 / 20) and row["protocol_class"] == "formal"
    cells = cell_acceptance(recs)
    assert list(cells) == ["c"] and cells["c"].steps == 20
    assert counts_of([recs[2]]) is None


def test_tokens_per_event_from_the_stream_of_any_server() -> None:
    def streamed(i: int, tokens: list[int], steps: int | None = None) -> RequestRecord:
        # ``tokens``: what each event added; the record keeps the cumulative count
        return RequestRecord(rid=f"s{i}", send_ns=0, done_ns=1,
                             event_ns=np.arange(len(tokens), dtype=np.int64),
                             event_tokens=np.cumsum(tokens).astype(np.int32), completion_tokens=sum(tokens),
                             wave_id="w.r0.w000", cell_id="w", concurrency=2, spec_steps=steps,
                             spec_proposed=None if steps is None else steps * 3, spec_accepted=None if steps is None
                             else sum(tokens) - 1 - steps, spec_source=None if steps is None else "sglang-meta-info")

    from harness.measure.acceptance import tokens_per_event

    # first (prefill) event left out, keep-alive (0-token) events ignored
    assert tokens_per_event([streamed(0, [1, 3, 0, 2, 4]), streamed(1, [1, 1, 4])]) == [0, 1, 1, 1, 2]
    # a server that reports no counts but streams multi-token events: one "stream" row, no steps claimed
    (row,) = acceptance_rows([streamed(0, [1, 3, 2, 4]), streamed(1, [1, 1, 4])])
    assert (row["source"], row["stream_events"], row["tokens_per_event_hist"]) == ("stream", 5, [0, 1, 1, 1, 2])
    assert row["tokens_per_step"] is None and "verify_steps" not in row
    # one token per event (a native server at stream_interval 1): no row at all
    assert acceptance_rows([streamed(0, [1, 1, 1, 1])]) == []
    # with counts, the row carries the stream's histogram beside them
    (counted,) = acceptance_rows([streamed(0, [1, 3, 2, 4], steps=3)])
    assert counted["source"] == "sglang-meta-info" and counted["tokens_per_event_hist"] == [0, 0, 1, 1, 1]
