"""The SLA-search section of a report snapshot (pure; docs/sla-search.md).

Contract: :func:`sla_entry` turns an SLA-search archive's ``sla.json`` (harness.run.sla) into an ``sla``
entry: the declared limits (ms), the rule a probe passes by, the bracket (highest passing rate,
lowest failing rate, monotone), why the search ended, whether it converged, its width and precision,
and every probe in probe order (rate, verdict, reasons, the worst measured round's p99 TTFT / TPOT /
E2E in seconds, rounds ok, schedule kept, bracket end). It never reduces the bracket to one number.
The entry is marked as one run (its bracket is a conclusion over every probe: not a result when the run
has a blocking finding), each probe by its cell id (``valid``, ``invalid_rules``;
:mod:`harness.report.snapshot.validity`).
Absent ``sla.json`` gives ``None``.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from harness.evidence.verdict import Verdict
from harness.report.snapshot.archives import ArchiveContent
from harness.report.snapshot.io import finite_or_none as _num
from harness.report.snapshot.validity import content_verdict, mark_row, mark_run

__all__ = ["sla_entry"]

_PROBE_KEYS = ("probe_index", "cell_id", "arrival_rate_req_s", "passed", "reasons", "rounds_ok", "rounds_planned",
               "schedule_kept", "ttft_p99_worst_s", "tpot_bench_p99_worst_s", "e2e_p99_worst_s", "ttft_limit_s",
               "tpot_limit_s", "e2e_limit_s", "request_throughput_median_req_s", "goodput_median_req_s",
               "bracket_end")


def _probe(p: Mapping[str, Any]) -> dict[str, Any]:
    out = {k: p.get(k) for k in _PROBE_KEYS}
    for k in _PROBE_KEYS:
        if k.endswith(("_s", "_req_s")):
            out[k] = _num(p.get(k))
    out["reasons"] = [str(r) for r in p.get("reasons") or []]
    return out


def sla_entry(c: ArchiveContent, base: Mapping[str, Any],
              verdict: Verdict | None = None) -> dict[str, Any] | None:
    """One ``sla`` entry (module docstring); ``base`` is the archive's snapshot entry."""
    verdict = content_verdict(c) if verdict is None else verdict  # default: the content's own
    doc = c.sla
    if not isinstance(doc, Mapping):
        return None
    raw_b, raw_s = doc.get("bracket"), doc.get("settings")
    bracket: Mapping[str, Any] = raw_b if isinstance(raw_b, Mapping) else {}
    settings: Mapping[str, Any] = raw_s if isinstance(raw_s, Mapping) else {}
    probes = [mark_row(_probe(p), verdict, [p.get("cell_id")]) for p in doc.get("probes") or []
              if isinstance(p, Mapping)]
    return mark_run({"archive_id": c.archive_id, "campaign": base["campaign"], "kind": base["kind"],
            "protocol_class": base["protocol_class"], "claim_class": base["claim_class"], "status": base["status"],
            "simulated": base["simulated"], "created_wall": base["created_wall"],
            "limits_ms": dict(doc.get("limits_ms") or {}), "rule": str(doc.get("rule") or ""),
            "highest_passing_req_s": _num(bracket.get("highest_passing_req_s")),
            "lowest_failing_req_s": _num(bracket.get("lowest_failing_req_s")),
            "monotone": bool(bracket.get("monotone", True)), "end": str(doc.get("end") or ""),
            "converged": bool(doc.get("converged")), "width": _num(doc.get("width")),
            "width_unit": str(doc.get("width_unit") or "req_s"), "precision": _num(settings.get("precision")),
            "max_probes": settings.get("max_probes"), "probes": probes}, verdict)
