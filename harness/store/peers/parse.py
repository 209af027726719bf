"""Peer result files parsed (edge module: reads files): each source opened as a regular, bounded
file and hashed as read, typed by its strict model (:mod:`harness.store.peers.docs`) and turned into
flat per-request columns; :mod:`harness.store.peers.importer` says what is refused and writes the archive.
"""

from __future__ import annotations

import hashlib
import json
import math
import os
import secrets
from array import array
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import IO, Any, Literal

import numpy as np
import pyarrow as pa
import pydantic_core

from harness.errors import ArchiveError
from harness.formats import UnreadableFile, fsync_dir, open_regular
from harness.service.identity.origin import server_is_simulator
from harness.store.peers.docs import (
    MAX_LENGTH,
    MAX_REQUESTS,
    MAX_SECONDS,
    AIPerfRecord,
    BenchResult,
    GuideLLMReport,
    GuideLLMRequest,
    GuideLLMTimings,
    json_value,
    refuse,
    validated,
)

Tool = Literal["sglang-bench", "vllm-bench", "guidellm", "aiperf"]
TOOLS: tuple[Tool, ...] = ("sglang-bench", "vllm-bench", "guidellm", "aiperf")
AIPERF_SUMMARY = "profile_export_aiperf.json"
AIPERF_RECORDS = "profile_export.jsonl"
MAX_IMPORT_BYTES = 64 << 20  # per source file; dsv4h import --max-bytes raises it
_COPY_CHUNK = 1 << 20


ROW_SCHEMA = pa.schema([("index", pa.int32()), ("input_len", pa.int32()), ("output_len", pa.int32()),
                        ("ttft_s", pa.float64()), ("e2e_s", pa.float64()), ("itl_s", pa.list_(pa.float64())),
                        ("error", pa.string()), ("start_s", pa.float64()), ("peer", pa.string())])

_UNIT_S = {"ms": 1e-3, "s": 1.0, "sec": 1.0, "ns": 1e-9, "us": 1e-6}

# ----------------------------------------------------------------------------------------------------
# Source files: regular, bounded, hashed as read


class Source:
    """One source file opened for an import: a regular file of at most ``max_bytes``, hashed while it
    is read, copied into the archive afterwards (refused when its bytes changed meanwhile)."""

    def __init__(self, path: Path, tool: str, max_bytes: int) -> None:
        self.path, self.tool, self.max_bytes = path, tool, max_bytes
        try:
            fd = open_regular(path, max_bytes)  # non-blocking: a FIFO opens without a writer, then is refused
        except UnreadableFile as exc:
            if str(exc).startswith("not a regular file"):
                raise refuse(path, tool, str(exc)) from None
            raise self._too_large(path.stat().st_size) from None
        self.fh: IO[bytes] = os.fdopen(fd, "rb", buffering=_COPY_CHUNK)
        self.sha256 = ""
        self.bytes = 0

    def _too_large(self, size: int) -> ArchiveError:
        return ArchiveError(f"{self.path}: {size} bytes, over the import limit of {self.max_bytes} bytes "
                            f"({self.max_bytes / (1 << 20):g} MiB)",
                            hint=f"if this is the tool's result file, raise the limit: dsv4h import --max-bytes {size}")

    def read(self) -> bytes:
        """The whole file (hashed)."""
        data = self.fh.read(self.max_bytes + 1)
        if len(data) > self.max_bytes:
            raise self._too_large(len(data))
        self.sha256, self.bytes = hashlib.sha256(data).hexdigest(), len(data)
        return data

    def lines(self) -> Iterator[tuple[int, bytes]]:
        """(1-based line number, line) of every non-blank line, hashing the whole file on the way."""
        h, total = hashlib.sha256(), 0
        for number, line in enumerate(self.fh, 1):
            h.update(line)
            total += len(line)
            if total > self.max_bytes:
                raise self._too_large(total)
            if line.strip():
                yield number, line
        self.sha256, self.bytes = h.hexdigest(), total

    def copy_into(self, dest: Path) -> None:
        """Copy the file to ``dest`` durably and atomically; refuse if it is not the bytes parsed."""
        self.fh.seek(0)
        h, total = hashlib.sha256(), 0
        tmp = dest.with_name(f".{dest.name}.tmp-{os.getpid()}-{secrets.token_hex(4)}")
        try:
            with tmp.open("wb") as out:
                while chunk := self.fh.read(_COPY_CHUNK):
                    h.update(chunk)
                    total += len(chunk)
                    if total > self.bytes:
                        break
                    out.write(chunk)
                out.flush()
                os.fsync(out.fileno())
            if (h.hexdigest(), total) != (self.sha256, self.bytes):
                raise ArchiveError(f"{self.path}: changed while it was imported (sha256 or size differs "
                                   "from the bytes parsed)",
                                   hint="import it again once the tool has finished writing it")
            os.replace(tmp, dest)
        finally:
            tmp.unlink(missing_ok=True)
        fsync_dir(dest.parent)

    def close(self) -> None:
        self.fh.close()


