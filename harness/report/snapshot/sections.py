"""The context sections of a report snapshot, one archive at a time: services, corpora, oracles, memory,
findings, the host and rate sweeps (pure).

Contract: each function takes one :class:`~harness.report.snapshot.archives.ArchiveContent` and returns
plain JSON data (see :func:`harness.report.snapshot.io.json_value`) for one key of the snapshot; absent
files give empty lists (or ``None`` for memory). :func:`harness.report.snapshot.freeze.freeze` gathers them
over all selected archives. Units: memory in bytes, ``t_ns`` in monotonic-clock nanoseconds relative to the
archive's first sample.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import Any

from harness.evidence.verdict import Verdict
from harness.report.snapshot.archives import ArchiveContent
from harness.report.snapshot.io import json_value
from harness.report.snapshot.validity import content_verdict, mark_row, mark_run
from harness.service.identity.origin import service_is_simulated

__all__ = [
    "LEG_ORDER",
    "SEVERITY_ORDER",
    "corpus_entries",
    "finding_entries",
    "host_entry",
    "memory_entry",
    "oracle_entries",
    "oracle_phase",
    "service_entries",
    "sweep_entry",
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
            "simulated": simulated or service_is_simulated(s),
            "stack": stack_entry(s.get("stack")),
        })
    return out


def stack_entry(stack: Any) -> dict[str, Any] | None:
    """What the service served (``service.json`` ``stack``, docs/identity.md) for the report: the model
    identity's own sentence, each source tree's commit and dirty state, the mapped libraries per
    process (count, hashed) at start and end, and the runtime identity with its component hashes;
    None when the archive recorded no stack."""
    if not isinstance(stack, Mapping):
        return None
    model = stack.get("model") if isinstance(stack.get("model"), Mapping) else None
    trees = [t for t in stack.get("source_trees") or [] if isinstance(t, Mapping)]
    mapped: Mapping[str, Any] = stack["mapped"] if isinstance(stack.get("mapped"), Mapping) else {}
    ident: Mapping[str, Any] = stack["runtime_identity"] if isinstance(stack.get("runtime_identity"), Mapping) else {}

    def snap(x: Any) -> dict[str, Any] | None:
        if not isinstance(x, Mapping) or not isinstance(x.get("pids"), Mapping):
            return None
        pids = x["pids"]
        return {"processes": len(pids), "files": len(x.get("files") or {}),
                "libraries": sum(len(p.get("libraries") or []) for p in pids.values() if isinstance(p, Mapping))}

    out: dict[str, Any] = json_value({
        "model": model.get("statement") if model else None,
        "source_trees": [{"name": t.get("name"), "commit": (t.get("git") or {}).get("commit"),
                          "dirty": len((t.get("git") or {}).get("dirty_paths") or []),
                          "untracked": (t.get("git") or {}).get("untracked_count"), "error": t.get("error")}
                         for t in trees],
        "mapped_at_start": snap(mapped.get("at_start")), "mapped_at_end": snap(mapped.get("at_end")),
        "identity": ident.get("hash"), "components": dict(sorted((ident.get("components") or {}).items())),
    })
    return out


def _pair(v: Any) -> list[Any] | None:
    """A recorded ``[min, max]`` as a list of two ints, else None."""
    if isinstance(v, list | tuple) and len(v) == 2 and all(isinstance(x, int) and not isinstance(x, bool) for x in v):
        return [int(v[0]), int(v[1])]
    return None


def corpus_entries(c: ArchiveContent) -> list[dict[str, Any]]:
    """One entry per corpus role of the archive: name, manifest SHA-256, cases, the declared token range,
    the tokenizer (name, SHA-256 of its file map, vocabulary size) and the observed input lengths and
    token ids over its cases (``[min, max]``, tokens / ids). A value the archive did not record is
    ``None``; ``recorded`` says whether the archive wrote the full record (corpus record format 2,
    :meth:`harness.inputs.corpus.Corpus.identity`)."""
    out = []
    for role in sorted(c.corpora or {}):
        ident = (c.corpora or {})[role]
        if not isinstance(ident, Mapping):
            continue
        tok = ident.get("tokenizer")
        out.append({
            "archive_id": c.archive_id, "role": role, "name": ident.get("name"),
            "manifest_sha256": ident.get("manifest_sha256"), "n_cases": ident.get("n_cases"),
            "token_range": _pair(ident.get("token_range")),
            "tokenizer": tok if isinstance(tok, str) and tok else None,
            "tokenizer_sha256": ident.get("tokenizer_sha256"),
            "vocab_size": ident.get("vocab_size"),
            "input_tokens": _pair(ident.get("input_tokens")),
            "token_ids": _pair(ident.get("token_ids")),
            "recorded": int(ident.get("record_format") or 1) >= 2,
        })
    return out


def oracle_phase(when: Any) -> str | None:
    """``before`` or ``after`` measurement from a sentinel row's ``when`` (``before``, ``before A1``,
    ``after``); None when not recorded."""
    text = str(when or "").strip().lower()
    for phase in ("before", "after"):
        if text == phase or text.startswith(phase + " "):
            return phase
    return None


def oracle_entries(c: ArchiveContent) -> list[dict[str, Any]]:
    """One entry per oracle check of the archive, in run order: when it ran (``when`` as recorded, e.g.
    ``before A1``; ``phase`` before/after measurement), passed, output and expected hashes, divergence."""
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
            "when": str(o["when"]) if o.get("when") is not None else None,
            "phase": oracle_phase(o.get("when")),
            "passed": bool(o.get("passed")),
            "output_hash16": o.get("output_hash16", o.get("got_hash16")),
            "expected_hash16": o.get("expected_hash16"),
            "first_divergence": o.get("first_divergence"),
            "error": o.get("error"),
        })
    return out


def host_entry(c: ArchiveContent) -> dict[str, Any] | None:
    """Where the run ran, from ``environment.json``: hostname, machine, platform, CPU count and the GPUs
    the harness saw (count, source, total memory of the first in bytes); None without the file."""
    env = c.environment
    if not isinstance(env, Mapping):
        return None
    raw = env.get("gpus")
    gpus: Mapping[str, Any] = raw if isinstance(raw, Mapping) else {}
    devices = [d for d in gpus.get("devices") or [] if isinstance(d, Mapping)]
    return {"hostname": env.get("hostname"), "machine": env.get("machine"), "platform": env.get("platform"),
            "cpu_count": env.get("cpu_count"), "gpu_count": len(devices), "gpu_source": gpus.get("source"),
            "gpu_memory_total_bytes": devices[0].get("memory_total_bytes") if devices else None}


def sweep_entry(c: ArchiveContent, base: Mapping[str, Any],
                verdict: Verdict | None = None) -> dict[str, Any] | None:
    """A rate sweep archive's section (from ``sweep.json``): per offered rate (requests/s) the medians of
    its ok rounds (request/output throughput, goodput), its pooled latency (seconds) and its over-saturated
    rounds (null before they were counted), the SLO, the goodput knee and where ``stop_at_saturation``
    stopped it; None without ``sweep.json``. The entry is marked as one run (its knee is a conclusion
    over every rate), each rate by its cell id (:mod:`harness.report.snapshot.validity`)."""
    verdict = content_verdict(c) if verdict is None else verdict  # default: the content's own
    if not isinstance(c.sweep, Mapping):
        return None
    ok_rounds: dict[str, list[str]] = {}
    for r in c.sweep.get("rounds") or []:
        if isinstance(r, Mapping) and r.get("status") == "ok" and r.get("round_id") is not None:
            ok_rounds.setdefault(str(r.get("cell_id")), []).append(str(r["round_id"]))
    keys = ("cell_id", "arrival_rate_req_s", "rounds_ok", "rounds_planned", "concurrency",
            "request_throughput_median_req_s",
            "output_throughput_median_tok_s", "input_throughput_median_tok_s", "goodput_median_req_s",
            "goodput_min_req_s", "goodput_max_req_s", "ttft_p50_s", "ttft_p99_s", "tpot_p50_s", "tpot_p99_s",
            "e2e_p50_s", "e2e_p99_s", "schedule_kept",
            "client_lag_p99_s", "saturated_rounds")
    cells = [mark_row({k: json_value(cell.get(k)) for k in keys}, verdict, [cell.get("cell_id")],
                      ok_rounds.get(str(cell.get("cell_id")), []))
             for cell in c.sweep.get("cells") or [] if isinstance(cell, Mapping)]
    cells.sort(key=lambda x: float(x.get("arrival_rate_req_s") or 0.0))
    knee = c.sweep.get("knee")
    return mark_run({
        "archive_id": c.archive_id, "campaign": base["campaign"], "claim_class": base["claim_class"],
        "protocol_class": base["protocol_class"], "status": base["status"], "simulated": base["simulated"],
        "created_wall": base["created_wall"], "slo": json_value(c.sweep.get("slo")),
        "knee": json_value(dict(knee)) if isinstance(knee, Mapping) else None, "cells": cells,
        "stopped": json_value(dict(stop)) if isinstance(stop := c.sweep.get("stopped"), Mapping) else None}, verdict)


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
