"""Energy over a time window from power/energy samples, and tokens per joule (pure).

Definitions (docs/metrics.md#power-and-energy). For each device, over ``[start_ns, end_ns]``:

- ``energy-counter``: ``E(end) - E(start)`` of the source's cumulative energy counter, each edge
  interpolated linearly between the two samples that bracket it. Used when every device has a
  counter in every sample of the span. A counter that decreases inside the span (wrap, reset,
  driver reload) gives ``None`` with a reason, never a guess.
- ``power-integral``: the trapezoid integral of the power samples, the power at each edge
  interpolated linearly between its bracketing samples. Used otherwise (or when asked).

A window not bracketed by samples (no sample at or before ``start_ns``, or none at or after
``end_ns``) gives ``None`` with a reason. ``mean_power_w = energy_j / seconds``; ``tokens_per_joule =
tokens / energy_j``, ``joules_per_token = energy_j / tokens``. Energy in J, power in W, times in
``time.perf_counter_ns()`` nanoseconds. This module imports no pydantic (device images lack it).
"""

from __future__ import annotations

import itertools
from collections.abc import Iterable, Sequence
from dataclasses import asdict, dataclass
from typing import Any, Final, Literal, Protocol

__all__ = ["window_energy"]

NS: Final = 1e9
Method = Literal["energy-counter", "power-integral"]


class PowerPoint(Protocol):
    """What a sample must offer (``harness.service.devices.power.PowerSample`` does)."""

    @property
    def t_ns(self) -> int: ...
    @property
    def device(self) -> int: ...
    @property
    def power_w(self) -> float | None: ...
    @property
    def energy_j(self) -> float | None: ...


@dataclass(frozen=True)
class DeviceEnergy:
    """One device over the window: energy (J) and mean power (W), or ``None`` with ``reason``;
    ``samples`` is how many samples the span used (the bracketing ones included)."""

    device: int
    energy_j: float | None
    mean_power_w: float | None
    samples: int
    reason: str | None = None


@dataclass(frozen=True)
class EnergyWindow:
    """Energy of all devices over ``[start_ns, end_ns]`` by ``method``; totals are ``None`` (with
    ``reason``) when any device has none; token ratios only when ``tokens`` was given."""

    start_ns: int
    end_ns: int
    seconds: float
    method: Method | None
    devices: tuple[DeviceEnergy, ...]
    energy_j: float | None
    mean_power_w: float | None
    tokens: int | None
    tokens_per_joule: float | None
    joules_per_token: float | None
    reason: str | None = None

    def to_dict(self) -> dict[str, Any]:
        """Plain JSON-able dict."""
        out = asdict(self)
        out["devices"] = [asdict(d) for d in self.devices]
        return out


def _interp(points: Sequence[tuple[int, float]], t: int) -> float:
    """Linear interpolation at ``t`` on sorted ``points`` that bracket it."""
    for (t0, v0), (t1, v1) in itertools.pairwise(points):
        if t0 <= t <= t1:
            return v1 if t1 == t0 else v0 + (v1 - v0) * (t - t0) / (t1 - t0)
    if len(points) == 1 and points[0][0] == t:
        return points[0][1]
    raise ValueError(f"t={t} is not bracketed")  # callers check bracketing first


def _span(rows: Sequence[PowerPoint], start_ns: int, end_ns: int) -> Sequence[PowerPoint] | str:
    """The samples from the last at/before ``start_ns`` to the first at/after ``end_ns``, or why not."""
    before = [i for i, r in enumerate(rows) if r.t_ns <= start_ns]
    after = [i for i, r in enumerate(rows) if r.t_ns >= end_ns]
    if not before:
        return f"window not bracketed: first sample at {rows[0].t_ns} ns is after the start {start_ns} ns"
    if not after:
        return f"window not bracketed: last sample at {rows[-1].t_ns} ns is before the end {end_ns} ns"
    return rows[before[-1]: after[0] + 1]