# ----------------------------------------------------------------------------------------------------
# Rows as columns


@dataclass
class Columns:
    """Per-request rows, column by column, numbers in flat typed arrays (8 bytes a value, not a Python
    object each); the ITL gaps of every request in one array with offsets, as Arrow stores a list column."""

    input_len: array[int] = field(default_factory=lambda: array("q"))
    output_len: array[int] = field(default_factory=lambda: array("q"))
    ttft_s: array[float] = field(default_factory=lambda: array("d"))
    e2e_s: array[float] = field(default_factory=lambda: array("d"))
    itl_values: array[float] = field(default_factory=lambda: array("d"))
    itl_offsets: array[int] = field(default_factory=lambda: array("q", [0]))
    error: list[str | None] = field(default_factory=list)
    start_raw: array[float] = field(default_factory=lambda: array("d"))  # the tool's clock (see start_s)
    peer: list[str] = field(default_factory=list)

    def add(self, n_in: int, n_out: int, ttft: float, e2e: float, itl: Sequence[float], error: str | None,
            start: float, peer: Mapping[str, Any]) -> None:
        self.input_len.append(n_in)
        self.output_len.append(n_out)
        self.ttft_s.append(ttft)
        self.e2e_s.append(e2e)
        self.itl_values.extend(itl)
        self.itl_offsets.append(len(self.itl_values))
        self.error.append(error or None)
        self.start_raw.append(start)
        self.peer.append(json.dumps(dict(peer), sort_keys=True))

    def __len__(self) -> int:
        return len(self.ttft_s)

    def start_s(self) -> array[float]:
        """Start offsets from the earliest finite start (NaN where the tool wrote none)."""
        t0 = min((x for x in self.start_raw if math.isfinite(x)), default=math.nan)
        return array("d", (x - t0 for x in self.start_raw))

    def table(self) -> pa.Table:
        n = len(self)
        if len(self.itl_values) > MAX_REQUESTS:
            raise ArchiveError(f"{len(self.itl_values)} ITL values: more than one Arrow list column holds",
                               hint="split the result file")
        itl = pa.ListArray.from_arrays(pa.array(np.frombuffer(self.itl_offsets, dtype=np.int64).astype(np.int32)),
                                       pa.array(np.frombuffer(self.itl_values, dtype=np.float64)))
        cols: list[Any] = [pa.array(np.arange(n, dtype=np.int32)),
                           pa.array(np.frombuffer(self.input_len, dtype=np.int64).astype(np.int32)),
                           pa.array(np.frombuffer(self.output_len, dtype=np.int64).astype(np.int32)),
                           pa.array(np.frombuffer(self.ttft_s, dtype=np.float64)),
                           pa.array(np.frombuffer(self.e2e_s, dtype=np.float64)), itl,
                           pa.array(self.error, type=pa.string()),
                           pa.array(np.frombuffer(self.start_s(), dtype=np.float64)),
                           pa.array(self.peer, type=pa.string())]
        return pa.Table.from_arrays(cols, schema=ROW_SCHEMA)

    def rows(self) -> list[dict[str, Any]]:
        starts, off = self.start_s(), self.itl_offsets
        return [{"index": i, "input_len": self.input_len[i], "output_len": self.output_len[i],
                 "ttft_s": self.ttft_s[i], "e2e_s": self.e2e_s[i], "itl_s": list(self.itl_values[off[i]:off[i + 1]]),
                 "error": self.error[i], "start_s": starts[i], "peer": self.peer[i]} for i in range(len(self))]


