"""The report snapshot: select archives and freeze every value a report shows (pure).

A report is rendered only from its snapshot (``results.json`` in the report directory), so
``dsv4h report build --from-snapshot results.json`` rebuilds the same report anywhere, without the
archives. This module holds the pure half of that pipeline:

- :func:`select_archives` applies a :class:`~harness.report.config.Selection` to archive manifests;
- :func:`freeze` turns loaded archive contents (:class:`ArchiveContent`, read by
  :mod:`harness.report.collect`) and historical ledger rows into the snapshot document;
- :func:`snapshot_bytes` / :func:`load_snapshot` write and read it (stable bytes: sorted keys,
  1-space indent, NaN stored as ``null``).

Units: every rate is tokens per second (prefill: input tok/s; decode: output tok/s); durations are
seconds; memory is bytes; ``t_ns`` are monotonic-clock nanoseconds; percentages are plain percent
values (10.0 means +10 %). Min/max of rounds or waves are *observed ranges*, never confidence
intervals.

Snapshot layout (top-level keys): ``snapshot_format_version``, ``title``, ``description``,
``selection`` (the config's filters), ``archives`` (id, manifest SHA-256, status, files count, run
identity, ``simulated``), ``formal`` (per formal archive: every cell with every round value, every
round, HTTP rates, spec summary, limits), ``screens`` (per ABBA archive: legs with every wave,
ratio, drift, spread, separation, completion equality, verdict, limits), ``memory`` (samples per
device, peak observed in samples), ``historical`` (ledger rows in ledger order, never mixed with
current cells) and ``historical_figure`` (the milestone panels: entry ids per claim class, metric and
unit),
``findings`` (evidence findings, ``findings_source`` says where they came from), ``services``,
``corpora``, ``oracles``, ``limits`` (report-wide), ``has_simulated``.

Snapshot format history (``SNAPSHOT_FORMAT_VERSION``):
  1 - first version (2026-11-29).
"""

from __future__ import annotations

import json
import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from datetime import date, datetime, time
from typing import Any

import numpy as np

from harness.errors import ArchiveError, SpecError
from harness.report.config import HistoricalFigure, ReportConfig, Selection

SNAPSHOT_FORMAT_VERSION = 1
SNAPSHOT_FORMAT = "dsv4h-report-snapshot"

LEG_ORDER = ("A1", "B1", "B2", "A2")
SEVERITY_ORDER = {"blocking": 0, "warning": 1, "info": 2}
_REQUIRED_KEYS = ("snapshot_format_version", "title", "archives", "formal", "screens", "memory", "historical",
                  "historical_figure", "findings", "services", "corpora", "oracles", "limits")


@dataclass(frozen=True)
class ArchiveContent:
    """What the report reads from one verified archive (``None`` = the file is absent).

    ``manifest_sha256`` is the SHA-256 of the archive's ``manifest.json`` bytes. ``memory`` holds
    the rows of ``memory.parquet`` (``t_ns``/``t_monotonic_ns``, ``wall``/``wall_iso``, ``device``,
    ``used_bytes``, ``total_bytes``). ``findings`` holds Finding-shaped dicts (``rule``,
    ``severity``, ``message``, ``remedy``, ``archive_id``, ``rows``), or ``None`` when the evidence
    module is not available.
    """

    archive_id: str
    manifest: Mapping[str, Any]
    manifest_sha256: str
    results: Mapping[str, Any] | None = None
    comparison: Mapping[str, Any] | None = None
    service: Mapping[str, Any] | None = None
    corpora: Mapping[str, Any] | None = None
    spec: Mapping[str, Any] | None = None
    identity_check: Mapping[str, Any] | None = None
    oracles: Any = None
    memory: Sequence[Mapping[str, Any]] | None = None
    findings: Sequence[Mapping[str, Any]] | None = None


# ---------------------------------------------------------------------------------------------
# JSON normalisation


def json_value(obj: Any) -> Any:
    """Plain JSON data from ``obj``: NaN/inf -> None, dates -> ISO strings, numpy -> Python, tuples
    -> lists, mapping keys -> str, bytes -> hex. Raises ``TypeError`` for anything else."""
    if obj is None or isinstance(obj, bool | str | int):
        return obj
    if isinstance(obj, float):
        return obj if math.isfinite(obj) else None
    if isinstance(obj, np.generic):
        return json_value(obj.item())
    if isinstance(obj, datetime | date | time):
        return obj.isoformat()
    if isinstance(obj, bytes):
        return obj.hex()
    if isinstance(obj, Mapping):
        return {str(k): json_value(v) for k, v in obj.items()}
    if isinstance(obj, list | tuple | np.ndarray):
        return [json_value(v) for v in obj]
    raise TypeError(f"cannot freeze a value of type {type(obj).__name__} into the report snapshot")


