"""Cold, restarted and warm TTFT measured by real runs on the simulator (harness.measure.coldness): a
profile whose first prefill forward of each shape pays ``compile_s`` more (harness.sim.cold), so a cold
request's TTFT is ``compile_s`` + the gather window + one prefill forward and a warm one's a few ms."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
import yaml

from harness.run.campaign import run_campaign
from harness.sim.profiles import PROFILE_DIR
from harness.store.ledger import read_table

REPO = Path(__file__).resolve().parents[2]
COMPILE_S = 0.5
TIERS = [1, 2, 4, 8, 16, 32, 64]


def _spec(tmp_path: Path, sections: dict[str, Any], **sim: Any) -> Path:
    prof = yaml.safe_load((PROFILE_DIR / "fast.yaml").read_text())
    prof |= {"name": "fast-cold", "cold_shape": {"compile_s": COMPILE_S, "input_len_edges": [1024],
                                                 "batch_tiers": TIERS}}
    (tmp_path / "fast-cold.yaml").write_text(yaml.safe_dump(prof))
    spec = tmp_path / "s.yaml"
    spec.write_text(yaml.safe_dump({
        "name": "cold", "claim_class": "native-ar",
        "service": {"backend": "sim", "startup_timeout_s": 60,
                    "sim": {"profile_file": str(tmp_path / "fast-cold.yaml"), "time_scale": 1} | sim},
        "ttft_shapes": {"input_len_edges": [1024], "batch_tiers": TIERS}} | sections))
    return spec


def _cold(ttft: float) -> bool:
    """A cold TTFT: the compile cost plus the gather window and a prefill forward of a few ms (the upper
    bound only keeps a cold figure from being a warm one plus a stall)."""
    return COMPILE_S <= ttft < COMPILE_S + 0.3


@pytest.mark.slow
def test_cold_ttft_apart_from_warm_and_a_finding_for_a_cold_measured_wave(tmp_path: Path) -> None:
    spec = _spec(tmp_path, {
        "corpora": {"decode": str(REPO / "corpora" / "sim-code-512"), "prefill": str(REPO / "corpora" / "sim-code-8k")},
        "decode": {"tiers": [1], "rounds": 3, "min_resident_seconds": 0.1, "warmup_waves": 1, "max_new_tokens": 32,
                   "ignore_eos": True},
        "prefill": {"tiers": [1], "rounds": 3, "warmup_waves": 0}})
    out = run_campaign(spec, tmp_path / "ws")
    assert out.status == "complete", out.error
    cells = {c.workload: c for c in out.results.cells}
    dec, pre = cells["decode"], cells["prefill"]
    # decode: its warmup request is the one cold request (a 512-token prompt at C1), every measured one warm
    assert dec.ttft_cold_n == 1 and _cold(dec.ttft_cold_p50_s) and dec.ttft_cold_max_s == dec.ttft_cold_p50_s
    assert dec.ttft_restarted_n == 0
    assert dec.ttft_warm_n == dec.latency["ttft_n"] and dec.ttft_warm_p99_s < COMPILE_S / 2
    assert dec.ttft_warm_p50_s == pytest.approx(dec.latency["ttft_p50_s"])
    # prefill: no warmup, so its first measured request is cold (an 8K prompt is a new length bucket) and
    # left out of the warm columns, which the cell's own TTFT columns are not
    assert pre.ttft_cold_n == 1 and _cold(pre.ttft_cold_p50_s)
    assert pre.ttft_warm_n == pre.latency["ttft_n"] - 1 == 2
    assert pre.ttft_warm_p99_s < COMPILE_S / 2 <= pre.latency["ttft_max_s"]
    doc = json.loads((out.archive.path / "coldness.json").read_text())
    assert doc["counts"] == {"cold": 2, "restarted": 0, "warm": sum(len(w.case_ids) for w in out.results.waves) - 2}
    cold_waves = [w["wave_id"] for w in doc["waves"]]
    assert [w.split(".", 1)[1] for w in cold_waves] == ["warmup1.w000", "r0.w000"]
    found = [f for f in out.findings if f.rule == "cold-in-measured-wave"]
    assert [(f.severity, f.rows) for f in found] == [("blocking", (cold_waves[1],))]
    # the ledger's cells rows carry the columns
    table = read_table(tmp_path / "ws", "cells")
    assert table is not None
    rows = {r["workload"]: r for r in table.to_pylist()}
    assert rows["decode"]["ttft_cold_n"] == 1 and rows["prefill"]["ttft_warm_n"] == 2
    assert rows["prefill"]["ttft_cold_p50_s"] == pytest.approx(pre.ttft_cold_p50_s)
    # the simulator counted its compilations: one shape per cell
    info = json.loads((out.archive.path / "service.json").read_text())["services"][0]["server_info_at_stop"]
    assert info["internal_states"][0]["sim_cold_compiles"] == 2


@pytest.mark.slow
def test_a_restart_of_the_same_service_is_restarted_not_warm(tmp_path: Path) -> None:
    # the server dies when its 4th request arrives: warmup, r0, r1 served, r2 fails; the resumed run
    # starts the same service again (a restart of the same identity), warms it and measures r2
    spec = _spec(tmp_path, {"corpora": {"prefill": str(REPO / "corpora" / "sim-code-8k")},
                            "prefill": {"tiers": [1], "rounds": 3, "warmup_waves": 1}}, die_after_requests=3)
    first = run_campaign(spec, tmp_path / "ws")
    assert first.status == "failed"
    out = run_campaign(spec, tmp_path / "ws", resume=first.archive.path)
    assert out.status == "complete", out.error
    (cell,) = out.results.cells
    assert cell.ttft_cold_n == 1 and _cold(cell.ttft_cold_p50_s)
    # the simulator keeps no compile cache across processes: the restarted request pays the compile again
    assert cell.ttft_restarted_n == 1 and _cold(cell.ttft_restarted_p50_s)
    assert cell.ttft_warm_n == 3 and cell.ttft_warm_p99_s < COMPILE_S / 2
    doc = json.loads((out.archive.path / "coldness.json").read_text())
    assert [s["start_index"] for s in doc["starts"]] == [1, 2]
    assert doc["starts"][0]["identity_hash"] == doc["starts"][1]["identity_hash"]
    assert [(r["class"], r["wave_id"].split(".", 1)[1]) for r in doc["requests"]] == [
        ("cold", "warmup1.w000"), ("restarted", "warmup2.w000")]
    assert not [f for f in out.findings if f.rule == "cold-in-measured-wave"]