def _counter_energy(span: Sequence[PowerPoint], start_ns: int, end_ns: int) -> float | str:
    points = [(r.t_ns, float(r.energy_j)) for r in span if r.energy_j is not None]
    for (t0, e0), (t1, e1) in itertools.pairwise(points):
        if e1 < e0:
            return (f"energy counter decreased from {e0} J at {t0} ns to {e1} J at {t1} ns "
                    "(wrap, reset or driver reload): no energy for this window")
    return _interp(points, end_ns) - _interp(points, start_ns)


def _power_integral(span: Sequence[PowerPoint], start_ns: int, end_ns: int) -> float:
    points = [(r.t_ns, float(r.power_w)) for r in span if r.power_w is not None]
    inner = [(t, p) for t, p in points if start_ns < t < end_ns]
    curve = [(start_ns, _interp(points, start_ns)), *inner, (end_ns, _interp(points, end_ns))]
    return sum((t1 - t0) / NS * (p0 + p1) / 2 for (t0, p0), (t1, p1) in itertools.pairwise(curve))


def window_energy(
    samples: Iterable[PowerPoint],
    start_ns: int,
    end_ns: int,
    *,
    tokens: int | None = None,
    devices: Sequence[int] | None = None,
    method: Literal["auto", "energy-counter", "power-integral"] = "auto",
) -> EnergyWindow:
    """Energy per device and in total over ``[start_ns, end_ns]`` (module docstring). ``devices``
    are the devices that must be covered (default: those in ``samples``; one without samples makes
    the total ``None``). ``method="auto"`` uses the energy counter when every device's span has it
    in every sample, else the power integral."""
    by_dev: dict[int, list[PowerPoint]] = {}
    for s in samples:
        by_dev.setdefault(s.device, []).append(s)
    wanted = sorted(by_dev) if devices is None else list(devices)
    seconds = (end_ns - start_ns) / NS

    def empty(reason: str, devs: tuple[DeviceEnergy, ...] = (), chosen: Method | None = None) -> EnergyWindow:
        return EnergyWindow(start_ns, end_ns, seconds, chosen, devs, None, None, tokens, None, None, reason)

    if end_ns <= start_ns:
        return empty(f"empty window: end {end_ns} ns is not after start {start_ns} ns")
    if not wanted:
        return empty("no samples")
    spans: dict[int, Sequence[PowerPoint] | str] = {}
    for d in wanted:
        rows = sorted(by_dev.get(d, []), key=lambda r: r.t_ns)
        spans[d] = _span(rows, start_ns, end_ns) if rows else "no samples"
    chosen: Method
    if method == "auto":
        has_counter = all(not isinstance(sp, str) and all(r.energy_j is not None for r in sp)
                          for sp in spans.values())
        chosen = "energy-counter" if has_counter else "power-integral"
    else:
        chosen = method
    results = []
    for d in wanted:
        sp = spans[d]
        if isinstance(sp, str):
            results.append(DeviceEnergy(d, None, None, 0, sp))
            continue
        field = "energy_j" if chosen == "energy-counter" else "power_w"
        missing = sum(1 for r in sp if getattr(r, field) is None)
        if missing:
            results.append(DeviceEnergy(d, None, None, len(sp),
                                        f"{missing} of {len(sp)} samples have no {field}"))
            continue
        value = _counter_energy(sp, start_ns, end_ns) if chosen == "energy-counter" else \
            _power_integral(sp, start_ns, end_ns)
        if isinstance(value, str):
            results.append(DeviceEnergy(d, None, None, len(sp), value))
        else:
            results.append(DeviceEnergy(d, value, value / seconds, len(sp)))
    devs = tuple(results)
    failed = [r for r in devs if r.energy_j is None]
    if failed:
        return empty("; ".join(f"device {r.device}: {r.reason}" for r in failed), devs, chosen)
    total = sum(r.energy_j for r in devs if r.energy_j is not None)
    tpj = tokens / total if tokens is not None and total > 0 else None
    jpt = total / tokens if tokens else None
    return EnergyWindow(start_ns, end_ns, seconds, chosen, devs, total, total / seconds, tokens, tpj, jpt)