def snapshot_bytes(snapshot: Mapping[str, Any]) -> bytes:
    """The snapshot's stable bytes: sorted keys, 1-space indent, UTF-8, trailing newline."""
    text = json.dumps(json_value(snapshot), indent=1, sort_keys=True, ensure_ascii=False, allow_nan=False)
    return (text + "\n").encode("utf-8")


def load_snapshot(data: bytes, source: str) -> dict[str, Any]:
    """Parse snapshot bytes and check its format version and keys. Raises ``SpecError`` naming
    ``source`` when it is not a snapshot this version can render."""
    try:
        obj = json.loads(data.decode("utf-8"))
    except (UnicodeDecodeError, ValueError) as exc:
        raise SpecError(f"{source}: not a report snapshot (invalid JSON: {exc})",
                        hint="give the results.json written by 'dsv4h report build'") from exc
    if not isinstance(obj, dict) or obj.get("format") != SNAPSHOT_FORMAT:
        raise SpecError(f"{source}: not a report snapshot (format is not '{SNAPSHOT_FORMAT}')",
                        hint="give the results.json of a report directory, not an archive's results.json")
    version = obj.get("snapshot_format_version")
    if version != SNAPSHOT_FORMAT_VERSION:
        raise SpecError(f"{source}: snapshot_format_version {version!r} is not supported "
                        f"(this dsv4h renders version {SNAPSHOT_FORMAT_VERSION})",
                        hint="rebuild the snapshot from its archives with this dsv4h version")
    missing = [k for k in _REQUIRED_KEYS if k not in obj]
    if missing:
        raise SpecError(f"{source}: snapshot lacks keys: {', '.join(missing)}",
                        hint="the file was edited or truncated; rebuild it from the archives")
    return obj


# ---------------------------------------------------------------------------------------------
# Selection


def _created_date(run: Mapping[str, Any]) -> date | None:
    wall = str(run.get("created_wall") or "")
    try:
        return date.fromisoformat(wall[:10])
    except ValueError:
        return None


def select_archives(manifests: Sequence[Mapping[str, Any]], selection: Selection) -> list[str]:
    """The ids of the archives (given as manifests) that pass every filter of ``selection``, in
    input order. Each ``archive_ids`` entry must match exactly one archive by id or prefix, else
    ``ArchiveError`` naming it (missing or ambiguous)."""
    ids = [str(m.get("archive_id", "")) for m in manifests]
    explicit: set[str] | None = None
    if selection.archive_ids is not None:
        explicit = set()
        for ref in selection.archive_ids:
            found = [i for i in ids if i.startswith(ref)]
            if not found:
                raise ArchiveError(f"archive {ref} (listed in select.archive_ids) is missing from the workspace",
                                   hint="check the id with 'dsv4h archive list', or restore the archive")
            if len(found) > 1:
                raise ArchiveError(f"archive id prefix '{ref}' in select.archive_ids is ambiguous: "
                                   + ", ".join(sorted(found)), hint="give more digits of the id")
            explicit.add(found[0])
    out: list[str] = []
    for aid, man in zip(ids, manifests, strict=True):
        run = man.get("run") or {}
        if explicit is not None and aid not in explicit:
            continue
        if selection.campaigns is not None and run.get("campaign") not in selection.campaigns:
            continue
        if selection.kinds is not None and run.get("kind") not in selection.kinds:
            continue
        if selection.statuses is not None and man.get("status") not in selection.statuses:
            continue
        if selection.labels is not None and not set(selection.labels) <= set(run.get("labels") or []):
            continue
        if selection.since is not None or selection.until is not None:
            created = _created_date(run)
            if created is None:
                continue
            if selection.since is not None and created < selection.since:
                continue
            if selection.until is not None and created > selection.until:
                continue
        out.append(aid)
    return out


# ---------------------------------------------------------------------------------------------
# Freezing


def _num(x: Any) -> float | None:
    """A finite float or None."""
    if x is None or isinstance(x, bool):
        return None
    try:
        v = float(x)
    except (TypeError, ValueError):
        return None
    return v if math.isfinite(v) else None


def _median(values: Sequence[float | None]) -> float | None:
    vals = [v for v in values if v is not None]
    return float(np.median(vals)) if vals else None


