"""Energy per resident window measured by a real run (harness.run.session.write_power): the simulator's
power model (idle + per-request watts, an energy counter on its model clock) sampled through
``GET /sim/power`` while a formal matrix runs; each measured wave's energy, mean power and output tokens
per joule against the model's known answer."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import yaml

from harness.run.campaign import run_campaign
from harness.sim.profiles import PROFILE_DIR

REPO = Path(__file__).resolve().parents[2]
DEVICES, IDLE_W, BUSY_W = 8, 100.0, 40.0


@pytest.mark.slow
def test_each_wave_gets_its_energy_and_tokens_per_joule(tmp_path: Path) -> None:
    prof = yaml.safe_load((PROFILE_DIR / "fast.yaml").read_text())
    prof |= {"name": "fast-power", "power": {"devices": DEVICES, "idle_w": IDLE_W, "busy_w_per_request": BUSY_W,
                                             "max_w": 700.0}}
    (tmp_path / "fast-power.yaml").write_text(yaml.safe_dump(prof))
    spec = tmp_path / "s.yaml"
    spec.write_text(yaml.safe_dump({
        "name": "energy", "claim_class": "native-ar",
        "service": {"backend": "sim", "startup_timeout_s": 60, "power_sample_interval_s": 0.02,
                    "sim": {"profile_file": str(tmp_path / "fast-power.yaml"), "time_scale": 1}},
        "corpora": {"decode": str(REPO / "corpora" / "sim-code-512")},
        "decode": {"tiers": [4], "rounds": 3, "min_resident_seconds": 0.5, "warmup_waves": 1, "max_new_tokens": 96,
                   "ignore_eos": True}}))
    out = run_campaign(spec, tmp_path / "ws")
    assert out.status == "complete", out.error
    doc = json.loads((out.archive.path / "energy.json").read_text())
    assert doc["sampler"]["source"] == "sim" and doc["waves"]
    assert out.archive.has("power.parquet")
    for w in doc["waves"]:
        # all 4 requests resident over the window: 8 x 100 W idle + 4 x 40 W = 960 W
        assert w["method"] == "energy-counter", w
        assert w["mean_power_w"] == pytest.approx(DEVICES * IDLE_W + 4 * BUSY_W, rel=0.03), w
        assert w["energy_j"] == pytest.approx(w["mean_power_w"] * w["seconds"], rel=1e-6)
        assert w["tokens_per_joule"] == pytest.approx(w["tokens"] / w["energy_j"], rel=1e-9)
