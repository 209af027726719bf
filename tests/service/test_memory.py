"""Memory sampler: thread lifecycle, peak observed in samples, failed reads, Arrow table."""

from __future__ import annotations

import itertools
import time
from collections.abc import Sequence
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from harness.errors import ServiceError
from harness.service.devices.gpu import MIB, GpuDevice, OwnersSnapshot
from harness.service.devices.gpu_probe import NVIDIA_GPUS
from harness.service.devices.memory import (
    PEAK_LABEL,
    MemorySample,
    MemorySampler,
    samples_from_snapshot,
    samples_table,
    summarize,
)

FIX = Path(__file__).resolve().parent.parent / "fixtures" / "gpu"


class RisingReader:
    """Device 0 grows 1 GiB per read up to a plateau; device 1 is constant; read 3 fails."""

    def __init__(self) -> None:
        self.n = itertools.count()

    def __call__(self) -> OwnersSnapshot:
        k = next(self.n)
        if k == 3:
            raise ServiceError("nvidia-smi hiccup")
        used0 = min(k, 5) << 30
        return OwnersSnapshot(source="fake", wall_iso=f"w{k}", t_monotonic_ns=time.perf_counter_ns(),
                              devices=(GpuDevice(0, memory_used_bytes=used0, memory_total_bytes=80 << 30),
                                       GpuDevice(1, memory_used_bytes=1 << 20, memory_total_bytes=80 << 30)))


def test_sampler_thread_peak_and_errors() -> None:
    with MemorySampler(interval_s=0.01, reader=RisingReader()) as sampler:
        deadline = time.monotonic() + 5
        while len({s.wall_iso for s in sampler.samples()}) < 8 and time.monotonic() < deadline:
            time.sleep(0.01)
        was_running = sampler.running
    assert was_running and not sampler.running
    samples = sampler.samples()
    assert sampler.error_count == 1 and sampler.errors == ["nvidia-smi hiccup"]
    summary = {s.device: s for s in sampler.summary()}
    assert summary[0].peak_observed_in_samples_bytes == 5 << 30
    assert summary[1].peak_observed_in_samples_bytes == 1 << 20
    assert summary[0].samples == len([s for s in samples if s.device == 0])
    assert summary[0].interval_s == 0.01 and summary[0].total_bytes == 80 << 30
    assert summary[0].label == PEAK_LABEL == "peak observed in samples"
    assert summary[0].to_dict()["label"] == "peak observed in samples"
    assert summary[0].first_wall_iso == "w0"
    times = [s.t_monotonic_ns for s in samples]
    assert times == sorted(times)
    n = len(samples)
    sampler.stop()  # second stop is a no-op
    assert len(sampler.samples()) == n


def test_sampler_interval_is_respected() -> None:
    sampler = MemorySampler(interval_s=1.0, reader=RisingReader()).start()
    deadline = time.monotonic() + 5
    while not sampler.samples() and time.monotonic() < deadline:
        time.sleep(0.005)
    time.sleep(0.1)
    sampler.stop(final_sample=False)
    assert {s.wall_iso for s in sampler.samples()} == {"w0"}  # the t=0 sample only; stop() did not wait 1 s
    s2 = MemorySampler(interval_s=1, reader=RisingReader()).start()
    try:
        with pytest.raises(RuntimeError, match="already started"):
            s2.start()
    finally:
        s2.stop()
    with pytest.raises(ValueError, match="interval_s"):
        MemorySampler(interval_s=0)


def test_sampler_through_probe_with_injected_runner() -> None:
    text = (FIX / "nvidia-h200" / "gpus_busy.csv").read_text()
    calls: list[Sequence[str]] = []

    def runner(argv: Sequence[str]) -> str:
        calls.append(tuple(argv))
        return text

    sampler = MemorySampler(source="nvidia-smi", runner=runner)
    new = sampler.sample_once()
    assert calls == [NVIDIA_GPUS]
    assert sampler.source == "nvidia-smi"
    assert [(s.device, s.used_bytes, s.total_bytes) for s in new] == [(0, 3481 * MIB, 143771 * MIB)]


def test_summarize_pure_and_none_values() -> None:
    rows = [MemorySample(2, "b", 0, None, None), MemorySample(1, "a", 0, None, 10)]
    (s,) = summarize(rows, 5.0)
    assert (s.peak_observed_in_samples_bytes, s.total_bytes, s.samples, s.first_wall_iso) == (None, 10, 2, "a")
    assert summarize([], 5.0) == []
    snap = OwnersSnapshot(source="x", devices=(GpuDevice(3, memory_used_bytes=1),), wall_iso="w", t_monotonic_ns=7)
    assert samples_from_snapshot(snap) == [MemorySample(7, "w", 3, 1, None)]


def test_samples_table_parquet_roundtrip(tmp_path: Path) -> None:
    rows = [MemorySample(1, "w1", 0, 5, 10), MemorySample(2, "w2", 1, None, None)]
    table = samples_table(rows)
    assert table.schema.field("t_monotonic_ns").type == pa.int64()
    assert table.schema.field("device").type == pa.int32()
    pq.write_table(table, tmp_path / "memory.parquet")
    back = pq.read_table(tmp_path / "memory.parquet").to_pylist()
    assert back == [{"t_monotonic_ns": 1, "wall_iso": "w1", "device": 0, "used_bytes": 5, "total_bytes": 10},
                    {"t_monotonic_ns": 2, "wall_iso": "w2", "device": 1, "used_bytes": None, "total_bytes": None}]
    assert samples_table([]).num_rows == 0
    sampler = MemorySampler(reader=RisingReader())
    sampler.sample_once()
    assert sampler.table().num_rows == 2
