"""The SLA search's planner and judge (pure): which rate to probe next, when the search ends, the bracket.

A *probe* is one offered rate (requests/s) measured in ``rounds`` rounds (a rate-sweep cell); it
**passes** only when every measured round ended ``ok`` and, in every such round, the p99 of each
declared metric (TTFT ``ttft_p99_s``, TPOT ``tpot_bench_p99_s`` (the peers' definition, as goodput's
SLO), E2E ``e2e_p99_s``) is at or below its limit (:func:`judge`, :data:`RULE`). A round that did not
end ``ok`` (failed requests, or it never ended) fails the probe.

The search (:func:`next_rate`): probe ``start``; while every probe has passed, double the highest rate
(up to ``max_rate``); while every probe has failed, halve the lowest; once a rate passed and a higher
one failed, probe the midpoint of the bracket. It ends when the bracket is at most the precision wide
(*converged*), when ``max_rate`` passed (no failing rate below it), or when ``max_probes`` probes ran
(*probe cap*: unconverged), or when no rate of 6 significant digits lies inside the bracket
(*resolution limit*: unconverged; probed rates, and their cell ids, have 6 significant digits).

The bracket (:func:`bracket`) is (the highest passing rate below the
lowest failing rate, the lowest failing rate); either end may be missing. The result is that bracket
with every probe's figures: never one interpolated number.

Width: ``hi - lo`` requests/s (absolute precision) or ``(hi - lo) / lo`` (relative precision, a
fraction of the highest passing rate).
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import pyarrow as pa

from harness.ids import probe_id
from harness.measure.sweep import SweepRoundRow
from harness.measure.table_model import TableModel

RULE = ("a probe passes only if every measured round ended ok and, in every round, the p99 of each declared "
        "metric (ttft_p99_s, tpot_bench_p99_s, e2e_p99_s) is at or below its limit")
METRIC_COLUMNS = {"ttft": "ttft_p99_s", "tpot": "tpot_bench_p99_s", "e2e": "e2e_p99_s"}
ENDS = ("converged", "probe-cap", "max-rate-passed", "resolution-limit", "running")


@dataclass(frozen=True)
class SearchSettings:
    """How the search runs: first rate, precision (absolute req/s or relative fraction), probe cap,
    optional highest rate."""

    start_req_s: float
    precision: float
    relative: bool = False
    max_probes: int = 12
    max_rate_req_s: float | None = None

    def __post_init__(self) -> None:
        if not (self.start_req_s > 0 and math.isfinite(self.start_req_s)):
            raise ValueError(f"start rate {self.start_req_s} must be a positive number")
        if not (self.precision > 0 and math.isfinite(self.precision)):
            raise ValueError(f"precision {self.precision} must be a positive number")
        if self.max_probes < 1:
            raise ValueError("max_probes must be >= 1")
        if self.max_rate_req_s is not None and self.max_rate_req_s < self.start_req_s:
            raise ValueError("max_rate_req_s must be >= start_req_s")


@dataclass(frozen=True)
class Probe:
    """One probed rate and whether it passed."""

    rate_req_s: float
    passed: bool


@dataclass(frozen=True)
class Bracket:
    """Highest passing rate below the lowest failing one (``lo``) and that failing rate (``hi``);
    ``None`` where no such probe exists. ``monotone`` is False when some rate passed above a
    failing one (the oracle was not monotone; the bracket still uses the lowest failure)."""

    lo_req_s: float | None
    hi_req_s: float | None
    monotone: bool = True

    def width(self, relative: bool) -> float:
        """``hi - lo`` (req/s), or ``(hi - lo) / lo`` when ``relative``; inf when an end is missing."""
        if self.lo_req_s is None or self.hi_req_s is None:
            return math.inf
        w = self.hi_req_s - self.lo_req_s
        return w / self.lo_req_s if relative else w

    def to_json(self) -> dict[str, Any]:
        """As recorded in ``sla.json``."""
        return {"highest_passing_req_s": self.lo_req_s, "lowest_failing_req_s": self.hi_req_s,
                "monotone": self.monotone}


def bracket(probes: Sequence[Probe]) -> Bracket:
    """The bracket of ``probes`` (class docstring)."""
    fails = [p.rate_req_s for p in probes if not p.passed]
    passes = [p.rate_req_s for p in probes if p.passed]
    hi = min(fails) if fails else None
    below = [r for r in passes if hi is None or r < hi]
    lo = max(below) if below else None
    monotone = hi is None or all(r < hi for r in passes)
    return Bracket(lo, hi, monotone)


def converged(probes: Sequence[Probe], s: SearchSettings) -> bool:
    """True when the bracket has both ends and is at most the precision wide."""
    return bracket(probes).width(s.relative) <= s.precision


def _round_rate(x: float) -> float:
    """``x`` to 6 significant digits (stable cell ids, readable tables)."""
    return float(f"{x:.6g}")


def _between(lo: float, hi: float) -> float | None:
    """The bracket's midpoint at 6 significant digits; None when no such rate lies strictly inside."""
    mid = _round_rate((lo + hi) / 2)
    return mid if lo < mid < hi else None


