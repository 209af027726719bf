"""Every kind judged per measured unit, end to end on the simulator (harness.run.sweep, harness.run.sla,
harness.run.replay; the rules of harness.evidence.rules.instruments): with the simulator's loop blocked
(``stall_loop``) during one request, the sweep round, SLA-probe round or trace replay that request
belongs to gets a blocking ``sim-lateness`` naming its rows (a round: its wave, round and cell id; a
replay: the replay and its wave, scope ``run``), from the ``wave_checks.jsonl`` row the runner wrote for
it; an SLA probe is also ``sla-probe-invalid``. A clean sweep has no blocking finding.

The ``fast`` profile is slowed ten times (decode steps of 50-180 ms) so a busy 2-core machine keeps the
simulator on its model outside the injected stall; a unit named beyond the stalled one is accepted only
when its own row shows the loss (the machine was busy: a pytest warning), as in tests/run/test_faults.py.
"""

from __future__ import annotations

import json
import warnings
from pathlib import Path
from typing import Any

import pytest
from testkit import only_archive, run_cli

from harness.evidence.findings import Finding
from harness.evidence.rules.instruments import SIM_LATENESS_FRACTION
from harness.inputs.spec import load_spec
from harness.run.replay import run_replay_loaded
from harness.run.sla import run_sla_loaded
from harness.run.sweep import run_sweep

REPO = Path(__file__).resolve().parents[2]
CORPUS = REPO / "corpora" / "sim-code-512"
TRACE = REPO / "tests" / "fixtures" / "traces" / "mooncake-small.jsonl"
# the 4th /generate request: after 2 warmups the 2nd of the first measured round (a replay: its 4th)
STALL = ", fault: 'stall_loop:400', fault_every: 4, fault_first: 4"
SERVICE = "{{backend: sim, sim: {{profile: fast, time_scale: 10{fault}}}, startup_timeout_s: 60}}"

SWEEP = """
name: unit-sweep
kind: rate-sweep
claim_class: native-ar
service: {service}
corpus: {corpus}
rates: [4]
arrivals: {{process: poisson, seed: 1, count: 6, max_concurrency: 16}}
rounds: 2
warmup_requests: 2
max_new_tokens: 8
slo: {{ttft_ms: 5000, tpot_ms: 1000}}
schedule_tolerance_ms: 200
"""
SLA = """
name: unit-sla
kind: sla-search
claim_class: native-ar
service: {service}
corpus: {corpus}
arrivals: {{process: constant, count: 6}}
rounds: 1
warmup_requests: 2
max_new_tokens: 8
use_case_output_lengths: false
ignore_eos: true
limits: {{ttft_ms: 5000}}
search: {{start_req_s: 4, precision_req_s: 1, max_probes: 1, max_remeasure: 0}}  # the stalled probe, not measured again
schedule_tolerance_ms: 200
"""
REPLAY = """
name: unit-replay
kind: trace-replay
claim_class: native-ar
service: {service}
corpus: {corpus}
trace: {trace}
speed: 2
lateness_tolerance_ms: 1000
"""


def write(path: Path, text: str, fault: str, **fields: Path) -> Path:
    path.write_text(text.format(service=SERVICE.format(fault=fault), **fields))
    return path


def checks(archive: Path) -> dict[str, dict[str, Any]]:
    """The archive's self-check rows by wave id."""
    rows = [json.loads(x) for x in (archive / "wave_checks.jsonl").read_text().splitlines()]
    return {str(r["wave_id"]): r for r in rows}


def late_on_its_own(archive: Path, window_s: dict[str, float]) -> set[str]:
    """The wave ids whose own self-check row shows a loss of at least the tolerance (independently of the
    rule): ``window_s`` per wave id."""
    return {w for w, c in checks(archive).items()
            if c["sim_lateness_s"] is not None and c["sim_lateness_s"] >= SIM_LATENESS_FRACTION * window_s[w]}


def blocking_lateness(findings: list[Finding]) -> Finding:
    (f,) = [f for f in findings if f.rule == "sim-lateness" and f.blocking]
    return f


def rounds_of(archive: Path) -> list[dict[str, Any]]:
    doc = json.loads((archive / ("sla.json" if (archive / "sla.json").is_file() else "sweep.json")).read_text())
    return list(doc["rounds"])


def round_rows(late: set[str]) -> tuple[str, ...]:
    """The rows a blocking sim-lateness names for the late rounds' wave ids: wave, round, cell."""
    return tuple(sorted({x for w in late for x in (w, w.removesuffix(".w000"), w.split(".r")[0])}))


def busy(name: str, extra: set[str]) -> None:
    if extra:
        warnings.warn(f"{name}: the machine was busy: {sorted(extra)} lost 1% on their own", stacklevel=2)


