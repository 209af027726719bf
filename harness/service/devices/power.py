"""Background GPU power/energy sampler (edge module: NVML, amd-smi, xpu-smi, the simulator's HTTP).

Every ``interval_s`` seconds a thread reads, per device, the power draw (W) and the cumulative energy
counter (J, ``None`` where the source has none) and keeps :class:`PowerSample` rows stamped with
``time.perf_counter_ns()`` just before the read was sent and just after it answered (the clock of the
request records). Sources and what they give (docs/metrics.md#power-and-energy):

- ``nvml``: ``nvmlDeviceGetPowerUsage`` (mW; NVML reference: "On Ampere (except GA100) or newer GPUs,
  the API returns power averaged over 1 sec interval. On GA100 and older architectures, instantaneous
  power is returned") and ``nvmlDeviceGetTotalEnergyConsumption`` (mJ since the driver was last
  reloaded; Volta and newer). ``NVML_ERROR_NOT_SUPPORTED`` for energy gives ``energy_j = None``.
- ``amd-smi``: ``amd-smi metric --power --energy --json``: ``power.socket_power`` and
  ``energy.total_energy_consumption`` as ``{"value", "unit"}`` (units converted; a missing or
  ``"N/A"`` field gives ``None``). Field names from the amd-smi sources, not from a capture.
- ``xpu-smi``: ``xpu-smi stats -d N -j``: ``XPUM_STATS_POWER`` (W) and ``XPUM_STATS_ENERGY`` (mJ)
  when present.
- ``sim``: ``GET <url>/sim/power`` of the simulator (``harness.sim.power``: modelled, not measured).
- ``none``: nothing is read; no samples.

Nothing here estimates a missing counter: what a source lacks stays ``None`` and :attr:`PowerSampler.info`
says which source, which counters and at what resolution. This module imports no pydantic (it runs on
device images without it).
"""

from __future__ import annotations

import contextlib
import importlib
import json
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import asdict, dataclass
from typing import Any, Final

from harness.errors import ServiceError
from harness.service.devices.sampler import Sampler
from harness.service.http import request

#: A command runner: argv in, stdout text out (``harness.service.devices.gpu_probe.subprocess_runner``).
Runner = Callable[[Sequence[str]], str]

SOURCES: Final = ("nvml", "amd-smi", "xpu-smi", "sim", "none")
DEFAULT_INTERVAL_S: Final = 0.5

AMD_POWER: Final = ("amd-smi", "metric", "--power", "--energy", "--json")
NVML_NOT_SUPPORTED: Final = 3  # NVML_ERROR_NOT_SUPPORTED in nvml.h, used when the module lacks the name

#: What each source's numbers are, recorded with the samples (docs/metrics.md#power-and-energy).
RESOLUTION: Final[Mapping[str, Mapping[str, str]]] = {
    "nvml": {
        "power": "nvmlDeviceGetPowerUsage, mW: averaged over 1 s on Ampere (except GA100) and newer, "
                 "instantaneous on GA100 and older (NVML API reference)",
        "energy": "nvmlDeviceGetTotalEnergyConsumption, mJ since the driver was last reloaded "
                  "(Volta and newer; NOT_SUPPORTED -> None)",
    },
    "amd-smi": {
        "power": "amd-smi metric --power: socket_power (the tool's unit, usually W)",
        "energy": "amd-smi metric --energy: total_energy_consumption (accumulator x counter "
                  "resolution, the tool's unit); None when absent or N/A",
    },
    "xpu-smi": {
        "power": "xpu-smi stats -j XPUM_STATS_POWER, W",
        "energy": "xpu-smi stats -j XPUM_STATS_ENERGY, mJ; None when absent",
    },
    "sim": {
        "power": "simulator model (harness.sim.power), exact, piecewise constant in the resident count",
        "energy": "simulator model energy integrated over its model clock, J",
    },
    "none": {"power": "no power source", "energy": "no energy source"},
}


@dataclass(frozen=True)
class DeviceReading:
    """One device's reading: ``power_w`` (W) and cumulative ``energy_j`` (J), ``None`` if unknown."""

    device: int
    power_w: float | None
    energy_j: float | None


