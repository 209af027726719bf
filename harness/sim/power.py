"""The simulator's power model (profile key ``power``) and its energy meter, served at ``GET /sim/power``.

Per device, with ``running`` resident requests (prefilling or decoding) on the whole server::

    power_w = min(max_w, idle_w + busy_w_per_request * running / devices)

Energy is this power integrated exactly (it is piecewise constant: it changes only when a request
becomes resident or leaves) over the simulator's **model clock**, ``t_model_s = (perf_counter - t0) /
time_scale``: a model second at P watts is P joules whatever ``time_scale`` is, so tokens per joule do
not depend on how fast the simulation runs. With ``time_scale = 1`` model and host seconds coincide.
These are modelled numbers, labelled ``"simulated"``; they say nothing about real hardware.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import Any

from pydantic import Field

from harness.formats import Strict


class SimPower(Strict):
    """Power model parameters: ``devices`` (GPUs the served model spans), ``idle_w`` (W per device with
    nothing resident), ``busy_w_per_request`` (W added per resident request, shared over the devices),
    ``max_w`` (W cap per device)."""

    devices: int = Field(default=8, ge=1)
    idle_w: float = Field(default=100.0, ge=0)
    busy_w_per_request: float = Field(default=5.0, ge=0)
    max_w: float = Field(default=700.0, gt=0)

    def device_power_w(self, running: int) -> float:
        """Power of one device (W) with ``running`` resident requests on the server."""
        return min(self.max_w, self.idle_w + self.busy_w_per_request * running / self.devices)


class PowerMeter:
    """Integrates :class:`SimPower` over the model clock. Call :meth:`update` after every change of
    the resident count (the scheduler's ``on_resident`` hook); :meth:`snapshot` is the payload of
    ``GET /sim/power``. ``clock`` is ``time.perf_counter`` seconds (injectable for tests)."""

    def __init__(self, spec: SimPower, *, time_scale: float = 1.0,
                 clock: Callable[[], float] = time.perf_counter) -> None:
        self.spec = spec
        self.time_scale = time_scale
        self._clock = clock
        self._t0 = self._t = clock()
        self._running = 0
        self._energy_j = 0.0  # per device: every device draws the same modelled power

    def _advance(self, now: float) -> None:
        dt_model = max(0.0, now - self._t) / self.time_scale
        self._energy_j += self.spec.device_power_w(self._running) * dt_model
        self._t = max(self._t, now)

    def update(self, running: int) -> None:
        """The resident count is now ``running``: charge the time since the last change at the old
        count, then switch."""
        self._advance(self._clock())
        self._running = running

    def snapshot(self) -> dict[str, Any]:
        """``{"devices": [{"index", "power_w", "energy_j"}], "t_model_s", "running", "label"}`` now."""
        self._advance(self._clock())
        p = self.spec.device_power_w(self._running)
        return {"devices": [{"index": i, "power_w": p, "energy_j": self._energy_j} for i in range(self.spec.devices)],
                "t_model_s": (self._t - self._t0) / self.time_scale, "running": self._running,
                "label": "simulated"}
