"""Power sampling and energy per measurement window, shared by every runner (edge module: threads,
HTTP, files).

A run samples power while each of its services runs (:class:`PowerLog`: one
:class:`harness.service.devices.power.PowerSampler` per service started, so an ABBA screen or a matched run
that starts a fresh service per leg samples each one) and, at its end, stores the samples
(``power.parquet``, a ``service`` column saying which sampler) and the energy of each measurement
window (``energy.json``): which window each kind measures is the kind's choice:

- formal matrices, ABBA screens, matched AR/SD runs: every measured wave's **resident window**
  (:func:`resident_windows`; the window the wave's rate is defined on);
- rate sweeps: every measured round's **round window**, from the round's planned start to the last
  response's end, with the round's output tokens of the requests that succeeded
  (:func:`round_window`; the window of the round's ``output_throughput_tok_s``).

A window is measured from the sampler whose samples bracket it (the service that served it); one no
sampler brackets is kept with its reason and no energy (never estimated). Definitions of the figures:
:mod:`harness.measure.energy` and docs/metrics.md, Power and energy.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any, Final

from harness.errors import DsvError
from harness.inputs.spec import ServiceProfile
from harness.measure import metrics as m
from harness.records import RequestRecord
from harness.service.devices.power import PowerSample, PowerSampler
from harness.service.launch.manager import RunningService
from harness.store.archive import ArchiveWriter

#: ``energy.json`` format history: 1 (formal matrices: ``sampler``, ``waves``); 2 adds ``samplers``
#: (one per service, in start order), ``window_kind`` and ``service`` per row, ``format``.
ENERGY_FORMAT: Final = 2


@dataclass(frozen=True)
class Window:
    """One measurement window: ids, kind (``resident`` or ``round``), edges (``perf_counter_ns``) and
    the output tokens it counts."""

    wave_id: str
    cell_id: str
    concurrency: int
    kind: str
    start_ns: int
    end_ns: int
    tokens: int
    extra: dict[str, Any] = field(default_factory=dict)


def resident_windows(records: Sequence[RequestRecord]) -> list[Window]:
    """Every measured wave's resident window (waves without one are skipped), in record order."""
    waves: dict[str, list[RequestRecord]] = {}
    for r in records:
        if r.phase == "measured":
            waves.setdefault(r.wave_id, []).append(r)
    out = []
    for wave_id, recs in waves.items():
        win = m.resident_window(recs)
        if win.contributes:
            out.append(Window(wave_id, recs[0].cell_id, recs[0].concurrency, "resident", win.start_ns, win.end_ns,
                              win.tokens))
    return out


def round_window(wave_id: str, cell_id: str, concurrency: int, start_ns: int,
                 records: Sequence[RequestRecord], **extra: Any) -> Window | None:
    """A sweep round's window: ``start_ns`` (the round's planned start) to the last response's end,
    with the output tokens of the requests that succeeded; ``None`` for a round without records."""
    if not records:
        return None
    end = max(r.done_ns for r in records)
    return Window(wave_id, cell_id, concurrency, "round", start_ns, end, sum(r.n_tokens for r in records if r.ok),
                  dict(extra))


def power_source(profile: ServiceProfile) -> str:
    """The power/energy source of a service (``devices.power_source``; ``auto``: the simulator's power
    model for a simulator whose profile has one, else the GPU tool the owners check uses: NVML for
    nvml / nvidia-smi, amd-smi, xpu-smi; ``none`` for anything else)."""
    if profile.devices.power_source != "auto":
        return profile.devices.power_source
    if profile.backend == "sim":
        from harness.sim import profile_for

        return "sim" if getattr(profile_for(profile.sim.profile, profile.sim.profile_file), "power", None) else "none"
    if not profile.checks_gpus:
        return "none"
    tool = profile.devices.gpu_owners_source
    if tool in ("nvml", "nvidia-smi"):
        return "nvml"
    if tool in ("amd-smi", "xpu-smi"):
        return tool
    if tool == "auto":
        import shutil

        if shutil.which("nvidia-smi"):
            return "nvml"
        for t in ("amd-smi", "xpu-smi"):
            if shutil.which(t):
                return t
    return "none"


