"""Batch formation and forward durations (pure), shared by the scheduler and the analytic answers.

Keeping one implementation here guarantees that ``analytic_prefill_rate`` predicts exactly the
batches the running scheduler forms.
"""

from __future__ import annotations

import math
from collections.abc import Iterable
from typing import Protocol

__all__ = ["grid_step_s"]


class BatchProfile(Protocol):
    """What batch formation and forward durations read of a simulator profile
    (:class:`harness.sim.profiles.SimProfile` is one; declared here so that this module imports no
    sibling). Durations in seconds, rates in tokens per second."""

    @property
    def name(self) -> str: ...
    @property
    def decode_tiers(self) -> tuple[tuple[int, float], ...]: ...
    @property
    def prefill_a_s(self) -> float: ...
    @property
    def prefill_rate_tps(self) -> float: ...
    @property
    def prefill_admission(self) -> int: ...
    @property
    def chunk_budget(self) -> int: ...
    @property
    def max_running(self) -> int: ...

    def decode_rate(self, batch: int) -> float:
        """Resident decode rate (tok/s) with ``batch`` running requests (model time)."""
        ...


def plan_prefill_forward(
    profile: BatchProfile,
    *,
    chunked_remaining: int,
    resident: int,
    kv_free: int,
    waiting: Iterable[tuple[int, int]],
) -> tuple[int, list[int]]:
    """Plan the next prefill forward.

    ``chunked_remaining`` is the uncached prompt tokens still to prefill for the request being chunked
    (0 if none); ``resident`` counts requests already holding a slot (decoding or being chunked);
    ``kv_free`` is the token capacity left; ``waiting`` yields ``(uncached_tokens, reserved_tokens)``
    for waiting requests in arrival order and is consumed lazily.

    Returns ``(tokens for the chunked request, tokens granted to each newly admitted request)``.
    A forward holds at most ``prefill_admission`` requests and ``chunk_budget`` tokens; at most
    ``max_running`` requests are resident; the last admitted request may get only part of its prompt
    (it becomes the next chunked request).
    """
    budget = profile.chunk_budget
    slots = profile.prefill_admission
    take = 0
    if chunked_remaining > 0:
        take = min(chunked_remaining, budget)
        budget -= take
        slots -= 1
        if budget <= 0:
            return take, []
    grants: list[int] = []
    if slots <= 0 or resident >= profile.max_running:
        return take, grants
    for uncached, reserve in waiting:
        if reserve > kv_free:
            break
        grant = min(uncached, budget)
        grants.append(grant)
        budget -= grant
        slots -= 1
        resident += 1
        kv_free -= reserve
        if slots <= 0 or budget <= 0 or resident >= profile.max_running:
            break
    return take, grants


def prefill_forward_s(profile: BatchProfile, tokens: int, *, time_scale: float = 1.0) -> float:
    """Duration (s) of one prefill forward over ``tokens`` uncached prompt tokens: ``a + T/p``."""
    return (profile.prefill_a_s + tokens / profile.prefill_rate_tps) * time_scale


def decode_step_s(
    profile: BatchProfile, batch: int, *, step_factor: float = 1.0, time_scale: float = 1.0
) -> float:
    """Duration (s) of one decode step with ``batch`` running requests: ``B / rate(B)``, scaled."""
    return batch / profile.decode_rate(batch) * step_factor * time_scale


GRID_STEP_RTOL = 1e-9


def grid_step_s(profile: BatchProfile, *, step_factor: float = 1.0, time_scale: float = 1.0) -> float:
    """The one decode step (s, scaled) of a profile whose step does not depend on the batch: every
    decode tier has the same ``B / rate(B)`` and no batch runs past the last tier (``max_running``).
    Several simulator processes share one step grid only for such a profile (``harness.sim.cluster``);
    any other raises ``SpecError`` naming the steps that differ."""
    from harness.errors import SpecError

    steps = [b / r for b, r in profile.decode_tiers]
    lo, hi = min(steps), max(steps)
    last = profile.decode_tiers[-1][0]
    if hi - lo > GRID_STEP_RTOL * hi or profile.max_running > last:
        why = (f"its decode step ranges from {1e3 * lo:.3f} to {1e3 * hi:.3f} ms over the tiers" if hi - lo >
               GRID_STEP_RTOL * hi else f"max_running {profile.max_running} runs past its last tier ({last})")
        raise SpecError(f"simulator profile {profile.name!r} cannot run as several processes on one step grid: "
                        f"{why}",
                        hint="use sim.processes: 1, or a profile whose decode step is the same at every tier up "
                        "to max_running (e.g. harness/sim/profile_files/scale-20ms.yaml)")
    return hi * step_factor * time_scale


def next_grid_instant(t0: float, step: float, start: float, duration: float) -> float:
    """End (s) of a forward that starts at ``start`` and lasts ``duration`` on the grid ``t0 + k*step``:
    the first grid instant after ``max(start + duration - step/2, start)`` (a decode step of ``step``
    begun on the grid ends on the next instant; a shorter forward ends on the next one after its start)."""
    at = max(start + duration - step / 2, start)
    return t0 + (math.floor((at - t0) / step) + 1) * step
