"""Load-robust SLA searches (harness.measure.sla_load): which measurements count, when a probe is measured
again, when the result is withheld; literal numbers (the measured case of issue 37: a 69.5 ms TTFT p99
with 12 late simulator steps must not decide the bracket)."""

from __future__ import annotations

import math

from harness.measure.sla import SearchSettings
from harness.measure.sla_load import (
    INVALID,
    Measured,
    counted,
    mark_bracket,
    measured_of,
    next_step,
    probe_row,
    summary,
    withheld,
)
from harness.measure.unit_load import LoadLimits, round_load_problems

LIMITS = LoadLimits(sim_lateness_fraction=0.01, stall_s=1.0, loop_cpu_share=0.9)
DEMO = SearchSettings(start_req_s=3, precision=1, max_probes=10)
OK_ROUND = {"round_id": "r", "duration_s": 2.0, "client_schedule_kept": True, "capped_requests": 0}


def test_a_round_is_invalid_when_the_simulator_lost_a_percent_of_its_window() -> None:
    late = {"sim_late_steps": 12, "sim_lateness_s": 0.031, "client_stall_s": 0.2, "loop_cpu_share": 0.4}
    assert round_load_problems(OK_ROUND, late, LIMITS) == [
        "the simulator lost 0.031 s of model time (12 late step(s); window 2.000 s)"]
    # 0.019 s lost of a 2 s window is under 1%: valid
    assert round_load_problems(OK_ROUND, late | {"sim_lateness_s": 0.019}, LIMITS) == []
    # an unknown window: the loss counts
    assert round_load_problems(OK_ROUND | {"duration_s": None}, late, LIMITS) != []


def test_client_stall_busy_loop_and_a_schedule_the_client_did_not_keep() -> None:
    bad = {"sim_late_steps": 0, "client_stall_s": 1.5, "loop_cpu_share": 0.95}
    row = OK_ROUND | {"client_schedule_kept": False, "client_lag_p99_s": 0.25}
    assert round_load_problems(row, bad, LIMITS) == [
        "the client stalled 1.50 s (limit 1.00 s)", "the client's loop thread was busy 95% of the round",
        "the client did not keep the schedule (send lag p99 250.0 ms)"]
    # a max_concurrency cap held requests back: the lag is the cap's, not the client's
    assert round_load_problems(row | {"capped_requests": 3}, {}, LIMITS) == []
    assert round_load_problems(OK_ROUND, None, LIMITS) == []


def test_an_invalid_probe_is_measured_again_then_counted() -> None:
    # 3 pass, 6 pass, 12 fail, 9 pass, 10.5 invalid (late simulator), 10.5 fail on re-measurement
    m = [Measured(3, True, True), Measured(6, True, True), Measured(12, True, False), Measured(9, True, True),
         Measured(10.5, False)]
    assert next_step(m, DEMO, max_remeasure=2) == (10.5, 1)
    m.append(Measured(10.5, True, False))
    assert next_step(m, DEMO, max_remeasure=2) == (9.75, 0)
    assert [p.rate_req_s for p in counted(m)] == [3, 6, 12, 9, 10.5]


def test_the_result_is_withheld_after_max_remeasure_invalid_measurements() -> None:
    m = [Measured(3, True, True), Measured(6, False), Measured(6, False)]
    assert next_step(m, DEMO, max_remeasure=2) == (6, 2)
    assert withheld(m, 2) is None
    m.append(Measured(6, False))
    assert next_step(m, DEMO, max_remeasure=2) is None
    assert withheld(m, 2) == ("the probe at 6 req/s was invalid for load in all 3 measurement(s) (the client or "
                              "the simulator fell behind); no bracket is decided from it")
    assert next_step([Measured(3, False)], DEMO, max_remeasure=0) is None