def is_simulated(content: ArchiveContent) -> bool:
    """True when any data of the archive comes from the built-in simulator (backend ``sim``, a
    ``simulated`` label, or a simulated service identity)."""
    run = content.manifest.get("run") or {}
    if "sim" in str(run.get("backend") or "").split("+") or "simulated" in (run.get("labels") or []):
        return True
    for svc in (content.service or {}).get("services") or []:
        info = svc.get("server_info") or {}
        if svc.get("backend") == "sim" or (isinstance(info, Mapping) and "dsv4h_simulator" in info):
            return True
    return False


def _archive_entry(c: ArchiveContent) -> dict[str, Any]:
    run = dict(c.manifest.get("run") or {})
    return {
        "archive_id": c.archive_id,
        "manifest_sha256": c.manifest_sha256,
        "status": str(c.manifest.get("status", "unknown")),
        "files_count": len(c.manifest.get("files") or {}),
        "archive_format_version": c.manifest.get("format_version"),
        "campaign": run.get("campaign"),
        "kind": run.get("kind"),
        "claim_class": run.get("claim_class"),
        "protocol_class": run.get("protocol_class"),
        "backend": run.get("backend"),
        "created_wall": run.get("created_wall"),
        "labels": sorted(str(x) for x in run.get("labels") or []),
        "service_name": run.get("service_name"),
        "error": run.get("error"),
        "simulated": is_simulated(c),
    }


def _spec_summary(spec: Mapping[str, Any] | None) -> dict[str, Any]:
    spec = spec or {}
    out: dict[str, Any] = {}
    for part, keys in (("decode", ("tiers", "rounds", "warmup_waves", "min_resident_seconds", "max_new_tokens",
                                   "ignore_eos", "temperature", "cache_salt")),
                       ("prefill", ("tiers", "rounds", "warmup_waves", "waves_per_round", "max_new_tokens",
                                    "cache_defeat"))):
        sect = spec.get(part)
        if isinstance(sect, Mapping):
            out[part] = {k: sect.get(k) for k in keys if k in sect}
    return out


def formal_limits(entry: Mapping[str, Any]) -> list[str]:
    """The limits of one formal matrix's claims, as sentences (pure)."""
    lim = [
        f"Formal three-round matrix, claim class '{entry.get('claim_class')}': never compared or combined with "
        "other claim classes or with ABBA screens.",
        "Prefill and resident-decode cells are medians of the ok round rates; every round is listed. Min-max is "
        "the observed range of the rounds, not a confidence interval.",
        "Resident decode excludes admission, prefill and drain; the whole-wave HTTP output rate includes them. "
        "They are distinct metrics and their gap is not a host-overhead measurement.",
        "Prefill divides all prompt tokens of a wave by the time to its last first token (one output token, "
        "fresh cache salts).",
    ]
    spec = entry.get("spec") or {}
    dec = spec.get("decode") or {}
    if dec:
        lim.append(f"Decode protocol of this archive: max_new_tokens {dec.get('max_new_tokens')}, at least "
                   f"{dec.get('min_resident_seconds')} s of resident windows per round, "
                   f"{dec.get('rounds')} rounds per cell; the numbers hold for that protocol only.")
    if entry.get("simulated"):
        lim.append("SIMULATED: produced by the built-in simulator, not by a model on hardware. It shows what "
                   "the harness measures, not how fast any model is.")
    if entry.get("status") != "complete":
        lim.append(f"The archive is {entry.get('status')}: some cells may lack rounds.")
    return lim


def screen_limits(entry: Mapping[str, Any]) -> list[str]:
    """The limits of one ABBA screen's claims, as sentences (pure)."""
    def pct(v: Any) -> str:
        return "n/a" if v is None else f"{float(v):+.3f}%"

    lim = [
        "ABBA screen (legs A1 -> B1 -> B2 -> A2), not a formal cell; never combined with formal matrices.",
        f"The candidate/control ratio ({pct(entry.get('ratio_pct'))}) holds for this workload only "
        f"(C{entry.get('concurrency')}, {entry.get('boundary')} boundary); it must not be added to or multiplied "
        "with percentages from other experiments.",
        f"Return-control drift A2 vs A1 is {pct(entry.get('drift_pct'))} and candidate spread B2 vs B1 "
        f"{pct(entry.get('spread_pct'))}: an effect not larger than these is not resolved by this screen.",
        "Min-max across waves are observed ranges, not confidence intervals.",
        f"The whole-wave HTTP ratio ({pct(entry.get('http_ratio_pct'))}) is a different boundary and does not "
        "establish the same percentage.",
    ]
    if entry.get("b2_shares_b1_service"):
        lim.append("B1 and B2 shared one candidate service; A1 and A2 were independently started controls.")
    if entry.get("simulated"):
        lim.append("SIMULATED: produced by the built-in simulator, not by a model on hardware.")
    if entry.get("status") != "complete":
        lim.append(f"The archive is {entry.get('status')}: legs may be missing.")
    return lim


