"""Issue 13: rules right about their cause, complete validity, the client self-check and the
simulator's lateness as findings (known answers on hand-made archive data)."""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path
from typing import Any

import numpy as np
import pyarrow as pa
from ledger_helpers import ledger_df
from testkit import run_block

from harness.evidence.findings import ArchiveData, Finding, Scope, Severity
from harness.evidence.io import apply_findings, check_archive, concerned_rows
from harness.evidence.rules import check, waves
from harness.records import RequestRecord
from harness.store.archive import ArchiveWriter, open_archive
from harness.store.ledger import delta as dl
from harness.store.ledger import ingest_archive

CELL = "decode-c32-x"
WAVE = {"wave_id": f"{CELL}.r0.w000", "cell_id": CELL, "phase": "measured", "workload": "decode",
        "concurrency": 32, "resident_tokens": 32 * 150, "resident_seconds": 4.6, "resident_output_tok_s": 1041.78,
        "lag_p50_s": 0.0002, "lag_p99_s": 0.0008, "n_failed": 0, "n_requests": 32}
WARM = WAVE | {"wave_id": f"{CELL}.warmup1.w000", "phase": "warmup"}
BASE = ArchiveData(
    archive_id="a1", run={"protocol_class": "formal", "claim_class": "native-ar", "backend": "sim",
                          "labels": ["simulated"], "service_starts": 1},
    spec={"decode": {"min_resident_seconds": 1}, "oracles": ["france"]},
    cells=[{"cell_id": CELL, "round_status": ["ok"], "rounds_required": 1}],
    rounds=[{"round_id": f"{CELL}.r0", "cell_id": CELL, "status": "ok", "workload": "decode", "seconds": 4.6}],
    waves=[WAVE, WARM], services=[{"start_index": 1, "url": "u", "server_info": {"tp_size": 8}}],
    oracles=[{"oracle": "france", "service": "s", "passed": True}],
)
MS = 1_000_000
T0, T1 = 1_000 * MS, 5_600 * MS  # the resident window of WAVE: 4.6 s


def witness(samples: list[tuple[int, int, float, float]]) -> dict[str, Any]:
    return {"wave_id": WAVE["wave_id"], "phase": "measured", "concurrency": 32, "window_start_ns": T0,
            "window_end_ns": T1, "samples": [list(s) for s in samples]}


def every_100ms(last: tuple[int, int, float, float] | None = None) -> list[tuple[int, int, float, float]]:
    out = [(T0 + k * 100 * MS, T0 + k * 100 * MS + 2 * MS, 32.0, 0.0) for k in range(1, 45)]
    return out + ([last] if last else [])


def found(d: ArchiveData, rule: str) -> list[Finding]:
    return [f for f in check(d) if f.rule == rule]


# ------------------------------------------------------------------------ 1. right about the cause


def test_witness_allows_receive_lag_and_one_step_at_the_edges() -> None:
    # the demo's C32 case: all 32 ended on one step; the last sample, answered 2.4 ms before the window
    # end (the client received the last tokens a few ms after the server sent them), saw none running
    demo = every_100ms(last=(T1 - 5 * MS, T1 - int(2.4 * MS), 0.0, 0.0))
    d = replace(BASE, extra={"server_metrics": [witness(demo)]})
    assert found(d, "concurrency-witness") == []
    lag, step = waves._witness_allowance_s(WAVE, None)
    assert lag == 0.0008 and round(step * 1e3, 2) == 30.72  # 32 / 1041.78 tok/s
    n, low, _ = waves._witness_view(witness(demo), lag + step)
    assert (n, low) == (44, 32.0)
    # the client's own loop delay widens the allowance (any server, no emit stamps)
    assert waves._witness_allowance_s(WAVE | {"lag_p99_s": None}, {"loop_lag_p99_s": 0.004})[0] == 0.004


def test_witness_names_the_cause_it_computed() -> None:
    held = every_100ms(last=(T0 + 2000 * MS, T0 + 2002 * MS, 31.0, 1.0))
    f = found(replace(BASE, extra={"server_metrics": [witness(held)]}), "concurrency-witness")
    assert len(f) == 1 and f[0].severity == "warning" and f[0].rows == (WAVE["wave_id"],)
    assert "held requests back" in f[0].message and "admission limits" in f[0].remedy
    gone = every_100ms(last=(T0 + 2000 * MS, T0 + 2002 * MS, 30.0, 0.0))
    f = found(replace(BASE, extra={"server_metrics": [witness(gone)]}), "concurrency-witness")
    assert len(f) == 1 and "ended on the server before the client received" in f[0].message
    assert "client read the streams late" in f[0].remedy and "KV pool" not in f[0].remedy
    # a wave with failed requests is failed-requests' business, not the witness's
    failed = replace(BASE, waves=[WAVE | {"n_failed": 1}, WARM], extra={"server_metrics": [witness(gone)]})
    assert found(failed, "concurrency-witness") == []


