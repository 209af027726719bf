"""Freezing a report snapshot: turn verified archive contents and historical ledger rows into the
snapshot document (pure).

Contract: :func:`freeze` takes :class:`~harness.report.snapshot.archives.ArchiveContent` s (any order) and
the report config and returns the snapshot as plain JSON data; the same inputs give the same snapshot.
This module builds the archive list and the historical sections; each kind's section is the list its
``KindInfo.report_section`` names, filled by its ``report`` entry builder (:data:`harness.kinds.KINDS`:
:func:`kind_sections`, so a new kind needs no edit here; a dotted section nests, :func:`placed`); the
acceptance counts come from :mod:`harness.report.snapshot.speculative`, the per-archive context sections
from :mod:`harness.report.snapshot.sections` and the limits from :mod:`harness.report.snapshot.limits`.
The document's layout is described in :mod:`harness.report.snapshot`.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np

from harness.evidence.verdict import Verdict
from harness.inputs.spec import legacy_cache
from harness.kinds import KINDS, kind_of_run, resolve
from harness.report.config import HistoricalFigure, ReportConfig
from harness.report.snapshot.archives import ArchiveContent
from harness.report.snapshot.energy import energy_entry
from harness.report.snapshot.imports import import_entries
from harness.report.snapshot.io import SNAPSHOT_FORMAT, SNAPSHOT_FORMAT_VERSION, json_value
from harness.report.snapshot.io import finite_or_none as _num
from harness.report.snapshot.limits import GENERAL_LIMITS, formal_limits, screen_limits
from harness.report.snapshot.sections import (
    LEG_ORDER,
    corpus_entries,
    finding_entries,
    host_entry,
    memory_entry,
    oracle_entries,
    service_entries,
)
from harness.report.snapshot.speculative import acceptance_entry
from harness.report.snapshot.validity import content_verdict, mark_row, mark_rows, mark_run, withhold
from harness.store.runblock import read_run_block

__all__ = ["MILESTONE_EXCLUDED_CLASSES", "freeze", "historical_figure_groups", "kind_sections", "placed",
           "section_entries", "supersessions"]


def _median(values: Sequence[float | None]) -> float | None:
    vals = [v for v in values if v is not None]
    return float(np.median(vals)) if vals else None



def _archive_entry(c: ArchiveContent, verdict: Verdict) -> dict[str, Any]:
    run = read_run_block(c.manifest, f"archive {c.archive_id}")
    return mark_run({
        "archive_id": c.archive_id,
        "manifest_sha256": c.manifest_sha256,
        "status": str(c.manifest.get("status", "unknown")),
        "files_count": len(c.manifest.get("files") or {}),
        "archive_format_version": c.manifest.get("format_version"),
        "campaign": run.campaign,
        "kind": run.kind,
        "claim_class": run.claim_class,
        "protocol_class": run.protocol_class,
        "backend": run.backend,
        "created_wall": run.created_wall,
        "labels": sorted(run.labels),
        "service_name": run.service_name,
        "error": run.error,
        "simulated": verdict.simulated,
        "data_origin": verdict.data_origin,
        "findings_source": verdict.source,
        "verdict": verdict.to_json(),
        "host": host_entry(c),
    }, verdict)


def _spec_summary(spec: Mapping[str, Any] | None) -> dict[str, Any]:
    spec = spec or {}
    out: dict[str, Any] = {}
    for part, keys in (("decode", ("tiers", "rounds", "warmup_waves", "min_resident_seconds", "max_new_tokens",
                                   "ignore_eos", "temperature", "cache")),
                       ("prefill", ("tiers", "rounds", "warmup_waves", "waves_per_round", "max_new_tokens",
                                    "cache"))):
        sect = legacy_cache(spec.get(part))  # an archive of the first spelling says cache_salt / cache_defeat
        if isinstance(sect, Mapping):
            out[part] = {k: sect.get(k) for k in keys if k in sect}
    return out



def formal_entry(c: ArchiveContent, base: Mapping[str, Any], verdict: Verdict) -> dict[str, Any] | None:
    if c.results is None:
        return None
    cells = [json_value(dict(x)) for x in c.results.get("cells") or []]
    rounds = [mark_row(json_value(dict(x)), verdict, [x.get("round_id")]) for x in c.results.get("rounds") or []]
    ok_rounds: dict[str, list[str]] = {}
    for r in rounds:
        if r.get("status") == "ok" and r.get("round_id") is not None:
            ok_rounds.setdefault(str(r.get("cell_id")), []).append(str(r["round_id"]))
    for x in cells:
        mark_row(x, verdict, [x.get("cell_id")], ok_rounds.get(str(x.get("cell_id")), []))
    cells.sort(key=lambda x: (0 if x.get("workload") == "prefill" else 1, x.get("concurrency") or 0,
                              str(x.get("cell_id"))))
    rounds.sort(key=lambda x: (str(x.get("cell_id")), x.get("round_index") or 0, str(x.get("round_id"))))
    entry: dict[str, Any] = {
        "archive_id": c.archive_id,
        "campaign": base["campaign"],
        "claim_class": base["claim_class"],
        "protocol_class": base["protocol_class"],
        "status": base["status"],
        "simulated": base["simulated"],
        "created_wall": base["created_wall"],
        "results_schema_version": c.results.get("results_schema_version"),
        "spec": _spec_summary(c.spec),
        "cells": cells,
        "rounds": rounds,
    }
    entry["limits"] = formal_limits(entry)
    return mark_rows(entry, verdict)


def screen_entry(c: ArchiveContent, base: Mapping[str, Any], verdict: Verdict) -> dict[str, Any] | None:
    if c.comparison is None:
        return None
    comp = c.comparison
    result = dict(comp.get("result") or {})
    leg_services = dict(comp.get("legs") or {})
    by_leg = {str(x.get("leg")): x for x in result.get("legs") or []}
    legs = []
    for name in LEG_ORDER:
        raw = by_leg.get(name)
        waves = [_num(v) for v in (raw or {}).get("wave_rates") or []]
        http = [_num(v) for v in (raw or {}).get("http_rates") or []]
        svc = leg_services.get(name) or {}
        legs.append({
            "leg": name, "arm": "control" if name in ("A1", "A2") else "candidate",
            "wave_rates": waves, "http_rates": http, "median": _median(waves), "http_median": _median(http),
            "observed_min": min((v for v in waves if v is not None), default=None),
            "observed_max": max((v for v in waves if v is not None), default=None),
            "service_pid": svc.get("pid"), "service_index": svc.get("service_index"),
            "fresh_start": svc.get("fresh_start"), "present": raw is not None,
        })
    workload = dict((c.spec or {}).get("workload") or {}) if isinstance((c.spec or {}).get("workload"), Mapping) \
        else {}
    service = c.service or {}
    ident = c.identity_check or {}
    entry: dict[str, Any] = {
        "archive_id": c.archive_id,
        "screen": base["campaign"],
        "claim_class": base["claim_class"],
        "protocol_class": base["protocol_class"],
        "status": base["status"],
        "simulated": base["simulated"],
        "created_wall": base["created_wall"],
        "boundary": result.get("boundary") or workload.get("boundary"),
        "concurrency": workload.get("concurrency"),
        "waves_per_leg": workload.get("waves_per_leg"),
        "max_new_tokens": workload.get("max_new_tokens"),
        "workload_name": workload.get("name"),
        "legs": legs,
        "control_mean": _num(result.get("control_mean")),
        "candidate_mean": _num(result.get("candidate_mean")),
        "change_pct": _num(result.get("change_pct")),
        "drift_pct": _num(result.get("drift_pct")),
        "spread_pct": _num(result.get("spread_pct")),
        "http_change_pct": _num(result.get("http_change_pct")),
        "separated": bool(result.get("separated")),
        "verdict": result.get("verdict"),
        "reason": result.get("reason"),
        "outputs": json_value(dict(comp.get("outputs") or {})),
        "failed_leg": comp.get("failed_leg"),
        "b2_shares_b1_service": service.get("b2_shares_b1_service"),
        "declared_change": [str(x) for x in ident.get("declared_change") or workload.get("declared_change") or []],
        "declared_differences": [str(x) for x in ident.get("declared_differences") or []],
        "undeclared_differences": [str(x) for x in ident.get("undeclared_differences") or []],
        "allow_identity_change": ident.get("allow_identity_change"),
    }
    entry["limits"] = screen_limits(entry)
    return withhold(mark_run(entry, verdict), verdict)


def _historical(rows: Sequence[Mapping[str, Any]]) -> list[dict[str, Any]]:
    """Historical ledger rows as plain data, in ledger order (the order of the imported file)."""
    out = [json_value(dict(r)) for r in rows]
    for r in out:
        nc = r.get("not_claims")
        if isinstance(nc, str):
            r["not_claims"] = [nc] if nc else []
        elif nc is None:
            r["not_claims"] = []
    return out


MILESTONE_EXCLUDED_CLASSES = ("formal", "abba-screen")


def historical_figure_groups(rows: Sequence[Mapping[str, Any]], spec: HistoricalFigure) -> list[dict[str, Any]]:
    """The panels of the historical milestones figure: entries with a finite value grouped by
    (claim class, metric, unit), filtered by ``spec``; groups with at least ``spec.min_entries``
    entries, largest first (ties: first appearance), at most ``spec.max_panels``. Each group lists
    its ``entry_ids`` in ledger order. Pure."""
    groups: dict[tuple[str, str, str], list[str]] = {}
    for r in rows:
        if _num(r.get("value")) is None:
            continue
        pclass = str(r.get("protocol_class") or "")
        if spec.protocol_classes is not None:
            if pclass not in spec.protocol_classes:
                continue
        elif pclass in MILESTONE_EXCLUDED_CLASSES:
            continue
        metric = str(r.get("metric") or "value")
        if spec.metrics is not None and metric not in spec.metrics:
            continue
        key = (str(r.get("claim_class") or ""), metric, str(r.get("unit") or ""))
        groups.setdefault(key, []).append(str(r.get("entry_id")))
    order = sorted((k for k in groups if len(groups[k]) >= spec.min_entries),
                   key=lambda k: (-len(groups[k]), list(groups).index(k)))
    return [{"claim_class": k[0], "metric": k[1], "unit": k[2], "entry_ids": groups[k]}
            for k in order[:spec.max_panels]]


def supersessions(contents: Sequence[ArchiveContent],
                  known: Mapping[str, str] | None = None) -> dict[str, str]:
    """Superseded archive id -> the id of the archive that resumed it (and carries its records), from
    the ``resumed_from`` of each content's run block, merged with ``known`` (the same map read from
    the whole workspace, so a successor left out of the report's selection still counts). Pure."""
    out = {str(k): str(v) for k, v in (known or {}).items() if k and v}
    for c in contents:
        prev = read_run_block(c.manifest, f"archive {c.archive_id}").resumed_from
        if prev and prev != c.archive_id:
            out.setdefault(str(prev), c.archive_id)
    return out


