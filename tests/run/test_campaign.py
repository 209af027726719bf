"""End to end: formal matrix campaigns against the real simulator (an owned subprocess)."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
from ledger_helpers import ledger_df

from harness.errors import CorpusError, MeasurementError, ServerUnreachable
from harness.measure.metrics import resident_decode_rate
from harness.run.campaign import run_campaign
from harness.sim import analytic_decode_rate, get_profile
from harness.store.archive import open_archive, verify_archive

REPO = Path(__file__).resolve().parents[2]
D512 = REPO / "corpora" / "sim-code-512"
D8K = REPO / "corpora" / "sim-code-8k"

SPEC = f"""
name: e2e
claim_class: native-ar
service: {{backend: sim, sim: {{profile: fast}}, startup_timeout_s: 60}}
corpora: {{decode: {D512}, prefill: {D8K}}}
decode: {{tiers: [1, 8, 32], rounds: 3, min_resident_seconds: 0.25, warmup_waves: 1, max_new_tokens: 64}}
prefill: {{tiers: [2], rounds: 3}}
"""


def write_spec(tmp_path: Path, text: str = SPEC, name: str = "spec.yaml") -> Path:
    p = tmp_path / name
    p.write_text(text)
    return p


@pytest.mark.slow
def test_formal_matrix_end_to_end(tmp_path: Path) -> None:
    ws = tmp_path / "ws"
    out = run_campaign(write_spec(tmp_path), ws)
    assert out.status == "complete" and out.error is None
    assert verify_archive(out.archive.path) == []
    prof = get_profile("fast")
    cells = {(c.workload, c.concurrency): c for c in out.results.cells}
    recs = out.archive.records()
    svc = json.loads((out.archive.path / "service.json").read_text())["services"][0]
    late_s = svc["server_info_at_stop"]["internal_states"][0]["sim_lateness_total_s"]
    for c in (1, 8, 32):
        cell = cells[("decode", c)]
        assert cell.status == "complete" and len(cell.round_tok_s) == 3
        # the client's measurement equals what the server emitted (its own monotonic emit stamps)
        waves: dict[str, list] = {}  # type: ignore[type-arg]
        for r in recs:
            if r.phase == "measured" and r.workload == "decode" and r.concurrency == c:
                waves.setdefault(r.wave_id, []).append(r)
        emitted = resident_decode_rate([[r.replace(event_ns=r.emit_ns) for r in w] for w in waves.values()]).rate
        client = resident_decode_rate(list(waves.values())).rate
        # (unless the client itself fell behind its streams on a busy machine: its own findings say so)
        if not {f.rule for f in out.findings} & {"client-lag", "client-stalled", "client-bound"}:
            assert client == pytest.approx(emitted, rel=0.02), (c, client, emitted)
        # and, when the simulator kept real time (no late steps on a busy machine), the model's rate
        if late_s == 0:
            want = analytic_decode_rate(prof, c)
            assert cell.median_tok_s == pytest.approx(want, rel=0.02), (c, cell.median_tok_s, want)
        assert cell.http_output_tok_s < cell.median_tok_s  # admission, prefill and drain are outside resident windows
    pre = cells[("prefill", 2)]
    assert pre.status == "complete" and pre.cache_violations == 0
    # warmups are recorded but never in a figure
    recs = out.archive.records()
    assert any(r.phase == "warmup" for r in recs)
    wave_rows = ledger_df(ws, "waves")
    assert set(wave_rows.phase) == {"warmup", "measured"}
    ledger_cells = ledger_df(ws, "cells")
    assert (ledger_cells.data_origin == "simulated").all()
    assert (ledger_cells.protocol_class == "formal").all()
    # decode waves cycle through corpus cases and keep membership
    c8 = [r for r in recs if r.concurrency == 8 and r.workload == "decode"]
    assert len({r.case_id for r in c8}) > 8
    # every prefill request was verified fresh
    assert all(r.cached_tokens == 0 for r in recs if r.workload == "prefill")
    run = out.archive.manifest["run"]
    assert "simulated" in run["labels"]
    svc = json.loads((out.archive.path / "service.json").read_text())["services"][0]
    assert svc["owned"] and svc["server_info"]["tp_size"] == 8


def test_missing_corpus_refused_before_any_request(tmp_path: Path) -> None:
    spec = write_spec(tmp_path, SPEC.replace(str(D512), str(tmp_path / "nope")))
    with pytest.raises(CorpusError):
        run_campaign(spec, tmp_path / "ws")
    assert not (tmp_path / "ws" / "archives").exists()


def test_corpus_hash_mismatch_refused(tmp_path: Path) -> None:
    import shutil

    bad = tmp_path / "corpus"
    shutil.copytree(D512, bad)
    lines = (bad / "cases.jsonl").read_text().splitlines()
    row = json.loads(lines[3])
    row["input_ids"][5] += 1
    lines[3] = json.dumps(row)
    (bad / "cases.jsonl").write_text("\n".join(lines) + "\n")
    with pytest.raises(CorpusError, match=row["case_id"]):
        run_campaign(write_spec(tmp_path, SPEC.replace(str(D512), str(bad))), tmp_path / "ws")


def test_unreachable_attached_service(tmp_path: Path) -> None:
    from harness.service.launch.manager import free_port

    port = free_port()
    spec = SPEC.replace("{backend: sim, sim: {profile: fast}, startup_timeout_s: 60}",
                        f"{{backend: attach, url: 'http://127.0.0.1:{port}'}}")
    out = run_campaign(write_spec(tmp_path, spec), tmp_path / "ws")
    assert out.status == "failed"
    assert isinstance(out.error, ServerUnreachable)
    assert out.error.hint and "resume" in out.error.hint


@pytest.mark.slow
def test_server_dies_mid_round_then_resume(tmp_path: Path) -> None:
    ws = tmp_path / "ws"
    dying = SPEC.replace("sim: {profile: fast}", "sim: {profile: fast, die_after_requests: 40}")
    spec = write_spec(tmp_path, dying)
    out = run_campaign(spec, ws)
    assert out.status == "failed"
    assert isinstance(out.error, MeasurementError | __import__("harness.errors").errors.ServiceDied)
    assert verify_archive(out.archive.path) == []
    rounds = {r.round_id: r.status for r in out.results.rounds}
    assert "ok" in rounds.values()  # completed rounds kept
    failed_records = [r for r in out.archive.records() if not r.ok]
    assert failed_records, "the failed wave's records are kept, marked with their error"
    # the 40th request falls in a measured wave or, when a busy machine made the rounds take more waves
    # to reach their resident minimum, in the next cell's warmup wave (then no round has failed)
    in_round = any(r.phase == "measured" for r in failed_records)
    assert not in_round or any(s in ("failed", "incomplete") for s in rounds.values()), rounds
    # resume with a healthy service (same plan: die_after_requests is a service option, not a cell)
    spec.write_text(SPEC)
    out2 = run_campaign(spec, ws, resume=out.archive.path)
    assert out2.status == "complete", out2.error
    assert out2.archive.manifest["run"]["resumed_from"] == out.archive.archive_id
    assert all(c.status == "complete" for c in out2.results.cells)
    assert len(list((ws / "archives").iterdir())) == 2  # the failed archive is never overwritten
    # the failed attempt stays visible as a failed round
    assert not in_round or any(r.status in ("failed", "incomplete") for r in out2.results.rounds)


@pytest.mark.slow
def test_ctrl_c_keeps_records_and_marks_partial(tmp_path: Path) -> None:
    ws = tmp_path / "ws"
    long = SPEC.replace("min_resident_seconds: 0.25", "min_resident_seconds: 30")
    spec = write_spec(tmp_path, long)
    env = dict(os.environ, PYTHONUNBUFFERED="1")
    proc = subprocess.Popen([sys.executable, "-m", "harness.cli", "campaign", "run", str(spec), "-w", str(ws)],
                            stdout=subprocess.PIPE, stderr=subprocess.STDOUT, env=env, cwd=REPO)
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        parts = list((ws / "archives").glob(".partial-*/records/*.parquet")) if (ws / "archives").exists() else []
        if len(parts) >= 3:
            break
        time.sleep(0.2)
    proc.send_signal(signal.SIGINT)
    output, _ = proc.communicate(timeout=60)
    text = output.decode()
    assert proc.returncode == 130, text
    archives = [d for d in (ws / "archives").iterdir() if not d.name.startswith(".")]
    assert len(archives) == 1
    a = open_archive(archives[0])
    assert a.status == "partial"
    assert len(a.records()) >= 3
    # the hint is the command that works as printed: from the repo, the workspace is not the default
    assert f"continue with 'dsv4h campaign run {spec} --resume {a.archive_id} -w {ws}'" in text, text
    assert verify_archive(a.path) == []


def test_closed_direction_refused_and_plan_labels(tmp_path: Path) -> None:
    from datetime import UTC, datetime, timedelta

    from harness.errors import EvidenceError
    from harness.governance.io import add_closure, freeze_file

    ws = tmp_path / "ws"
    first = run_campaign(write_spec(tmp_path, SPEC.replace("tiers: [1, 8, 32]", "tiers: [1]")
                                    .replace("prefill: {tiers: [2], rounds: 3}", "")), ws)
    add_closure(ws, "fused-moe-x", first.archive.archive_id, "slower in a matched screen")
    closed = SPEC.replace("tiers: [1, 8, 32]", "tiers: [1]").replace(
        "prefill: {tiers: [2], rounds: 3}", "direction: fused-moe-x")
    with pytest.raises(EvidenceError, match="fused-moe-x"):
        run_campaign(write_spec(tmp_path, closed, "closed.yaml"), ws)
    # a frozen analysis plan labels the run preregistered; an unfrozen one exploratory
    plan = tmp_path / "plan.md"
    plan.write_text("C1 resident rate will be within 2% of the model.\n")
    freeze_file(plan, ws, now=datetime.now(UTC) - timedelta(minutes=5))
    pre = SPEC.replace("tiers: [1, 8, 32]", "tiers: [1]").replace(
        "prefill: {tiers: [2], rounds: 3}", f"analysis_plan: {plan}")
    out = run_campaign(write_spec(tmp_path, pre, "pre.yaml"), ws)
    assert "preregistered" in out.archive.manifest["run"]["labels"]
    plan.write_text("changed after the freeze\n")
    out2 = run_campaign(write_spec(tmp_path, pre, "pre2.yaml"), ws)
    assert "exploratory" in out2.archive.manifest["run"]["labels"]


def test_port_in_use_names_port_and_field_and_leaves_no_archive(tmp_path: Path) -> None:
    """A service port that is taken: one error naming host:port and the spec field, a hint, no
    asyncio noise, no results table, no archive (partial or final) and no ledger rows."""
    import socket

    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = taken.getsockname()[1]
        spec = write_spec(tmp_path, SPEC.replace("startup_timeout_s: 60}", f"startup_timeout_s: 60, port: {port}}}"))
        ws = tmp_path / "ws"
        proc = subprocess.run([sys.executable, "-m", "harness.cli", "campaign", "run", str(spec), "-w", str(ws)],
                              capture_output=True, text=True, timeout=120, cwd=REPO, check=False)
    assert proc.returncode != 0
    errors = [line for line in proc.stderr.splitlines() if line.startswith("error:")]
    assert len(errors) == 1, proc.stderr
    assert f"127.0.0.1:{port}" in errors[0] and "'service.port'" in errors[0], errors[0]
    assert "hint:" in proc.stderr and "stop the process" in proc.stderr
    assert "Task was destroyed" not in proc.stdout + proc.stderr
    assert "--resume" not in proc.stdout + proc.stderr
    assert "Resident" not in proc.stdout  # no (empty) results table
    assert not (ws / "archives").exists() or list((ws / "archives").iterdir()) == []
    assert not ws.exists() or list(ws.rglob("*.parquet")) == []  # no ledger rows
