"""Governance on real simulator archives: three suites, a control, the shipped gates, a record, a
freeze-before-reveal and an ABBA screen for the hardware gate (about 18 s in all)."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest
import yaml

from harness.errors import EvidenceError
from harness.governance.io import add_closure, check_direction, check_gate, freeze_file, propose_record, reveal_file
from harness.inputs.spec import AbbaSpec, loaded_abba
from harness.run.abba import run_abba
from harness.run.campaign import run_campaign
from harness.store.archive import Archive

REPO = Path(__file__).resolve().parents[2]
GATES = REPO / "campaigns" / "gates"
CORPUS = REPO / "corpora" / "sim-code-512"


def _spec(tmp: Path, name: str, step_factor: float) -> Path:
    p = tmp / f"{name}.yaml"
    p.write_text(yaml.safe_dump({
        "name": name, "claim_class": "native-ar",
        "service": {"backend": "sim", "startup_timeout_s": 60,
                    "sim": {"profile": "paper-tp8", "time_scale": 0.5, "step_factor": step_factor}},
        "corpora": {"decode": str(CORPUS)},
        "decode": {"tiers": [1], "rounds": 3, "min_resident_seconds": 0.2, "max_new_tokens": 120}}),
        encoding="utf-8")
    return p


ATTEMPTS = 3


def _on_time(spec: Path, ws: Path) -> Archive:
    """A complete campaign the simulator kept up with. A busy machine can make the simulator lose 1%
    of a window or more (a blocking ``sim-lateness``: the cell is invalid and a record refuses it); the
    rule's remedy is a rerun, so the campaign is rerun up to ``ATTEMPTS`` times, then the module is
    skipped (the machine, not governance, failed)."""
    for _ in range(ATTEMPTS):
        out = run_campaign(spec, ws)
        assert out.status == "complete", out.error
        late = [f for f in out.findings if f.rule == "sim-lateness" and f.blocking]
        if not late:
            return out.archive
    pytest.skip(f"the simulator fell behind its model in {ATTEMPTS} runs (busy machine): {late[0].message}")


@pytest.fixture(scope="module")
def runs(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
    ws = tmp_path_factory.mktemp("gov-real")
    suites = [_on_time(_spec(ws, f"suite{i}", 1.0), ws) for i in range(3)]
    control = _on_time(_spec(ws, "control", 1.1), ws)
    return {"ws": ws, "suites": suites, "control": control}


@pytest.mark.slow
def test_shipped_gates_and_a_record_from_real_runs(runs: dict[str, Any]) -> None:
    ws: Path = runs["ws"]
    suites: list[Archive] = runs["suites"]
    for s in suites:
        for g in ("fresh-response.yaml", "exact-repeat.yaml"):
            row = check_gate(GATES / g, s.archive_id, ws, candidate="sim-baseline")
            assert row["passed"], row
    proposal = ws / "rec.yaml"
    proposal.write_text(yaml.safe_dump({
        "name": "sim-c1-single-stream", "scope": "sim-paper-tp8-c1", "metric": "single_stream_decode",
        "concurrency": 1, "claim_class": "native-ar", "candidate": "sim-baseline",
        "suites": [s.archive_id for s in suites], "gates": ["fresh-response", "exact-repeat"],
        "control": {"archives": [runs["control"].archive_id], "declared_change": ["sim.step_factor"]}}),
        encoding="utf-8")
    row = propose_record(proposal, ws)
    # structure, not simulator fidelity: at time_scale 0.5 the client's receive lag is a visible share
    # of a 5.8 ms step, so only the arithmetic of the record is asserted here
    assert row["value"] == sorted(row["suite_values"])[1] and row["value"] > 0
    assert row["control_values"][0] > 0 and row["over_control_pct"] is not None
    assert row["data_origin"] == "simulated" and len(set(row["suite_ids"])) == 3


@pytest.mark.slow
def test_freeze_before_reveal_against_a_real_archive(runs: dict[str, Any], tmp_path: Path) -> None:
    ws: Path = runs["ws"]
    archive: Archive = runs["suites"][0]
    plan = tmp_path / "plan.yaml"
    plan.write_text("predict: C1 >= 80 tok/s\n", encoding="utf-8")
    freeze_file(plan, ws, now=datetime.now(UTC) - timedelta(days=1))
    assert reveal_file(plan, archive.archive_id, ws)["passed"]
    late = tmp_path / "late.yaml"
    late.write_text("predict after the fact\n", encoding="utf-8")
    freeze_file(late, ws)
    assert reveal_file(late, archive.archive_id, ws)["outcome"] == "frozen after the results"


@pytest.mark.slow
def test_hw_gate_and_closure_on_a_real_abba(runs: dict[str, Any]) -> None:
    ws: Path = runs["ws"]
    spec = AbbaSpec.model_validate({
        "name": "gov-abba",
        "control": {"name": "ctrl", "backend": "sim", "sim": {"profile": "fast"}},
        "candidate": {"name": "cand", "backend": "sim", "sim": {"profile": "fast", "step_factor": 1 / 1.1}},
        "workload": {"corpus": str(CORPUS), "concurrency": 8, "waves_per_leg": 1, "warmup_waves": 1,
                     "max_new_tokens": 64, "ignore_eos": True, "declared_change": ["sim.step_factor"]}})
    out = run_abba(loaded_abba(spec, REPO), ws)
    assert out.status == "complete"
    row = check_gate(GATES / "hw-gate-0.5ms-per-token.yaml", out.archive.archive_id, ws, candidate="cand")
    c, r = 8, out.result
    assert row["value"] == pytest.approx(1000 * c / r.control_mean - 1000 * c / r.candidate_mean)
    assert row["passed"] is (row["value"] >= 0.5)
    # a closed direction refuses the next spec declaring it until newer evidence (the screen) reopens it
    add_closure(ws, "sim-step-factor", runs["control"].archive_id, "demo closure")
    with pytest.raises(EvidenceError, match="reopen it only with new evidence"):
        check_direction(ws, "sim-step-factor", None)
    with pytest.raises(EvidenceError, match="older than the archive that closed"):
        check_direction(ws, "sim-step-factor", runs["suites"][0].archive_id)
    reopened = check_direction(ws, "sim-step-factor", out.archive.archive_id, "screened again")
    assert reopened["state"] == "reopened"
