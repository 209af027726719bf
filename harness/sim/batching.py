"""Batch formation and forward durations (pure), shared by the scheduler and the analytic answers.

Keeping one implementation here guarantees that ``analytic_prefill_rate`` predicts exactly the
batches the running scheduler forms.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from harness.sim.profiles import SimProfile


def plan_prefill_forward(
    profile: SimProfile,
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


def prefill_forward_s(profile: SimProfile, tokens: int, *, time_scale: float = 1.0) -> float:
    """Duration (s) of one prefill forward over ``tokens`` uncached prompt tokens: ``a + T/p``."""
    return (profile.prefill_a_s + tokens / profile.prefill_rate_tps) * time_scale


def decode_step_s(
    profile: SimProfile, batch: int, *, step_factor: float = 1.0, time_scale: float = 1.0
) -> float:
    """Duration (s) of one decode step with ``batch`` running requests: ``B / rate(B)``, scaled."""
    return batch / profile.decode_rate(batch) * step_factor * time_scale