def end_of(probes: Sequence[Probe], s: SearchSettings) -> str:
    """Why the search stops now (``converged``, ``max-rate-passed``, ``probe-cap``) or ``running``."""
    if converged(probes, s):
        return "converged"
    b = bracket(probes)
    if s.max_rate_req_s is not None and b.hi_req_s is None and any(
            p.passed and p.rate_req_s >= s.max_rate_req_s for p in probes):
        return "max-rate-passed"
    if len(probes) >= s.max_probes:
        return "probe-cap"
    if b.lo_req_s is not None and b.hi_req_s is not None and _between(b.lo_req_s, b.hi_req_s) is None:
        return "resolution-limit"  # rates are probed at 6 significant digits (their cell ids)
    return "running"


def next_rate(probes: Sequence[Probe], s: SearchSettings) -> float | None:
    """The next rate to probe (req/s), or None when the search has ended (module docstring)."""
    if not probes:
        return s.start_req_s
    if end_of(probes, s) != "running":
        return None
    b = bracket(probes)
    if b.hi_req_s is None:  # every probe passed: double
        top = max(p.rate_req_s for p in probes)
        up = top * 2
        return min(up, s.max_rate_req_s) if s.max_rate_req_s is not None else up
    if b.lo_req_s is None:  # every probe at or below the lowest failure failed: halve
        return _round_rate(b.hi_req_s / 2)
    return _between(b.lo_req_s, b.hi_req_s)  # not None: end_of said "running"


def judge(rounds: Sequence[Mapping[str, Any]], limits_s: Mapping[str, float | None]) -> tuple[bool, list[str]]:
    """Whether a probe of these measured ``rounds`` (``sweep_rounds`` rows) passes :data:`RULE` under
    ``limits_s`` (``ttft``/``tpot``/``e2e`` -> seconds or None), and the reasons it failed
    (``round-not-ok``, ``no-rounds`` or the metrics over their limit)."""
    reasons: list[str] = []
    if not rounds:
        return False, ["no-rounds"]
    if any(r.get("status") != "ok" for r in rounds):
        reasons.append("round-not-ok")
    for metric, limit in limits_s.items():
        if limit is None:
            continue
        worst = worst_p99(rounds, metric)
        if not worst <= limit:  # NaN (nothing measured) fails too
            reasons.append(metric)
    return not reasons, reasons


def worst_p99(rounds: Sequence[Mapping[str, Any]], metric: str) -> float:
    """The highest p99 of ``metric`` over ``rounds`` (seconds; NaN when a round has none)."""
    col = METRIC_COLUMNS[metric]
    vals = [float(r.get(col, math.nan)) for r in rounds]
    if not vals or any(math.isnan(v) for v in vals):
        return math.nan
    return max(vals)


def probe_row(index: int, rate_req_s: float, cell: Mapping[str, Any] | None, rounds: Sequence[Mapping[str, Any]],
              limits_s: Mapping[str, float | None], rounds_planned: int) -> dict[str, Any]:
    """The ``sla_probes`` row of probe ``index`` at ``rate_req_s`` from its ``sweep_cells`` row (None:
    no round measured) and its ``sweep_rounds`` rows, judged by :func:`judge`."""
    passed, reasons = judge(rounds, limits_s)
    c = cell or {}
    return {"probe_index": index, "cell_id": c.get("cell_id"), "arrival_rate_req_s": rate_req_s,
            "passed": passed, "reasons": reasons,
            "rounds_ok": sum(1 for r in rounds if r.get("status") == "ok"), "rounds_planned": rounds_planned,
            "schedule_kept": all(bool(r.get("client_schedule_kept")) for r in rounds) if rounds else False,
            "ttft_p99_worst_s": worst_p99(rounds, "ttft"), "tpot_bench_p99_worst_s": worst_p99(rounds, "tpot"),
            "e2e_p99_worst_s": worst_p99(rounds, "e2e"),
            "ttft_limit_s": limits_s.get("ttft"), "tpot_limit_s": limits_s.get("tpot"),
            "e2e_limit_s": limits_s.get("e2e"),
            "request_throughput_median_req_s": c.get("request_throughput_median_req_s", math.nan),
            "goodput_median_req_s": c.get("goodput_median_req_s", math.nan), "bracket_end": None}


def probes_of(rows: Sequence[Mapping[str, Any]]) -> list[Probe]:
    """The planner's view of ``sla_probes`` rows, in probe order."""
    return [Probe(float(r["arrival_rate_req_s"]), bool(r["passed"]))
            for r in sorted(rows, key=lambda r: int(r["probe_index"]))]