@dataclass
class Parsed:
    """One peer result, parsed and checked: the tool's summary, the rows, derived-field notes."""

    summary: dict[str, Any]
    columns: Columns
    derived: dict[str, str]
    sources: list[Source] = field(default_factory=list)
    server: dict[str, Any] = field(default_factory=lambda: server_identity({}))


SERVER_SOURCE = "server_info in the file (the server's own /server_info, as the tool saved it)"


def server_identity(doc: Mapping[str, Any]) -> dict[str, Any]:
    """Who served the run, as far as the peer's file can tell (pure): ``reported_by`` (where the
    identity comes from, None when the file has none), the server's ``version`` and ``model_path``,
    ``requested_model`` (the client's ``--model``/``model_id``: a name the client asked for, not an
    identity) and ``dsv4h_simulator``: True when the server reported itself as the dsv4h simulator
    (``harness.service.identity.origin.server_is_simulator``), False when it reported another identity, None when
    the file cannot tell."""
    info = doc.get("server_info")
    requested = next((v for k in ("model_id", "model") if isinstance(v := doc.get(k), str)), None)
    if not isinstance(info, dict) or not info:
        return {"reported_by": None, "version": None, "model_path": None, "requested_model": requested,
                "dsv4h_simulator": None}
    version, model = info.get("version"), info.get("model_path")
    return {"reported_by": SERVER_SOURCE, "version": version if isinstance(version, str) else None,
            "model_path": model if isinstance(model, str) else None, "requested_model": requested,
            "dsv4h_simulator": server_is_simulator(info)}


def origin_of(server: Mapping[str, Any]) -> str:
    """An import's ``data_origin`` from its :func:`server_identity`: ``simulated`` (the server said it
    is the dsv4h simulator), ``external`` (it named another server), ``unknown`` (the file cannot tell)."""
    sim = server.get("dsv4h_simulator")
    return "unknown" if sim is None else "simulated" if sim else "external"


def _nan(x: float | None) -> float:
    return math.nan if x is None else float(x)


def _summary_value(key: str, v: Any, derived: dict[str, str]) -> Any:
    """A summary scalar as the tool wrote it; NaN or infinity becomes null, named in ``derived``."""
    if isinstance(v, float) and not math.isfinite(v):
        derived[f"summary.{key}"] = f"{v} in the file; kept as null"
        return None
    return v


def _scalars(d: Mapping[str, Any], derived: dict[str, str]) -> dict[str, Any]:
    return {k: _summary_value(k, v, derived) for k, v in d.items()
            if v is None or isinstance(v, (bool, int, float, str))}


# ----------------------------------------------------------------------------------------------------
# The four formats


def _last_line(src: Source) -> tuple[tuple[int, bytes] | None, int]:
    """(the last non-blank line with its number, how many non-blank lines), reading line by line."""
    last: tuple[int, bytes] | None = None
    n = 0
    for item in src.lines():
        last, n = item, n + 1
    return last, n


def _bench_doc(src: Source, tool: str) -> BenchResult:
    """The run of an sglang/vllm result: the last JSON line (sglang appends one per run), or the whole
    document (a JSON object, or a list of runs: the last)."""
    last, n_lines = _last_line(src)
    if last is None:
        raise refuse(src.path, tool, "the file is empty")
    where = f"line {last[0]}: " if n_lines > 1 else ""
    doc: Any = None
    try:
        doc = pydantic_core.from_json(last[1])
    except ValueError:
        if n_lines == 1:
            doc = json_value(last[1], src.path, tool)  # raises, naming the problem
    del last
    if doc is None:  # a document over several lines
        src.fh.seek(0)
        doc, where = json_value(src.read(), src.path, tool), ""
    if isinstance(doc, list) and doc:
        doc = doc[-1]
    if not isinstance(doc, dict) or "completed" not in doc:
        raise refuse(src.path, tool, f"{where}no 'completed' key (not a result of this tool)",
                      hint="pass the --output-file (sglang) or --save-result JSON (vllm)")
    return validated(BenchResult, doc, src.path, tool, where)


