"""Peer benchmark results in and out (edge module: files).

**Import.** A result file of another tool becomes an archive of claim class ``external`` (kind
``external``, protocol class ``external``): ``external.json`` holds the tool, the source file's name and
SHA-256, the tool's summary numbers *as the tool computed them* and the names of the tool's own metric
definitions (:data:`DEFINITIONS`); ``external.parquet`` holds one row per request where the file has
details (input and output lengths, TTFT, E2E, the tool's ITL list, error). Nothing of it is a dsv4h
measurement: the archive has no raw records, adds only a ``runs`` ledger row, and the comparison guard
refuses to combine claim classes, so an imported number is never combined with a measured one.

Formats read: sglang.bench_serving's ``--output-file`` JSONL (the last line; ``--output-details`` adds
the per-request lists), ``vllm bench serve --save-result [--save-detailed]`` JSON (same key names), a
GuideLLM report JSON (``benchmarks[].requests.successful[]``) and an AIPerf ``profile_export.jsonl``
(one record per request, ``metrics.<name>.value`` with units).

**Export.** :func:`export_archive` writes any archive, measured or imported, as an sglang.bench_serving
JSONL line, a ``vllm bench serve`` JSON, a GuideLLM-shaped JSON or CSV (one row per request), from the
per-request rows: a measured archive's rows come from its raw records with the peers' definitions
(ITL per chunk, TPOT ``(d_i - f_i) / (N_i - 1)``, harness.measure.latency ``bench-serving``).
"""

from __future__ import annotations

import csv
import io
import json
import math
import secrets
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any, Literal

import numpy as np
import pyarrow as pa

from harness.errors import ArchiveError
from harness.formats import atomic_write
from harness.hashing import sha256_file
from harness.measure.latency import stats
from harness.service.environment import clock_anchor
from harness.store.archive import Archive, ArchiveWriter, open_archive
from harness.store.runblock import RunBlock

Tool = Literal["sglang-bench", "vllm-bench", "guidellm", "aiperf"]
TOOLS: tuple[Tool, ...] = ("sglang-bench", "vllm-bench", "guidellm", "aiperf")
EXPORTS = ("sglang-bench", "vllm-bench", "guidellm", "csv")
NS = 1e9

DEFINITIONS: dict[str, dict[str, str]] = {
    "sglang-bench": {
        "ttft": "first streamed chunk with non-empty text minus send (s)",
        "itl": "gap between consecutive text-carrying chunks (per chunk, not per token)",
        "tpot": "(latency - ttft) / (output_len - 1), output_len re-tokenized from the generated text",
        "e2e": "response end minus send",
        "goodput": "completed requests meeting every --goodput SLO / duration"},
    "vllm-bench": {
        "ttft": "first streamed chunk minus send (s)",
        "itl": "gap between consecutive chunks (per chunk)",
        "tpot": "(latency - ttft) / (output_len - 1)",
        "e2e": "response end minus send",
        "goodput": "completed requests meeting every --goodput SLO / duration"},
    "guidellm": {
        "ttft": "first token iteration time minus request start (GuideLLM request timings)",
        "itl": "(last token time - first token time) / (output_tokens - 1) per request",
        "tpot": "request latency / output_tokens (GuideLLM time_per_output_token)",
        "e2e": "request end minus request start"},
    "aiperf": {
        "ttft": "metrics.time_to_first_token (first response with content)",
        "itl": "metrics.inter_token_latency: (request_latency - ttft) / (output_sequence_length - 1)",
        "tpot": "same as its inter_token_latency",
        "e2e": "metrics.request_latency"},
}

_ROW_SCHEMA = pa.schema([("index", pa.int32()), ("input_len", pa.int32()), ("output_len", pa.int32()),
                         ("ttft_s", pa.float64()), ("e2e_s", pa.float64()), ("itl_s", pa.list_(pa.float64())),
                         ("error", pa.string())])


def _f(x: Any, scale: float = 1.0) -> float:
    try:
        v = float(x) * scale
    except (TypeError, ValueError):
        return math.nan
    return v if math.isfinite(v) else math.nan


