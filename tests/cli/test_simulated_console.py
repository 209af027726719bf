"""Every run's console says SIMULATED when its data is simulated (the run block, harness.service.identity.origin):
the title of ``dsv4h sweep run``'s, ``dsv4h sla run``'s and ``dsv4h replay run``'s end-of-run output
(``campaign run`` of those kinds delegates to the same code) and an ABBA screen's table; and ``dsv4h
archive list`` carries each archive's data origin and its validity in the workspace's ledger."""

from __future__ import annotations

import csv
import io
import json
import re
from pathlib import Path

from synthetic_archives import write_formal_archive
from testkit import ran, run_cli, tiny_sweep_spec
from typer.testing import CliRunner

from harness.cli import _register, app
from harness.store.ledger import ingest_archive

REPO = Path(__file__).resolve().parents[2]


def flat(text: str) -> str:
    """``text`` with every run of white space one blank (a table title wraps at the table's width)."""
    return " ".join(text.split())


def test_sweep_run_says_simulated(tmp_path: Path) -> None:
    spec = tiny_sweep_spec(tmp_path)  # one rate, one round of 4 requests: seconds
    spec.write_text(spec.read_text().replace("rates: [4, 8]", "rates: [8]").replace("rounds: 3", "rounds: 1")
                    .replace("count: 8", "count: 4").replace("warmup_requests: 2", "warmup_requests: 1"))
    _register()
    result = CliRunner().invoke(app, ["sweep", "run", str(spec), "-w", str(tmp_path / "ws"), "--percentiles",
                                      "50,99"], env={"COLUMNS": "200"}, terminal_width=200)
    assert ran(result.exit_code, result.stdout, result.output), result.output  # 7 on a machine too busy
    assert "sweep-test: rate sweep, per offered rate (SIMULATED)" in result.stdout
    assert "sweep-test: latency per offered rate (ms) (SIMULATED)" in flat(result.stdout)  # a title may wrap


def test_sla_run_says_simulated(tmp_path: Path) -> None:
    spec = tmp_path / "sla.yaml"
    spec.write_text((REPO / "campaigns/sla-demo.yaml").read_text().replace("max_probes: 10", "max_probes: 1")
                    .replace("count: 20", "count: 4")
                    .replace("service: profiles/", f"service: {REPO}/campaigns/profiles/")
                    .replace("corpus: ../corpora", f"corpus: {REPO}/corpora"))
    code, out, err = run_cli("sla", "run", str(spec), "-w", str(tmp_path / "ws"))
    assert ran(code, out, err), out + err
    assert "SLA search probes (SIMULATED)" in flat(out)


def test_replay_run_says_simulated(tmp_path: Path) -> None:
    spec = tmp_path / "replay.yaml"
    spec.write_text((REPO / "campaigns/replay-demo.yaml").read_text().replace("speed: 1", "speed: 4")
                    .replace("lateness_tolerance_ms: 50", "lateness_tolerance_ms: 1000")
                    .replace("../corpora", f"{REPO}/corpora"))
    code, out, err = run_cli("replay", "run", str(spec), "-w", str(tmp_path / "ws"))
    assert ran(code, out, err), out + err
    assert "replay-demo: trace replay (SIMULATED)" in out and "20/20 ok" in out


def test_archive_list_carries_data_origin_and_ledger_validity(tmp_path: Path) -> None:
    ws = tmp_path / "ws"
    ingested = write_formal_archive(ws, seed=0, tiers=(1,))
    ingest_archive(ws, ingested)
    alone = write_formal_archive(ws, seed=1, tiers=(1,))  # on disk, not in the ledger
    code, out, err = run_cli("archive", "list", "-w", str(ws), "--json")
    assert code == 0, out + err
    rows = {r["archive_id"]: r for r in json.loads(out)}
    assert rows[ingested.archive_id]["data_origin"] == "simulated" and rows[ingested.archive_id]["valid"] is True
    assert rows[alone.archive_id]["data_origin"] == "simulated" and rows[alone.archive_id]["valid"] is None
    code, out, _ = run_cli("archive", "list", "-w", str(ws), "--csv")
    by_id = {r["archive_id"]: r for r in csv.DictReader(io.StringIO(out))}
    assert by_id[ingested.archive_id]["data_origin"] == "simulated" and by_id[ingested.archive_id]["valid"] == "True"
    assert by_id[alone.archive_id]["valid"] == ""
    code, out, _ = run_cli("archive", "list", "-w", str(ws))
    assert code == 0
    # the table: status over data origin over the ledger's validity
    under_status = [re.split(r"\s{2,}", line.strip())[0] for line in out.splitlines()
                    if line.startswith(" " * 18) and line.strip()]
    assert under_status.count("simulated") == 2 and {"valid", "no ledger"} <= set(under_status)


def test_abba_table_says_simulated_from_the_run_block(tmp_path: Path) -> None:
    from harness.cli.abba_cmd import render_abba
    from harness.cli.common import console
    from harness.inputs.spec import AbbaSpec, loaded_abba
    from harness.run.abba import run_abba

    sim = {"backend": "sim", "sim": {"profile": "fast"}}
    spec = AbbaSpec.model_validate({
        "name": "sim-abba", "control": {"name": "ctrl", **sim},
        "candidate": {"name": "cand", "backend": "sim", "sim": {"profile": "fast", "step_factor": 0.9}},
        "workload": {"corpus": str(REPO / "corpora" / "sim-code-512"), "concurrency": 2, "waves_per_leg": 1,
                     "warmup_waves": 0, "max_new_tokens": 8, "ignore_eos": True,
                     "declared_change": ["sim.step_factor"]}})
    out = run_abba(loaded_abba(spec, REPO), tmp_path / "ws")
    assert out.archive.run.simulated
    with console.capture() as cap:
        render_abba(out)
    assert "ABBA screen sim-abba — C2, resident boundary (SIMULATED)" in flat(cap.get())
