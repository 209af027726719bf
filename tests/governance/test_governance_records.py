"""Records: every rule has one proposal that passes and one that is refused."""

from __future__ import annotations

import statistics
from pathlib import Path
from typing import Any

import pytest
import yaml
from hypothesis import given, settings
from hypothesis import strategies as st
from test_governance_support import make_abba, make_formal, profile, stream_record

from harness.errors import EvidenceError, SpecError
from harness.governance import record_claims as gv
from harness.governance.io import check_gate, get_record, propose_record, table_rows

REPO = Path(__file__).resolve().parents[2]
FRESH = REPO / "campaigns" / "gates" / "fresh-response.yaml"
CONTROL_PROFILE = profile(sim={"step_factor": 1.1})


def write(tmp: Path, data: dict[str, Any], name: str = "proposal.yaml") -> Path:
    p = tmp / name
    p.write_text(yaml.safe_dump(data), encoding="utf-8")
    return p


def proposal(suites: list[str], control_ids: list[str], **over: Any) -> dict[str, Any]:
    return {"name": "rec", "scope": "sim-c1", "metric": "resident_decode", "concurrency": 1,
            "claim_class": "native-ar", "candidate": "cand", "suites": suites,
            "control": {"archives": control_ids, "declared_change": ["sim.step_factor"]},
            "gates": ["fresh-response"]} | over


def evidence(ws: Path, values: tuple[float, ...] = (100.0, 102.0, 101.0), gate: bool = True,
             **kw: Any) -> tuple[list[str], list[str]]:
    suites = [make_formal(ws, value=v, **kw).archive_id for v in values]
    control = [make_formal(ws, value=95.0, prof=CONTROL_PROFILE, **kw).archive_id]
    if gate:
        check_gate(FRESH, suites[0], ws)
    return suites, control


def refused(path: Path, ws: Path) -> str:
    with pytest.raises(EvidenceError) as exc:
        propose_record(path, ws)
    return exc.value.message


def test_record_accepted_with_lineage(tmp_path: Path) -> None:
    ws = tmp_path
    suites, control = evidence(ws)
    row = propose_record(write(tmp_path, proposal(suites, control)), ws)
    assert row["value"] == 101.0  # median of the suite medians
    assert row["suite_values"] == [100.0, 102.0, 101.0] and row["suite_ids"] == suites
    assert row["control_values"] == [95.0] and row["gates"] == ["fresh-response"]
    assert row["previous_record_id"] is None and row["data_origin"] == "simulated"
    assert row["over_control_pct"] == pytest.approx((101.0 / 95.0 - 1) * 100)
    assert row["record_id"] == gv.record_id(get_record(ws, row["record_id"][:8])["content_json"])
    # the next record of the lineage keeps this one and the percentage over it (through the guard)
    suites2, control2 = evidence(ws, values=(110.0, 111.0, 112.0))
    row2 = propose_record(write(tmp_path, proposal(suites2, control2, name="rec2"), "p2.yaml"), ws)
    assert row2["previous_record_id"] == row["record_id"] and row2["previous_value"] == 101.0
    assert row2["over_previous_pct"] == pytest.approx((111.0 / 101.0 - 1) * 100)
    assert [r["record_id"] for r in table_rows(ws, "records")] == [row["record_id"], row2["record_id"]]


def test_missing_everything_lists_every_problem(tmp_path: Path) -> None:
    msg = refused(write(tmp_path, proposal([], [], gates=[], control={"archives": [], "declared_change": []})),
                  tmp_path)
    for needle in ("suites: 0 given, at least 3", "no control archive", "declared_change is empty",
                   "gates: none named"):
        assert needle in msg
    assert not table_rows(tmp_path, "records")


def test_too_few_suites(tmp_path: Path) -> None:
    suites, control = evidence(tmp_path, values=(100.0, 101.0))
    assert "suites: 2 given, at least 3" in refused(write(tmp_path, proposal(suites, control)), tmp_path)


def test_unknown_and_duplicate_suites(tmp_path: Path) -> None:
    suites, control = evidence(tmp_path)
    msg = refused(write(tmp_path, proposal([suites[0], suites[0][:10], "ffffffffffffffff"], control)), tmp_path)
    assert "the same archive as" in msg and "suite ffffffffffffffff: cannot be read" in msg
    assert "only 1 distinct readable archives" in msg