@dataclass(frozen=True)
class PowerSample:
    """One device at one read: ``t_sent_ns`` / ``t_answered_ns`` (``time.perf_counter_ns`` just
    before and after the read), ``device``, ``power_w`` (W), ``energy_j`` (J, cumulative counter of
    the source; ``None`` when it has none)."""

    t_sent_ns: int
    t_answered_ns: int
    device: int
    power_w: float | None
    energy_j: float | None

    @property
    def t_ns(self) -> int:
        """The instant the reading is taken to stand for: the middle of the read (ns)."""
        return (self.t_sent_ns + self.t_answered_ns) // 2

    def to_dict(self) -> dict[str, Any]:
        """Plain JSON-able dict (``t_ns`` included)."""
        return asdict(self) | {"t_ns": self.t_ns}


#: A reader returns one reading per device per call.
Reader = Callable[[], list[DeviceReading]]


# ------------------------------------------------------------------------------------------ parsers


_POWER_UNITS: Final = {"w": 1.0, "mw": 1e-3, "uw": 1e-6, "µw": 1e-6, "kw": 1e3}
_ENERGY_UNITS: Final = {"j": 1.0, "mj": 1e-3, "uj": 1e-6, "µj": 1e-6, "kj": 1e3}


def _amd_value(field: Any, units: Mapping[str, float], default_unit: str, where: str) -> float | None:
    """A ``{"value", "unit"}`` (or bare number) field in the base unit; ``None`` for absent/N/A."""
    if field is None or (isinstance(field, str) and field.strip().upper() == "N/A"):
        return None
    unit = default_unit
    value = field
    if isinstance(field, Mapping):
        value, unit = field.get("value"), str(field.get("unit", default_unit))
        if value is None or (isinstance(value, str) and value.strip().upper() == "N/A"):
            return None
    try:
        number = float(value)
    except (TypeError, ValueError) as exc:
        raise ServiceError(f"amd-smi metric --power --energy: {where} is {field!r:.80}, expected a number",
                           hint="run the command by hand; report the output shape") from exc
    scale = units.get(unit.strip().lower())
    if scale is None:
        raise ServiceError(f"amd-smi metric --power --energy: {where} has unknown unit {unit!r}",
                           hint="extend harness.service.devices.power's unit table")
    return number * scale


def parse_amd_power_json(text: str) -> list[DeviceReading]:
    """Parse ``amd-smi metric --power --energy --json``: a list (or ``{"gpu_data": [...]}``) of
    ``{"gpu": N, "power": {"socket_power": {"value", "unit"}}, "energy":
    {"total_energy_consumption": {"value", "unit"}}}``. Missing energy gives ``energy_j=None``."""
    try:
        data = json.loads(text)
    except json.JSONDecodeError as exc:
        raise ServiceError(f"amd-smi metric --power --energy printed no JSON: {text[:120]!r}",
                           hint="run the command by hand") from exc
    rows = data.get("gpu_data") if isinstance(data, Mapping) else data
    if not isinstance(rows, list):
        raise ServiceError(f"amd-smi metric --power --energy: expected a list, got {type(rows).__name__}",
                           hint="run the command by hand; report the output shape")
    out = []
    for row in rows:
        if not isinstance(row, Mapping) or "gpu" not in row:
            raise ServiceError(f"amd-smi metric --power --energy: row without 'gpu': {row!r:.80}",
                               hint="run the command by hand")
        dev = int(row["gpu"])
        power: Mapping[str, Any] = row["power"] if isinstance(row.get("power"), Mapping) else {}
        energy: Mapping[str, Any] = row["energy"] if isinstance(row.get("energy"), Mapping) else {}
        out.append(DeviceReading(
            device=dev,
            power_w=_amd_value(power.get("socket_power"), _POWER_UNITS, "W", f"gpu {dev} socket_power"),
            energy_j=_amd_value(energy.get("total_energy_consumption"), _ENERGY_UNITS, "J",
                                f"gpu {dev} total_energy_consumption"),
        ))
    return out


def _xpu_metric(entries: Any, name: str) -> float | None:
    if not isinstance(entries, list):
        return None
    for m in entries:
        if isinstance(m, Mapping) and m.get("metrics_type") == name:
            value = m.get("value")
            if isinstance(value, bool) or not isinstance(value, int | float):
                raise ServiceError(f"xpu-smi stats -j: {name} is {value!r:.40}, expected a number",
                                   hint="run 'xpu-smi stats -d N -j' by hand")
            return float(value)
    return None