def _bench(src: Source, tool: str) -> Parsed:
    """sglang.bench_serving / vllm bench serve: summary scalars verbatim, rows from the detail lists."""
    d = _bench_doc(src, tool)
    n = len(d.ttfts)
    if n == 0:
        raise refuse(src.path, tool, f"field ttfts is empty: no per-request data (completed = {d.completed})",
                      hint="pass a file written with --output-details (sglang) or --save-detailed (vllm)")
    lists: dict[str, Sequence[Any] | None] = {"input_lens": d.input_lens, "output_lens": d.output_lens,
                                              "itls": d.itls, "errors": d.errors, "latencies": d.latencies,
                                              "start_times": d.start_times}
    for key, values in lists.items():
        if values is not None and len(values) != n:
            raise refuse(src.path, tool, f"field {key} has {len(values)} entries, ttfts has {n}: the "
                          "per-request lists disagree")
    ok = sum(1 for e in d.errors if not e)
    if ok != d.completed:
        raise refuse(src.path, tool, f"field completed is {d.completed} but {ok} of the {n} requests have no "
                      "error (errors): the counts disagree")
    if d.failed is not None and d.completed + d.failed != n:
        raise refuse(src.path, tool, f"fields completed ({d.completed}) + failed ({d.failed}) != {n} requests "
                      "(ttfts): the counts disagree")
    cols = Columns()
    for i in range(n):
        itl = d.itls[i]
        ttft = _nan(d.ttfts[i])
        e2e = _nan(d.latencies[i]) if d.latencies is not None else ttft + math.fsum(itl)
        start = _nan(d.start_times[i]) if d.start_times is not None else math.nan
        peer = {"ttft": d.ttfts[i]} | ({"latency": d.latencies[i]} if d.latencies is not None else {}) | (
            {"start_time": d.start_times[i]} if d.start_times is not None else {})
        cols.add(d.input_lens[i], d.output_lens[i], ttft, e2e, itl, d.errors[i], start, peer)
    derived: dict[str, str] = {}
    summary = _scalars({"completed": d.completed} | ({"failed": d.failed} if d.failed is not None else {})
                       | dict(d.model_extra or {}), derived)
    if d.latencies is None:
        derived["e2e_s"] = "ttft + sum(itls): the file has no per-request latency"
    if d.start_times is None:
        derived["start_s"] = "unknown (NaN): the file has no per-request start times"
    return Parsed(summary, cols, derived, server=server_identity(dict(d.model_extra or {})))


GUIDELLM_REQUEST_KEYS = ("prompt_tokens", "output_tokens", "request_start_time", "request_end_time", "request_latency",
                 "time_to_first_token_ms", "inter_token_latency_ms", "time_per_output_token_ms")
_GUIDELLM_METRICS = ("requests_per_second", "request_concurrency", "request_latency", "time_to_first_token_ms",
                     "inter_token_latency_ms", "time_per_output_token_ms", "output_tokens_per_second",
                     "prompt_token_count", "output_token_count")
_GUIDELLM_STATS = ("mean", "median", "std_dev", "min", "max", "count", "total_sum")
_STATUSES = ("successful", "errored", "incomplete")


