"""Per-unit judgement of every kind (harness.evidence.rules.instruments, rules.sla): a rate sweep's and an SLA
search's rounds and a trace replay's window are judged from their ``wave_checks.jsonl`` rows like a
formal matrix's waves (``sim-lateness``, ``client-stalled``, ``client-bound``; ``sla-probe-invalid`` for a
probe's round), with literal numbers on hand-made archive data."""

from __future__ import annotations

from dataclasses import replace
from typing import Any

from harness.evidence.findings import ArchiveData, Finding
from harness.evidence.io import concerned_rows
from harness.evidence.rules import check
from harness.evidence.rules.instruments import open_loop_units, unit_problems

C4, C8 = "sweep-4rps", "sweep-8rps"


def rnd(cell: str, k: int, duration_s: float = 2.0, rate: float = 4.0) -> dict[str, Any]:
    return {"round_id": f"{cell}.r{k}", "cell_id": cell, "round_index": k, "arrival_rate_req_s": rate,
            "status": "ok", "duration_s": duration_s, "client_schedule_kept": True, "client_lag_p99_s": 0.002}


def chk(cell: str, k: int, lost: float, steps: int = 1, stall: float = 0.004, cpu: float = 0.05,
        **extra: Any) -> dict[str, Any]:
    """A sweep round's self-check row as ``harness.run.sweep`` writes it."""
    return {"wave_id": f"{cell}.r{k}.w000", "round_id": f"{cell}.r{k}", "cell_id": cell, "phase": "measured",
            "workload": "sweep", "concurrency": 16, "sim_late_steps": steps if lost else 0, "sim_lateness_s": lost,
            "sim_late_decode_steps": steps if lost else 0, "sim_decode_lateness_s": lost, "client_stall_s": stall,
            "loop_gap_max_s": stall, "loop_cpu_share": cpu, "loop_lag_p50_s": 0.0001, "loop_lag_p99_s": 0.0004,
            } | extra


SWEEP = ArchiveData(
    archive_id="s1", run={"protocol_class": "rate-sweep", "claim_class": "native-ar", "backend": "sim",
                          "labels": ["simulated"], "service_starts": 1},
    spec={"schedule_tolerance_ms": 200.0},
    cells=[{"cell_id": C4, "rounds_ok": 2, "rounds_planned": 2}, {"cell_id": C8, "rounds_ok": 1, "rounds_planned": 1}],
    rounds=[rnd(C4, 0), rnd(C4, 1), rnd(C8, 0, duration_s=1.5, rate=8.0)],
    services=[{"start_index": 1, "url": "u", "server_info": {"dsv4h_simulator": {}, "internal_states": [
        {"sim_late_steps": 0}]}, "server_info_at_stop": {"internal_states": [{"sim_late_steps": 5}]}}])


def found(d: ArchiveData, rule: str) -> list[Finding]:
    return [f for f in check(d) if f.rule == rule]


def test_a_sweep_round_that_lost_one_percent_of_its_window_is_blocking_with_its_round_and_cell() -> None:
    # windows 2.0 s, 2.0 s, 1.5 s: tolerances 20 ms, 20 ms, 15 ms
    d = replace(SWEEP, extra={"wave_checks": [chk(C4, 0, 0.050, steps=2), chk(C4, 1, 0.019), chk(C8, 0, 0.015)]})
    info, block = sorted(found(d, "sim-lateness"), key=lambda f: f.severity != "info")
    assert (block.severity, block.scope) == ("blocking", "rows")
    assert block.rows == (C4, f"{C4}.r0", f"{C4}.r0.w000", C8, f"{C8}.r0", f"{C8}.r0.w000")
    assert block.message == (
        "2 measured round(s) ran while the simulator fell behind its model (3 late step(s), 0.065 s of model "
        "time lost, at least 1% of the round's window; e.g. sweep-4rps.r0: 0.050 s lost, window 2.000 s): their "
        "rates and latencies are not the model's; invalid: sweep-4rps, sweep-4rps.r0, sweep-8rps, sweep-8rps.r0")
    assert (info.severity, info.rows) == ("info", (f"{C4}.r1", f"{C4}.r1.w000"))  # 19 ms of 2 s: under 1%
    assert "1 measured round(s)" in info.message and "0.019 s of model time lost, under 1% of the round's" \
        in info.message
    # no run-level fallback beside per-round rows, although the service's counters rose by 5
    assert all(f.severity != "warning" for f in found(d, "sim-lateness"))
    whole, ids = concerned_rows(check(d), [], list(d.rounds))
    assert not whole and {C4, f"{C4}.r0", C8, f"{C8}.r0"} <= ids and f"{C4}.r1" not in ids


def test_a_clean_sweep_has_no_lateness_finding_and_an_old_one_keeps_the_run_level_warning() -> None:
    clean = replace(SWEEP, extra={"wave_checks": [chk(C4, 0, 0.0), chk(C4, 1, 0.0), chk(C8, 0, 0.0)]})
    assert [f for f in check(clean) if f.blocking] == []
    assert found(clean, "sim-lateness") == []
    (old,) = found(SWEEP, "sim-lateness")  # no wave_checks.jsonl: an archive from before per-round rows
    assert (old.severity, old.rows) == ("warning", ())
    assert "5 late step(s) during the run (per-wave lateness was not recorded)" in old.message