def parse_xpu_power_json(text: str, device: int) -> DeviceReading:
    """Parse ``xpu-smi stats -d N -j``: device-level ``XPUM_STATS_POWER`` (W) and
    ``XPUM_STATS_ENERGY`` (mJ -> J), else the sum over ``tile_level``; absent -> ``None``."""
    try:
        data = json.loads(text)
    except json.JSONDecodeError as exc:
        raise ServiceError(f"xpu-smi stats -j printed no JSON: {text[:120]!r}",
                           hint="run 'xpu-smi stats -d N -j' by hand") from exc
    if not isinstance(data, Mapping):
        raise ServiceError("xpu-smi stats -j: expected a JSON object", hint="run it by hand")
    index = int(data.get("device_id", device))

    def metric(name: str) -> float | None:
        value = _xpu_metric(data.get("device_level"), name)
        if value is None and isinstance(data.get("tile_level"), list):
            tiles = [_xpu_metric(t.get("data_list"), name) for t in data["tile_level"] if isinstance(t, Mapping)]
            known = [t for t in tiles if t is not None]
            value = sum(known) if known else None
        return value

    energy_mj = metric("XPUM_STATS_ENERGY")
    return DeviceReading(device=index, power_w=metric("XPUM_STATS_POWER"),
                         energy_j=None if energy_mj is None else energy_mj / 1000.0)


def parse_sim_power_json(text: str) -> list[DeviceReading]:
    """Parse the simulator's ``GET /sim/power`` payload (``harness.sim.power``)."""
    try:
        data = json.loads(text)
        return [DeviceReading(device=int(d["index"]), power_w=float(d["power_w"]),
                              energy_j=None if d.get("energy_j") is None else float(d["energy_j"]))
                for d in data["devices"]]
    except (json.JSONDecodeError, KeyError, TypeError, ValueError) as exc:
        raise ServiceError(f"/sim/power answered an unexpected payload: {text[:120]!r}",
                           hint="is the URL a dsv4h simulator with a power model?") from exc


# ------------------------------------------------------------------------------------------ readers


def _nvml_not_supported(nvml: Any, exc: Exception) -> bool:
    code = getattr(nvml, "NVML_ERROR_NOT_SUPPORTED", NVML_NOT_SUPPORTED)
    return getattr(exc, "value", None) == code


class NvmlReader:
    """Reads power and energy through an NVML module (``pynvml`` or a stand-in). Initialises NVML
    once (``close()`` shuts it down); ``devices`` defaults to all. Energy that answers
    NOT_SUPPORTED once is not asked again (``energy_supported`` says per device)."""

    def __init__(self, nvml: Any | None = None, devices: Sequence[int] | None = None) -> None:
        if nvml is None:
            try:
                nvml = importlib.import_module("pynvml")
            except ImportError as exc:
                raise ServiceError("power source 'nvml' needs pynvml (nvidia-ml-py)",
                                   hint="pip install nvidia-ml-py, or choose another power source") from exc
        self.nvml = nvml
        try:
            nvml.nvmlInit()
            count = int(nvml.nvmlDeviceGetCount())
        except Exception as exc:
            raise ServiceError(f"NVML cannot initialise: {exc}", hint="is the NVIDIA driver loaded?") from exc
        self.devices = list(range(count)) if devices is None else list(devices)
        self._handles = {d: nvml.nvmlDeviceGetHandleByIndex(d) for d in self.devices}
        self.energy_supported = dict.fromkeys(self.devices, True)

    def __call__(self) -> list[DeviceReading]:
        out = []
        for d, h in self._handles.items():
            power_w = float(self.nvml.nvmlDeviceGetPowerUsage(h)) / 1000.0
            energy_j: float | None = None
            if self.energy_supported[d]:
                try:
                    energy_j = float(self.nvml.nvmlDeviceGetTotalEnergyConsumption(h)) / 1000.0
                except Exception as exc:
                    if not _nvml_not_supported(self.nvml, exc):
                        raise
                    self.energy_supported[d] = False
            out.append(DeviceReading(d, power_w, energy_j))
        return out

    def close(self) -> None:
        """Shut NVML down (errors ignored)."""
        with contextlib.suppress(Exception):
            self.nvml.nvmlShutdown()


MAX_POWER_BYTES: Final = 1 << 20
"""Most of a ``/sim/power`` answer read (bytes): a payload of a few devices is well under 1 KiB."""


def http_get(url: str, timeout_s: float = 5.0) -> str:
    """GET ``url`` and return the body, read within ``MAX_POWER_BYTES`` and ``timeout_s`` in all;
    raises ServiceError on failure (HTTP status, no answer, a body too long or too slow)."""
    status, body = request(url, timeout_s=timeout_s, max_bytes=MAX_POWER_BYTES)
    if status != 200:
        raise ServiceError(f"GET {url} answered HTTP {status}",
                           hint="the simulator's profile needs a 'power' block")
    return body.decode("utf-8", "replace")