def test_rules_consider_only_cells_that_ran() -> None:
    # after Ctrl-C and --resume: a planned cell without any wave is "not run", never "cold"
    later = {"cell_id": "decode-c64-x", "round_status": [], "rounds_required": 1}
    d = replace(BASE, cells=[*BASE.cells, later])
    assert found(d, "warmup-in-measured") == []
    (f,) = found(d, "formal-rounds")
    assert f.rows == ("decode-c64-x",) and "not run" in f.message and f.blocking
    # a cell that was measured without a warmup still is flagged
    assert [x.rows for x in found(replace(BASE, waves=[WAVE]), "warmup-in-measured")] == [(CELL,)]


# ------------------------------------------------------------------------ 2. validity is complete


def test_warmup_failures() -> None:
    some = replace(BASE, waves=[WAVE, WARM | {"n_failed": 6, "n_requests": 16},
                                WARM | {"wave_id": f"{CELL}.warmup1.w001"}])
    (f,) = found(some, "warmup-failed")
    assert f.severity == "warning" and f.rows == (f"{CELL}.warmup1.w000",)
    every = replace(BASE, waves=[WAVE, WARM | {"n_failed": 4, "n_requests": 32}])
    (f,) = found(every, "warmup-failed")
    assert f.blocking and f.rows == tuple(sorted([CELL, f"{CELL}.r0", str(WAVE["wave_id"]), str(WARM["wave_id"])]))
    assert "4 of 32 warmup requests failed" in f.message and "measured anyway" in f.message


def test_run_level_findings_have_run_scope() -> None:
    unlabelled = replace(BASE, run=BASE.run | {"backend": "attach", "labels": []},
                         services=[{"url": "http://127.0.0.1:9", "server_info": {"dsv4h_simulator": {}}}])
    (f,) = found(unlabelled, "simulated-context")
    assert f.blocking and f.scope == "run"
    (g,) = found(replace(BASE, services=[{"url": "u", "server_info": {}}]), "identity-unverified")
    assert g.scope == "run"
    assert found(BASE, "formal-rounds") == [] and all(x.scope == "rows" for x in check(BASE))


def test_concerned_rows_spread_to_the_figures_built_from_them() -> None:
    waves = [{"wave_id": "c.r0.w000", "phase": "measured"}, {"wave_id": "c.r1.w000", "phase": "measured"},
             {"wave_id": "c.warmup1.w000", "phase": "warmup"}]
    rounds = [{"round_id": "c.r0", "cell_id": "c", "status": "ok"},
              {"round_id": "c.r1", "cell_id": "c", "status": "failed"}]

    def f(rows: tuple[str, ...], scope: Scope = "rows", severity: Severity = "blocking") -> Finding:
        return Finding("r", severity, "m", "x", "a", rows, scope)

    assert concerned_rows([f(("c.r0.w000",))], waves, rounds) == (False, {"c.r0.w000", "c.r0", "c"})
    # a failed round is not in the cell's median: the cell is not concerned
    assert concerned_rows([f(("c.r1.w000",))], waves, rounds) == (False, {"c.r1.w000", "c.r1"})
    assert concerned_rows([f(("c.warmup1.w000",))], waves, rounds) == (False, {"c.warmup1.w000"})
    assert concerned_rows([f(("service#1",), "run")], waves, rounds) == (True, set())
    assert concerned_rows([f(("c.r0.w000",), severity="warning")], waves, rounds) == (False, set())


def _archive(tmp_path: Path, backend: str, server_info: dict[str, Any], labels: list[str]) -> Path:
    w = ArchiveWriter(tmp_path)
    w.write_json("spec.json", {"decode": {"min_resident_seconds": 1}})
    w.write_json("service.json", {"services": [{"start_index": 1, "url": "http://127.0.0.1:9",
                                                "server_info": server_info}]})
    w.write_wave([RequestRecord(rid=f"q{i}", send_ns=0, done_ns=9, event_ns=np.array([1, 5]),
                                event_tokens=np.array([1, 2]), wave_id=str(wid), cell_id=CELL, phase=phase,
                                round_index=0) for i, (wid, phase) in
                  enumerate([(WAVE["wave_id"], "measured"), (WARM["wave_id"], "warmup")])])
    w.write_table("waves.parquet", pa.Table.from_pylist([WAVE, WARM]))
    w.write_table("rounds.parquet", pa.Table.from_pylist(list(BASE.rounds)))
    w.write_table("cells.parquet", pa.Table.from_pylist([{"cell_id": CELL, "round_status": ["ok"],
                                                          "rounds_required": 1}]))
    return w.finalize(status="complete", run=run_block(backend=backend, labels=labels))


