"""Peer benchmark results in (edge module: files); :mod:`harness.store.peers_export` writes them out.

**Import.** A result file of another tool becomes an archive of claim class ``external`` (kind
``external``, protocol class ``external``): ``external.json`` holds the tool, each source file's name and
SHA-256, the tool's summary numbers *as the tool computed them* (``summary``, keys as in the file), the
names of the tool's own metric definitions (:data:`DEFINITIONS`) and which row fields dsv4h derived
(``derived``); ``external.parquet`` holds one row per request (:data:`ROW_SCHEMA`): lengths, TTFT, E2E,
the tool's per-chunk gaps where it writes them, error, start offset, and ``peer``, a JSON object of the
request's numbers exactly as the tool wrote them. The source files are kept byte for byte. Nothing of it
is a dsv4h measurement: the archive has no raw records, adds only a ``runs`` ledger row, the evidence
rule ``external-claim`` labels it and the comparison guard refuses to combine claim classes.

Formats read (each checked against a file the real tool wrote here, tests/fixtures/peers/):

* ``sglang-bench``: sglang.bench_serving ``--output-file`` JSONL with ``--output-details`` (the last
  line; one line per run is appended). No per-request E2E in the file: ``e2e_s`` = TTFT + sum(ITL).
* ``vllm-bench``: ``vllm bench serve --save-result --save-detailed`` JSON (``latencies``,
  ``start_times`` per request).
* ``guidellm``: GuideLLM report JSON (``benchmarks[].requests.{successful,errored,incomplete}[]``);
  GuideLLM writes per-request means only, so ``itl_s`` is empty.
* ``aiperf``: AIPerf ``profile_export.jsonl`` (``--export-level records``; one record per request,
  ``metrics.<name>.{value,unit}``) or its artifact directory; ``profile_export_aiperf.json`` beside it
  gives the summary.
"""

from __future__ import annotations

import json
import math
import secrets
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any, Literal

import pyarrow as pa

from harness.errors import ArchiveError
from harness.formats import finite_float as _f
from harness.hashing import sha256_file
from harness.service.environment import clock_anchor
from harness.store.archive import Archive, ArchiveWriter, open_archive
from harness.store.runblock import RunBlock

Tool = Literal["sglang-bench", "vllm-bench", "guidellm", "aiperf"]
TOOLS: tuple[Tool, ...] = ("sglang-bench", "vllm-bench", "guidellm", "aiperf")
AIPERF_SUMMARY = "profile_export_aiperf.json"
AIPERF_RECORDS = "profile_export.jsonl"

# Read from the tools' source (sglang 0.5.23 sglang/benchmark/serving.py, vllm 0.32.0
# vllm/benchmarks/serve.py, guidellm 0.8.1, aiperf 0.13.0) and checked on the fixture files.
DEFINITIONS: dict[str, dict[str, str]] = {
    "sglang-bench": {
        "ttft": "first streamed chunk with non-empty text minus send (s)",
        "itl": "per token: gap between text-carrying chunks / tokens new in that chunk (meta_info.completion_tokens)",
        "tpot": "(latency - ttft) / (output_len - 1), output_len = the server's completion_tokens",
        "e2e": "last stream message ([DONE]) minus send (summary only; not written per request)",
        "goodput": "completed requests meeting every --goodput SLO / duration"},
    "vllm-bench": {
        "ttft": "first streamed chunk with choices minus send (s)",
        "itl": "gap between consecutive chunks with choices (per chunk)",
        "tpot": "(latency - ttft) / (output_len - 1)",
        "e2e": "last chunk with choices minus send (latencies, e2el; = ttft + sum(itl))",
        "input_len": "the server's usage.prompt_tokens where reported, else the client tokenizer's count",
        "output_len": "the server's usage.completion_tokens",
        "goodput": "completed requests meeting every --goodput SLO / duration"},
    "guidellm": {
        "ttft": "first_token_iteration - request_start (time_to_first_token_ms)",
        "itl": "(last_token_iteration - first_token_iteration) / (output_tokens - 1), per request",
        "tpot": "(last_token_iteration - request_start) / output_tokens (time_per_output_token_ms)",
        "e2e": "request_end - request_start (request_latency, s)"},
    "aiperf": {
        "ttft": "metrics.time_to_first_token (first response with content)",
        "itl": "metrics.inter_token_latency: (request_latency - ttft) / (output_sequence_length - 1); "
               "per chunk: metrics.inter_chunk_latency",
        "tpot": "same as its inter_token_latency",
        "e2e": "metrics.request_latency",
        "output_len": "output_sequence_length: the client tokenizer's count of the generated text"},
}

