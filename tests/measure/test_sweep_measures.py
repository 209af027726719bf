"""Goodput, achieved schedule and knee (harness.measure.sweep) with literal numbers."""

from __future__ import annotations

import math

import numpy as np

from harness.measure.sweep import Knee, Slo, goodput, knee, knee_of, meets, rate_row, schedule, schedule_summary
from harness.records import RequestRecord

MS = 1_000_000


def rec(rid: str, send_ms: int, first_ms: int, done_ms: int, n: int, error: str | None = None) -> RequestRecord:
    # one event per token, evenly spaced from first to done
    times = [first_ms + (done_ms - first_ms) * k // max(n - 1, 1) for k in range(n)]
    return RequestRecord(rid=rid, send_ns=send_ms * MS, done_ns=done_ms * MS,
                         event_ns=np.asarray([t * MS for t in times], dtype=np.int64),
                         event_tokens=np.arange(1, n + 1, dtype=np.int32), error=error)


def test_goodput_counts_requests_meeting_every_slo() -> None:
    a = rec("a", 0, 100, 1000, 10)      # ttft 0.1, tpot 0.1
    b = rec("b", 0, 400, 1000, 10)      # ttft 0.4 -> misses ttft 0.3
    c = rec("c", 500, 600, 2000, 8)     # ttft 0.1, tpot 0.2 -> misses tpot 0.15
    d = rec("d", 500, 600, 700, 2, error="http 500")
    slo = Slo(ttft_s=0.3, tpot_s=0.15)
    assert [meets(r, slo) for r in (a, b, c, d)] == [True, False, False, False]
    assert goodput([a, b, c, d], slo) == 0.5  # 1 request over 2.0 s
    assert goodput([a, b, c, d], Slo()) == 1.5  # 3 ok over 2.0 s
    row = rate_row([a, b, c, d], start_ns=0, slo=slo)
    assert row["n_ok"] == 3 and row["slo_met"] == 1 and row["request_throughput_req_s"] == 1.5
    assert row["output_throughput_tok_s"] == 14.0


def test_schedule_lag_and_summary() -> None:
    recs = [rec("a", 10, 20, 30, 2), rec("b", 160, 170, 180, 2)]
    rows = schedule([0, 100 * MS], recs)
    assert [r["lag_s"] for r in rows] == [0.01, 0.06]
    s = schedule_summary(rows, tolerance_s=0.05)
    assert s["late"] == 1 and s["schedule_kept"] is False and math.isclose(s["lag_max_s"], 0.06)
    assert schedule_summary(rows, tolerance_s=0.1)["schedule_kept"] is True


def test_knee_is_the_highest_goodput_lowest_rate_on_ties() -> None:
    r, g = "arrival_rate_req_s", "goodput_median_req_s"
    rows = [{r: 1.0, g: 1.0}, {r: 2.0, g: 1.9}, {r: 4.0, g: 1.9}, {r: 8.0, g: 0.5}, {r: 16.0, g: math.nan}]
    assert knee(rows) == {r: 2.0, g: 1.9}
    assert knee([]) is None


def test_knee_is_never_a_saturated_rate() -> None:
    r, g, sat = "arrival_rate_req_s", "goodput_median_req_s", "saturated_rounds"
    rows = [{r: 10.0, g: 9.9, sat: 0}, {r: 20.0, g: 11.5, sat: 0}, {r: 40.0, g: 11.9, sat: 2}]
    k = knee_of(rows)
    assert k.row == {r: 20.0, g: 11.5, sat: 0}
    assert k.note == ("the highest goodput, at 40 req/s, is not a steady state (2 over-saturated round(s)); "
                      "the knee is the best steady rate")
    assert knee(rows) == {r: 20.0, g: 11.5, sat: 0}
    assert knee_of(rows[:2]) == Knee({r: 20.0, g: 11.5, sat: 0}, None)


def test_knee_skips_rates_whose_schedule_was_not_kept_and_is_withheld_without_a_steady_rate() -> None:
    r, g = "arrival_rate_req_s", "goodput_median_req_s"
    rows = [{r: 5.0, g: 4.9, "schedule_kept": True}, {r: 10.0, g: 8.0, "schedule_kept": False}]
    assert knee_of(rows).row == {r: 5.0, g: 4.9, "schedule_kept": True}
    only = [{r: 40.0, g: 11.9, "saturated_rounds": 1, "rounds_ok": 1}, {r: 80.0, g: 3.0, "rounds_ok": 0}]
    k = knee_of(only)
    assert k.row is None
    assert k.note == ("withheld: no steady rate; the highest goodput, at 40 req/s, is not a steady state "
                      "(1 over-saturated round(s))")


def test_knee_is_never_a_rate_whose_simulator_or_client_fell_behind() -> None:
    from harness.measure.unit_load import LoadLimits, late_cells

    limits = LoadLimits(sim_lateness_fraction=0.01, stall_s=1.0, loop_cpu_share=0.9)
    rounds = [{"round_id": "sweep-10rps.r0", "cell_id": "sweep-10rps", "duration_s": 6.0},
              {"round_id": "sweep-20rps.r0", "cell_id": "sweep-20rps", "duration_s": 6.0},
              {"round_id": "sweep-20rps.r1", "cell_id": "sweep-20rps", "duration_s": 6.0}]
    checks = [{"round_id": "sweep-20rps.r1", "sim_late_steps": 12, "sim_lateness_s": 0.3},
              {"round_id": "sweep-10rps.r0", "client_stall_s": 0.2}]
    late = late_cells(rounds, checks, limits)
    assert late == {"sweep-20rps": "1 round(s) invalid for load (sweep-20rps.r1: the simulator lost 0.300 s of "
                                   "model time (12 late step(s); window 6.000 s))"}
    r, g = "arrival_rate_req_s", "goodput_median_req_s"
    cells = [{"cell_id": "sweep-10rps", r: 10.0, g: 9.9}, {"cell_id": "sweep-20rps", r: 20.0, g: 11.5}]
    k = knee_of(cells, late)
    assert k.row == cells[0]
    assert k.note == ("the highest goodput, at 20 req/s, is not a steady state (1 round(s) invalid for load "
                      "(sweep-20rps.r1: the simulator lost 0.300 s of model time (12 late step(s); window 6.000 s)))"
                      "; the knee is the best steady rate")
    assert knee_of(cells).row == cells[1]  # without the self-checks the faster rate is the knee