def test_attached_simulator_unlabelled_invalidates_every_row(tmp_path: Path) -> None:
    """An old attach archive against the simulator, not labelled: the blocking simulated-context
    finding names the server URL, yet every row of every table becomes invalid, and every row
    says data_origin simulated."""
    a = open_archive(_archive(tmp_path, "attach", {"dsv4h_simulator": {"label": "simulated"}}, []))
    ingest_archive(tmp_path, a)
    findings = check_archive(a)
    assert {(f.rule, f.severity) for f in findings if f.blocking} == {("simulated-context", "blocking")}
    changed = apply_findings(tmp_path, a.archive_id, findings)
    assert changed == {"cells": 1, "rounds": 1, "waves": 2, "requests": 2, "runs": 1}
    for table in ("runs", "cells", "rounds", "waves", "requests"):
        df = ledger_df(tmp_path, table)
        assert not df["valid"].any() and set(df["data_origin"]) == {"simulated"}, table


def test_superseded_rows_stay_invalid_when_findings_are_applied(tmp_path: Path) -> None:
    a = open_archive(_archive(tmp_path, "sglang", {"tp_size": 8}, []))
    ingest_archive(tmp_path, a)
    dl.supersede(tmp_path, a.archive_id, "b" * 16)  # as a resume's ingest leaves it
    apply_findings(tmp_path, a.archive_id, [])
    cells = ledger_df(tmp_path, "cells")
    assert len(cells) and not cells.valid.any() and set(cells.superseded_by) == {"b" * 16}


# ------------------------------------------------------------------------ 3. and 4. lateness, self-check


def test_sim_lateness_on_the_waves_it_touched() -> None:
    # WAVE's resident window is 4.6 s: from 46 ms of model time lost its rate may be off by 1%
    checks = [{"wave_id": WAVE["wave_id"], "phase": "measured", "sim_late_steps": 2, "sim_lateness_s": 0.047},
              {"wave_id": WARM["wave_id"], "phase": "warmup", "sim_late_steps": 5, "sim_lateness_s": 0.2}]
    (f,) = found(replace(BASE, extra={"wave_checks": checks}), "sim-lateness")
    assert f.rows == (CELL, WAVE["wave_id"]) and "2 late step(s), 0.047 s" in f.message and f.severity == "blocking"
    assert f"invalid cell(s): {CELL}" in f.message and "1% or more of its window is invalid" in f.remedy
    small = [checks[0] | {"sim_lateness_s": 0.045}]
    (i,) = found(replace(BASE, extra={"wave_checks": small}), "sim-lateness")
    assert i.severity == "info" and "under 1% of the window" in i.message
    quiet = [c | {"sim_late_steps": 0} for c in checks[:1]]
    assert found(replace(BASE, extra={"wave_checks": quiet}), "sim-lateness") == []
    # a decode wave whose late steps were first-token forwards only: its resident rate is the model's
    prefill_only = [checks[0] | {"sim_late_decode_steps": 0, "sim_decode_lateness_s": 0.0}]
    assert WAVE.get("workload") == "decode"
    assert found(replace(BASE, extra={"wave_checks": prefill_only}), "sim-lateness") == []
    one_decode = [checks[0] | {"sim_late_decode_steps": 1, "sim_decode_lateness_s": 0.046}]
    (h,) = found(replace(BASE, extra={"wave_checks": one_decode}), "sim-lateness")
    assert h.severity == "blocking" and "1 late step(s), 0.046 s" in h.message
    # an archive without per-wave counters: the service's counters before and after
    svc = {"url": "u", "start_index": 1, "server_info": {"dsv4h_simulator": {}, "internal_states": [
        {"sim_late_steps": 1}]}, "server_info_at_stop": {"internal_states": [{"sim_late_steps": 4}]}}
    (g,) = found(replace(BASE, services=[svc]), "sim-lateness")
    assert "3 late step(s)" in g.message and g.rows == ()


