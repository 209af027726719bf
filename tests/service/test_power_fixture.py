"""The H200 energy capture (tests/fixtures/gpu/h200-energy): every measured wave's energy, mean power and
tokens per joule recomputed from the archived raw NVML samples equal what the run recorded; the counter
method covers every window; the idle/load check's counter and power integral stay apart."""

from __future__ import annotations

import json
from pathlib import Path
from types import SimpleNamespace
from typing import Literal

import pyarrow.parquet as pq
import pytest

from harness.measure.energy import window_energy

FIX = Path(__file__).resolve().parents[1] / "fixtures" / "gpu" / "h200-energy"


def samples() -> list[SimpleNamespace]:
    rows = pq.read_table(FIX / "power.parquet").to_pylist()
    return [SimpleNamespace(**r) for r in rows]


def test_every_wave_recomputes_from_the_raw_samples() -> None:
    doc = json.loads((FIX / "energy.json").read_text())
    assert doc["sampler"]["source"] == "nvml" and doc["sampler"]["error_count"] == 0
    got = samples()
    assert len(got) == doc["sampler"]["samples"] == 500
    assert len(doc["waves"]) == 17
    for w in doc["waves"]:
        e = window_energy(got, w["start_ns"], w["end_ns"], tokens=w["tokens"])
        assert e.method == w["method"] == "energy-counter", w["wave_id"]
        assert e.energy_j == pytest.approx(w["energy_j"], rel=1e-12)
        assert e.tokens_per_joule == pytest.approx(w["tokens_per_joule"], rel=1e-12)
        assert 100.0 < w["mean_power_w"] < 200.0  # a tiny model on an H200: near its idle draw


def test_the_load_check_recomputes_and_keeps_counter_and_integral_apart() -> None:
    doc = json.loads((FIX / "power_nvml.json").read_text())
    raw = [SimpleNamespace(**r) for r in doc["samples"]]
    win = doc["windows"]
    methods: tuple[tuple[str, Literal["energy-counter", "power-integral"]], ...] = (
        ("idle", "energy-counter"), ("load", "energy-counter"), ("load_power_integral", "power-integral"))
    for name, method in methods:
        w = win[name]
        e = window_energy(raw, w["start_ns"], w["end_ns"], method=method)
        assert e.method == method and e.energy_j == pytest.approx(w["energy_j"], rel=1e-12), name
    # NVML's power reading is a 1 s average on this GPU: its integral lags the load's start, the
    # energy counter does not (687.8 W against 659.9 W over the same 10 s)
    assert win["load"]["mean_power_w"] == pytest.approx(687.8, abs=0.05)
    assert win["load_power_integral"]["mean_power_w"] == pytest.approx(659.9, abs=0.05)