def _guidellm(src: Source, tool: str) -> Parsed:
    """GuideLLM report: each request's own numbers; the summary of the (first) benchmark's metrics."""
    report = validated(GuideLLMReport, json_value(src.read(), src.path, tool), src.path, tool)
    summary: dict[str, Any] = {}
    derived: dict[str, str] = {}
    raw: list[tuple[GuideLLMRequest, str]] = []
    for bi, b in enumerate(report.benchmarks):
        totals = b.metrics.request_totals if b.metrics else None
        for status in _STATUSES:
            stored = getattr(b.requests, status)
            total = getattr(totals, status) if totals else None
            if total is not None and len(stored) > total:
                raise refuse(src.path, tool, f"benchmarks.{bi}.requests.{status} holds {len(stored)} requests, "
                              f"its metrics.request_totals.{status} counts {total}: the counts disagree")
            for ri, r in enumerate(stored):
                if status == "successful" and (r.prompt_tokens is None or r.output_tokens is None):
                    raise refuse(src.path, tool, f"field benchmarks.{bi}.requests.successful.{ri}."
                                  f"{'prompt_tokens' if r.prompt_tokens is None else 'output_tokens'}: "
                                  "missing for a successful request")
            raw += [(r, status) for r in stored]
        if summary:
            continue  # the summary is the first benchmark's; rows are every benchmark's
        summary = {k: getattr(b, k) for k in ("duration", "start_time", "end_time") if getattr(b, k) is not None}
        for name in _GUIDELLM_METRICS:
            metric = getattr(b.metrics, name) if b.metrics else None
            node = metric.successful if metric else None
            if node is not None:
                summary |= {f"{name}.{s}": getattr(node, s) for s in _GUIDELLM_STATS}
                summary |= {f"{name}.{p}": v for p, v in (node.percentiles or {}).items()
                            if p in ("p50", "p90", "p95", "p99")}
    if not raw:
        raise refuse(src.path, tool, "no requests in benchmarks[].requests: no per-request data",
                      hint="pass the report GuideLLM wrote (benchmarks.json with its requests)")
    cols = Columns()
    for r, status in raw:
        t = (r.info.timings if r.info else None) or GuideLLMTimings()
        start = _nan(r.request_start_time if r.request_start_time is not None else t.request_start)
        ttft = _nan(r.time_to_first_token_ms) * 1e-3
        if not math.isfinite(ttft):
            ttft = _nan(t.first_token_iteration) - start
        e2e = _nan(r.request_latency)
        if not math.isfinite(e2e):
            e2e = _nan(t.request_end) - start
        err = None if status == "successful" else ((r.info.error if r.info else None) or r.error or status)
        cols.add(r.prompt_tokens or 0, r.output_tokens or 0, ttft, e2e, [], err, start,
                 {k: getattr(r, k) for k in GUIDELLM_REQUEST_KEYS})
    derived["itl_s"] = "empty: GuideLLM writes one mean ITL per request (peer.inter_token_latency_ms)"
    return Parsed(_scalars(summary, derived), cols, derived)


def _aiperf_summary(src: Source, tool: str, derived: dict[str, str]) -> dict[str, Any]:
    doc = json_value(src.read(), src.path, tool)
    if not isinstance(doc, dict):
        raise refuse(src.path, tool, f"the summary is a JSON {type(doc).__name__}, not an object")
    summary = _scalars(doc, derived)
    for name, node in doc.items():
        if isinstance(node, dict) and "unit" in node:
            summary |= {f"{name}.{s}": _summary_value(f"{name}.{s}", v, derived) for s, v in node.items()
                        if isinstance(v, (int, float)) and not isinstance(v, bool)}
            summary[f"{name}.unit"] = node["unit"]
    return summary


def _aiperf_row(rec: AIPerfRecord, where: str, path: Path, tool: str, cols: Columns) -> None:
    m = rec.metrics

    def length(name: str) -> int:
        v = m[name].value if name in m else None
        if v is None:
            return 0
        if not isinstance(v, int) or not 0 <= v <= MAX_LENGTH:
            raise refuse(path, tool, f"{where}field metrics.{name}.value: not a token count (got {v!r:.60})")
        return v

    def scale(name: str) -> float:
        unit = m[name].unit
        if unit not in _UNIT_S:
            raise refuse(path, tool, f"{where}field metrics.{name}.unit: unknown time unit {unit!r:.40}")
        return _UNIT_S[str(unit)]

    def sec(name: str) -> float:
        if name not in m or m[name].value is None:
            return math.nan
        v = m[name].value
        if not isinstance(v, (int, float)) or not 0 <= float(v) * scale(name) <= MAX_SECONDS:
            raise refuse(path, tool, f"{where}field metrics.{name}.value: not a time of 0 to {MAX_SECONDS:g} s "
                          f"(got {v!r:.60})")
        return float(v) * scale(name)

    itl: list[float] = []
    if "inter_chunk_latency" in m and m["inter_chunk_latency"].value is not None:
        v = m["inter_chunk_latency"].value
        k = scale("inter_chunk_latency")
        itl = [float(x) * k for x in v] if isinstance(v, list) else [float(v) * k]
        if any(not 0 <= x <= MAX_SECONDS for x in itl):
            raise refuse(path, tool, f"{where}field metrics.inter_chunk_latency.value: a gap outside 0 to "
                          f"{MAX_SECONDS:g} s")
    start_ns = rec.metadata.request_start_ns if rec.metadata else None
    err = rec.error if isinstance(rec.error, str) or rec.error is None else json.dumps(rec.error, sort_keys=True)
    peer = {k: node.value for k, node in m.items() if isinstance(node.value, (int, float))}
    cols.add(length("input_sequence_length"), length("output_sequence_length"), sec("time_to_first_token"),
             sec("request_latency"), itl, err, _nan(start_ns) * 1e-9, peer)


