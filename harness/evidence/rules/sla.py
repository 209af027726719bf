"""Evidence rules of SLA searches (pure; harness.run.sla, docs/sla-search.md): a search the probe cap
ended before its bracket was as narrow as declared, or whose result was withheld because a probe had no
measurement valid for load (``sla-not-converged``), a probe whose rounds were
not all ok, whose client did not keep the planned arrival schedule, or whose simulator fell behind
its model or client stalled in a round (``sla-probe-invalid``: its verdict is not a measurement of
that rate), and a bracket that some passing rate above a failing
one contradicts (``sla-not-monotone``). All three apply to kind ``sla-search`` only."""

from __future__ import annotations

from typing import Any

from harness.evidence.findings import ArchiveData, Finding
from harness.evidence.findings import make_finding as _f
from harness.evidence.rules._registry import rule
from harness.evidence.rules.instruments import unit_problems
from harness.ids import probe_id


def _sla(d: ArchiveData) -> dict[str, Any]:
    """The search's ``sla.json`` (empty when it is missing or not an object)."""
    doc = d.extra.get("sla")
    return doc if isinstance(doc, dict) else {}


@rule("sla-not-converged", kinds=("sla-search",))
def rule_sla_not_converged(d: ArchiveData) -> list[Finding]:
    """A search that ended (probe cap, or cut short) with a bracket wider than its precision, or whose
    result is withheld (``end`` ``invalid-load``: a probe invalid for load in every measurement)."""
    doc = _sla(d)
    if doc.get("converged") or doc.get("end") == "max-rate-passed":
        return []
    if doc.get("withheld"):
        return [_f(d.archive_id, "sla-not-converged", "warning",
                   f"the search's result is withheld (end invalid-load): {doc['withheld']}; the bracket holds only "
                   "the valid measurements and is not converged",
                   "run the search again on a less loaded machine (nothing else busy), or raise "
                   "search.max_remeasure", scope="run")]
    s = doc.get("settings") or {}
    unit = "" if s.get("relative") else " req/s"
    width = doc.get("width")
    shown = "unbounded (an end is missing)" if width is None else f"{float(width):.4g}{unit}"
    return [_f(d.archive_id, "sla-not-converged", "warning",
               f"the search ended ({doc.get('end', 'unknown')}) after {doc.get('n_probes', 0)} probes with a bracket "
               f"{shown} wide, wider than its precision {s.get('precision')}{unit}; the bracket is what was "
               "measured, not the declared precision",
               "raise search.max_probes, start nearer the threshold, or relax the precision (a resolution-limit "
               "end: the bracket cannot be split at 6 significant digits)", scope="run")]


def _measurement(r: dict[str, Any], per_probe: int) -> list[str]:
    """The ``sla_probes`` id of the measurement round ``r`` belongs to (harness.ids.probe_id): a finding on
    an invalid attempt never names a valid re-measurement of the same rate; [] for a row without a rate."""
    rate, index = r.get("arrival_rate_req_s"), r.get("round_index")
    if rate is None or index is None:
        return []
    return [probe_id(float(rate), int(index) // per_probe)]


@rule("sla-probe-invalid", kinds=("sla-search",))
def rule_sla_probe_invalid(d: ArchiveData) -> list[Finding]:
    """Probes whose measured rounds were not all ok, whose client did not keep the schedule, or that a
    blocking ``sim-lateness`` or ``client-stalled`` invalidates (the simulator lost at least
    ``SIM_LATENESS_FRACTION`` of a round's window, or the client stalled longer than a round tolerates:
    ``instruments.unit_problems``): one blocking finding per such round, naming it and its measurement
    (``sla_probes.probe_id``), so no invalid probe decides the bracket silently."""
    instruments = unit_problems(d)
    doc = _sla(d)
    # rates with a valid (counted) measurement: harness.measure.sla_load gives an invalid one no verdict
    counted = {float(p["arrival_rate_req_s"]) for p in doc.get("probes") or []
               if isinstance(p, dict) and p.get("passed") is not None and p.get("arrival_rate_req_s") is not None}
    per_probe = max(1, int(d.spec.get("rounds") or 1))
    out = []
    for r in d.rounds:
        problems = []
        if r.get("status") != "ok":
            problems.append(f"round status {r.get('status')}")
        if r.get("client_schedule_kept") is False:
            problems.append(f"client send lag p99 {float(r.get('client_lag_p99_s') or 0) * 1e3:.1f} ms over the "
                            f"tolerance {float(d.spec.get('schedule_tolerance_ms', 50.0)):.0f} ms")
        problems.extend(instruments.get(str(r["round_id"]), []))
        if problems:
            rate = r.get("arrival_rate_req_s")
            again = (" (the search measured this rate again and counted only a valid measurement)"
                     if rate is not None and float(rate) in counted and r.get("status") == "ok" else "")
            out.append(_f(d.archive_id, "sla-probe-invalid", "blocking",
                          f"{r['round_id']} (probe at {rate} req/s): {'; '.join(problems)}; "
                          f"this probe's verdict is not a measurement of its planned rate{again}",
                          "find the failed requests, the achieved schedule (schedule.jsonl) or the round's "
                          "self-check (wave_checks.jsonl) in the archive; run the search again on a less "
                          "loaded machine", [str(r["round_id"]), *_measurement(r, per_probe)]))
    return out


@rule("sla-not-monotone", kinds=("sla-search",))
def rule_sla_not_monotone(d: ArchiveData) -> list[Finding]:
    """A rate passed above the lowest failing rate: the pass/fail boundary is not one threshold."""
    doc = _sla(d)
    if (doc.get("bracket") or {}).get("monotone", True):
        return []
    return [_f(d.archive_id, "sla-not-monotone", "warning",
               "a probe passed at a rate above the lowest failing rate; the bracket uses the lowest failure, but "
               "the limits are not met by every rate below a single threshold",
               "repeat the probes near the bracket with more rounds or requests per round", scope="run")]
