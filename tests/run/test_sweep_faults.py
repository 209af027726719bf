"""A rate sweep killed or interrupted part-way (issue 25): ``kill -9`` after a round, then ``dsv4h
archive recover``, gives a ``partial`` archive recovered as a rate sweep (kind and protocol class
``rate-sweep`` in the runs, sweep_cells and sweep_rounds ledgers, never formal); a SIGINT between rounds ends with a
``partial`` archive and the ``interrupted`` and ``run-end`` events every runner writes."""

from __future__ import annotations

import contextlib
import json
import os
import signal
import subprocess
import sys
from pathlib import Path

import psutil
import pytest
from ledger_helpers import ledger_df
from testkit import ran, run_cli, tiny_sweep_spec

from harness.store.archive import iter_archives, iter_partials, open_archive, verify_archive

REPO = Path(__file__).resolve().parents[2]


def sweep(spec: Path, ws: Path, fault: str) -> subprocess.CompletedProcess[str]:
    env = dict(os.environ, PYTHONUNBUFFERED="1", DSV4H_FAULT=fault)
    return subprocess.run([sys.executable, "-m", "harness.cli", "sweep", "run", str(spec), "-w", str(ws)],
                          capture_output=True, text=True, env=env, cwd=REPO, timeout=240, check=False)


def stop_left_behind(ws: Path) -> None:
    """Kill the simulator a ``kill -9``-ed dsv4h left running (its launch record names it)."""
    launched = ws / "services" / "launched"
    for rec in launched.glob("*.json") if launched.is_dir() else []:
        with contextlib.suppress(psutil.Error, KeyError, ValueError):
            psutil.Process(int(json.loads(rec.read_text())["process"]["pid"])).kill()


def events(archive: Path) -> list[dict[str, object]]:
    return [json.loads(line) for line in (archive / "events.jsonl").read_text().splitlines()]


@pytest.mark.slow
@pytest.mark.parametrize(("point", "first_round"), [("sweep:round-ended", "ok"),
                                                    ("sweep:round-written", "incomplete")])
def test_killed_sweep_is_recovered_as_a_rate_sweep(tmp_path: Path, point: str, first_round: str) -> None:
    ws = tmp_path / "ws"
    proc = sweep(tiny_sweep_spec(tmp_path, "killed-sweep"), ws, f"{point}:SIGKILL")
    try:
        assert proc.returncode == -signal.SIGKILL, proc.stdout[-2000:] + proc.stderr[-2000:]
    finally:
        stop_left_behind(ws)
    [p] = list(iter_partials(ws))
    assert not p.live and not p.has_manifest
    code, out, err = run_cli("archive", "recover", "-w", str(ws))
    assert code == 0, out + err
    assert not list(iter_partials(ws))
    [a] = list(iter_archives(ws))
    assert verify_archive(a.path) == []
    assert (a.status, a.run.kind, a.run.protocol_class) == ("partial", "rate-sweep", "rate-sweep")
    assert "recovered" in a.run.labels and "simulated" in a.run.labels
    runs = ledger_df(ws, "runs")
    assert list(zip(runs.kind, runs.protocol_class, strict=True)) == [("rate-sweep", "rate-sweep")]
    assert not (ws / "ledgers" / "cells").exists()  # never formal cells
    cells = ledger_df(ws, "sweep_cells")
    assert list(cells.protocol_class) == ["rate-sweep"] and list(cells.cell_id) == ["sweep-4rps"]
    assert list(cells.rounds_ok) == [1 if first_round == "ok" else 0]
    rounds = ledger_df(ws, "sweep_rounds")
    assert list(zip(rounds.round_id, rounds.status, strict=True)) == [("sweep-4rps.r0", first_round)]
    assert set(rounds.protocol_class) == {"rate-sweep"} and list(rounds.n_requests) == [8]
    sweep_json = json.loads((a.path / "sweep.json").read_text())
    assert [r["round_id"] for r in sweep_json["rounds"]] == ["sweep-4rps.r0"]


@pytest.mark.slow
def test_sigint_between_rounds_ends_partial_with_the_runners_end_events(tmp_path: Path) -> None:
    ws = tmp_path / "ws"
    proc = sweep(tiny_sweep_spec(tmp_path, "stopped-sweep"), ws, "sweep:round-ended:SIGINT")
    assert proc.returncode == 130, proc.stdout[-2000:] + proc.stderr[-2000:]
    assert not list(iter_partials(ws))
    [a] = list(iter_archives(ws))
    assert (a.status, a.run.kind, a.run.protocol_class) == ("partial", "rate-sweep", "rate-sweep")
    evs = events(a.path)
    names = [e["event"] for e in evs]
    assert names.count("round") == 1 and names[-2:] == ["interrupted", "run-end"]
    assert evs[-2]["exit_status"] == 130 and evs[-1]["status"] == "partial"
    assert not (ws / "services" / "launched").exists() or not list((ws / "services" / "launched").glob("*.json"))
    rounds = ledger_df(ws, "sweep_rounds")
    assert list(zip(rounds.round_id, rounds.status, strict=True)) == [("sweep-4rps.r0", "ok")]
    assert open_archive(a.path).status == "partial"


@pytest.mark.slow
def test_sweep_run_recovers_a_killed_sweep_at_startup(tmp_path: Path) -> None:
    ws = tmp_path / "ws"
    spec = tiny_sweep_spec(tmp_path, "restarted-sweep")
    proc = sweep(spec, ws, "sweep:round-ended:SIGKILL")
    try:
        assert proc.returncode == -signal.SIGKILL, proc.stdout[-2000:] + proc.stderr[-2000:]
    finally:
        stop_left_behind(ws)
    code, out, err = run_cli("sweep", "run", str(spec), "-w", str(ws))
    assert ran(code, out, err), out + err
    assert "recovered .partial-" in out.replace("\n", "")
    kinds = sorted((a.status, a.run.kind, a.run.protocol_class) for a in iter_archives(ws))
    assert kinds == [("complete", "rate-sweep", "rate-sweep"), ("partial", "rate-sweep", "rate-sweep")]
    assert set(ledger_df(ws, "runs").protocol_class) == {"rate-sweep"}
