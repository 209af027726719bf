"""The context sections of a report snapshot, one archive at a time: services, corpora, oracles, memory
and findings (pure).

Contract: each function takes one :class:`~harness.report.snapshot_archives.ArchiveContent` and returns
plain JSON data (see :func:`harness.report.snapshot_io.json_value`) for one key of the snapshot; absent
files give empty lists (or ``None`` for memory). :func:`harness.report.snapshot_freeze.freeze` gathers them
over all selected archives. Units: memory in bytes, ``t_ns`` in monotonic-clock nanoseconds relative to the
archive's first sample.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import Any

from harness.report.snapshot_archives import ArchiveContent
from harness.report.snapshot_io import json_value

__all__ = [
    "LEG_ORDER",
    "SEVERITY_ORDER",
    "corpus_entries",
    "finding_entries",
    "memory_entry",
    "oracle_entries",
    "service_entries",
]

LEG_ORDER = ("A1", "B1", "B2", "A2")
SEVERITY_ORDER = {"blocking": 0, "warning": 1, "info": 2}


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


def service_entries(c: ArchiveContent, simulated: bool) -> list[dict[str, Any]]:
    """One entry per service the archive started or used: identity, command, legs served, server info
    flattened to ``[key, text]`` pairs, patches and witnesses."""
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


def corpus_entries(c: ArchiveContent) -> list[dict[str, Any]]:
    """One entry per corpus role of the archive (name, manifest SHA-256, cases, token range, tokenizer)."""
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


def oracle_entries(c: ArchiveContent) -> list[dict[str, Any]]:
    """One entry per oracle check of the archive (passed, output and expected hashes, divergence)."""
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


def memory_entry(c: ArchiveContent, simulated: bool) -> dict[str, Any] | None:
    """The archive's memory samples per device with the peak observed in them; ``None`` without samples."""
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


def finding_entries(c: ArchiveContent) -> list[dict[str, Any]]:
    """The archive's evidence findings, most severe first (then rule, rows, message)."""
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