GENERAL_LIMITS = (
    "Native autoregressive, full-target speculative and approximate-target results are different claims; "
    "their rates are never compared or combined.",
    "Checkpoint precision, component equality, repeated output hashes and end-to-end answer quality are "
    "distinct claims; no check substitutes for another.",
    "Formal three-round matrices and ABBA screens are shown in separate sections and never combined. "
    "Min/max are observed ranges, not confidence intervals.",
    "Historical results keep their original protocol labels and are never presented as current.",
    "Logged flags are not proof that a code path ran: service identities below come from the servers' own "
    "reports.",
    "GPU memory figures are the peak observed in samples at the sampling interval, not an allocator peak.",
    "Oracle checks are bounded fixed-input checks; they do not certify long contexts, other batch shapes or "
    "answer quality.",
)


def _formal_entry(c: ArchiveContent, base: Mapping[str, Any]) -> dict[str, Any] | None:
    if c.results is None:
        return None
    cells = [json_value(dict(x)) for x in c.results.get("cells") or []]
    rounds = [json_value(dict(x)) for x in c.results.get("rounds") or []]
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
    return entry


def _screen_entry(c: ArchiveContent, base: Mapping[str, Any]) -> dict[str, Any] | None:
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
        "ratio_pct": _num(result.get("ratio_pct")),
        "drift_pct": _num(result.get("drift_pct")),
        "spread_pct": _num(result.get("spread_pct")),
        "http_ratio_pct": _num(result.get("http_ratio_pct")),
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
    return entry


def _flatten(obj: Any, prefix: str = "") -> list[tuple[str, Any]]:
    if isinstance(obj, Mapping) and obj:
        out: list[tuple[str, Any]] = []
        for k in sorted(obj, key=str):
            out.extend(_flatten(obj[k], f"{prefix}{k}."))
        return out
    return [(prefix[:-1], obj)]


def _value_text(v: Any) -> str:
    if isinstance(v, str):
        return v
    return json.dumps(json_value(v), sort_keys=True, ensure_ascii=False, separators=(",", ":"))


def _services(c: ArchiveContent, simulated: bool) -> list[dict[str, Any]]:
    svc_doc = c.service or {}
    legs = svc_doc.get("legs") or {}
    out = []
    for i, s in enumerate(svc_doc.get("services") or [], start=1):
        info = s.get("server_info") or {}
        proc = s.get("process") or {}
        index = s.get("start_index") or i
        served = [leg for leg in LEG_ORDER if (legs.get(leg) or {}).get("service_index") == index]
        out.append({
            "archive_id": c.archive_id,
            "index": index,
            "name": s.get("name"),
            "backend": s.get("backend"),
            "url": s.get("url"),
            "owned": s.get("owned"),
            "legs": served,
            "version": info.get("version") if isinstance(info, Mapping) else None,
            "model_path": info.get("model_path") if isinstance(info, Mapping) else None,
            "server_info_source": info.get("_source") if isinstance(info, Mapping) else None,
            "pid": proc.get("pid") if isinstance(proc, Mapping) else None,
            "ready_wall": s.get("ready_wall"),
            "command": [str(x) for x in s.get("command") or []],
            "env_diff": json_value(dict(s.get("env_diff") or {})),
            "patches": json_value(s.get("patches")),
            "witnesses": json_value(s.get("witnesses", s.get("witness"))),
            "server_info": [[k, _value_text(v)] for k, v in _flatten(info) if k],
            "simulated": simulated or s.get("backend") == "sim",
        })
    return out


def _corpora(c: ArchiveContent) -> list[dict[str, Any]]:
    out = []
    for role in sorted(c.corpora or {}):
        ident = (c.corpora or {})[role]
        if not isinstance(ident, Mapping):
            continue
        out.append({
            "archive_id": c.archive_id, "role": role, "name": ident.get("name"),
            "manifest_sha256": ident.get("manifest_sha256"), "n_cases": ident.get("n_cases"),
            "token_range": json_value(ident.get("token_range")), "tokenizer": ident.get("tokenizer"),
        })
    return out