def make_reader(source: str, *, devices: Sequence[int] | None = None, url: str | None = None,
                runner: Runner | None = None, nvml: Any | None = None,
                get: Callable[[str], str] = http_get) -> tuple[Reader | None, Callable[[], None]]:
    """The reader of ``source`` (``None`` for ``none``) and its close function."""
    if source not in SOURCES:
        raise ServiceError(f"unknown power source {source!r}", hint=f"use one of {', '.join(SOURCES)}")
    wanted = None if devices is None else set(devices)

    def keep(rows: list[DeviceReading]) -> list[DeviceReading]:
        return rows if wanted is None else [r for r in rows if r.device in wanted]

    if source == "none":
        return None, lambda: None
    if source == "nvml":
        reader = NvmlReader(nvml, devices)
        return reader, reader.close
    if source == "sim":
        if not url:
            raise ServiceError("power source 'sim' needs the simulator's URL", hint="pass url=")
        endpoint = url.rstrip("/") + "/sim/power"
        return (lambda: keep(parse_sim_power_json(get(endpoint)))), lambda: None
    if runner is None:
        from harness.service.devices.gpu_probe import subprocess_runner  # psutil only when a CLI tool is used
        runner = subprocess_runner
    run = runner
    if source == "amd-smi":
        return (lambda: keep(parse_amd_power_json(run(AMD_POWER)))), lambda: None
    if devices is None:
        raise ServiceError("power source 'xpu-smi' needs the device indices", hint="pass devices=[0, ...]")
    devs = list(devices)
    return (lambda: [parse_xpu_power_json(run(("xpu-smi", "stats", "-d", str(d), "-j")), d) for d in devs]), \
        lambda: None


# ------------------------------------------------------------------------------------------ sampler


class PowerSampler(Sampler[PowerSample]):
    """Sample power and energy in a daemon thread: ``start()``, ``stop()``, then ``samples()`` and
    ``info``. Also a context manager. The schedule and error handling are the shared loop of
    :class:`harness.service.devices.sampler.Sampler` (as :class:`harness.service.devices.memory.MemorySampler`):
    a first sample when the thread starts, one every ``interval_s`` seconds (fixed schedule, missed
    ticks skipped) and a last one at ``stop()``; a failed read is counted (``error_count``, messages
    in ``errors``) and sampling goes on. ``reader`` replaces the source entirely (tests)."""

    thread_name = "dsv4h-gpu-power"

    def __init__(self, interval_s: float = DEFAULT_INTERVAL_S, source: str = "none",
                 devices: Sequence[int] | None = None, *, url: str | None = None, runner: Runner | None = None,
                 nvml: Any | None = None, reader: Reader | None = None,
                 clock_ns: Callable[[], int] = time.perf_counter_ns) -> None:
        super().__init__(interval_s)
        self.source = source
        self.devices = None if devices is None else list(devices)
        self._close: Callable[[], None] = lambda: None
        if reader is None:
            reader, self._close = make_reader(source, devices=devices, url=url, runner=runner, nvml=nvml)
        self._reader = reader
        self._clock_ns = clock_ns

    @property
    def info(self) -> dict[str, Any]:
        """Source, interval, resolution of each counter, which devices lacked energy, read errors."""
        with self._lock:
            samples, errors, count = list(self._samples), list(self.errors), self.error_count
        no_energy = sorted({s.device for s in samples if s.energy_j is None})
        no_power = sorted({s.device for s in samples if s.power_w is None})
        return {"source": self.source, "interval_s": self.interval_s,
                "resolution": dict(RESOLUTION.get(self.source, {})), "samples": len(samples),
                "devices": sorted({s.device for s in samples}), "devices_without_energy": no_energy,
                "devices_without_power": no_power, "error_count": count, "errors": errors}

    def read(self) -> list[PowerSample]:
        """Read every device now, stamped just before and after the read (none for source ``none``)."""
        if self._reader is None:
            return []
        sent = self._clock_ns()
        rows = self._reader()
        answered = self._clock_ns()
        return [PowerSample(sent, answered, r.device, r.power_w, r.energy_j) for r in rows]

    def close(self) -> None:
        """Close the source (NVML shut down)."""
        self._close()