def _bench_rows(d: Mapping[str, Any]) -> list[dict[str, Any]]:
    """Per-request rows from the detail lists sglang.bench_serving and vllm bench serve share."""
    ins, outs, ttfts = d.get("input_lens") or [], d.get("output_lens") or [], d.get("ttfts") or []
    itls, errs = d.get("itls") or [], d.get("errors") or []
    lat = d.get("e2e_latencies") or d.get("latencies") or []
    rows = []
    for i in range(len(ttfts)):
        itl = [float(x) for x in itls[i]] if i < len(itls) and isinstance(itls[i], list) else []
        ttft = _f(ttfts[i])
        e2e = _f(lat[i]) if i < len(lat) else ttft + sum(itl)
        err = errs[i] if i < len(errs) and errs[i] else None
        rows.append({"index": i, "input_len": int(ins[i]) if i < len(ins) else 0,
                     "output_len": int(outs[i]) if i < len(outs) else 0, "ttft_s": ttft, "e2e_s": e2e,
                     "itl_s": itl, "error": str(err) if err else None})
    return rows


_BENCH_KEYS = ("duration", "completed", "total_input_tokens", "total_output_tokens", "request_throughput",
               "request_goodput", "input_throughput", "output_throughput", "request_rate", "max_concurrency",
               "burstiness")


def _bench_summary(d: Mapping[str, Any]) -> dict[str, Any]:
    out = {k: d[k] for k in _BENCH_KEYS if k in d}
    for key, value in d.items():
        if key.endswith("_ms") and isinstance(value, (int, float)):
            out[key] = value
    return out


def _load_json(path: Path) -> Any:
    text = path.read_text(encoding="utf-8")
    try:
        return json.loads(text)
    except ValueError:
        lines = [ln for ln in text.splitlines() if ln.strip()]
        try:
            return [json.loads(ln) for ln in lines]
        except ValueError as exc:
            raise ArchiveError(f"{path}: neither JSON nor JSON lines: {exc}",
                               hint="pass the result file the tool wrote") from None


def _guidellm(data: Mapping[str, Any]) -> tuple[dict[str, Any], list[dict[str, Any]]]:
    rows: list[dict[str, Any]] = []
    summary: dict[str, Any] = {}
    for b in data.get("benchmarks") or []:
        reqs = (b.get("requests") or {})
        for status in ("successful", "errored", "incomplete"):
            for r in reqs.get(status) or []:
                rows.append(_guidellm_row(len(rows), r, status))
        m = b.get("metrics") or {}
        for name in ("requests_per_second", "output_tokens_per_second", "time_to_first_token_ms",
                     "inter_token_latency_ms", "request_latency", "time_per_output_token_ms"):
            node = m.get(name) or {}
            succ = node.get("successful") if isinstance(node, dict) else None
            if isinstance(succ, dict):
                summary[f"{name}.mean"] = succ.get("mean")
                summary[f"{name}.median"] = succ.get("median")
    return summary, rows


def _first(*values: Any) -> Any:
    return next((v for v in values if v is not None), None)


def _guidellm_row(i: int, r: Mapping[str, Any], status: str) -> dict[str, Any]:
    t = r.get("info", {}).get("timings") or r.get("timings") or {}
    start = _f(_first(t.get("request_start"), r.get("start_time"), r.get("request_start_time")))
    first = _f(_first(t.get("first_token_iteration"), t.get("first_iteration"), r.get("first_token_time")))
    end = _f(_first(t.get("request_end"), r.get("end_time"), r.get("request_end_time")))
    last = _f(_first(t.get("last_token_iteration"), t.get("last_iteration"), r.get("last_token_time")))
    n_out = int(r.get("output_tokens") or (r.get("output_metrics") or {}).get("text_tokens") or 0)
    n_in = int(r.get("prompt_tokens") or (r.get("input_metrics") or {}).get("text_tokens") or 0)
    ttft = first - start
    if not math.isfinite(ttft) and r.get("time_to_first_token_ms") is not None:
        ttft = _f(r["time_to_first_token_ms"], 1e-3)
    e2e = end - start if math.isfinite(end - start) else _f(r.get("request_latency"))
    itl = [(last - first) / (n_out - 1)] * (n_out - 1) if n_out > 1 and math.isfinite(last - first) else []
    return {"index": i, "input_len": n_in, "output_len": n_out, "ttft_s": ttft, "e2e_s": e2e, "itl_s": itl,
            "error": None if status == "successful" else str(r.get("error") or status)}