def test_a_round_without_its_row_has_an_unknown_window_and_is_blocking() -> None:
    d = replace(SWEEP, rounds=[rnd(C4, 0)], extra={"wave_checks": [chk(C4, 0, 0.0), chk(C4, 1, 0.001)]})
    (f,) = found(d, "sim-lateness")
    assert f.blocking and f.rows == (C4, f"{C4}.r1", f"{C4}.r1.w000") and "window unknown" in f.message
    assert open_loop_units(d)[f"{C4}.r1.w000"].cell_id == C4  # the cell from the self-check row


def test_a_replay_that_lost_one_percent_of_its_window_is_blocking_for_the_run() -> None:
    d = ArchiveData("r1", {"protocol_class": "trace-replay"}, {},
                    extra={"replay": [{"replay_id": "replay", "duration_s": 4.0, "status": "ok"}],
                           "wave_checks": [chk("replay", 0, 0.040, workload="replay", replay_id="replay")]})
    (f,) = found(d, "sim-lateness")  # 40 ms of 4 s: exactly the 1% tolerance
    assert (f.severity, f.scope, f.rows) == ("blocking", "run", ("replay", "replay.r0.w000"))
    assert f.message == (
        "1 measured replay(s) ran while the simulator fell behind its model (1 late step(s), 0.040 s of model time "
        "lost, at least 1% of the replay's window; e.g. replay: 0.040 s lost, window 4.000 s): their rates and "
        "latencies are not the model's; invalid: replay")
    whole, _ = concerned_rows([f], [], [])
    assert whole
    small = replace(d, extra=d.extra | {"wave_checks": [chk("replay", 0, 0.039, workload="replay")]})
    (i,) = found(small, "sim-lateness")
    assert (i.severity, i.scope, i.rows) == ("info", "rows", ("replay", "replay.r0.w000"))


def test_a_stalled_or_saturated_client_in_a_round() -> None:
    d = replace(SWEEP, extra={"wave_checks": [chk(C4, 0, 0.0, stall=1.5), chk(C4, 1, 0.0, stall=0.9),
                                              chk(C8, 0, 0.0, cpu=0.95)]})
    (s,) = found(d, "client-stalled")  # STALL_FLOOR_S = 1 s: 1.5 s stalls, 0.9 s does not
    assert (s.severity, s.rows) == ("blocking", (C4, f"{C4}.r0", f"{C4}.r0.w000"))
    assert "1 measured round(s)" in s.message and "1.50 s against 1.00 s" in s.message
    (b,) = found(d, "client-bound")  # CLIENT_CPU_SHARE = 90%: a warning naming the round, not the cell
    assert (b.severity, b.rows) == ("warning", (f"{C8}.r0", f"{C8}.r0.w000")) and "busy 95%" in b.message


def test_failed_requests_of_a_sweep_round_name_the_round() -> None:
    d = replace(SWEEP, requests=[{"rid": "x", "wave_id": f"{C4}.r1.w000", "phase": "measured", "ok": False,
                                  "error": "boom"}])
    (f,) = found(d, "failed-requests")
    assert f.rows == (f"{C4}.r1", f"{C4}.r1.w000") and "1 failed request(s) in 1 measured wave(s)" in f.message


def test_a_probe_with_a_late_or_stalled_round_is_an_invalid_probe() -> None:
    rounds = [rnd("sweep-3rps", 0, rate=3.0), rnd("sweep-6rps", 0, rate=6.0), rnd("sweep-9rps", 0, rate=9.0)]
    checks = [chk("sweep-3rps", 0, 0.030), chk("sweep-6rps", 0, 0.010), chk("sweep-9rps", 0, 0.0, stall=2.0)]
    d = ArchiveData("q1", {"protocol_class": "sla-search"}, {"schedule_tolerance_ms": 200.0}, rounds=rounds,
                    extra={"sla": {"end": "converged", "converged": True}, "wave_checks": checks})
    assert unit_problems(d) == {
        "sweep-3rps.r0": ["the simulator lost 0.030 s of model time (1 late step(s); window 2.000 s)"],
        "sweep-9rps.r0": ["the client stalled 2.00 s (limit 1.00 s)"]}
    got = found(d, "sla-probe-invalid")
    assert [(f.severity, f.rows) for f in got] == [("blocking", ("sweep-3rps.m0", "sweep-3rps.r0")),
                                                   ("blocking", ("sweep-9rps.m0", "sweep-9rps.r0"))]
    assert got[0].message.startswith("sweep-3rps.r0 (probe at 3.0 req/s): the simulator lost 0.030 s")
    (late,) = [f for f in found(d, "sim-lateness") if f.blocking]
    assert late.rows == ("sweep-3rps", "sweep-3rps.r0", "sweep-3rps.r0.w000")


def test_formal_units_are_waves() -> None:
    d = ArchiveData("f1", {"protocol_class": "formal"}, {}, extra={"wave_checks": [chk(C4, 0, 0.05)]})
    assert open_loop_units(d) == {}
