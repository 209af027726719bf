"""Power sampler: NVML through a fake pynvml, amd-smi / xpu-smi parsing, the simulator's power model."""

from __future__ import annotations

import asyncio
import json
import types
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import pytest
from sim_helpers import prompt, run, serving, stream, token_timeline

from harness.errors import ServiceError
from harness.measure.energy import window_energy
from harness.service.devices.power import (
    AMD_POWER,
    DeviceReading,
    PowerSampler,
    parse_amd_power_json,
    parse_xpu_power_json,
)
from harness.sim import get_profile
from harness.sim.power import PowerMeter, SimPower

XPU_FIXTURES = Path(__file__).parents[1] / "fixtures" / "xpu"


# ------------------------------------------------------------------------------------------ NVML


class FakeNVMLError(Exception):
    def __init__(self, value: int) -> None:
        super().__init__(f"NVML error {value}")
        self.value = value


def fake_pynvml(power_mw: Sequence[int], energy_mj: Sequence[int | None]) -> types.ModuleType:
    """A stand-in for pynvml: device i draws ``power_mw[i]``; energy ``None`` answers NOT_SUPPORTED."""
    m = types.ModuleType("pynvml")
    calls = {"energy": 0, "shutdown": 0}
    m.NVML_ERROR_NOT_SUPPORTED = 3  # type: ignore[attr-defined]
    m.NVMLError = FakeNVMLError  # type: ignore[attr-defined]
    m.nvmlInit = lambda: None  # type: ignore[attr-defined]
    m.nvmlDeviceGetCount = lambda: len(power_mw)  # type: ignore[attr-defined]
    m.nvmlDeviceGetHandleByIndex = lambda i: ("handle", i)  # type: ignore[attr-defined]
    m.nvmlDeviceGetPowerUsage = lambda h: power_mw[h[1]]  # type: ignore[attr-defined]

    def energy(h: tuple[str, int]) -> int:
        calls["energy"] += 1
        value = energy_mj[h[1]]
        if value is None:
            raise FakeNVMLError(3)
        return value

    def shutdown() -> None:
        calls["shutdown"] += 1

    m.nvmlDeviceGetTotalEnergyConsumption = energy  # type: ignore[attr-defined]
    m.nvmlShutdown = shutdown  # type: ignore[attr-defined]
    m.calls = calls  # type: ignore[attr-defined]
    return m


def test_nvml_units_and_not_supported_energy(monkeypatch: pytest.MonkeyPatch) -> None:
    fake = fake_pynvml([250_500, 80_000], [123_456_789, None])
    monkeypatch.setitem(__import__("sys").modules, "pynvml", fake)
    ticks = iter(range(1000, 100_000, 1000))
    sampler = PowerSampler(interval_s=0.1, source="nvml", clock_ns=lambda: next(ticks))
    first = sampler.sample_once()
    assert [(s.device, s.power_w, s.energy_j) for s in first] == [(0, 250.5, 123456.789), (1, 80.0, None)]
    assert (first[0].t_sent_ns, first[0].t_answered_ns, first[0].t_ns) == (1000, 2000, 1500)
    sampler.sample_once()
    assert fake.calls["energy"] == 3  # NOT_SUPPORTED is not asked again  # type: ignore[attr-defined]
    info = sampler.info
    assert info["source"] == "nvml" and info["devices_without_energy"] == [1]
    assert "averaged over 1 s" in info["resolution"]["power"]
    assert "mJ since the driver was last reloaded" in info["resolution"]["energy"]


def test_nvml_other_error_is_counted_not_hidden() -> None:
    fake = fake_pynvml([100_000], [5_000])

    def broken(h: Any) -> int:
        raise FakeNVMLError(999)

    fake.nvmlDeviceGetTotalEnergyConsumption = broken  # type: ignore[attr-defined]
    sampler = PowerSampler(source="nvml", nvml=fake)
    assert sampler.sample_once() == []
    assert sampler.error_count == 1 and "999" in sampler.errors[0]