def _aiperf(records: Sequence[Any]) -> tuple[dict[str, Any], list[dict[str, Any]]]:
    rows = []
    for i, rec in enumerate(r for r in records if isinstance(r, dict)):
        m = rec.get("metrics") or {}

        def val(name: str, m: Mapping[str, Any] = m) -> float:
            node = m.get(name)
            if not isinstance(node, dict):
                return math.nan
            unit = str(node.get("unit", "ms"))
            scale = {"ms": 1e-3, "s": 1.0, "ns": 1e-9, "us": 1e-6}.get(unit, 1.0)
            return _f(node.get("value"), scale)

        n_out = int(_f((m.get("output_sequence_length") or {}).get("value")) or 0) if m.get(
            "output_sequence_length") else 0
        n_in = int(_f((m.get("input_sequence_length") or {}).get("value")) or 0) if m.get(
            "input_sequence_length") else 0
        itl = val("inter_token_latency")
        rows.append({"index": i, "input_len": n_in, "output_len": n_out, "ttft_s": val("time_to_first_token"),
                     "e2e_s": val("request_latency"),
                     "itl_s": [itl] * (n_out - 1) if n_out > 1 and math.isfinite(itl) else [],
                     "error": str(rec["error"]) if rec.get("error") else None})
    return {}, rows


def parse_peer(path: Path, tool: Tool) -> tuple[dict[str, Any], list[dict[str, Any]]]:
    """(the tool's summary as it computed it, per-request rows) of one result file."""
    data = _load_json(path)
    if tool in ("sglang-bench", "vllm-bench"):
        d = data[-1] if isinstance(data, list) and data else data
        if not isinstance(d, dict) or "completed" not in d:
            raise ArchiveError(f"{path}: not a {tool} result (no 'completed' key)",
                               hint="pass the --output-file (sglang) or --save-result JSON (vllm)")
        return _bench_summary(d), _bench_rows(d)
    if tool == "guidellm":
        if not isinstance(data, dict) or "benchmarks" not in data:
            raise ArchiveError(f"{path}: not a GuideLLM report (no 'benchmarks')", hint="pass benchmarks.json")
        return _guidellm(data)
    if isinstance(data, dict):
        data = [data]
    return _aiperf(data)


def import_peer(path: Path, tool: Tool, workspace: Path, *, name: str | None = None,
                labels: Sequence[str] = ()) -> Archive:
    """Import one peer result file as an ``external`` archive (module docstring)."""
    if tool not in TOOLS:
        raise ArchiveError(f"unknown tool {tool!r}", hint=f"use one of {', '.join(TOOLS)}")
    summary, rows = parse_peer(path, tool)
    token = secrets.token_hex(8)
    writer = ArchiveWriter(workspace, token=token)
    digest = sha256_file(path)
    writer.write_json("external.json", {
        "tool": tool, "source_file": path.name, "source_sha256": digest, "summary": summary,
        "metric_definitions": DEFINITIONS[tool], "n_requests": len(rows),
        "note": "numbers as the peer tool computed them; not a dsv4h measurement; never combined with "
                "measured claims"})
    writer.write_bytes(f"source-{path.name}", path.read_bytes())
    writer.write_table("external.parquet", pa.Table.from_pylist(rows, schema=_ROW_SCHEMA))
    run = RunBlock(campaign=name or f"{tool}-{digest[:12]}", kind="external", claim_class="external",
                   protocol_class="external", backend="external", service_name=tool,
                   created_wall=str(clock_anchor()["wall_iso"]), run_token=token,
                   labels=(*labels, "external", tool))
    return open_archive(writer.finalize(status="complete", run=run))


def request_rows(archive: Archive) -> list[dict[str, Any]]:
    """Per-request rows of any archive, in the peers' definitions (module docstring)."""
    if archive.has("external.parquet"):
        rows_in: list[dict[str, Any]] = archive.table("external.parquet").to_pylist()
        return rows_in
    rows = []
    for i, r in enumerate(x for x in archive.records() if x.phase == "measured"):
        f = r.first_token_ns
        idx = np.flatnonzero(np.diff(np.concatenate(([0], r.event_tokens.astype(np.int64)))) > 0)
        times = r.event_ns[idx]
        rows.append({"index": i, "input_len": int(r.prompt_tokens or r.input_len), "output_len": r.n_tokens,
                     "ttft_s": (f - r.send_ns) / NS if f is not None else math.nan,
                     "e2e_s": (r.done_ns - r.send_ns) / NS,
                     "itl_s": [float(x) / NS for x in np.diff(times)], "error": r.error})
    return rows