def start_power_sampler(svc: RunningService, writer: ArchiveWriter) -> PowerSampler | None:
    """Sample power and energy every ``power_sample_interval_s`` while the service runs (None when it
    has no source). A source that cannot be opened (no NVML library, no tool) is recorded as a
    ``power-unavailable`` event with the reason: energy is then absent, never estimated."""
    source = power_source(svc.profile)
    if source == "none":
        return None
    devices = [int(g) for g in svc.profile.devices.gpus or [] if isinstance(g, int)] or None
    try:
        sampler = PowerSampler(interval_s=svc.profile.devices.power_sample_interval_s, source=source, devices=devices,
                               url=svc.url)
    except (DsvError, ImportError, OSError) as exc:
        writer.append_event({"event": "power-unavailable", "source": source, "reason": str(exc)[:300]})
        return None
    sampler.start()
    return sampler


def _brackets(samples: Sequence[PowerSample], w: Window) -> bool:
    return bool(samples) and min(s.t_ns for s in samples) <= w.start_ns and max(s.t_ns for s in samples) >= w.end_ns


def energy_rows(samplers: Sequence[Sequence[PowerSample]], windows: Sequence[Window]) -> list[dict[str, Any]]:
    """One ``energy.json`` row per window (pure): the energy from the first sampler (by index, the
    ``service`` field) whose samples bracket it, else from the first sampler with samples (which says
    why the window is not bracketed)."""
    from harness.measure.energy import window_energy

    rows = []
    for w in windows:
        idx = next((i for i, s in enumerate(samplers) if _brackets(s, w)),
                   next((i for i, s in enumerate(samplers) if s), 0))
        e = window_energy(samplers[idx] if samplers else [], w.start_ns, w.end_ns, tokens=w.tokens).to_dict()
        rows.append({"wave_id": w.wave_id, "cell_id": w.cell_id, "concurrency": w.concurrency, "window": w.kind,
                     "service": idx} | w.extra | e)
    return rows


class PowerLog:
    """The power samplers of one run, one per service, in start order (``start`` after a service is
    up, ``stop`` before it stops: the service's last samples stay bracketed by its own sampler), and
    :meth:`write` at the run's clean-up."""

    def __init__(self, writer: ArchiveWriter) -> None:
        self.writer = writer
        self.samplers: list[PowerSampler] = []
        self._current: PowerSampler | None = None

    def start(self, svc: RunningService) -> None:
        """Start sampling ``svc`` (nothing when it has no power source); stops a sampler still running."""
        self.stop()
        sampler = start_power_sampler(svc, self.writer)
        if sampler is not None:
            self.samplers.append(sampler)
            self._current = sampler

    def stop(self) -> None:
        """Stop the running sampler (its last sample taken now), if any."""
        current, self._current = self._current, None
        if current is not None:
            current.stop()

    def write(self, windows: Sequence[Window]) -> None:
        """Stop sampling and store ``power.parquet`` and ``energy.json`` (nothing when no sampler ran)."""
        self.stop()
        if not self.samplers:
            return
        import pyarrow as pa

        for s in self.samplers:
            s.stop()
        samples = [s.samples() for s in self.samplers]
        flat = [p.to_dict() | {"service": i} for i, ss in enumerate(samples) for p in ss]
        if flat:
            self.writer.write_table("power.parquet", pa.Table.from_pylist(flat))
        infos = [s.info for s in self.samplers]
        self.writer.write_json("energy.json", {
            "format": ENERGY_FORMAT, "sampler": infos[0], "samplers": infos,
            "waves": energy_rows(samples, windows), "definition": "docs/metrics.md, Power and energy"})