@pytest.mark.slow
def test_a_stalled_sweep_round_is_blocking_with_its_round_and_cell(tmp_path: Path) -> None:
    out = run_sweep(write(tmp_path / "s.yaml", SWEEP, STALL, corpus=CORPUS), tmp_path / "ws")
    archive = only_archive(tmp_path / "ws")
    rows = checks(archive)
    assert sorted(rows) == ["sweep-4rps.r0.w000", "sweep-4rps.r1.w000"]  # one row per measured round
    assert {(r["round_id"], r["cell_id"], r["phase"], r["workload"]) for r in rows.values()} == {
        ("sweep-4rps.r0", "sweep-4rps", "measured", "sweep"), ("sweep-4rps.r1", "sweep-4rps", "measured", "sweep")}
    stalled = rows["sweep-4rps.r0.w000"]
    assert stalled["sim_late_steps"] >= 1 and stalled["sim_lateness_s"] > 0.2  # the 400 ms stall
    window = {f"{r['round_id']}.w000": float(r["duration_s"]) for r in rounds_of(archive)}
    late = late_on_its_own(archive, window)
    assert "sweep-4rps.r0.w000" in late
    busy("sweep", late - {"sweep-4rps.r0.w000"})
    f = blocking_lateness(out.finished.findings)
    assert f.rows == round_rows(late) and f.scope == "rows"
    assert "at least 1% of the round's window; e.g. sweep-4rps.r0" in f.message
    print("sweep:", f.rows)


@pytest.mark.slow
def test_a_stalled_sla_probe_is_blocking_and_an_invalid_probe(tmp_path: Path) -> None:
    out = run_sla_loaded(load_spec(write(tmp_path / "q.yaml", SLA, STALL, corpus=CORPUS)), tmp_path / "ws")
    archive = only_archive(tmp_path / "ws")
    assert sorted(checks(archive)) == ["sweep-4rps.r0.w000"]
    window = {f"{r['round_id']}.w000": float(r["duration_s"]) for r in rounds_of(archive)}
    assert late_on_its_own(archive, window) == {"sweep-4rps.r0.w000"}
    f = blocking_lateness(out.finished.findings)
    assert f.rows == ("sweep-4rps", "sweep-4rps.r0", "sweep-4rps.r0.w000")
    (p,) = [g for g in out.finished.findings if g.rule == "sla-probe-invalid"]
    assert (p.severity, p.rows) == ("blocking", ("sweep-4rps.m0", "sweep-4rps.r0"))
    assert "the simulator lost" in p.message and "of model time" in p.message
    print("sla:", f.rows, p.rows)


@pytest.mark.slow
def test_a_stalled_replay_is_blocking_for_the_run(tmp_path: Path) -> None:
    code, out_text, err = run_cli("corpus", "import-trace", str(TRACE), "--out", str(tmp_path / "mc"))
    assert code == 0, out_text + err
    spec = write(tmp_path / "r.yaml", REPLAY, STALL, corpus=tmp_path / "mc", trace=TRACE)
    out = run_replay_loaded(load_spec(spec), tmp_path / "ws")
    archive = only_archive(tmp_path / "ws")
    (row,) = checks(archive).values()
    assert (row["wave_id"], row["round_id"], row["cell_id"], row["workload"]) == (
        "replay.r0.w000", "replay.r0", "replay", "replay")
    assert out.row is not None
    assert late_on_its_own(archive, {"replay.r0.w000": float(out.row["duration_s"])}) == {"replay.r0.w000"}
    f = blocking_lateness(out.finished.findings)
    assert (f.rows, f.scope) == (("replay", "replay.r0.w000"), "run")
    print("replay:", f.rows, f.scope)


@pytest.mark.slow
def test_a_clean_sweep_has_no_blocking_finding(tmp_path: Path) -> None:
    out = run_sweep(write(tmp_path / "s.yaml", SWEEP, "", corpus=CORPUS), tmp_path / "ws")
    archive = only_archive(tmp_path / "ws")
    rows = checks(archive)
    assert len(rows) == 2 and all(r["sim_late_steps"] is not None for r in rows.values())  # read per round
    window = {f"{r['round_id']}.w000": float(r["duration_s"]) for r in rounds_of(archive)}
    late = late_on_its_own(archive, window)
    busy("clean sweep", late)
    blocking = [f for f in out.finished.findings if f.blocking]
    assert [(f.rule, f.rows) for f in blocking] == ([("sim-lateness", round_rows(late))] if late else [])
    assert not [f for f in out.finished.findings if f.rule == "sim-lateness" and f.severity == "warning"]