def test_same_service_start_reused(tmp_path: Path) -> None:
    ws = tmp_path
    suites = [make_formal(ws, value=v, pid=4242, create_time=1.5).archive_id for v in (100.0, 101.0)]
    suites.append(make_formal(ws, value=102.0).archive_id)
    control = [make_formal(ws, value=95.0, prof=CONTROL_PROFILE).archive_id]
    check_gate(FRESH, suites[0], ws)
    msg = refused(write(tmp_path, proposal(suites, control)), ws)
    assert "reuses the service start" in msg and "pid 4242" in msg


def test_control_differs_in_undeclared_key(tmp_path: Path) -> None:
    ws = tmp_path
    suites, _ = evidence(ws)
    bad = make_formal(ws, value=95.0, prof=profile(sim={"step_factor": 1.1}, tp_size=4)).archive_id
    msg = refused(write(tmp_path, proposal(suites, [bad])), ws)
    assert "undeclared key: identity.tp_size" in msg  # a flat profile key, named in the sectioned spelling


def test_a_sectioned_control_against_flat_suites_with_a_flat_declared_key(tmp_path: Path) -> None:
    """Suites recorded flat (archives of format 3), a control recorded in sections (format 4) that
    differs only in one environment variable, declared in spec format 1's spelling: accepted."""
    ws = tmp_path
    suites, _ = evidence(ws)
    sectioned = {"name": "svc", "backend": "sim", "identity": {"tp_size": None, "expect": {}},
                 "launch": {"env": {"NCCL_ALGO": "ring"}},
                 "sim": {"profile": "paper-tp8", "step_factor": 1.0, "time_scale": 1.0}}
    control = [make_formal(ws, value=95.0, prof=sectioned).archive_id]
    row = propose_record(write(tmp_path, proposal(suites, control, control={
        "archives": control, "declared_change": ["env.NCCL_ALGO"]})), ws)
    assert row["control_values"] == [95.0] and row["value"] == 101.0


def test_control_must_differ_in_the_declared_change_and_be_separate(tmp_path: Path) -> None:
    ws = tmp_path
    suites, _ = evidence(ws)
    same = make_formal(ws, value=95.0).archive_id
    msg = refused(write(tmp_path, proposal(suites, [same, suites[1]])), ws)
    assert "declared change 'sim.step_factor' does not differ" in msg
    assert "is also a suite" in msg


def test_control_of_another_build(tmp_path: Path) -> None:
    ws = tmp_path
    suites, _ = evidence(ws)
    other = make_formal(ws, value=95.0, prof=CONTROL_PROFILE, engine="sim-0.2.0").archive_id
    assert "not the same build" in refused(write(tmp_path, proposal(suites, [other])), ws)


def test_missing_gate_and_failing_gate(tmp_path: Path) -> None:
    ws = tmp_path
    suites, control = evidence(ws, gate=False)
    msg = refused(write(tmp_path, proposal(suites, control, gates=["fresh-response", "exact-repeat"])), ws)
    assert "gate fresh-response: no result" in msg and "gate exact-repeat: no result" in msg
    # a failing result does not count; a passing result for the candidate name does
    cached = make_formal(ws, value=1.0, cached=7).archive_id
    with pytest.raises(EvidenceError):
        raise_if_failed(check_gate(FRESH, cached, ws, candidate="cand"))
    assert "1 result(s), none passing" in refused(write(tmp_path, proposal(suites, control)), ws)
    check_gate(FRESH, make_formal(ws, value=2.0).archive_id, ws, candidate="cand")
    assert propose_record(write(tmp_path, proposal(suites, control)), ws)["gates"] == ["fresh-response"]


def raise_if_failed(row: dict[str, Any]) -> None:
    if not row["passed"]:
        raise EvidenceError(row["detail"])


def test_suite_problems_incomplete_blocking_claim_definition(tmp_path: Path) -> None:
    ws = tmp_path
    good = make_formal(ws, value=100.0).archive_id
    partial = make_formal(ws, value=101.0, status="partial").archive_id
    blocked = make_formal(ws, value=102.0, cell_status="partial").archive_id  # formal-rounds is blocking
    spec_claim = make_formal(ws, value=103.0, claim="speculative-full-target").archive_id
    other_def = make_formal(ws, value=104.0, decode={"max_new_tokens": 512}).archive_id
    screen = make_abba(ws).archive_id
    control = [make_formal(ws, value=95.0, prof=CONTROL_PROFILE).archive_id]
    check_gate(FRESH, good, ws)
    msg = refused(write(tmp_path, proposal([good, partial, blocked, spec_claim, other_def, screen], control)), ws)
    assert f"suite {partial}: archive is partial" in msg
    assert f"suite {blocked}: blocking evidence finding: formal-rounds" in msg
    assert f"suite {spec_claim}: claim class speculative-full-target" in msg and "rule 1" in msg
    assert f"suite {other_def}: different metric definition" in msg and "max_new_tokens" in msg
    assert f"suite {screen}: protocol abba-screen" in msg and "rule 3" in msg


