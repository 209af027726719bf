"""A trace replay end to end on the simulator (harness.run.replay): the fixture trace imported, replayed on
schedule, the simulator's prefix-cache hits equal to those the trace implies, the replay_runs ledger row.
The ``fast`` profile is slowed ten times so a busy machine keeps the simulator on its model: the replay is
judged by its simulator's late steps (``sim-lateness``, blocking from 1% of its window lost)."""

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
from ledger_helpers import ledger_table
from testkit import only_archive, run_cli, run_dsv4h

from harness.store.archive import iter_archives, verify_archive

ROOT = Path(__file__).resolve().parents[2]
SMALL = ROOT / "tests" / "fixtures" / "traces" / "mooncake-small.jsonl"
# tests/inputs/test_trace.py works these out by hand
SMALL_EXPECTED = [0, 1024, 0, 1200, 0, 600, 1536, 0, 512, 512, 0, 1699, 999, 0, 1300, 519, 0, 1024, 512, 1100]

SPEC = """
name: replay-test
kind: trace-replay
claim_class: native-ar
service: {{backend: sim, sim: {{profile: fast, time_scale: 10}}, startup_timeout_s: 60}}
corpus: {corpus}
trace: {trace}
speed: 0.5
lateness_tolerance_ms: 1000
"""


def test_the_fixture_replays_on_schedule_with_the_implied_prefix_hits(tmp_path: Path) -> None:
    run_dsv4h("corpus", "import-trace", str(SMALL), "--block-size", "512", "--out", str(tmp_path / "mc"))
    spec = tmp_path / "replay.yaml"
    spec.write_text(SPEC.format(corpus=tmp_path / "mc", trace=SMALL))
    ws = tmp_path / "ws"
    out = run_dsv4h("replay", "run", str(spec), "-w", str(ws)).stdout
    assert "20/20 ok" in out and "agree" in out
    archive = only_archive(ws)
    arrivals = json.loads((archive / "arrivals.json").read_text())
    assert arrivals["offsets_ns"][:3] == [0, 300_000_000, 600_000_000]  # 150 ms of trace time at speed 0.5
    assert arrivals["expected_cached_tokens"] == SMALL_EXPECTED
    cache = [json.loads(x) for x in (archive / "cache.jsonl").read_text().splitlines()]
    assert [c["reported_cached_tokens"] for c in cache] == SMALL_EXPECTED == [c["expected_cached_tokens"]
                                                                               for c in cache]
    sched = [json.loads(x) for x in (archive / "schedule.jsonl").read_text().splitlines()]
    assert [s["index"] for s in sched] == list(range(20)) and all(s["cap_wait_s"] == 0 for s in sched)
    (row,) = ledger_table(ws, "replay_runs").to_pylist()
    findings = ledger_table(ws, "findings").to_pylist()
    busy = {f["rule"] for f in findings if f["severity"] == "blocking"} & {"sim-lateness", "client-stalled",
                                                                           "client-bound"}
    # valid unless the machine was too busy for the simulator or the client (then marked, not claimed)
    assert row["protocol_class"] == "trace-replay" and row["valid"] is not bool(busy) and row["extra"] is None
    if not busy:
        assert row["schedule_kept"] is True and row["late_requests"] == 0
    assert row["expected_cached_tokens"] == row["reported_cached_tokens"] == sum(SMALL_EXPECTED)
    assert row["cached_mismatch_requests"] == 0 and row["cached_agree"] is True
    assert row["prompt_tokens"] == 19077 and row["reported_hit_ratio"] == sum(SMALL_EXPECTED) / 19077
    assert row["speed"] == 0.5 and row["block_size_tokens"] == 512 and row["n_ok"] == 20
    rules = {r["rule"] for r in findings}
    assert not rules & {"replay-cache", "failed-requests"} and (busy or "replay-schedule" not in rules)
    recs = ledger_table(ws, "requests").to_pylist()
    assert sorted(r["completion_tokens"] for r in recs) == sorted(json.loads(x)["output_length"]
                                                                   for x in SMALL.read_text().splitlines())
    assert not (ws / "ledgers" / "cells").exists() and not (ws / "ledgers" / "sweep_cells").exists()  # never formal


