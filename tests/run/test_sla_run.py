"""The SLA search end to end on the simulator (harness.run.sla): the ``single-slot`` profile serves one
request at a time, so its capacity is known analytically, and the search must bracket it within the
declared precision; a probe cap ends a search unconverged (the ``sla-not-converged`` finding); a
search killed after a probe is recovered as an SLA search."""

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
from testkit import only_archive, ran, run_cli

from harness.inputs.spec import load_spec
from harness.run.sla import run_sla_loaded
from harness.sim import PROFILES
from harness.sim.batching import decode_step_s, prefill_forward_s
from harness.store.archive import iter_archives, iter_partials

REPO = Path(__file__).resolve().parents[2]
N_OUT = 10  # output tokens per request

SLA_SPEC = """
name: {name}
kind: sla-search
claim_class: native-ar
service: {{backend: sim, sim: {{profile: single-slot}}, startup_timeout_s: 60}}
corpus: {corpus}
arrivals: {{process: constant, count: {count}}}
rounds: 1
warmup_requests: 2
max_new_tokens: {n_out}
use_case_output_lengths: false
ignore_eos: true
limits: {{ttft_ms: 60}}
search: {{start_req_s: 3, precision_req_s: 1, max_probes: {cap}}}
schedule_tolerance_ms: 200
"""


def sla_spec(directory: Path, *, name: str = "sla-test", count: int = 20, cap: int = 10) -> Path:
    """An SLA search against ``single-slot`` with constant arrivals, written to ``directory/sla.yaml``."""
    spec = directory / "sla.yaml"
    spec.write_text(SLA_SPEC.format(name=name, corpus=REPO / "corpora/sim-code-512", count=count, cap=cap,
                                    n_out=N_OUT))
    return spec


def stop_left_behind(ws: Path) -> None:
    """Kill the simulator a ``kill -9``-ed dsv4h left running (its launch record names it)."""
    launched = ws / "services" / "launched"
    for rec in launched.glob("*.json") if launched.is_dir() else []:
        with contextlib.suppress(psutil.Error, KeyError, ValueError):
            psutil.Process(int(json.loads(rec.read_text())["process"]["pid"])).kill()


def capacity_req_s() -> float:
    """``single-slot``'s capacity: one request holds the only slot for its prefill forward (which
    gives the first token) and N - 1 decode steps; past 1 / S requests/s requests queue."""
    p = PROFILES["single-slot"]
    prompt = 512  # sim-code-512's prompts; prefill at 1e9 tok/s makes the length immaterial
    return 1 / (prefill_forward_s(p, prompt) + (N_OUT - 1) * decode_step_s(p, 1))


def test_capacity_of_the_single_slot_profile() -> None:
    assert capacity_req_s() == pytest.approx(10.0, rel=1e-4)