def _oracles(c: ArchiveContent) -> list[dict[str, Any]]:
    raw = c.oracles
    if isinstance(raw, Mapping):
        raw = raw.get("results") or []
    out = []
    for o in raw or []:
        if not isinstance(o, Mapping):
            continue
        out.append({
            "archive_id": c.archive_id,
            "oracle": o.get("oracle") or o.get("name"),
            "service": _value_text(o.get("service", o.get("service_url"))) if o.get(
                "service", o.get("service_url")) is not None else None,
            "passed": bool(o.get("passed")),
            "output_hash16": o.get("output_hash16", o.get("got_hash16")),
            "expected_hash16": o.get("expected_hash16"),
            "first_divergence": o.get("first_divergence"),
            "error": o.get("error"),
        })
    return out


def _memory(c: ArchiveContent, simulated: bool) -> dict[str, Any] | None:
    if not c.memory:
        return None
    rows = []
    for r in c.memory:
        t = r.get("t_ns", r.get("t_monotonic_ns"))
        if t is None or r.get("device") is None:
            continue
        rows.append((int(t), int(r["device"]), r.get("used_bytes"), r.get("total_bytes"),
                     r.get("wall", r.get("wall_iso"))))
    if not rows:
        return None
    rows.sort(key=lambda x: (x[1], x[0]))
    t0 = min(x[0] for x in rows)
    devices = []
    for dev in sorted({x[1] for x in rows}):
        mine = [x for x in rows if x[1] == dev]
        used = [None if x[2] is None else int(x[2]) for x in mine]
        totals = [int(x[3]) for x in mine if x[3] is not None]
        known = [u for u in used if u is not None]
        devices.append({
            "device": dev, "t_ns": [x[0] - t0 for x in mine], "used_bytes": used,
            "total_bytes": max(totals) if totals else None,
            "peak_used_bytes": max(known) if known else None, "n_samples": len(mine),
            "first_wall": json_value(mine[0][4]),
        })
    return {"archive_id": c.archive_id, "simulated": simulated, "t0_ns": t0, "devices": devices}


def _findings(c: ArchiveContent) -> list[dict[str, Any]]:
    out: list[dict[str, Any]] = []
    for f in c.findings or []:
        out.append({
            "archive_id": str(f.get("archive_id") or c.archive_id),
            "rule": str(f.get("rule")), "severity": str(f.get("severity")),
            "message": str(f.get("message")), "remedy": str(f.get("remedy") or ""),
            "rows": sorted(str(x) for x in f.get("rows") or ()),
        })
    out.sort(key=lambda f: (SEVERITY_ORDER.get(f["severity"], 9), f["rule"], f["rows"], f["message"]))
    return out


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


def freeze(contents: Sequence[ArchiveContent], config: ReportConfig, *,
           historical: Sequence[Mapping[str, Any]] | None = None,
           findings_source: str = "harness.evidence") -> dict[str, Any]:
    """Build the snapshot document from verified archive contents (any order; the snapshot is
    sorted by created_wall, then archive id) and the historical ledger rows (``None`` = no ledger).

    ``findings_source`` names where findings came from (``harness.evidence``, or ``unavailable``
    when the evidence module could not be imported). Pure: the same inputs give the same snapshot.
    """
    ordered = sorted(contents, key=lambda c: (str((c.manifest.get("run") or {}).get("created_wall") or ""),
                                              c.archive_id))
    archives, formal, screens, memory, findings = [], [], [], [], []
    services, corpora, oracles = [], [], []
    for c in ordered:
        base = _archive_entry(c)
        archives.append(base)
        kind, proto = base["kind"], base["protocol_class"]
        if kind == "abba" or proto == "abba-screen":
            scr = _screen_entry(c, base)
            if scr is not None:
                screens.append(scr)
        elif kind == "formal-matrix" or proto == "formal":
            frm = _formal_entry(c, base)
            if frm is not None:
                formal.append(frm)
        if config.memory:
            mem = _memory(c, base["simulated"])
            if mem is not None:
                memory.append(mem)
        if config.findings:
            findings.extend(_findings(c))
        services.extend(_services(c, base["simulated"]))
        corpora.extend(_corpora(c))
        oracles.extend(_oracles(c))
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
        "formal": formal,
        "screens": screens,
        "memory": memory,
        "historical": hist,
        "historical_present": historical is not None and config.historical,
        "historical_figure": hist_groups,
        "findings": findings,
        "findings_source": findings_source if config.findings else "disabled",
        "services": services,
        "corpora": corpora,
        "oracles": oracles,
        "has_simulated": any(a["simulated"] for a in archives),
        "limits": {"general": list(GENERAL_LIMITS), "config": list(config.limits)},
    })
    return snapshot