def test_nvml_device_subset_and_shutdown_on_stop() -> None:
    fake = fake_pynvml([100_000, 200_000, 300_000], [1_000, 2_000, 3_000])
    sampler = PowerSampler(interval_s=60, source="nvml", devices=[2], nvml=fake).start()
    sampler.stop()
    rows = sampler.samples()
    assert len(rows) >= 2  # the first sample at start and the last at stop
    assert {(s.device, s.power_w, s.energy_j) for s in rows} == {(2, 300.0, 3.0)}
    assert fake.calls["shutdown"] == 1
    assert not sampler.running


def test_none_source_reads_nothing() -> None:
    sampler = PowerSampler(interval_s=60, source="none").start()
    sampler.stop()
    assert sampler.samples() == [] and sampler.info["resolution"]["power"] == "no power source"


def test_unknown_source() -> None:
    with pytest.raises(ServiceError, match="unknown power source"):
        PowerSampler(source="rapl")


# ------------------------------------------------------------------------------------------ amd-smi

AMD_TWO = json.dumps([
    {"gpu": 0, "power": {"socket_power": {"value": 312, "unit": "W"}, "gfx_voltage": "N/A"},
     "energy": {"total_energy_consumption": {"value": 1_500_000, "unit": "uJ"}}},
    {"gpu": 1, "power": {"socket_power": {"value": 95, "unit": "W"}},
     "energy": {"total_energy_consumption": "N/A"}},
])


def test_amd_power_json_units_and_missing_energy() -> None:
    assert parse_amd_power_json(AMD_TWO) == [DeviceReading(0, 312.0, 1.5), DeviceReading(1, 95.0, None)]


def test_amd_gpu_data_wrapper_and_no_energy_block() -> None:
    text = json.dumps({"gpu_data": [{"gpu": 3, "power": {"socket_power": {"value": 410.5, "unit": "W"}}}]})
    assert parse_amd_power_json(text) == [DeviceReading(3, 410.5, None)]


def test_amd_bad_unit_is_an_error() -> None:
    text = json.dumps([{"gpu": 0, "power": {"socket_power": {"value": 1, "unit": "hp"}}}])
    with pytest.raises(ServiceError, match="unknown unit"):
        parse_amd_power_json(text)


def test_amd_sampler_runs_the_documented_command_and_filters_devices() -> None:
    seen: list[tuple[str, ...]] = []

    def runner(argv: Sequence[str]) -> str:
        seen.append(tuple(argv))
        return AMD_TWO

    sampler = PowerSampler(source="amd-smi", devices=[1], runner=runner)
    rows = sampler.sample_once()
    assert seen == [AMD_POWER]
    assert [(s.device, s.power_w, s.energy_j) for s in rows] == [(1, 95.0, None)]


# ------------------------------------------------------------------------------------------ xpu-smi


def test_xpu_fixture_power_without_energy() -> None:
    text = (XPU_FIXTURES / "stats_device_level.json").read_text(encoding="utf-8")
    assert parse_xpu_power_json(text, 0) == DeviceReading(0, 15.0, None)


def test_xpu_energy_millijoules_and_tiles() -> None:
    dev = json.dumps({"device_id": 1, "device_level": [{"metrics_type": "XPUM_STATS_POWER", "value": 180},
                                                       {"metrics_type": "XPUM_STATS_ENERGY", "value": 123456}]})
    assert parse_xpu_power_json(dev, 1) == DeviceReading(1, 180.0, 123.456)
    tiles = json.dumps({"device_id": 2, "tile_level": [
        {"tile_id": 0, "data_list": [{"metrics_type": "XPUM_STATS_POWER", "value": 60}]},
        {"tile_id": 1, "data_list": [{"metrics_type": "XPUM_STATS_POWER", "value": 70}]}]})
    assert parse_xpu_power_json(tiles, 2) == DeviceReading(2, 130.0, None)


def test_xpu_sampler_one_call_per_device() -> None:
    seen: list[tuple[str, ...]] = []

    def runner(argv: Sequence[str]) -> str:
        seen.append(tuple(argv))
        return json.dumps({"device_id": int(argv[3]),
                           "device_level": [{"metrics_type": "XPUM_STATS_POWER", "value": 10 + int(argv[3])}]})

    rows = PowerSampler(source="xpu-smi", devices=[0, 1], runner=runner).sample_once()
    assert seen == [("xpu-smi", "stats", "-d", "0", "-j"), ("xpu-smi", "stats", "-d", "1", "-j")]
    assert [(s.device, s.power_w) for s in rows] == [(0, 10.0), (1, 11.0)]


