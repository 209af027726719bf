"""Open-loop arrival plans: when each request of a rate-sweep round is sent (pure).

A plan is made before the run and archived (``arrivals.json``); the runner only follows it. Offsets
are seconds after the round's start, drawn from a seeded generator (``numpy.random.default_rng``),
so the same (process, rate, burstiness, seed, size) always gives the same plan.

Processes (the names and the gamma parameterisation are those of sglang.bench_serving's and
``vllm bench serve``'s ``--request-rate`` / ``--burstiness``):

- ``poisson``: exponential gaps with mean ``1/rate`` (gamma with shape 1);
- ``gamma``: gaps ~ Gamma(shape = burstiness, scale = 1 / (rate x burstiness)); the mean gap stays
  ``1/rate``, burstiness < 1 is burstier than Poisson, > 1 more regular;
- ``constant``: gaps of exactly ``1/rate``.

The first request is sent at offset 0. A plan is bounded by a request ``count`` or a ``duration_s``
(every arrival with offset < duration). Rate sweeps are a list of rates or a geometric range.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any, Literal

import numpy as np
import numpy.typing as npt

from harness.hashing import sha256_json

__all__ = ["RoundPlan", "plan_hash"]

Process = Literal["poisson", "gamma", "constant"]
PROCESSES: tuple[Process, ...] = ("poisson", "gamma", "constant")
MAX_PLANNED = 1_000_000
F64 = npt.NDArray[np.float64]


def gaps(process: Process, rate: float, n: int, *, burstiness: float = 1.0, seed: int = 0) -> F64:
    """``n`` inter-arrival gaps in seconds for ``process`` at ``rate`` requests/s."""
    if not (rate > 0 and math.isfinite(rate)):
        raise ValueError(f"rate must be a positive finite number of requests/s, got {rate}")
    if not burstiness > 0:
        raise ValueError(f"burstiness must be > 0, got {burstiness}")
    if n < 0 or n > MAX_PLANNED:
        raise ValueError(f"cannot plan {n} arrivals (0 to {MAX_PLANNED})")
    if process == "constant":
        return np.full(n, 1.0 / rate, dtype=np.float64)
    shape = 1.0 if process == "poisson" else burstiness
    rng = np.random.default_rng(seed)
    return np.asarray(rng.gamma(shape, 1.0 / (rate * shape), size=n), dtype=np.float64)


def offsets(process: Process, rate: float, *, count: int | None = None, duration_s: float | None = None,
            burstiness: float = 1.0, seed: int = 0) -> F64:
    """Send offsets (s, from 0, non-decreasing): ``count`` arrivals, or every arrival before ``duration_s``."""
    if (count is None) == (duration_s is None):
        raise ValueError("give exactly one of count and duration_s")
    if count is not None:
        g = gaps(process, rate, max(count - 1, 0), burstiness=burstiness, seed=seed)
        return np.concatenate([[0.0], np.cumsum(g)])[:count] if count else np.zeros(0)
    assert duration_s is not None
    if not duration_s > 0:
        raise ValueError(f"duration_s must be > 0, got {duration_s}")
    # draw in one go with headroom, extend while the last arrival is still inside the duration
    n = int(rate * duration_s * 1.5) + 16
    while True:
        if n > MAX_PLANNED:
            raise ValueError(f"rate {rate} x duration {duration_s} s needs more than {MAX_PLANNED} arrivals")
        t = np.concatenate([[0.0], np.cumsum(gaps(process, rate, n, burstiness=burstiness, seed=seed))])
        if t[-1] >= duration_s:
            return np.asarray(t[t < duration_s], dtype=np.float64)
        n *= 2


def geometric_rates(start: float, stop: float, steps: int) -> list[float]:
    """``steps`` rates from ``start`` to ``stop`` inclusive, equally spaced on a log scale (rounded to
    6 significant digits so plans and cell ids are stable)."""
    if not (0 < start <= stop) or steps < 1:
        raise ValueError(f"a geometric range needs 0 < start <= stop and steps >= 1 (got {start}, {stop}, {steps})")
    if steps == 1:
        return [float(f"{start:.6g}")]
    ratio = (stop / start) ** (1.0 / (steps - 1))
    return [float(f"{start * ratio ** k:.6g}") for k in range(steps)]


@dataclass(frozen=True)
class RoundPlan:
    """The planned sends of one round at one rate: offsets (s) and the corpus case of each request."""

    rate: float
    round_index: int
    seed: int
    offsets_s: tuple[float, ...]
    case_ids: tuple[str, ...]

    def to_json(self) -> dict[str, Any]:
        """The plan as archived (offsets rounded to the nanosecond)."""
        return {"rate": self.rate, "round_index": self.round_index, "seed": self.seed,
                "offsets_ns": [round(x * 1e9) for x in self.offsets_s], "case_ids": list(self.case_ids)}


def round_seed(seed: int, rate: float, round_index: int) -> int:
    """The seed of one (rate, round): derived from the sweep seed, stable across runs."""
    return int(sha256_json({"seed": seed, "rate": rate, "round": round_index})[:12], 16)


def plan_round(process: Process, rate: float, round_index: int, case_ids: Sequence[str], *, seed: int,
               count: int | None = None, duration_s: float | None = None, burstiness: float = 1.0,
               first_case: int = 0) -> RoundPlan:
    """One round's plan; cases are taken in corpus order from ``first_case``, cycling."""
    if not case_ids:
        raise ValueError("no corpus cases to send")
    s = round_seed(seed, rate, round_index)
    off = offsets(process, rate, count=count, duration_s=duration_s, burstiness=burstiness, seed=s)
    cases = tuple(case_ids[(first_case + i) % len(case_ids)] for i in range(off.size))
    return RoundPlan(rate, round_index, s, tuple(float(x) for x in off), cases)


def plan_hash(rounds: Sequence[RoundPlan]) -> str:
    """SHA-256 of the canonical JSON of every round's plan (recorded in the archive)."""
    return sha256_json([r.to_json() for r in rounds])
