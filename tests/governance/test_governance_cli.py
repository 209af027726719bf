"""Governance commands through the CLI: output, refusals and exit codes end to end."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest
import typer
import yaml
from test_governance_support import make_abba, make_formal, profile
from typer.testing import CliRunner

from harness.cli import closure_cmd, gate_cmd, record_cmd
from harness.cli.freeze_cmd import freeze, reveal
from harness.cli.historical_cmd import import_historical
from harness.errors import EvidenceError
from harness.governance.io import table_rows

REPO = Path(__file__).resolve().parents[2]
GATES = REPO / "campaigns" / "gates"
runner = CliRunner()

top = typer.Typer()
top.command("freeze")(freeze)
top.command("reveal")(reveal)
top.command("import-historical")(import_historical)


@pytest.mark.parametrize(("app", "command"), [(record_cmd.app, "propose"), (record_cmd.app, "list"),
                                              (record_cmd.app, "show"), (closure_cmd.app, "add"),
                                              (closure_cmd.app, "list"), (closure_cmd.app, "reopen"),
                                              (gate_cmd.app, "check"), (top, "freeze"), (top, "reveal"),
                                              (top, "import-historical")])
def test_help_has_an_example(app: typer.Typer, command: str) -> None:
    result = runner.invoke(app, [command, "--help"])
    assert result.exit_code == 0 and "Example" in result.output


def test_record_propose_list_show(tmp_path: Path) -> None:
    ws = str(tmp_path)
    suites = [make_formal(tmp_path, value=v).archive_id for v in (100.0, 102.0, 101.0)]
    control = make_formal(tmp_path, value=95.0, prof=profile(sim={"step_factor": 1.1})).archive_id
    res = runner.invoke(gate_cmd.app, ["check", str(GATES / "fresh-response.yaml"), "--archive", suites[0],
                                       "--candidate", "cand", "-w", ws])
    assert res.exit_code == 0 and "PASSED" in res.output and "SIMULATED" in res.output
    prop = tmp_path / "p.yaml"
    prop.write_text(yaml.safe_dump({
        "name": "rec", "scope": "sim-c1", "metric": "resident_decode", "concurrency": 1, "claim_class": "native-ar",
        "candidate": "cand", "suites": suites[:2], "gates": ["fresh-response"],
        "control": {"archives": [control], "declared_change": ["sim.step_factor"]}}), encoding="utf-8")
    res = runner.invoke(record_cmd.app, ["propose", str(prop), "-w", ws])
    assert isinstance(res.exception, EvidenceError) and "at least 3" in res.exception.message
    prop.write_text(prop.read_text().replace(f"- {suites[1]}", f"- {suites[1]}\n- {suites[2]}"), encoding="utf-8")
    res = runner.invoke(record_cmd.app, ["propose", str(prop), "-w", ws])
    assert res.exit_code == 0, res.output
    assert "101.000000" in res.output and suites[2] in res.output and "sim.step_factor" in res.output
    res = runner.invoke(record_cmd.app, ["list", "-w", ws])
    assert res.exit_code == 0 and "sim-c1" in res.output
    rid = table_rows(tmp_path, "records")[0]["record_id"]
    res = runner.invoke(record_cmd.app, ["show", rid[:6], "-w", ws])
    assert res.exit_code == 0 and "previous record: none" in res.output and "+6.32%" in res.output


def test_closure_commands(tmp_path: Path) -> None:
    ws = str(tmp_path)
    a = make_abba(tmp_path, created_wall="2026-07-15T00:00:00+0000").archive_id
    b = make_abba(tmp_path, change_pct=3.0, created_wall="2026-07-16T00:00:00+0000").archive_id
    res = runner.invoke(closure_cmd.app, ["add", "--direction", "oneccl-flag-sweep", "--evidence", a,
                                          "--reason", "no gain", "-w", ws])
    assert res.exit_code == 0 and "closed oneccl-flag-sweep" in res.output
    res = runner.invoke(closure_cmd.app, ["reopen", "oneccl-flag-sweep", "--evidence", a, "--reason", "x", "-w", ws])
    assert isinstance(res.exception, EvidenceError)
    res = runner.invoke(closure_cmd.app, ["reopen", "oneccl-flag-sweep", "--evidence", b, "--reason", "new algebra",
                                          "-w", ws])
    assert res.exit_code == 0 and "reopened" in res.output
    res = runner.invoke(closure_cmd.app, ["list", "--log", "-w", ws])
    assert res.exit_code == 0 and "close" in res.output and "reopen" in res.output


def test_freeze_reveal_and_historical(tmp_path: Path) -> None:
    ws = str(tmp_path)
    p = tmp_path / "plan.yaml"
    p.write_text("predict: +1%\n", encoding="utf-8")
    res = runner.invoke(top, ["freeze", str(p), "-w", ws])
    assert res.exit_code == 0 and "froze" in res.output
    res = runner.invoke(top, ["freeze", str(p), "-w", ws])
    assert res.exit_code == 0 and "already frozen" in res.output
    future = make_abba(tmp_path, created_wall="2099-01-01T00:00:00+0000").archive_id
    res = runner.invoke(top, ["reveal", str(p), "--results", future, "-w", ws])
    assert res.exit_code == 0 and "reveal passed" in res.output
    past = make_abba(tmp_path, created_wall="2020-01-01T00:00:00+0000").archive_id
    res = runner.invoke(top, ["reveal", str(p), "--results", past, "-w", ws])
    assert isinstance(res.exception, EvidenceError) and "frozen after the results" in res.exception.message
    source = REPO / "ledgers/historical-sources/report-2609.15627.yaml"
    res = runner.invoke(top, ["import-historical", str(source), "-w", ws])
    assert res.exit_code == 0 and "historical entries added" in " ".join(res.output.split())


def test_exit_codes_end_to_end(tmp_path: Path) -> None:
    cached = make_formal(tmp_path, value=1.0, cached=64).archive_id
    cmd = [sys.executable, "-c", "from harness.cli import main; main()"]
    out = subprocess.run([*cmd, "gate", "check", str(GATES / "fresh-response.yaml"), "--archive", cached,
                          "-w", str(tmp_path)], capture_output=True, text=True, timeout=60, check=False)
    assert out.returncode == 7, out.stderr
    assert "FAILED" in out.stdout and "gate fresh-response failed" in out.stderr
    plan = tmp_path / "plan.yaml"
    plan.write_text("x\n", encoding="utf-8")
    out = subprocess.run([*cmd, "reveal", str(plan), "--results", cached, "-w", str(tmp_path)],
                         capture_output=True, text=True, timeout=60, check=False)
    assert out.returncode == 7 and "never frozen" in out.stderr
