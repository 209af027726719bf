"""SLA searches robust to load, end to end on the simulator (harness.run.sla, harness.measure.sla_load):
a probe whose simulator fell behind (its loop blocked 400 ms by ``stall_loop`` during one request) is
invalid, not a failure; the search measures that rate again (fresh round ids, no warmup) and counts only
the valid measurement; when every measurement is invalid the result is withheld (``invalid-load``).

The ``fast`` profile is slowed ten times (decode steps of 50-180 ms) so a busy 2-core machine keeps the
simulator on its model outside the injected stall (as tests/run/test_unit_checks_run.py)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from ledger_helpers import ledger_table
from testkit import only_archive

from harness.inputs.spec import load_spec
from harness.run.sla import run_sla_loaded

REPO = Path(__file__).resolve().parents[2]
SLA = """
name: load-sla
kind: sla-search
claim_class: native-ar
service: {{backend: sim, sim: {{profile: fast, time_scale: 10, fault: 'stall_loop:400', {faults}}},
          startup_timeout_s: 60}}
corpus: {corpus}
arrivals: {{process: constant, count: 6}}
rounds: 1
warmup_requests: 2
max_new_tokens: 8
use_case_output_lengths: false
ignore_eos: true
limits: {{ttft_ms: 5000}}
search: {{start_req_s: 4, precision_req_s: 1, max_probes: 1, max_remeasure: {again}}}
schedule_tolerance_ms: 200
"""


def spec(tmp_path: Path, faults: str, again: int) -> Path:
    path = tmp_path / "sla.yaml"
    path.write_text(SLA.format(faults=faults, again=again, corpus=REPO / "corpora" / "sim-code-512"))
    return path


@pytest.mark.slow
def test_a_late_probe_is_measured_again_and_only_the_valid_measurement_counts(tmp_path: Path) -> None:
    # only the 4th request stalls: the 2nd of round 0 (after 2 warmups)
    out = run_sla_loaded(load_spec(spec(tmp_path, "fault_every: 4, fault_first: 4", 2)), tmp_path / "ws")
    archive = only_archive(tmp_path / "ws")
    first, again = out.probes[0], out.probes[1]
    assert (first["passed"], first["reasons"][0].startswith("invalid-load: the simulator lost")) == (None, True)
    if len(out.probes) > 2:  # the busy machine made the re-measurement late too: still never counted
        pytest.skip(f"the machine was busy: {[p['reasons'] for p in out.probes[1:]]}")
    assert (again["arrival_rate_req_s"], again["passed"], again["bracket_end"]) == (4.0, True, "highest-passing")
    r = out.result
    assert (r["end"], r["withheld"], r["n_probes"], r["n_measurements"], r["n_invalid"], r["n_remeasured"]) == (
        "probe-cap", None, 1, 2, 1, 1)
    assert [x["round_id"] for x in out.rounds] == ["sweep-4rps.r0", "sweep-4rps.r1"]  # both kept
    arrivals = [json.loads(x) for x in (archive / "arrivals.jsonl").read_text().splitlines()]
    assert [(a["attempt"], [p["round_index"] for p in a["rounds"]]) for a in arrivals] == [(0, [-1, 0]), (1, [1])]
    probes = json.loads((archive / "sla.json").read_text())["probes"]
    assert [p["passed"] for p in probes] == [None, True]
    # one ledger row per measurement, each with its own id: the late attempt is invalid, the valid one is not
    rows = sorted(ledger_table(tmp_path / "ws", "sla_probes").to_pylist(), key=lambda x: x["probe_index"])
    assert [(x["probe_id"], x["attempt"], x["valid"]) for x in rows] == [
        ("sweep-4rps.m0", 0, False), ("sweep-4rps.m1", 1, True)]
    assert rows[1]["request_throughput_median_req_s"] == out.rounds[1]["request_throughput_req_s"]


@pytest.mark.slow
def test_a_probe_late_in_every_measurement_withholds_the_result(tmp_path: Path) -> None:
    out = run_sla_loaded(load_spec(spec(tmp_path, "fault_every: 1", 1)), tmp_path / "ws")
    r = out.result
    assert [p["passed"] for p in out.probes] == [None, None]
    assert (r["end"], r["converged"], r["n_probes"], r["n_measurements"], r["n_invalid"]) == (
        "invalid-load", False, 0, 2, 2)
    assert r["bracket"] == {"highest_passing_req_s": None, "lowest_failing_req_s": None, "monotone": True}
    assert r["withheld"].startswith("the probe at 4 req/s was invalid for load in all 2 measurement(s)")
    (f,) = [g for g in out.finished.findings if g.rule == "sla-not-converged"]
    assert "withheld (end invalid-load)" in f.message and "max_remeasure" in f.remedy