def _tpot(row: Mapping[str, Any]) -> float:
    n = int(row["output_len"])
    return (float(row["e2e_s"]) - float(row["ttft_s"])) / (n - 1) if n > 1 else math.nan


def _ms_stats(prefix: str, values: Sequence[float]) -> dict[str, float]:
    v = np.asarray([x for x in values if math.isfinite(x)], dtype=np.float64)
    s = stats(v)
    return {f"mean_{prefix}_ms": s["mean"] * 1e3, f"median_{prefix}_ms": s["p50"] * 1e3,
            f"p99_{prefix}_ms": s["p99"] * 1e3}


def bench_dict(rows: Sequence[Mapping[str, Any]], duration_s: float | None, backend: str) -> dict[str, Any]:
    """The fields sglang.bench_serving and vllm bench serve both write, from per-request rows."""
    ok = [r for r in rows if not r.get("error")]
    dur = duration_s if duration_s and duration_s > 0 else max((float(r["e2e_s"]) for r in ok), default=math.nan)
    out: dict[str, Any] = {"backend": backend, "duration": dur, "completed": len(ok),
                           "total_input_tokens": sum(int(r["input_len"]) for r in ok),
                           "total_output_tokens": sum(int(r["output_len"]) for r in ok)}
    out["request_throughput"] = len(ok) / dur if dur else math.nan
    out["input_throughput"] = out["total_input_tokens"] / dur if dur else math.nan
    out["output_throughput"] = out["total_output_tokens"] / dur if dur else math.nan
    out |= _ms_stats("ttft", [float(r["ttft_s"]) for r in ok])
    out |= _ms_stats("tpot", [_tpot(r) for r in ok])
    out |= _ms_stats("itl", [float(x) for r in ok for x in r["itl_s"]])
    out |= _ms_stats("e2e_latency", [float(r["e2e_s"]) for r in ok])
    out |= {"input_lens": [int(r["input_len"]) for r in rows], "output_lens": [int(r["output_len"]) for r in rows],
            "ttfts": [float(r["ttft_s"]) for r in rows], "itls": [list(r["itl_s"]) for r in rows],
            "errors": [r.get("error") or "" for r in rows]}
    return out


def _duration(archive: Archive) -> float | None:
    if archive.has("external.json"):
        d = archive.json("external.json").get("summary", {}).get("duration")
        return float(d) if isinstance(d, (int, float)) else None
    recs = [r for r in archive.records() if r.phase == "measured"]
    return (max(r.done_ns for r in recs) - min(r.send_ns for r in recs)) / NS if recs else None


def export_archive(archive: Archive, fmt: str, out: Path) -> Path:
    """Write ``archive`` in a peer's format (module docstring); returns the file written."""
    rows = request_rows(archive)
    dur = _duration(archive)
    if fmt == "csv":
        buf = io.StringIO()
        w = csv.writer(buf)
        w.writerow(["index", "input_len", "output_len", "ttft_s", "e2e_s", "tpot_s", "n_itl", "error"])
        for r in rows:
            w.writerow([r["index"], r["input_len"], r["output_len"], r["ttft_s"], r["e2e_s"], _tpot(r),
                        len(r["itl_s"]), r.get("error") or ""])
        data = buf.getvalue().encode()
    elif fmt in ("sglang-bench", "vllm-bench"):
        d = bench_dict(rows, dur, archive.run.backend) | {"dsv4h_archive": archive.archive_id,
                                                          "dsv4h_claim_class": archive.run.claim_class}
        text = json.dumps(d, allow_nan=True)
        data = (text + "\n").encode() if fmt == "sglang-bench" else text.encode()
    elif fmt == "guidellm":
        reqs = [{"prompt_tokens": r["input_len"], "output_tokens": r["output_len"],
                 "info": {"timings": {"request_start": 0.0, "first_token_iteration": r["ttft_s"],
                                      "last_token_iteration": r["ttft_s"] + sum(r["itl_s"]),
                                      "request_end": r["e2e_s"]}}} for r in rows if not r.get("error")]
        data = json.dumps({"benchmarks": [{"requests": {"successful": reqs, "errored": [], "incomplete": []}}],
                           "dsv4h_archive": archive.archive_id, "dsv4h_note": "GuideLLM-shaped subset"},
                          allow_nan=True).encode()
    else:
        raise ArchiveError(f"unknown export format {fmt!r}", hint=f"use one of {', '.join(EXPORTS)}")
    atomic_write(out, data)
    return out