# ------------------------------------------------------------------------------------------ simulator


def test_sim_power_model_known_answer_on_a_fake_clock() -> None:
    clock = iter([10.0, 11.0, 13.0])
    meter = PowerMeter(SimPower(devices=8, idle_w=100, busy_w_per_request=5.0, max_w=700),
                       clock=lambda: next(clock))
    meter.update(4)  # 1 s idle
    snap = meter.snapshot()  # then 2 s at 100 + 5 x 4 / 8 = 102.5 W per device
    assert snap["t_model_s"] == pytest.approx(3.0) and snap["running"] == 4
    assert len(snap["devices"]) == 8
    assert snap["devices"][7] == {"index": 7, "power_w": 102.5, "energy_j": pytest.approx(305.0)}


def test_sim_power_model_clock_scale_and_cap() -> None:
    clock = iter([0.0, 1.0])
    meter = PowerMeter(SimPower(devices=1, idle_w=100, busy_w_per_request=50.0, max_w=700),
                       time_scale=0.5, clock=lambda: next(clock))
    snap = meter.snapshot()  # 1 host second = 2 model seconds at idle
    assert snap["t_model_s"] == pytest.approx(2.0) and snap["devices"][0]["energy_j"] == pytest.approx(200.0)
    assert SimPower(devices=1, idle_w=100, busy_w_per_request=50.0, max_w=700).device_power_w(100) == 700


POWER = SimPower(devices=8, idle_w=100.0, busy_w_per_request=40.0, max_w=700.0)


async def _wave(concurrency: int, max_new: int, interval_s: float) -> tuple[Any, PowerSampler, list[Any]]:
    profile = get_profile("fast").model_copy(update={"power": POWER})
    async with serving(profile=profile) as (server, session):
        sampler = PowerSampler(interval_s=interval_s, source="sim", url=server.url)
        await asyncio.to_thread(sampler.start)
        payloads = [{"input_ids": prompt(32, seed=300 + i),
                     "sampling_params": {"max_new_tokens": max_new, "ignore_eos": True}}
                    for i in range(concurrency)]
        streams = await asyncio.gather(*(stream(session, p) for p in payloads))
        await asyncio.to_thread(sampler.stop)
        return server, sampler, streams


def test_sim_wave_energy_matches_the_model() -> None:
    c, interval = 8, 0.05
    _, sampler, streams = run(_wave(c, 150, interval))
    assert sampler.error_count == 0 and sampler.info["devices"] == list(range(8))
    timelines = [token_timeline(st.events) for st in streams]
    t_s = max(tl[0][0] for tl in timelines)  # every request is resident from here ...
    t_e = min(tl[-1][0] for tl in timelines)  # ... to here
    w = window_energy(sampler.samples(), t_s, t_e, tokens=sum(st.meta["completion_tokens"] for st in streams))
    assert w.method == "energy-counter" and w.energy_j is not None
    want = POWER.devices * (POWER.idle_w + POWER.busy_w_per_request * c / POWER.devices) * w.seconds
    # Edge error: the bracketing samples may reach outside the resident interval (busy part only), and a
    # sample's instant is known to within its read's duration.
    reads = [s.t_answered_ns - s.t_sent_ns for s in sampler.samples()]
    busy_w = POWER.busy_w_per_request * c
    total_w = POWER.devices * POWER.idle_w + busy_w
    tol = 2 * busy_w * (interval + max(reads) / 1e9) + 2 * total_w * max(reads) / 1e9
    assert abs(w.energy_j - want) <= tol, (w.energy_j, want, tol, w.seconds)
    assert w.mean_power_w == pytest.approx(total_w, rel=tol / want)
    assert w.tokens_per_joule is not None and w.tokens_per_joule > 0


def test_sim_without_power_model_is_counted_not_invented() -> None:
    async def go() -> PowerSampler:
        async with serving() as (server, _):
            sampler = PowerSampler(source="sim", url=server.url)
            await asyncio.to_thread(sampler.sample_once)
            return sampler

    sampler = run(go())
    assert sampler.samples() == [] and sampler.error_count == 1 and "404" in sampler.errors[0]
