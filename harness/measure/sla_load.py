"""Load-robust SLA searches (pure): which probe measurements count, when a probe is measured again,
and when the search's result is withheld (docs/sla-search.md, "Measurements under load").

A probe round is **invalid for load** when the instruments, not the service, shaped it
(:func:`harness.measure.unit_load.round_load_problems`, with the evidence rules' thresholds), so a
round the search counts is one those rules do not invalidate.

A *measurement* is one attempt at a probe's rate: ``rounds`` measured rounds, attempt ``a`` using round
indices ``a * rounds .. a * rounds + rounds - 1`` (distinct round ids and request ids). It is valid when
none of its rounds is invalid for load; only a valid measurement has a verdict (pass / fail) and enters
the bracket. After an invalid one the search measures the same rate again, at most ``max_remeasure``
times (:func:`next_step`); when every attempt was invalid the search stops: ``end`` ``invalid-load``,
not converged, the reason in ``withheld`` (:func:`summary`). Every measurement stays a ``sla_probes``
row; an invalid one has ``passed`` null and ``reasons`` ``invalid-load: ...``.
"""

from __future__ import annotations

import math
import statistics
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from harness.ids import probe_id
from harness.measure import sla
from harness.measure.unit_load import num

INVALID = "invalid-load"
"""The ``end`` of a search whose probe had no valid measurement, and the prefix of such a row's reasons."""


@dataclass(frozen=True)
class Measured:
    """One measurement of a probe: its rate (req/s), whether it is valid, and its verdict (None when invalid)."""

    rate_req_s: float
    valid: bool
    passed: bool | None = None


def counted(measured: Sequence[Measured]) -> list[sla.Probe]:
    """The planner's probes: the valid measurements, in order."""
    return [sla.Probe(m.rate_req_s, bool(m.passed)) for m in measured if m.valid]


def withheld(measured: Sequence[Measured], max_remeasure: int) -> str | None:
    """Why the search's result is withheld: the last probe's ``1 + max_remeasure`` measurements were all
    invalid for load; None otherwise."""
    if not measured or measured[-1].valid:
        return None
    rate = measured[-1].rate_req_s
    tail = 0
    for m in reversed(measured):
        if m.rate_req_s != rate or m.valid:
            break
        tail += 1
    if tail <= max_remeasure:
        return None
    return (f"the probe at {rate:g} req/s was invalid for load in all {tail} measurement(s) (the client or the "
            "simulator fell behind); no bracket is decided from it")


def next_step(measured: Sequence[Measured], s: sla.SearchSettings, max_remeasure: int) -> tuple[float, int] | None:
    """The next measurement, (rate req/s, attempt at that rate: 0 for a new probe), or None when the search
    ends: the same rate again after an invalid measurement (at most ``max_remeasure`` times), else the
    planner's next rate from the valid measurements (:func:`harness.measure.sla.next_rate`)."""
    if measured and not measured[-1].valid:
        if withheld(measured, max_remeasure) is not None:
            return None
        rate = measured[-1].rate_req_s
        return rate, sum(1 for m in measured if m.rate_req_s == rate and not m.valid)
    planned = sla.next_rate(counted(measured), s)
    return None if planned is None else (planned, 0)


def measured_of(rows: Sequence[Mapping[str, Any]]) -> list[Measured]:
    """The measurements of ``sla_probes`` rows (probe order): a row with ``passed`` null is invalid."""
    return [Measured(float(r["arrival_rate_req_s"]), r["passed"] is not None,
                     None if r["passed"] is None else bool(r["passed"]))
            for r in sorted(rows, key=lambda r: int(r["probe_index"]))]


def attempt_rounds(rounds: Sequence[Mapping[str, Any]], rate: float, attempt: int,
                   per_probe: int) -> list[Mapping[str, Any]]:
    """The measured rounds of attempt ``attempt`` at ``rate`` (module docstring: its round indices)."""
    return [r for r in rounds if r["arrival_rate_req_s"] == rate and int(r["round_index"]) // per_probe == attempt]


def probe_row(index: int, rate: float, attempt: int, cell: Mapping[str, Any] | None,
              rounds: Sequence[Mapping[str, Any]], problems: Sequence[str], limits_s: Mapping[str, float | None],
              per_probe: int) -> dict[str, Any]:
    """The ``sla_probes`` row of measurement ``index`` (:func:`harness.measure.sla.probe_row`), attempt
    ``attempt`` at ``rate``: its own id ``probe_id`` (:func:`harness.ids.probe_id`) and the medians of
    its own ``rounds``; one with load ``problems`` has no verdict (``passed`` None) and its reasons say why."""
    row = sla.probe_row(index, rate, cell, rounds, limits_s, per_probe)
    # a rate measured again has one cell for all its attempts: each measurement's medians are its own rounds'
    ok = [r for r in rounds if r.get("status") == "ok"]
    for key in ("request_throughput", "goodput"):
        vals = [v for v in (num(r.get(f"{key}_req_s")) for r in ok) if not math.isnan(v)]
        row[f"{key}_median_req_s"] = statistics.median(vals) if vals else math.nan
    row |= {"probe_id": probe_id(rate, attempt), "attempt": attempt}
    if problems:
        row |= {"passed": None, "reasons": [f"{INVALID}: {p}" for p in problems]}
    return row


def mark_bracket(rows: Sequence[Mapping[str, Any]]) -> list[dict[str, Any]]:
    """``rows`` with ``bracket_end`` set on the two valid measurements at the bracket's ends."""
    b = sla.bracket(counted(measured_of(rows)))
    out = []
    for r in rows:
        rate, passed = float(r["arrival_rate_req_s"]), r["passed"]
        end = ("highest-passing" if passed is True and rate == b.lo_req_s
               else "lowest-failing" if passed is False and rate == b.hi_req_s else None)
        out.append(dict(r) | {"bracket_end": end})
    return out


def summary(rows: Sequence[Mapping[str, Any]], s: sla.SearchSettings, max_remeasure: int, *,
            finished: bool = True) -> dict[str, Any]:
    """``sla.json``'s result (:func:`harness.measure.sla.summary` of the valid measurements), with
    ``end`` ``invalid-load`` and the reason in ``withheld`` when the result is withheld, and the counts
    ``n_measurements``, ``n_invalid``, ``n_remeasured`` (measurements that repeated a rate)."""
    m = measured_of(rows)
    valid_rows = [r for r in rows if r["passed"] is not None]
    out = sla.summary(valid_rows, s, finished=finished)
    why = withheld(m, max_remeasure)
    if why is not None:
        out |= {"end": INVALID, "converged": False}
    out["settings"] = dict(out["settings"]) | {"max_remeasure": max_remeasure}
    seen: set[float] = set()
    again = 0
    for x in m:
        again += x.rate_req_s in seen
        seen.add(x.rate_req_s)
    return out | {"withheld": why, "n_measurements": len(m), "n_invalid": sum(1 for x in m if not x.valid),
                  "n_remeasured": again}