def kind_sections() -> dict[str, list[dict[str, Any]]]:
    """One empty entry list per report section a kind's entries join (``KindInfo.report_section`` of every
    kind with a ``report`` entry builder), in descriptor order: a new kind's section needs no edit here."""
    return {k.report_section: [] for k in KINDS.values() if k.report is not None}


def placed(sections: Mapping[str, list[dict[str, Any]]], doc: Mapping[str, Any]) -> dict[str, Any]:
    """The top-level snapshot keys of ``sections`` merged into ``doc``'s: a dotted section
    (``speculative.matched``) is a key of the mapping its first part names."""
    out = {k: dict(v) if isinstance(v, Mapping) else v for k, v in doc.items()}
    for key, entries in sections.items():
        head, _, rest = key.partition(".")
        if rest:
            out[head] = placed({rest: entries}, out.get(head) or {})
        else:
            out[head] = entries
    return out


def section_entries(snapshot: Mapping[str, Any], section: str) -> list[Any]:
    """The entries of a kind's (possibly dotted, :func:`placed`) section of ``snapshot`` ([] when absent)."""
    node: Any = snapshot
    for part in section.split("."):
        node = node.get(part) if isinstance(node, Mapping) else None
    return list(node) if isinstance(node, list) else []


def _add(entries: list[dict[str, Any]], entry: dict[str, Any] | None) -> None:
    """Append ``entry`` (already marked from the archive's verdict) unless it is None (the archive lacks the file)."""
    if entry is not None:
        entries.append(entry)