ROW_SCHEMA = pa.schema([("index", pa.int32()), ("input_len", pa.int32()), ("output_len", pa.int32()),
                        ("ttft_s", pa.float64()), ("e2e_s", pa.float64()), ("itl_s", pa.list_(pa.float64())),
                        ("error", pa.string()), ("start_s", pa.float64()), ("peer", pa.string())])

_UNIT_S = {"ms": 1e-3, "s": 1.0, "sec": 1.0, "ns": 1e-9, "us": 1e-6}



def _int(x: Any) -> int:
    v = _f(x)
    return int(v) if math.isfinite(v) else 0


def _row(i: int, n_in: int, n_out: int, ttft: float, e2e: float, itl: Sequence[float], error: Any, *,
         start: float, peer: Mapping[str, Any]) -> dict[str, Any]:
    return {"index": i, "input_len": n_in, "output_len": n_out, "ttft_s": ttft, "e2e_s": e2e,
            "itl_s": [float(x) for x in itl], "error": str(error) if error else None, "start_s": start,
            "peer": json.dumps(dict(peer), sort_keys=True)}


def _scalars(d: Mapping[str, Any]) -> dict[str, Any]:
    return {k: v for k, v in d.items() if v is None or isinstance(v, (bool, int, float, str))}


def _bench(d: Mapping[str, Any]) -> tuple[dict[str, Any], list[dict[str, Any]], dict[str, str]]:
    """sglang.bench_serving / vllm bench serve: summary scalars verbatim, rows from the detail lists."""
    ttfts = d.get("ttfts") or []
    cols = {k: d.get(k) or [] for k in ("input_lens", "output_lens", "itls", "errors", "latencies", "start_times")}
    t0 = min((_f(x) for x in cols["start_times"]), default=math.nan)
    rows = []
    for i in range(len(ttfts)):
        def at(key: str, i: int = i) -> Any:
            return cols[key][i] if i < len(cols[key]) else None
        itl = at("itls") if isinstance(at("itls"), list) else []
        ttft = _f(ttfts[i])
        e2e = _f(at("latencies")) if cols["latencies"] else ttft + sum(float(x) for x in itl)
        peer = {"ttft": ttfts[i]} | ({"latency": at("latencies")} if cols["latencies"] else {}) | (
            {"start_time": at("start_times")} if cols["start_times"] else {})
        rows.append(_row(i, _int(at("input_lens")), _int(at("output_lens")), ttft, e2e, itl, at("errors"),
                         start=_f(at("start_times")) - t0, peer=peer))
    derived = {} if cols["latencies"] else {"e2e_s": "ttft + sum(itls): the file has no per-request latency"}
    if not cols["start_times"]:
        derived["start_s"] = "unknown (NaN): the file has no per-request start times"
    return _scalars(d), rows, derived


GUIDELLM_REQUEST_KEYS = ("prompt_tokens", "output_tokens", "request_start_time", "request_end_time", "request_latency",
                 "time_to_first_token_ms", "inter_token_latency_ms", "time_per_output_token_ms")
_GUIDELLM_METRICS = ("requests_per_second", "request_concurrency", "request_latency", "time_to_first_token_ms",
                     "inter_token_latency_ms", "time_per_output_token_ms", "output_tokens_per_second",
                     "prompt_token_count", "output_token_count")
_GUIDELLM_STATS = ("mean", "median", "std_dev", "min", "max", "count", "total_sum")