def test_an_invalid_probe_never_decides_the_bracket() -> None:
    # issue 37: at load 2.9 a late probe at 3 req/s "failed" (TTFT 69.5 ms) and the search "converged" on
    # [2.25, 3]; here that measurement is invalid, so 3 req/s is measured again and passes
    m = [Measured(3, False), Measured(3, True, True)]
    assert next_step(m, DEMO, max_remeasure=2) == (6, 0)
    assert counted(m)[0].passed is True


def _row(i: int, rate: float, passed: bool | None) -> dict[str, object]:
    return {"probe_index": i, "arrival_rate_req_s": rate, "passed": passed, "bracket_end": None}


def test_rows_summary_and_bracket_marks() -> None:
    rows = [_row(0, 3, True), _row(1, 6, True), _row(2, 12, False), _row(3, 9, True), _row(4, 10.5, None),
            _row(5, 10.5, False), _row(6, 9.75, True)]
    assert measured_of(rows)[4] == Measured(10.5, False, None)
    marked = mark_bracket(rows)
    assert [r["bracket_end"] for r in marked] == [None, None, None, None, None, "lowest-failing", "highest-passing"]
    out = summary(rows, DEMO, 2)
    assert (out["end"], out["converged"], out["withheld"]) == ("converged", True, None)
    assert out["bracket"] == {"highest_passing_req_s": 9.75, "lowest_failing_req_s": 10.5, "monotone": True}
    assert (out["n_probes"], out["n_measurements"], out["n_invalid"], out["n_remeasured"]) == (6, 7, 1, 1)
    assert out["settings"]["max_remeasure"] == 2


def test_a_withheld_search_is_not_converged() -> None:
    rows = [_row(0, 3, True), _row(1, 6, None), _row(2, 6, None), _row(3, 6, None)]
    out = summary(rows, DEMO, 2)
    assert (out["end"], out["converged"], out["n_probes"], out["n_invalid"], out["n_remeasured"]) == (
        INVALID, False, 1, 3, 2)
    assert out["bracket"]["lowest_failing_req_s"] is None and out["withheld"].startswith("the probe at 6 req/s")
    # cut short while re-measures were left: interrupted, not withheld
    part = summary(rows[:2], DEMO, 2, finished=False)
    assert (part["end"], part["withheld"]) == ("interrupted", None)


def test_an_invalid_probe_row_has_no_verdict_and_says_why() -> None:
    rnd = {"status": "ok", "ttft_p99_s": 0.0695, "tpot_bench_p99_s": 0.01, "e2e_p99_s": 0.16,
           "client_schedule_kept": True}
    limits = {"ttft": 0.06, "tpot": None, "e2e": None}
    bad = probe_row(4, 3.0, 0, None, [rnd], ["the simulator lost 0.031 s"], limits, 1)
    assert (bad["passed"], bad["reasons"]) == (None, ["invalid-load: the simulator lost 0.031 s"])
    assert math.isclose(bad["ttft_p99_worst_s"], 0.0695)  # the figures are kept
    good = probe_row(5, 3.0, 1, None, [rnd], [], limits, 1)
    assert (good["passed"], good["reasons"]) == (False, ["ttft"])


def test_rows_written_before_probe_ids_get_them_on_the_way_into_the_ledger() -> None:
    import pyarrow as pa

    from harness.measure.sla import fill_probe_ids
    from harness.store.ledger.layout import canonical

    old = pa.table({"probe_index": [2, 0, 1], "arrival_rate_req_s": [8.0, 4.0, 4.0], "passed": [False, None, True]})
    got = canonical("sla_probes", old).select(["probe_index", "probe_id", "attempt"]).to_pylist()
    assert got == [{"probe_index": 2, "probe_id": "sweep-8rps.m0", "attempt": 0},
                   {"probe_index": 0, "probe_id": "sweep-4rps.m0", "attempt": 0},
                   {"probe_index": 1, "probe_id": "sweep-4rps.m1", "attempt": 1}]
    new = old.append_column("probe_id", pa.array(["x", "y", "z"])).append_column("attempt", pa.array([5, 6, 7]))
    assert fill_probe_ids(new) is new  # ids given are kept
