"""Energy in ABBA screens and rate sweeps on the real simulator (harness.run.energy): the simulator's
power model (8 devices x 100 W idle + 40 W per resident request, an energy counter on its model clock)
sampled through ``GET /sim/power`` on every service a run starts; known answers as in
tests/run/test_energy_run.py (a full C4 resident window draws 8 x 100 + 4 x 40 = 960 W)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pyarrow.parquet as pq
import pytest
import yaml
from ledger_helpers import ledger_table

from harness.ids import leg_wave_id
from harness.inputs.spec import AbbaSpec, load_spec, loaded_abba
from harness.run.abba import run_abba
from harness.run.sweep import run_sweep_loaded
from harness.sim.profiles import PROFILE_DIR

REPO = Path(__file__).resolve().parents[2]
DEVICES, IDLE_W, BUSY_W = 8, 100.0, 40.0
NS = 1e9


def power_profile(tmp_path: Path) -> Path:
    prof = yaml.safe_load((PROFILE_DIR / "fast.yaml").read_text())
    prof |= {"name": "fast-power", "power": {"devices": DEVICES, "idle_w": IDLE_W, "busy_w_per_request": BUSY_W,
                                             "max_w": 700.0}}
    path = tmp_path / "fast-power.yaml"
    path.write_text(yaml.safe_dump(prof))
    return path


def service(tmp_path: Path, name: str, **sim: Any) -> dict[str, Any]:
    return {"name": name, "backend": "sim", "startup_timeout_s": 60, "power_sample_interval_s": 0.02,
            "sim": {"profile_file": str(power_profile(tmp_path)), "time_scale": 1} | sim}


@pytest.mark.slow
def test_every_abba_leg_wave_gets_its_energy_from_its_own_service(tmp_path: Path) -> None:
    spec = AbbaSpec.model_validate({
        "name": "energy-abba", "control": service(tmp_path, "ctrl"),
        "candidate": service(tmp_path, "cand", step_factor=0.9),
        "workload": {"corpus": str(REPO / "corpora" / "sim-code-512"), "concurrency": 4, "waves_per_leg": 2,
                     "warmup_waves": 1, "max_new_tokens": 64, "ignore_eos": True,
                     "declared_change": ["sim.step_factor"]}})
    out = run_abba(loaded_abba(spec, REPO), tmp_path / "ws")
    assert out.status == "complete", out.error
    doc = json.loads((out.archive.path / "energy.json").read_text())
    # A1, B1 (shared with B2), A2: three services, three samplers, in start order
    assert doc["format"] == 2 and len(doc["samplers"]) == 3
    assert {s["source"] for s in doc["samplers"]} == {"sim"}
    rows = doc["waves"]
    assert sorted(r["wave_id"] for r in rows) == sorted(leg_wave_id(leg, "measured", j)
                                                        for leg in ("A1", "B1", "B2", "A2") for j in range(2))
    assert {r["cell_id"]: r["service"] for r in rows} == {"A1": 0, "B1": 1, "B2": 1, "A2": 2}
    for w in rows:
        assert w["window"] == "resident" and w["method"] == "energy-counter", w
        # all 4 requests resident over the window: 8 x 100 W idle + 4 x 40 W = 960 W
        assert w["mean_power_w"] == pytest.approx(DEVICES * IDLE_W + 4 * BUSY_W, rel=0.03), w
        assert w["energy_j"] == pytest.approx(w["mean_power_w"] * w["seconds"], rel=1e-6)
        assert w["tokens_per_joule"] == pytest.approx(w["tokens"] / w["energy_j"], rel=1e-9)
    samples = pq.read_table(out.archive.path / "power.parquet").to_pylist()
    assert {s["service"] for s in samples} == {0, 1, 2} and {s["device"] for s in samples} == set(range(DEVICES))
    energy = ledger_table(tmp_path / "ws", "energy").to_pylist()
    assert len(energy) == 8 and {r["protocol_class"] for r in energy} == {"abba-screen"}
    assert {r["window_kind"] for r in energy} == {"resident"} and {r["source"] for r in energy} == {"sim"}
    assert all(r["extra"] is None for r in energy)  # every energy.json field is a canonical column


@pytest.mark.slow
def test_every_sweep_round_gets_its_round_window_energy(tmp_path: Path) -> None:
    spec = tmp_path / "sweep.yaml"
    spec.write_text(yaml.safe_dump({
        "name": "energy-sweep", "kind": "rate-sweep", "claim_class": "native-ar",
        "service": service(tmp_path, "swp"), "corpus": str(REPO / "corpora" / "sim-code-512"),
        "rates": [20], "arrivals": {"process": "poisson", "seed": 1, "count": 12, "max_concurrency": 4},
        "rounds": 2, "warmup_requests": 2, "max_new_tokens": 48, "ignore_eos": True,
        "slo": {"ttft_ms": 5000}, "schedule_tolerance_ms": 2000}))
    out = run_sweep_loaded(load_spec(spec), tmp_path / "ws")
    archive = out.finished.archive
    doc = json.loads((archive.path / "energy.json").read_text())
    rows = doc["waves"]
    assert [r["round_id"] for r in rows] == [r["round_id"] for r in out.rounds] and len(rows) == 2
    records = [r for r in archive.records() if r.phase == "measured"]
    for w, rnd in zip(rows, out.rounds, strict=True):
        assert w["window"] == "round" and w["method"] == "energy-counter", w
        recs = [r for r in records if r.round_index == rnd["round_index"]]
        assert w["end_ns"] == max(r.done_ns for r in recs) and w["tokens"] == sum(r.n_tokens for r in recs)
        assert w["seconds"] == pytest.approx(rnd["duration_s"], rel=1e-9)  # the window of output_throughput_tok_s
        # idle draw over the whole window plus 40 W per request for the time it was resident, which the
        # client sees from send to last byte (a loopback hop longer than the server's residence)
        resident_s = sum((r.done_ns - r.send_ns) / NS for r in recs)
        expect = DEVICES * IDLE_W * w["seconds"] + BUSY_W * resident_s
        assert w["energy_j"] == pytest.approx(expect, rel=0.05), (w, expect)
        assert DEVICES * IDLE_W * 0.99 < w["mean_power_w"] < (DEVICES * IDLE_W + 4 * BUSY_W) * 1.01
        assert w["tokens_per_joule"] == pytest.approx(w["tokens"] / w["energy_j"], rel=1e-9)
    energy = ledger_table(tmp_path / "ws", "energy").to_pylist()
    assert [r["window_kind"] for r in energy] == ["round", "round"]
    assert {r["protocol_class"] for r in energy} == {"rate-sweep"}
