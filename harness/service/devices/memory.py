"""Background GPU memory sampler: per-device memory used/total every ``interval_s`` seconds.

A thread reads device memory through :func:`harness.service.devices.gpu_probe.read_gpu_memory` (amd-smi
``metric --mem-usage``, ``nvidia-smi --query-gpu`` or NVML; injectable runner or reader) and keeps
:class:`MemorySample` rows. Its summary reports, per device, the **peak observed in samples**: the
largest ``used`` value among the samples taken, never the allocator's true peak (a spike between
two samples is not seen). Memory is in bytes; times are ``time.perf_counter_ns()`` (the clock of
the request records) plus a UTC wall-clock ISO string per sample.
"""

from __future__ import annotations

import shutil
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
from typing import Any, Final

from harness.service.devices.gpu import OwnersSnapshot
from harness.service.devices.gpu_probe import Runner, read_gpu_memory
from harness.service.devices.sampler import Sampler

#: The exact label of the summary's peak: a maximum over samples, not an allocator peak.
PEAK_LABEL: Final = "peak observed in samples"
DEFAULT_INTERVAL_S: Final = 5.0

#: A reader returns one memory snapshot (devices filled) per call.
Reader = Callable[[], OwnersSnapshot]


@dataclass(frozen=True)
class MemorySample:
    """One device's memory at one instant: ``t_monotonic_ns`` (``time.perf_counter_ns``),
    ``wall_iso`` (UTC), ``device`` index, ``used_bytes`` / ``total_bytes`` (``None`` if unknown)."""

    t_monotonic_ns: int
    wall_iso: str
    device: int
    used_bytes: int | None
    total_bytes: int | None


@dataclass(frozen=True)
class DeviceMemorySummary:
    """Per-device summary of the samples: the peak observed in samples (bytes; ``None`` when no
    sample had a value), the device's total, how many samples and the sampling interval (s)."""

    device: int
    peak_observed_in_samples_bytes: int | None
    total_bytes: int | None
    samples: int
    interval_s: float
    first_wall_iso: str
    last_wall_iso: str
    label: str = PEAK_LABEL

    def to_dict(self) -> dict[str, Any]:
        """Plain JSON-able dict (``label`` says what the peak is)."""
        return {"device": self.device, "label": self.label,
                "peak_observed_in_samples_bytes": self.peak_observed_in_samples_bytes,
                "total_bytes": self.total_bytes, "samples": self.samples, "interval_s": self.interval_s,
                "first_wall_iso": self.first_wall_iso, "last_wall_iso": self.last_wall_iso}


def samples_from_snapshot(snap: OwnersSnapshot) -> list[MemorySample]:
    """One sample per device of a memory snapshot (pure)."""
    return [MemorySample(t_monotonic_ns=snap.t_monotonic_ns, wall_iso=snap.wall_iso, device=d.index,
                         used_bytes=d.memory_used_bytes, total_bytes=d.memory_total_bytes)
            for d in snap.devices]


def summarize(samples: Iterable[MemorySample], interval_s: float) -> list[DeviceMemorySummary]:
    """Per-device summary of ``samples`` (pure), sorted by device index."""
    by_dev: dict[int, list[MemorySample]] = {}
    for s in samples:
        by_dev.setdefault(s.device, []).append(s)
    out = []
    for dev in sorted(by_dev):
        rows = sorted(by_dev[dev], key=lambda s: s.t_monotonic_ns)
        used = [s.used_bytes for s in rows if s.used_bytes is not None]
        totals = [s.total_bytes for s in rows if s.total_bytes is not None]
        out.append(DeviceMemorySummary(
            device=dev, peak_observed_in_samples_bytes=max(used) if used else None,
            total_bytes=totals[-1] if totals else None, samples=len(rows), interval_s=interval_s,
            first_wall_iso=rows[0].wall_iso, last_wall_iso=rows[-1].wall_iso,
        ))
    return out


MEMORY_COLUMNS: Final = ("t_monotonic_ns", "wall_iso", "device", "used_bytes", "total_bytes")


def samples_table(samples: Sequence[MemorySample]) -> Any:
    """The samples as a ``pyarrow.Table`` for the archive's ``memory.parquet``.

    Columns: ``t_monotonic_ns`` int64, ``wall_iso`` string, ``device`` int32, ``used_bytes`` int64
    (nullable), ``total_bytes`` int64 (nullable).
    """
    import pyarrow as pa

    schema = pa.schema([("t_monotonic_ns", pa.int64()), ("wall_iso", pa.string()), ("device", pa.int32()),
                        ("used_bytes", pa.int64()), ("total_bytes", pa.int64())])
    return pa.Table.from_pylist([{c: getattr(s, c) for c in MEMORY_COLUMNS} for s in samples], schema=schema)


class MemorySampler(Sampler[MemorySample]):
    """Sample GPU memory in a daemon thread: ``start()``, ``stop()``, then ``samples()`` and
    ``summary()``. Also a context manager.

    The first sample is taken when the thread starts, then one every ``interval_s`` seconds (on a
    fixed schedule, no drift) and, by default, a last one at ``stop()``. A failed read is counted in
    ``error_count`` (messages in ``errors``) and sampling goes on (the shared loop of
    :class:`harness.service.devices.sampler.Sampler`). ``source`` is resolved on the first read (``auto`` ->
    the tool that answered) and kept. Pass ``reader`` to replace the probe entirely (tests), or
    ``runner`` to replace only the command runner.
    """

    thread_name = "dsv4h-gpu-memory"

    def __init__(
        self,
        *,
        interval_s: float = DEFAULT_INTERVAL_S,
        source: str = "auto",
        runner: Runner | None = None,
        reader: Reader | None = None,
        which: Callable[[str], str | None] = shutil.which,
        nvml: Any | None = None,
    ) -> None:
        super().__init__(interval_s)
        self.source = source
        self._runner, self._which, self._nvml = runner, which, nvml
        self._reader = reader

    def _read(self) -> OwnersSnapshot:
        if self._reader is not None:
            return self._reader()
        snap = read_gpu_memory(self.source, self._runner, which=self._which, nvml=self._nvml)
        self.source = snap.source
        return snap

    def read(self) -> list[MemorySample]:
        """One sample of every device now (raises on a failed read)."""
        return samples_from_snapshot(self._read())

    def summary(self) -> list[DeviceMemorySummary]:
        """Per device: the peak observed in samples, sample count and interval."""
        return summarize(self.samples(), self.interval_s)

    def table(self) -> Any:
        """:func:`samples_table` of the samples so far."""
        return samples_table(self.samples())