def mark_bracket(rows: Sequence[Mapping[str, Any]]) -> list[dict[str, Any]]:
    """``rows`` with ``bracket_end`` set on the probes at the bracket's two ends."""
    b = bracket(probes_of(rows))
    out = []
    for r in rows:
        rate = float(r["arrival_rate_req_s"])
        end = ("highest-passing" if r["passed"] and rate == b.lo_req_s
               else "lowest-failing" if not r["passed"] and rate == b.hi_req_s else None)
        out.append(dict(r) | {"bracket_end": end})
    return out


def summary(rows: Sequence[Mapping[str, Any]], s: SearchSettings, *, finished: bool = True) -> dict[str, Any]:
    """``sla.json``'s result: the bracket, why the search ended (``running`` when it was cut short:
    a partial), whether it converged, its width, the settings and :data:`RULE`."""
    probes = probes_of(rows)
    b = bracket(probes)
    end = end_of(probes, s)
    width = b.width(s.relative)
    return {"bracket": b.to_json(), "end": end if finished or end != "running" else "interrupted",
            "converged": end == "converged", "width": None if math.isinf(width) else width,
            "width_unit": "ratio" if s.relative else "req_s",
            "settings": {"start_req_s": s.start_req_s, "precision": s.precision, "relative": s.relative,
                         "max_probes": s.max_probes, "max_rate_req_s": s.max_rate_req_s},
            "rule": RULE, "n_probes": len(probes)}


@dataclass(frozen=True, kw_only=True)
class SlaProbeRow:
    """``sla_probes``: one probe of an SLA search (harness.measure.sla): its offered rate, the worst
    measured round's p99 of each metric (s) beside its declared limit (s; null: not declared),
    ``passed`` under the search's rule, ``reasons`` it failed, its rounds, whether every round kept
    its schedule, and ``bracket_end`` (``highest-passing``, ``lowest-failing`` or null). ``probe_id``
    names the measurement (``harness.ids.probe_id``; ``attempt`` 0 is the rate's first): a rate measured
    again for load has one row per attempt (harness.measure.sla_load); null in rows written before
    2026-12-04."""

    probe_index: int
    probe_id: str | None = None
    attempt: int | None = None
    cell_id: str | None = None
    arrival_rate_req_s: float
    passed: bool
    reasons: list[str]
    rounds_ok: int
    rounds_planned: int
    schedule_kept: bool
    ttft_p99_worst_s: float | None = None
    tpot_bench_p99_worst_s: float | None = None
    e2e_p99_worst_s: float | None = None
    ttft_limit_s: float | None = None
    tpot_limit_s: float | None = None
    e2e_limit_s: float | None = None
    request_throughput_median_req_s: float | None = None
    goodput_median_req_s: float | None = None
    bracket_end: str | None = None


def fill_probe_ids(t: pa.Table) -> pa.Table:
    """``sla_probes`` rows with ``probe_id`` and ``attempt`` filled where null (rows written before
    2026-12-04): a row's attempt is the number of rows before it (``probe_index`` order) at its rate."""
    if "arrival_rate_req_s" not in t.column_names or "probe_index" not in t.column_names or (
            "probe_id" in t.column_names and t.column("probe_id").null_count == 0):
        return t
    rows = t.select(["probe_index", "arrival_rate_req_s"]).to_pylist()
    given = t.column("probe_id").to_pylist() if "probe_id" in t.column_names else [None] * t.num_rows
    tries = t.column("attempt").to_pylist() if "attempt" in t.column_names else [None] * t.num_rows
    seen: dict[float, int] = {}
    attempt: dict[int, int] = {}
    for i in sorted(range(len(rows)), key=lambda i: int(rows[i]["probe_index"])):
        rate = float(rows[i]["arrival_rate_req_s"])
        given_try = tries[i]
        attempt[i] = int(given_try) if given_try is not None else seen.get(rate, 0)
        seen[rate] = seen.get(rate, 0) + 1
    ids = [g if g is not None else probe_id(float(rows[i]["arrival_rate_req_s"]), attempt[i])
           for i, g in enumerate(given)]
    out = t
    for name, values, typ in (("probe_id", ids, pa.string()), ("attempt", [attempt[i] for i in range(len(rows))],
                                                               pa.int64())):
        col = pa.array(values, typ)
        out = (out.set_column(out.column_names.index(name), name, col) if name in out.column_names
               else out.append_column(name, col))
    return out


TABLES: dict[str, TableModel] = {
    "sla_probes": TableModel(SlaProbeRow, row_keys=("probe_id",), fill=fill_probe_ids),
    "sla_rounds": TableModel(SweepRoundRow, latency=True, row_keys=("round_id",)),  # the sweep_rounds columns
}
"""An SLA search's ledger tables (its descriptor's ``row_models``)."""