def _aiperf(sources: Sequence[Source], tool: str) -> Parsed:
    """AIPerf records (``metrics.<name>.{value,unit}``, one JSON line each, parsed line by line) and its
    summary JSON (``<name>.{unit,avg,...}``)."""
    derived: dict[str, str] = {}
    summary: dict[str, Any] = {}
    cols = Columns()
    path = sources[0].path
    for src in sources:
        if src.path.suffix != ".jsonl":
            summary |= _aiperf_summary(src, tool, derived)
            continue
        for number, line in src.lines():
            where = f"line {number}: "
            rec = validated(AIPerfRecord, json_value(line, src.path, tool, where), src.path, tool, where)
            _aiperf_row(rec, f"line {number}: ", src.path, tool, cols)
    if not len(cols):
        raise refuse(path, tool, "no request records: no per-request data",
                      hint=f"pass {AIPERF_RECORDS} (aiperf profile --export-level records) or its artifact directory")
    count = summary.get("request_count.avg")
    ok = sum(1 for e in cols.error if not e)
    if isinstance(count, (int, float)) and not isinstance(count, bool) and count != ok:
        raise refuse(path, tool, f"the summary's request_count.avg is {count:g} but {ok} records have no error: "
                      "the counts disagree")
    return Parsed(summary, cols, derived)


def source_files(path: Path, tool: Tool) -> list[Path]:
    """The files one import reads: ``path``, or for AIPerf the records and summary of its artifacts."""
    if tool != "aiperf":
        return [path]
    folder = path if path.is_dir() else path.parent
    names = [AIPERF_RECORDS, AIPERF_SUMMARY] if path.is_dir() or path.name in (AIPERF_RECORDS, AIPERF_SUMMARY) \
        else [path.name]
    found = [folder / n for n in names if (folder / n).exists()]
    if not found:
        raise ArchiveError(f"{path}: no {AIPERF_RECORDS} or {AIPERF_SUMMARY}",
                           hint="pass AIPerf's artifact directory or its profile export")
    return found


def parse_sources(path: Path, tool: Tool, max_bytes: int) -> Parsed:
    """Open, check and parse every source file of one result (module docstring); the sources stay
    open (for the copy into the archive) and are closed by the caller."""
    if tool not in TOOLS:
        raise ArchiveError(f"unknown tool {tool!r}", hint=f"use one of {', '.join(TOOLS)}")
    sources: list[Source] = []
    try:
        for f in source_files(path, tool):
            sources.append(Source(f, tool, max_bytes))
        if tool in ("sglang-bench", "vllm-bench"):
            parsed = _bench(sources[0], tool)
        elif tool == "guidellm":
            parsed = _guidellm(sources[0], tool)
        else:
            parsed = _aiperf(sources, tool)
        parsed.sources = sources
        return parsed
    except BaseException:
        for s in sources:
            s.close()
        raise


def parse_peer(path: Path, tool: Tool, *, max_bytes: int = MAX_IMPORT_BYTES,
               ) -> tuple[dict[str, Any], list[dict[str, Any]], dict[str, str]]:
    """(the tool's summary as it computed it, per-request rows, derived-field notes) of one result."""
    parsed = parse_sources(path, tool, max_bytes)
    for s in parsed.sources:
        s.close()
    return parsed.summary, parsed.columns.rows(), parsed.derived