def _guidellm(data: Mapping[str, Any]) -> tuple[dict[str, Any], list[dict[str, Any]], dict[str, str]]:
    """GuideLLM report: each request's own numbers; the summary of the (first) benchmark's metrics."""
    rows: list[dict[str, Any]] = []
    summary: dict[str, Any] = {}
    raw: list[tuple[Mapping[str, Any], str]] = []
    for b in data.get("benchmarks") or []:
        reqs = b.get("requests") or {}
        raw += [(r, status) for status in ("successful", "errored", "incomplete") for r in reqs.get(status) or []]
        if summary:
            continue  # the summary is the first benchmark's; rows are every benchmark's
        summary = {k: b.get(k) for k in ("duration", "start_time", "end_time") if k in b}
        for name in _GUIDELLM_METRICS:
            node = ((b.get("metrics") or {}).get(name) or {}).get("successful")
            if isinstance(node, dict):
                summary |= {f"{name}.{s}": node.get(s) for s in _GUIDELLM_STATS}
                summary |= {f"{name}.{p}": v for p, v in (node.get("percentiles") or {}).items()
                            if p in ("p50", "p90", "p95", "p99")}
    t0 = min((_f(r.get("request_start_time")) for r, _ in raw), default=math.nan)
    for i, (r, status) in enumerate(raw):
        info = r.get("info") or {}
        t = info.get("timings") or {}
        start = _f(r.get("request_start_time", t.get("request_start")))
        ttft = _f(r.get("time_to_first_token_ms"), 1e-3)
        if not math.isfinite(ttft):
            ttft = _f(t.get("first_token_iteration")) - start
        e2e = _f(r.get("request_latency"))
        if not math.isfinite(e2e):
            e2e = _f(t.get("request_end")) - start
        err = None if status == "successful" else (info.get("error") or r.get("error") or status)
        rows.append(_row(i, _int(r.get("prompt_tokens")), _int(r.get("output_tokens")), ttft, e2e, [], err,
                         start=start - t0, peer={k: r.get(k) for k in GUIDELLM_REQUEST_KEYS}))
    return summary, rows, {"itl_s": "empty: GuideLLM writes one mean ITL per request (peer.inter_token_latency_ms)"}


def _aiperf(records: Sequence[Any], summary_doc: Any) -> tuple[dict[str, Any], list[dict[str, Any]], dict[str, str]]:
    """AIPerf records (``metrics.<name>.{value,unit}``) and its summary JSON (``<name>.{unit,avg,...}``)."""
    summary: dict[str, Any] = {}
    if isinstance(summary_doc, dict):
        summary = _scalars(summary_doc)
        for name, node in summary_doc.items():
            if isinstance(node, dict) and "unit" in node:
                summary |= {f"{name}.{s}": v for s, v in node.items() if isinstance(v, (int, float))}
                summary[f"{name}.unit"] = node["unit"]
    recs = [r for r in records if isinstance(r, dict) and "metrics" in r]
    starts = [_f((r.get("metadata") or {}).get("request_start_ns"), 1e-9) for r in recs]
    t0 = min(starts, default=math.nan)
    rows = []
    for i, (rec, start) in enumerate(zip(recs, starts, strict=True)):
        m = rec.get("metrics") or {}

        def val(name: str, m: Mapping[str, Any] = m) -> Any:
            node = m.get(name)
            return node.get("value") if isinstance(node, dict) else None

        def sec(name: str, m: Mapping[str, Any] = m) -> float:
            node = m.get(name)
            if not isinstance(node, dict) or isinstance(node.get("value"), list):
                return math.nan
            return _f(node.get("value"), _UNIT_S.get(str(node.get("unit")), math.nan))

        chunks = m.get("inter_chunk_latency") or {}
        scale = _UNIT_S.get(str(chunks.get("unit")), math.nan)
        itl = [float(x) * scale for x in chunks.get("value") or []]
        peer = {k: node.get("value") for k, node in m.items()
                if isinstance(node, dict) and isinstance(node.get("value"), (int, float))}
        rows.append(_row(i, _int(val("input_sequence_length")), _int(val("output_sequence_length")),
                         sec("time_to_first_token"), sec("request_latency"), itl, rec.get("error"),
                         start=start - t0, peer=peer))
    return summary, rows, {}


def _load(path: Path) -> Any:
    """JSON, or a list of JSON lines."""
    text = path.read_text(encoding="utf-8")
    try:
        return json.loads(text)
    except ValueError:
        try:
            return [json.loads(ln) for ln in text.splitlines() if ln.strip()]
        except ValueError as exc:
            raise ArchiveError(f"{path}: neither JSON nor JSON lines: {exc}",
                               hint="pass the result file the tool wrote") from None