def freeze(contents: Sequence[ArchiveContent], config: ReportConfig, *,
           historical: Sequence[Mapping[str, Any]] | None = None,
           findings_source: str = "harness.evidence.rules",
           superseded: Mapping[str, str] | None = None) -> dict[str, Any]:
    """Build the snapshot document from verified archive contents (any order; the snapshot is
    sorted by created_wall, then archive id) and the historical ledger rows (``None`` = no ledger).

    ``findings_source`` names where findings came from (``harness.evidence.verdict``: each archive's
    verdict, whose own source, ``ledger`` or ``rules``, is ``archives[].findings_source``;
    ``harness.evidence.rules``: findings handed in; ``unavailable`` when the evidence module could not be
    imported). ``superseded`` maps an archive id to the archive
    that resumed it (read from the whole workspace by :func:`harness.report.collect.collect`); the
    selected contents' own ``resumed_from`` are added (:func:`supersessions`). Validity comes from each
    archive's one verdict (``ArchiveContent.verdict``, :mod:`harness.report.snapshot.validity`): every
    archive, matrix, screen, sweep, SLA, matched, acceptance, energy and replay entry carries ``valid``,
    ``invalid_rules`` and ``superseded_by`` (entries of one row per run are invalid by any blocking
    finding, a matrix or energy entry only as a whole), every formal cell and round, sweep rate, SLA
    probe, energy and acceptance group its own ``valid`` and ``invalid_rules``; a screen's or matched
    run's verdict on an invalid run is ``withheld`` (``verdict_as_measured`` keeps it). A superseded
    archive's values are never a result (its successor carries its records). Pure: the same inputs
    give the same snapshot.
    """
    ordered = sorted(contents, key=lambda c: (read_run_block(c.manifest).created_wall, c.archive_id))
    successors = supersessions(ordered, superseded)
    archives: list[dict[str, Any]] = []
    memory: list[dict[str, Any]] = []
    findings: list[dict[str, Any]] = []
    services, corpora, oracles = [], [], []
    spec_acceptance: list[dict[str, Any]] = []
    energy: list[dict[str, Any]] = []
    sections = kind_sections()
    for c in ordered:
        verdict = content_verdict(c, successors.get(c.archive_id))
        base = _archive_entry(c, verdict)
        archives.append(base)
        info = kind_of_run(base["kind"], base["protocol_class"])
        if info is not None and info.report is not None:  # the kind's own entry, in its section's list
            _add(sections[info.report_section], resolve(info.report)(c, base, verdict))
        _add(spec_acceptance, acceptance_entry(c, base, verdict))
        _add(energy, energy_entry(c, base, verdict))
        if config.memory:
            mem = memory_entry(c, base["simulated"])
            if mem is not None:
                memory.append(mem)
        if config.findings:
            findings.extend(finding_entries(c))
        services.extend(service_entries(c, base["simulated"]))
        corpora.extend(corpus_entries(c))
        oracles.extend(oracle_entries(c))
    for i, f in enumerate(findings, start=1):
        f["id"] = f"finding-{i}"
    hist = _historical(historical) if (historical is not None and config.historical) else []
    hist_groups = historical_figure_groups(hist, config.historical_figure)
    sel = config.select.model_dump(mode="json", exclude_none=True)
    snapshot: dict[str, Any] = json_value({
        "format": SNAPSHOT_FORMAT,
        "snapshot_format_version": SNAPSHOT_FORMAT_VERSION,
        "title": config.title,
        "description": config.description,
        "selection": sel,
        "archives": archives,
        "memory": memory,
        "historical": hist,
        "historical_present": historical is not None and config.historical,
        "historical_figure": hist_groups,
        "findings": findings,
        "findings_source": findings_source if config.findings else "disabled",
        "services": services,
        "corpora": corpora,
        "oracles": oracles,
        "imports": import_entries(ordered),
        "energy": energy,
        "has_simulated": any(a["simulated"] for a in archives),
        "limits": {"general": list(GENERAL_LIMITS), "config": list(config.limits)},
    } | placed(sections, {"speculative": {"acceptance": spec_acceptance}}))
    return snapshot