@pytest.mark.slow
def test_search_brackets_the_known_capacity(tmp_path: Path) -> None:
    ws = tmp_path / "ws"
    out = run_sla_loaded(load_spec(sla_spec(tmp_path)), ws)
    assert out.finished.archive.status == "complete"
    cap = capacity_req_s()
    # Constant arrivals, n requests, TTFT limit L over a base TTFT b (~0.02 s): the last request of a
    # round at rate r > 1 / S waits (n - 1)(S - 1 / r), so the highest passing rate is
    # 1 / (S - (L - b) / (n - 1)): between the capacity and 1 / (1/cap - 0.06 / 19) = 10.3 req/s.
    upper = 1 / (1 / cap - 0.060 / 19)
    b = out.result["bracket"]
    lo, hi = b["highest_passing_req_s"], b["lowest_failing_req_s"]
    if out.result["end"] == "invalid-load":  # a machine too busy even for the re-measurements: withheld, said so
        assert not out.result["converged"] and out.result["withheld"], out.result
        pytest.skip(f"the machine was too busy for the simulator: {out.result['withheld']}")
    assert out.result["converged"] and out.result["end"] == "converged"
    assert hi - lo <= 1.0
    assert lo <= upper and hi > cap  # the bracket holds the known threshold
    rates = [p["arrival_rate_req_s"] for p in out.probes]
    assert rates[:3] == [3.0, 6.0, 12.0]  # doubled until a probe failed, then bisected
    archive = only_archive(ws)
    arrivals = [json.loads(x) for x in (archive / "arrivals.jsonl").read_text().splitlines()]
    assert [a["arrival_rate_req_s"] for a in arrivals] == rates  # each probe's plan archived
    # warmup + one measured round; a re-measurement of a probe invalid for load (a busy machine) has no warmup
    assert all(len(a["rounds"]) == (2 if a["attempt"] == 0 else 1) and a["plan_id"] for a in arrivals)
    sla = json.loads((archive / "sla.json").read_text())
    assert sla["bracket"] == b and len(sla["probes"]) == len(rates) and "p99" in sla["rule"]
    probes = ledger_table(ws, "sla_probes").to_pylist()
    assert sorted(p["arrival_rate_req_s"] for p in probes) == sorted(rates)
    assert {p["bracket_end"] for p in probes} >= {"highest-passing", "lowest-failing"}
    assert all(p["extra"] is None and p["protocol_class"] == "sla-search" for p in probes)
    # the probes live in their own tables, never among a sweep's rates (issue 36): one sla_rounds row per
    # probe (rounds: 1), cell ids the probes'
    assert ledger_table(ws, "sweep_cells") is None or ledger_table(ws, "sweep_cells").num_rows == 0
    rounds = ledger_table(ws, "sla_rounds").to_pylist()
    assert {r["protocol_class"] for r in rounds} == {"sla-search"} and len(rounds) == len(rates)
    assert {r["cell_id"] for r in rounds} == {p["cell_id"] for p in probes}
    runs = ledger_table(ws, "runs").to_pylist()
    assert [r["kind"] for r in runs] == ["sla-search"]


@pytest.mark.slow
def test_probe_cap_ends_the_search_unconverged(tmp_path: Path) -> None:
    ws = tmp_path / "ws"
    code, out, err = run_cli("sla", "run", str(sla_spec(tmp_path, count=6, cap=2)), "-w", str(ws))
    assert ran(code, out, err), out + err
    assert "SLA search probes" in out and "bracket:" in out and "probe-cap" in out
    sla = json.loads((only_archive(ws) / "sla.json").read_text())
    assert sla["end"] == "probe-cap" and not sla["converged"] and sla["n_probes"] == 2
    rules = {f["rule"] for f in ledger_table(ws, "findings").to_pylist()}
    assert "sla-not-converged" in rules


@pytest.mark.slow
def test_killed_search_is_recovered_as_an_sla_search(tmp_path: Path) -> None:
    ws = tmp_path / "ws"
    env = dict(os.environ, PYTHONUNBUFFERED="1", DSV4H_FAULT="sla:probe-ended:SIGKILL")
    proc = subprocess.run([sys.executable, "-m", "harness.cli", "sla", "run", str(sla_spec(tmp_path, count=4)),
                           "-w", str(ws)], capture_output=True, text=True, env=env, cwd=REPO, timeout=240,
                          check=False)
    try:
        assert proc.returncode == -signal.SIGKILL, proc.stdout[-2000:] + proc.stderr[-2000:]
    finally:
        stop_left_behind(ws)
    code, out, err = run_cli("archive", "recover", "-w", str(ws))
    assert code == 0, out + err
    assert not list(iter_partials(ws))
    [a] = list(iter_archives(ws))
    assert a.run.kind == "sla-search" and a.status == "partial" and "recovered" in a.run.labels
    sla = a.json("sla.json")
    assert sla["n_probes"] == 1 and sla["probes"][0]["arrival_rate_req_s"] == 3.0
    assert sla["end"] == "interrupted" and not sla["converged"]
