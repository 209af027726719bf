"""Over-saturation on the simulator (docs/saturation.md): a profile with two resident requests at most
(tests/fixtures/sim-profiles/narrow.yaml, capacity about 11.8 req/s) offered 4 req/s stays steady and
offered 40 req/s saturates; ``stop_at_saturation`` then runs no higher rate."""

from __future__ import annotations

import json
from pathlib import Path

import pyarrow.parquet as pq
import pytest
from ledger_helpers import ledger_table
from testkit import only_archive, run_dsv4h

REPO = Path(__file__).resolve().parents[2]

SPEC = """
name: saturation-test
kind: rate-sweep
claim_class: native-ar
service: {{backend: sim, sim: {{profile_file: {profile}}}, startup_timeout_s: 60}}
corpus: {corpus}
rates: [4, 40, 80]
arrivals: {{process: poisson, seed: 3, count: 24}}
rounds: 1
warmup_requests: 2
max_new_tokens: 32
use_case_output_lengths: false
ignore_eos: true
schedule_tolerance_ms: 500
stop_at_saturation: {stop}
"""

pytestmark = pytest.mark.slow


def _spec(tmp_path: Path, stop: bool) -> Path:
    path = tmp_path / "sweep.yaml"
    path.write_text(SPEC.format(profile=REPO / "tests/fixtures/sim-profiles/narrow.yaml",
                                corpus=REPO / "corpora/sim-code-512", stop=str(stop).lower()))
    return path


def test_the_saturated_rate_is_found_and_the_sweep_stops_there(tmp_path: Path) -> None:
    ws = tmp_path / "ws"
    proc = run_dsv4h("sweep", "run", str(_spec(tmp_path, True)), "-w", str(ws))
    archive = only_archive(ws)
    rounds = {r["arrival_rate_req_s"]: r for r in pq.read_table(archive / "sweep_rounds.parquet").to_pylist()}
    assert sorted(rounds) == [4.0, 40.0]  # 80 req/s was never run
    steady, flooded = rounds[4.0], rounds[40.0]
    assert steady["saturated"] is False and flooded["saturated"] is True
    # the queue of a server finishing ~11.8 req/s while offered ~40 grows by tens of requests per second
    assert flooded["inflight_slope_req_per_s"] > 10 and flooded["ttft_slope_s_per_s"] > 0.5
    assert abs(steady["inflight_slope_req_per_s"]) < 1
    sweep = json.loads((archive / "sweep.json").read_text())
    assert sweep["stopped"]["at_rate_req_s"] == 40.0 and sweep["stopped"]["not_run"] == [80.0]
    # the goodput knee is never the over-saturated rate (issue 37): 40 req/s had the higher goodput (no SLO:
    # its completed-request rate, 11-12 req/s, against 4)
    assert sweep["knee"]["arrival_rate_req_s"] == 4.0
    assert "at 40 req/s, is not a steady state (1 over-saturated round(s))" in sweep["knee_note"]
    cells = {c["arrival_rate_req_s"]: c for c in ledger_table(ws, "sweep_cells").to_pylist()}
    assert cells[4.0]["saturated_rounds"] == 0 and cells[40.0]["saturated_rounds"] == 1
    findings = ledger_table(ws, "findings").to_pylist()
    sat = [f for f in findings if f["rule"] == "sweep-saturated"]
    assert len(sat) == 1 and "sweep-40rps" in sat[0]["message"] and sat[0]["severity"] == "warning"
    assert "stopped at 40 req/s (over-saturated); not run: 80 req/s" in proc.stdout
    assert "OVER-SATURATED" in proc.stdout


def test_without_the_option_every_rate_runs(tmp_path: Path) -> None:
    ws = tmp_path / "ws"
    run_dsv4h("sweep", "run", str(_spec(tmp_path, False)), "-w", str(ws))
    archive = only_archive(ws)
    rounds = {r["arrival_rate_req_s"]: r for r in pq.read_table(archive / "sweep_rounds.parquet").to_pylist()}
    assert sorted(rounds) == [4.0, 40.0, 80.0] and rounds[80.0]["saturated"] is True
    sweep = json.loads((archive / "sweep.json").read_text())
    assert sweep["stopped"] is None and sweep["knee"]["arrival_rate_req_s"] == 4.0
