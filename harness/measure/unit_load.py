"""When a measured round is invalid for load (pure): the instruments, not the service, shaped it.

A round (a ``sweep_rounds`` / ``sla_rounds`` row with its ``wave_checks.jsonl`` self-check row) is
invalid for load when the simulator lost at least ``sim_lateness_fraction`` of its window to late
steps, the client stalled longer than ``stall_s``, the client's loop thread was busy at least
``loop_cpu_share`` of it, or the client did not keep the planned schedule while no request was held
back by a ``max_concurrency`` cap. The thresholds are the evidence rules' (``sim-lateness``,
``client-stalled``, ``client-bound``); the runners pass them in :class:`LoadLimits`
(``harness.run.rate_rounds.LOAD_LIMITS``). An SLA search measures such a probe again
(:mod:`harness.measure.sla_load`); a rate sweep never places its knee on a rate with such a round
(:func:`harness.measure.sweep.knee_of`).
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

__all__ = ["LoadLimits", "late_cells", "num", "round_load_problems"]


def num(v: Any) -> float:
    """``v`` as a float; NaN for None or what is not a number."""
    try:
        return float(v) if v is not None else math.nan
    except (TypeError, ValueError):
        return math.nan


@dataclass(frozen=True)
class LoadLimits:
    """When a round is invalid for load: simulator time lost (fraction of the round's window), the
    longest client stall (s), the client loop thread's busy share (fraction of wall time)."""

    sim_lateness_fraction: float
    stall_s: float
    loop_cpu_share: float


def round_load_problems(row: Mapping[str, Any], check: Mapping[str, Any] | None, limits: LoadLimits) -> list[str]:
    """Why measured round ``row`` (a ``sweep_rounds`` row) with self-check ``check`` (its
    ``wave_checks.jsonl`` row; None: none taken) is invalid for load (module docstring); empty: valid."""
    out: list[str] = []
    c = check or {}
    window = num(row.get("duration_s"))
    if int(c.get("sim_late_steps") or 0) > 0:
        lost = num(c.get("sim_lateness_s"))
        if not lost < limits.sim_lateness_fraction * window:  # an unknown window or loss counts
            out.append(f"the simulator lost {lost:.3f} s of model time ({int(c['sim_late_steps'])} late step(s); "
                       f"window {window:.3f} s)")
    stall = num(c.get("client_stall_s"))
    if stall > limits.stall_s:
        out.append(f"the client stalled {stall:.2f} s (limit {limits.stall_s:.2f} s)")
    cpu = num(c.get("loop_cpu_share"))
    if cpu >= limits.loop_cpu_share:
        out.append(f"the client's loop thread was busy {cpu:.0%} of the round")
    if row.get("client_schedule_kept") is False and not int(row.get("capped_requests") or 0):
        lag = num(row.get("client_lag_p99_s"))
        out.append(f"the client did not keep the schedule (send lag p99 {lag * 1e3:.1f} ms)")
    return out


def late_cells(rounds: Sequence[Mapping[str, Any]], checks: Sequence[Mapping[str, Any]],
               limits: LoadLimits) -> dict[str, str]:
    """Cell id -> why, for every cell with a round invalid for load (``checks``: the archive's
    ``wave_checks.jsonl`` rows, matched to ``rounds`` by ``round_id``)."""
    by_round = {str(c["round_id"]): c for c in checks if c.get("round_id") is not None}
    late: dict[str, list[str]] = {}
    for r in rounds:
        problems = round_load_problems(r, by_round.get(str(r.get("round_id"))), limits)
        if problems and r.get("cell_id") is not None:
            late.setdefault(str(r["cell_id"]), []).append(f"{r.get('round_id')}: {problems[0]}")
    return {cell: f"{len(why)} round(s) invalid for load ({why[0]})" for cell, why in late.items()}
