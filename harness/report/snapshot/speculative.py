"""The speculative-decoding section of a report snapshot (pure; definitions in docs/speculative.md).

Contract: :func:`matched_entry` turns one matched AR/SD archive (kind and protocol class ``matched-sd``:
``matched.json``, the ``legs.parquet`` rows, ``spec.json``, ``service.json``) into a ``speculative.matched``
entry; :func:`acceptance_entry` turns the ``acceptance.parquet`` rows of any archive into a
``speculative.acceptance`` entry, the counts summed per (cell, source) and the derived values recomputed
from the sums (tokens per step ``a = 1 + accepted / steps``, bonus included; acceptance rate
``accepted / proposed``, bonus excluded). Sources are never added together (a wave may carry a
per-request and a counter-delta row of the same steps). Absent files give ``None``.

Units: rates tok/s (resident decode), step times ms, percentages plain percent, acceptance rate a
fraction in [0, 1]. A matched entry's ``valid`` is False when a resumed run superseded the archive
(``superseded_by``), when a blocking evidence finding invalidates the run (``invalid_rules``; its
break-even ``verdict`` is then ``withheld``, ``verdict_as_measured`` keeps it) or when the run did not
finish every leg (``status`` not ``complete`` or a ``failed_leg``); ``invalid_reason`` says which, and
its figures are then withheld by the renderer. An acceptance entry is marked as a whole and per
(cell, source) group by the wave ids of its rows (:mod:`harness.report.snapshot.validity`).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from harness.evidence.verdict import Verdict
from harness.measure.speculative import SpecCounts
from harness.report.snapshot.archives import ArchiveContent
from harness.report.snapshot.io import finite_or_none as _num
from harness.report.snapshot.io import json_value
from harness.report.snapshot.validity import content_verdict, mark_row, mark_rows, mark_run, withhold

__all__ = ["acceptance_entry", "invalid_reason", "matched_entry", "matched_snapshot_entry", "sd_algorithm"]

_LEG_KEYS = ("wave_rates_tok_s", "http_rates_tok_s", "median_tok_s", "http_median_tok_s", "step_ms",
             "step_samples", "tokens_per_step", "acceptance_rate", "spec_source")
_COUNT_KEYS = ("verify_steps", "drafts_proposed", "drafts_accepted", "completion_tokens")


def _ms(seconds: Any) -> float | None:
    v = _num(seconds)
    return v * 1e3 if v is not None else None


def _count(x: Any) -> int:
    v = _num(x)
    return int(v) if v is not None and v >= 0 else 0


def sd_algorithm(c: ArchiveContent) -> str | None:
    """``speculative_algorithm`` from the server info of the archive's first speculative service (the one
    whose ``first_leg`` is an SD leg; else the first service reporting one); None when none reported."""
    services = [s for s in (c.service or {}).get("services") or [] if isinstance(s, Mapping)]
    sd_first = sorted(services, key=lambda s: 0 if str(s.get("first_leg", "")).startswith("SD") else 1)
    for s in sd_first:
        info = s.get("server_info")
        algo = info.get("speculative_algorithm") if isinstance(info, Mapping) else None
        if algo:
            return str(algo)
    return None


def _legs(c: ArchiveContent, services: Mapping[str, Any], order: Sequence[str]) -> list[dict[str, Any]]:
    rows = {str(r.get("leg")): r for r in c.matched_legs or [] if isinstance(r, Mapping)}
    names = [x for x in order if x in rows or x in services]
    names += sorted(x for x in set(rows) | set(services) if x not in names)
    out = []
    for name in names:
        row, svc = rows.get(name) or {}, services.get(name) or {}
        leg: dict[str, Any] = {"leg": name, "arm": str(row.get("arm") or name[:2]), "present": name in rows}
        leg |= {k: json_value(row.get(k)) for k in _LEG_KEYS}
        leg["service_pid"] = svc.get("pid") if isinstance(svc, Mapping) else None
        out.append(leg)
    return out


def _first_differences(raw: Any) -> list[dict[str, Any]]:
    out = []
    for d in raw or []:
        if isinstance(d, Sequence) and not isinstance(d, str) and len(d) == 4:
            out.append({"leg": str(d[0]), "wave_index": d[1], "case_id": str(d[2]), "position": d[3]})
        elif isinstance(d, Mapping):
            out.append({k: json_value(d.get(k)) for k in ("leg", "wave_index", "case_id", "position")})
    return out


def matched_snapshot_entry(c: ArchiveContent, base: Mapping[str, Any], verdict: Verdict) -> dict[str, Any] | None:
    """The matched kind's snapshot entry (:func:`matched_entry`) with its verdict decided: marked by the
    archive's verdict, its verdict withheld on an invalid run, ``valid`` and ``invalid_reason``."""
    mat = matched_entry(c, base)
    if mat is None:
        return None
    mat = withhold(mark_run(mat, verdict), verdict)
    mat["invalid_reason"] = invalid_reason(mat)
    mat["valid"] = mat["invalid_reason"] is None
    return mat