def test_sim_lateness_invalidates_only_the_late_cells() -> None:
    """Two decode cells with 4.6 s resident windows (tolerance 1%: 46 ms): a wave that lost 23 ms
    (0.5%) is info and its cell stays valid; one that lost 92 ms (2%) is blocking and invalidates its
    wave, round and cell, and nothing of the other cell."""
    other = "decode-c8-x"
    w8 = WAVE | {"wave_id": f"{other}.r0.w000", "cell_id": other}
    d = replace(BASE, cells=[*BASE.cells, {"cell_id": other, "round_status": ["ok"], "rounds_required": 1}],
                rounds=[*BASE.rounds, {"round_id": f"{other}.r0", "cell_id": other, "status": "ok",
                                       "workload": "decode", "seconds": 4.6}],
                waves=[WAVE, WARM, w8],
                extra={"wave_checks": [
                    {"wave_id": WAVE["wave_id"], "phase": "measured", "sim_late_steps": 1, "sim_lateness_s": 0.023},
                    {"wave_id": w8["wave_id"], "phase": "measured", "sim_late_steps": 3, "sim_lateness_s": 0.092}]})
    info, block = sorted(found(d, "sim-lateness"), key=lambda f: f.severity != "info")
    assert (info.severity, info.rows) == ("info", (WAVE["wave_id"],))
    assert "0.023 s of model time lost, under 1% of the window" in info.message
    assert (block.severity, block.rows) == ("blocking", (other, w8["wave_id"]))
    assert "3 late step(s), 0.092 s of model time lost, at least 1% of the window" in block.message
    whole, ids = concerned_rows(check(d), list(d.waves), list(d.rounds))
    assert not whole
    assert {other, f"{other}.r0", w8["wave_id"]} <= ids
    assert not ids & {CELL, f"{CELL}.r0", WAVE["wave_id"]}
    # exactly at the tolerance (46 ms of 4.6 s) is material
    at = [{"wave_id": WAVE["wave_id"], "phase": "measured", "sim_late_steps": 1, "sim_lateness_s": 0.046}]
    (f,) = found(replace(BASE, extra={"wave_checks": at}), "sim-lateness")
    assert f.blocking and f.rows == (CELL, WAVE["wave_id"])


def test_client_bound_thresholds() -> None:
    step = 32 / 1041.78  # 30.72 ms: limits 3.07 ms at the median, 15.36 ms at p99

    def with_check(p50: float, p99: float, cpu: float = 0.1, wave: dict[str, Any] = WAVE) -> list[Finding]:
        c = {"wave_id": wave["wave_id"], "phase": "measured", "loop_lag_p50_s": p50, "loop_lag_p99_s": p99,
             "loop_cpu_share": cpu}
        return found(replace(BASE, waves=[wave], extra={"wave_checks": [c]}), "client-bound")

    assert with_check(0.099 * step, 0.49 * step) == []
    (f,) = with_check(0.101 * step, 0.2 * step)
    assert f.rows == (WAVE["wave_id"],) and "30.72 ms decode step" in f.message and "idle core" in f.remedy
    assert len(with_check(0.001, 0.51 * step)) == 1
    (g,) = with_check(0.0001, 0.0002, cpu=0.95)
    assert "loop thread busy 95% of the wave" in g.message
    prefill = WAVE | {"workload": "prefill", "prefill_seconds": 1.15}  # limit: 23 ms at p99
    assert with_check(0.001, 0.022, wave=prefill) == [] and len(with_check(0.001, 0.024, wave=prefill)) == 1

    def with_edge(edge: float, p99: float, wave: dict[str, Any]) -> list[Finding]:
        c = {"wave_id": wave["wave_id"], "loop_lag_p50_s": 0.0001, "loop_lag_p99_s": p99, "loop_lag_edge_s": edge,
             "loop_cpu_share": 0.02}
        return found(replace(BASE, waves=[wave], extra={"wave_checks": [c]}), "client-bound")

    # a 0.73 s stall while a prefill wave waited for its first tokens moved no measured instant (seen in a demo)
    assert with_edge(0.0009, 0.728, prefill) == []
    (e,) = with_edge(0.024, 0.0009, prefill)
    assert "loop delay at a window edge 24.00 ms, above 2% of the 1.150 s prefill window" in e.message
    assert with_edge(0.49 * step, 0.9, WAVE) == [] and len(with_edge(0.51 * step, 0.0, WAVE)) == 1
    # warmups are never judged
    assert found(replace(BASE, waves=[WARM], extra={"wave_checks": [{"wave_id": WARM["wave_id"],
                                                                      "loop_lag_p50_s": 1.0}]}), "client-bound") == []