def test_previous_record_of_another_claim_refused_citing_the_rule(tmp_path: Path) -> None:
    ws = tmp_path
    s1, c1 = evidence(ws, claim="speculative-full-target")
    first = propose_record(write(tmp_path, proposal(s1, c1, claim_class="speculative-full-target")), ws)
    s2, c2 = evidence(ws, values=(110.0, 111.0, 112.0))
    # the lineage lookup never crosses claim classes ...
    assert propose_record(write(tmp_path, proposal(s2, c2), "p2.yaml"), ws)["previous_record_id"] is None
    # ... and naming a previous record of another claim class is refused by the guard
    s3, c3 = evidence(ws, values=(120.0, 121.0, 122.0))
    msg = refused(write(tmp_path, proposal(s3, c3, previous=first["record_id"]), "p3.yaml"), ws)
    assert "rule 1" in msg and first["record_id"] in msg


def test_same_suites_cannot_be_recorded_twice(tmp_path: Path) -> None:
    ws = tmp_path
    suites, control = evidence(ws)
    path = write(tmp_path, proposal(suites, control))
    rid = propose_record(path, ws)["record_id"]
    msg = refused(path, ws)
    assert f"already recorded as record {rid}" in msg and "previous" not in msg.split("already")[0]


def test_single_stream_metric(tmp_path: Path) -> None:
    ws = tmp_path

    def recs(step: float) -> list[Any]:
        return [stream_record(k, case_id=f"c{k}", step_ms=step) for k in range(4)] + [
            stream_record(9, n_tokens=50, step_ms=1.0)]  # too short: left out

    suites = [make_formal(ws, records=recs(s)).archive_id for s in (20.0, 25.0, 22.0)]
    control = [make_formal(ws, records=recs(30.0), prof=CONTROL_PROFILE).archive_id]
    check_gate(FRESH, suites[1], ws)
    row = propose_record(write(tmp_path, proposal(suites, control, metric="single_stream_decode")), ws)
    assert row["value"] == pytest.approx(1000 / 22.0)
    assert row["suite_values"] == pytest.approx([50.0, 40.0, 1000 / 22.0])
    assert "tokens 1-100" in row["unit"]


def test_malformed_proposal_names_file_and_field(tmp_path: Path) -> None:
    path = write(tmp_path, proposal([], []) | {"suite": []})
    with pytest.raises(SpecError, match=r"proposal\.yaml.*\n.*suite: unknown key 'suite' \(did you mean 'suites'"):
        propose_record(path, tmp_path)
    path = write(tmp_path, proposal([], [], metric="decode"))
    with pytest.raises(SpecError, match="metric"):
        propose_record(path, tmp_path)


@settings(max_examples=40, deadline=None)
@given(st.lists(st.floats(1.0, 1e4, allow_nan=False), min_size=3, max_size=7))
def test_record_value_is_median_of_suite_medians(values: list[float]) -> None:
    facts = {f"s{i}": gv.ArchiveFacts(
        archive_id=f"{i:016x}", status="complete", kind="formal-matrix", claim_class="native-ar",
        protocol_class="formal", backend="sim", labels=("simulated",), created_wall="", service_profile={"a": 1},
        service_starts=((i, 1.0),), build={}, metric_definition={"m": 1}, metric_value=v, metric_n=3)
        for i, v in enumerate(values)}
    ctrl = {"c": gv.ArchiveFacts(
        archive_id="c" * 16, status="complete", kind="formal-matrix", claim_class="native-ar",
        protocol_class="formal", backend="sim", labels=(), created_wall="", service_profile={"a": 2},
        service_starts=((99, 1.0),), build={}, metric_definition={"m": 1}, metric_value=1.0, metric_n=3)}
    p = gv.RecordProposal.model_validate(proposal(list(facts), ["c"], control={"archives": ["c"],
                                                                               "declared_change": ["a"]}))
    draft = gv.evaluate_proposal(p, facts, ctrl, [{"gate": "fresh-response", "passed": True,
                                                   "archive_id": "0" * 16}], [])
    assert draft.content["value"] == statistics.median(values)
    assert draft.record_id == gv.record_id(draft.content)