def matched_entry(c: ArchiveContent, base: Mapping[str, Any]) -> dict[str, Any] | None:
    """One ``speculative.matched`` entry (module docstring); None without ``matched.json``. ``base`` is
    the archive's snapshot entry (campaign, claim class, status, simulated, created wall)."""
    if not isinstance(c.matched, Mapping):
        return None
    res = c.matched.get("result")
    result: Mapping[str, Any] = res if isinstance(res, Mapping) else {}
    be_raw = result.get("break_even")
    be: Mapping[str, Any] = be_raw if isinstance(be_raw, Mapping) else {}
    out_raw = result.get("outputs")
    outputs: Mapping[str, Any] = out_raw if isinstance(out_raw, Mapping) else {}
    spec = c.spec or {}
    wl = spec.get("workload") if isinstance(spec.get("workload"), Mapping) else {}
    svc_raw = c.matched.get("legs")
    services: Mapping[str, Any] = svc_raw if isinstance(svc_raw, Mapping) else {}
    order = [str(x) for x in spec.get("order") or []]
    algorithm = sd_algorithm(c)
    failed_leg = c.matched.get("failed_leg")
    entry: dict[str, Any] = {
        "archive_id": c.archive_id,
        "name": base["campaign"],
        "family": algorithm or base["campaign"],
        "algorithm": algorithm,
        "claim": str(spec.get("sd_claim") or base["claim_class"]),
        "claim_class": base["claim_class"],
        "protocol_class": base["protocol_class"],
        "status": base["status"],
        "simulated": base["simulated"],
        "created_wall": base["created_wall"],
        "order": order,
        "concurrency": result.get("concurrency", (wl or {}).get("concurrency")),
        "legs": _legs(c, services, order),
        "ar_rate_tok_s": _num(result.get("ar_rate_tok_s")),
        "sd_rate_tok_s": _num(result.get("sd_rate_tok_s")),
        "change_pct": _num(result.get("change_pct")),
        "http_change_pct": _num(result.get("http_change_pct")),
        "ar_drift_pct": _num(result.get("ar_drift_pct")),
        "sd_spread_pct": _num(result.get("sd_spread_pct")),
        "counts": json_value(dict(result["counts"])) if isinstance(result.get("counts"), Mapping) else None,
        "tokens_per_step": _num(result.get("tokens_per_step")),
        "acceptance_rate": _num(result.get("acceptance_rate")),
        "t_ar_ms": _ms(result.get("t_ar_s")),
        "t_sd_ms": _ms(result.get("t_sd_s")),
        "t_sd_implied_ms": _ms(result.get("t_sd_implied_s")),
        "t_sd_over_t_ar": _num(be.get("ratio")),
        "speedup": _num(be.get("speedup")),
        "margin": _num(be.get("margin")),
        "noise": _num(be.get("noise")),
        "reconcile_rel": _num(result.get("reconcile_rel")),
        "reconciled": result.get("reconciled"),
        "verdict": be.get("verdict"),
        "reason": be.get("reason"),
        "outputs": {"reference_leg": outputs.get("reference_leg"), "compared": outputs.get("compared"),
                    "identical": outputs.get("identical"), "differing": outputs.get("differing"),
                    "first_differences": _first_differences(outputs.get("first_differences"))},
        "failed_leg": failed_leg,
    }
    return entry


def invalid_reason(entry: Mapping[str, Any]) -> str | None:
    """Why a matched entry is not a result: superseded, a blocking evidence finding (its rules named),
    or a run that did not finish every leg."""
    if entry.get("superseded_by"):
        return f"superseded by {entry['superseded_by']}"
    if entry.get("invalid_rules"):
        return f"blocking finding: {', '.join(entry['invalid_rules'])}"
    if entry.get("failed_leg"):
        return f"leg {entry['failed_leg']} failed"
    if entry.get("status") != "complete":
        return f"archive status {entry.get('status')}"
    return None


def acceptance_entry(c: ArchiveContent, base: Mapping[str, Any],
                     verdict: Verdict | None = None) -> dict[str, Any] | None:
    """One ``speculative.acceptance`` entry: per (cell, source) the summed counts of its measured waves
    and the values derived from the sums, marked by the wave ids it sums; None without acceptance rows."""
    verdict = content_verdict(c) if verdict is None else verdict  # default: the content's own
    rows = [r for r in c.acceptance or [] if isinstance(r, Mapping)]
    if not rows:
        return None
    groups: dict[tuple[str, str], list[Mapping[str, Any]]] = {}
    for r in rows:
        groups.setdefault((str(r.get("cell_id")), str(r.get("source") or "unknown")), []).append(r)
    cells = []
    for (cell_id, source), mine in groups.items():
        sums = {k: sum(_count(r.get(k)) for r in mine) for k in _COUNT_KEYS}
        counts = SpecCounts(steps=sums["verify_steps"], proposed=sums["drafts_proposed"],
                            accepted=sums["drafts_accepted"], completion_tokens=sums["completion_tokens"],
                            source=source)
        conc = sorted({int(v) for r in mine if (v := _num(r.get("concurrency"))) is not None})
        cells.append(mark_row({"cell_id": cell_id, "source": source,
                               "concurrency": conc[0] if len(conc) == 1 else None,
                               "waves": len(mine), **sums, "tokens_per_step": _num(counts.tokens_per_step),
                               "acceptance_rate": _num(counts.acceptance_rate),
                               "sglang_accept_length": _num(counts.sglang_accept_length)},
                              verdict, [r.get("wave_id") for r in mine]))
    cells.sort(key=lambda x: (x["concurrency"] or 0, x["cell_id"], x["source"]))
    return mark_rows({"archive_id": c.archive_id, "campaign": base["campaign"], "kind": base["kind"],
                      "claim_class": base["claim_class"], "protocol_class": base["protocol_class"],
                      "status": base["status"], "simulated": base["simulated"], "created_wall": base["created_wall"],
                      "cells": cells}, verdict)