def test_a_trace_that_is_not_the_corpus_source_is_refused_before_anything_runs(tmp_path: Path) -> None:
    code, _, _ = run_cli("corpus", "import-trace", str(SMALL), "--out", str(tmp_path / "mc"))
    assert code == 0
    other = tmp_path / "other.jsonl"
    other.write_text(SMALL.read_text().replace('"output_length": 8', '"output_length": 9', 1))
    spec = tmp_path / "replay.yaml"
    spec.write_text(SPEC.format(corpus=tmp_path / "mc", trace=other))
    code, _, err = run_cli("replay", "run", str(spec), "-w", str(tmp_path / "ws"))
    assert code != 0 and "is not the trace corpus mc was imported from" in err
    assert not (tmp_path / "ws" / "archives").exists()


def test_the_report_shows_the_replay(tmp_path: Path) -> None:
    run_dsv4h("corpus", "import-trace", str(SMALL), "--out", str(tmp_path / "mc"))
    spec = tmp_path / "replay.yaml"
    spec.write_text(SPEC.format(corpus=tmp_path / "mc", trace=SMALL))
    ws = tmp_path / "ws"
    run_dsv4h("campaign", "run", str(spec), "-w", str(ws))  # the same runner through the kind registry
    run_dsv4h("report", "build", "-w", str(ws), "--config", str(ROOT / "reports/demo/report.yaml"), "--out",
              str(tmp_path / "report"))
    snap = json.loads((tmp_path / "report" / "results.json").read_text())
    (entry,) = snap["replays"]
    md = (tmp_path / "report" / "report.md").read_text()
    assert "## Trace replays" in md and "| 20 of 20 | 0.500 |" in md and entry["simulated"]
    assert entry["expected_cached_tokens"] == 12537
    findings = ledger_table(ws, "findings").to_pylist()
    busy = {f["rule"] for f in findings if f["severity"] == "blocking"} & {"sim-lateness", "client-stalled",
                                                                           "client-bound", "replay-schedule"}
    if busy:  # late arrivals can find a prefix not yet cached: the report shows what the server said, marked
        assert f"| 12537 | {entry['reported_cached_tokens']} |" in md
    else:
        assert entry["reported_cached_tokens"] == 12537 and "| 12537 | 12537 | 0.657 / 0.657 | agree" in md


@pytest.mark.slow
def test_a_killed_replay_is_recovered_as_a_replay(tmp_path: Path) -> None:
    run_dsv4h("corpus", "import-trace", str(SMALL), "--out", str(tmp_path / "mc"))
    spec = tmp_path / "replay.yaml"
    spec.write_text(SPEC.format(corpus=tmp_path / "mc", trace=SMALL))
    ws = tmp_path / "ws"
    env = dict(os.environ, DSV4H_FAULT="replay:written:SIGKILL")
    proc = subprocess.run([sys.executable, "-m", "harness.cli", "replay", "run", str(spec), "-w", str(ws)],
                          capture_output=True, text=True, env=env, cwd=ROOT, timeout=240, check=False)
    try:
        assert proc.returncode == -signal.SIGKILL, proc.stdout[-2000:] + proc.stderr[-2000:]
    finally:
        launched = ws / "services" / "launched"
        for rec in launched.glob("*.json") if launched.is_dir() else []:
            with contextlib.suppress(psutil.Error, KeyError, ValueError):
                psutil.Process(int(json.loads(rec.read_text())["process"]["pid"])).kill()
    code, out, err = run_cli("archive", "recover", "-w", str(ws))
    assert code == 0, out + err
    [a] = list(iter_archives(ws))
    assert verify_archive(a.path) == [] and (a.status, a.run.kind) == ("partial", "trace-replay")
    assert "recovered" in a.run.labels
    (row,) = ledger_table(ws, "replay_runs").to_pylist()
    assert row["status"] == "incomplete" and row["n_requests"] == 20
    assert row["expected_cached_tokens"] == row["reported_cached_tokens"] == 12537