def source_files(path: Path, tool: Tool) -> list[Path]:
    """The files one import reads: ``path``, or for AIPerf the records and summary of its artifacts."""
    if tool != "aiperf":
        return [path]
    folder = path if path.is_dir() else path.parent
    names = [AIPERF_RECORDS, AIPERF_SUMMARY] if path.is_dir() or path.name in (AIPERF_RECORDS, AIPERF_SUMMARY) \
        else [path.name]
    found = [folder / n for n in names if (folder / n).is_file()]
    if not found:
        raise ArchiveError(f"{path}: no {AIPERF_RECORDS} or {AIPERF_SUMMARY}",
                           hint="pass AIPerf's artifact directory or its profile export")
    return found


def parse_peer(path: Path, tool: Tool) -> tuple[dict[str, Any], list[dict[str, Any]], dict[str, str]]:
    """(the tool's summary as it computed it, per-request rows, derived-field notes) of one result."""
    if tool in ("sglang-bench", "vllm-bench"):
        data = _load(path)
        d = data[-1] if isinstance(data, list) and data else data
        if not isinstance(d, dict) or "completed" not in d:
            raise ArchiveError(f"{path}: not a {tool} result (no 'completed' key)",
                               hint="pass the --output-file (sglang) or --save-result JSON (vllm)")
        return _bench(d)
    if tool == "guidellm":
        data = _load(path)
        if not isinstance(data, dict) or "benchmarks" not in data:
            raise ArchiveError(f"{path}: not a GuideLLM report (no 'benchmarks')", hint="pass benchmarks.json")
        return _guidellm(data)
    records: list[Any] = []
    summary_doc: Any = None
    for f in source_files(path, tool):
        data = _load(f)
        if isinstance(data, dict) and "metrics" not in data:
            summary_doc = data
        else:
            records += data if isinstance(data, list) else [data]
    if summary_doc is None and not any(isinstance(r, dict) and "metrics" in r for r in records):
        raise ArchiveError(f"{path}: not an AIPerf profile export", hint=f"pass {AIPERF_RECORDS}")
    return _aiperf(records, summary_doc)


def _duration_s(tool: Tool, summary: Mapping[str, Any]) -> float | None:
    """The run's duration (s) as the tool measured it, None where its summary has none."""
    v = summary.get("benchmark_duration.avg" if tool == "aiperf" else "duration")
    return float(v) if isinstance(v, (int, float)) and not isinstance(v, bool) else None


def import_peer(path: Path, tool: Tool, workspace: Path, *, name: str | None = None,
                labels: Sequence[str] = ()) -> Archive:
    """Import one peer result as an ``external`` archive (module docstring)."""
    if tool not in TOOLS:
        raise ArchiveError(f"unknown tool {tool!r}", hint=f"use one of {', '.join(TOOLS)}")
    summary, rows, derived = parse_peer(path, tool)
    files = source_files(path, tool)
    token = secrets.token_hex(8)
    writer = ArchiveWriter(workspace, token=token)
    hashes = [{"name": f.name, "sha256": sha256_file(f), "bytes": f.stat().st_size} for f in files]
    writer.write_json("external.json", {
        "tool": tool, "source_file": hashes[0]["name"], "source_sha256": hashes[0]["sha256"],
        "source_files": hashes, "summary": summary, "metric_definitions": DEFINITIONS[tool],
        "derived": derived, "n_requests": len(rows), "duration_s": _duration_s(tool, summary),
        "note": "numbers as the peer tool computed them; not a dsv4h measurement; never combined with "
                "measured claims"})
    for f in files:
        writer.write_bytes(f"source-{f.name}", f.read_bytes())
    writer.write_table("external.parquet", pa.Table.from_pylist(rows, schema=ROW_SCHEMA))
    run = RunBlock(campaign=name or f"{tool}-{str(hashes[0]['sha256'])[:12]}", kind="external",
                   claim_class="external", protocol_class="external", backend="external", service_name=tool,
                   created_wall=str(clock_anchor()["wall_iso"]), run_token=token,
                   labels=(*labels, "external", tool))
    return open_archive(writer.finalize(status="complete", run=run))
