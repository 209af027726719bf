"""Any archive, measured or imported, in a peer tool's format (edge module: files).

:func:`export_cells` writes an sglang.bench_serving JSONL line, a ``vllm bench serve`` JSON, a
GuideLLM-shaped report JSON or CSV (one row per request) from per-request rows (:func:`archive_cells`):
an imported archive's ``external.parquet``, or a measured archive's raw records in the peers'
definitions (TPOT ``(e2e - ttft) / (N - 1)``; ITL per chunk, harness.measure.latency ``bench-serving``,
except in sglang-bench files: sglang.bench_serving's native backend spreads a chunk's gap over the
tokens it carried, so those ITLs are per token).

**Cells are never merged.** A peer summary is one run at one load; a formal matrix is many (8K prefill
and C1-C64 decode). Each cell is exported as its own run, its summary recomputed from its own
requests over its own span: one cell (an import, a single-cell archive, ``--cell ID``) to one file;
several in the format's own multi-run layout where it has one: sglang-bench one JSONL line per cell
(sglang.bench_serving appends one line per run), GuideLLM one ``benchmarks[]`` entry per cell, CSV
rows carrying ``cell_id``, ``workload`` and ``concurrency``; vllm-bench (one run per file), or any
format with ``files_per_cell``, into a directory: ``<cell_id>.<ext>`` per cell plus ``index.json``
(cell, workload, concurrency, data_origin, file, request count, validity). A directory export to a
file name is refused, with the cells named.

Summary numbers: exported to the format the archive was imported from, the tool's own summary is
written verbatim (``dsv4h_summary: "verbatim"``) with the per-request lists rebuilt from the rows, so a
round trip gives back the fields both sides have. Otherwise every summary number is recomputed from the
rows with the target tool's definitions (``dsv4h_summary: "recomputed"``); row fields the source did not
have and dsv4h derived are named in ``dsv4h_derived``. Every run carries the archive id, claim class,
``dsv4h_data_origin`` (``simulated`` / ``measured``, an import's ``simulated`` / ``external`` /
``unknown``: harness.store.ledger.data_origin) and its ``dsv4h_cell``, ``dsv4h_workload`` and
``dsv4h_concurrency`` (null for an import); the CSV a ``data_origin`` column.

Validity (:class:`ExportVerdict`): the archive's one verdict (``harness.evidence.io.archive_verdict``),
decided by the caller and passed in as plain data (harness.store does not import harness.evidence).
Every exported run (sglang-bench line, vllm-bench file, GuideLLM ``benchmarks[]`` entry) carries
``dsv4h_valid`` (true/false) and ``dsv4h_invalid_rules`` (the sorted rules of the blocking findings
that invalidate it; ``superseded`` when a resume superseded the archive, the index's ``verdict`` then
naming the successor: harness.cli.validity; [] when valid); a GuideLLM report's top level carries
them for all its benchmarks together (valid only when every one is); CSV rows a ``valid`` (``true`` /
``false``) and an ``invalid_rules`` (``;``-joined) column, per request; each index entry ``valid`` and
``invalid_rules``, and the index the archive-level ``verdict`` (``Verdict.to_json``). A cell's export
is invalid when the verdict invalidates the cell or any wave or round its exported requests came from
(the export's summary is recomputed from all of the cell's measured requests, failed rounds included,
not the cell's median of ok rounds); a CSV row when it invalidates that request's wave, round or cell.
``dsv4h_data_origin`` (CSV ``data_origin``) is the verdict's ``data_origin``. Without a verdict
(``verdict=None``, a library caller) validity is unknown: ``dsv4h_valid`` null, CSV ``valid`` empty,
and the origin is read from the archive (harness.store.ledger.data_origin).

sglang-bench lines carry bench_serving's load fields (:func:`load_fields`): ``request_rate``
(``Infinity`` for a closed-loop cell, as bench_serving writes its default ``inf``), ``max_concurrency``
(the cell's planned concurrency) and ``concurrency`` (bench_serving's mean in flight: the sum of the
successful requests' e2e latencies over the duration).

Format history (the fields dsv4h adds; the peers' own fields are unchanged):

- 3: sglang-bench lines gain bench_serving's ``request_rate``, ``max_concurrency`` and
  ``concurrency`` (peer fields that were missing; the dsv4h fields are unchanged).
- 2: ``dsv4h_valid`` / ``dsv4h_invalid_rules`` on every run, CSV ``valid`` / ``invalid_rules`` columns
  after ``data_origin``, index entries ``valid`` / ``invalid_rules`` and the index ``verdict`` and
  ``dsv4h_export_version``; the origin is the verdict's.
- 1: one run per cell with ``dsv4h_archive``, ``dsv4h_claim_class``, ``dsv4h_data_origin``,
  ``dsv4h_cell``, ``dsv4h_workload``, ``dsv4h_concurrency``; CSV ``cell_id``, ``workload``,
  ``concurrency``, ``data_origin``; no validity.
"""

from __future__ import annotations

import csv
import io
import json
import math
import re
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from harness.errors import ArchiveError
from harness.formats import atomic_write, dump_json, json_safe
from harness.formats import finite_float as _f
from harness.ids import round_of
from harness.records import RequestRecord
from harness.store.archive import Archive
from harness.store.ledger import data_origin
from harness.store.peers.parse import GUIDELLM_REQUEST_KEYS
from harness.store.view import ArchiveView

__all__ = ["EXPORTS", "INDEX", "ExportVerdict", "export_cells"]

EXPORTS = ("sglang-bench", "vllm-bench", "guidellm", "csv")
EXPORT_VERSION = 3  # the dsv4h fields' version (module docstring, format history)
NS = 1e9
_PCTS = {"sglang-bench": (90, 95, 99), "vllm-bench": (50, 90, 99)}
_E2E_NAME = {"sglang-bench": "e2e_latency", "vllm-bench": "e2el"}
_GUIDELLM_EXPORT = ("request_latency", "time_to_first_token_ms", "inter_token_latency_ms", "time_per_output_token_ms")


@dataclass(frozen=True)
class CellRows:
    """One cell of an archive as an export sees it: its id, workload and concurrency (None where the
    archive has no cells: an import, ad hoc records), per-request rows and run duration (s)."""

    cell_id: str | None
    workload: str | None
    concurrency: int | None
    rows: list[dict[str, Any]]
    duration_s: float | None
    waves: tuple[str | None, ...] = ()  # per row: its request's wave id (None: an import, or no wave id)

    def row_ids(self, k: int) -> tuple[str | None, ...]:
        """The ids that decide row ``k``'s validity: its wave, that wave's round, the cell."""
        wave = self.waves[k] if k < len(self.waves) else None
        return wave, _round(wave), self.cell_id

    def ids(self) -> tuple[str | None, ...]:
        """The ids that decide the cell's validity: the cell, and every wave and round of its rows."""
        waves = sorted({w for w in self.waves if w})
        return (self.cell_id, *waves, *sorted({r for w in waves if (r := _round(w)) is not None}))


def _round(wave: str | None) -> str | None:
    if not wave:
        return None
    try:
        return round_of(wave)
    except ArchiveError:  # a wave id of another shape has no round
        return None


Validity = Callable[..., tuple[bool, tuple[str, ...]]]
"""``(*row_ids) -> (valid, rules)``: whether a row named by its wave, round or cell ids (None ignored)
is valid, and the rules of the blocking findings that invalidate it (sorted; () when valid)."""


@dataclass(frozen=True)
class ExportVerdict:
    """The archive's verdict as an export takes it, plain data (module docstring): ``data_origin`` (the
    verdict's), ``validity`` (:data:`Validity`, e.g. ``lambda *ids: (v.row_valid(*ids), v.rules_for(*ids))``)
    and ``summary`` (the archive-level verdict as JSON, ``Verdict.to_json``, written to the index)."""

    data_origin: str
    validity: Validity
    summary: Mapping[str, Any]


def _measured_rows(recs: Sequence[RequestRecord]) -> list[dict[str, Any]]:
    t0 = min((r.send_ns for r in recs), default=0)
    rows = []
    for i, r in enumerate(recs):
        f = r.first_token_ns
        idx = np.flatnonzero(np.diff(np.concatenate(([0], r.event_tokens.astype(np.int64)))) > 0)
        times = r.event_ns[idx]
        gaps = np.diff(times) / NS
        new = np.diff(r.event_tokens.astype(np.int64)[idx]) if idx.size else np.zeros(0, np.int64)
        per_token = [float(g / k) for g, k in zip(gaps, new, strict=True) for _ in range(int(k))]
        rows.append({"index": i, "input_len": int(r.prompt_tokens or r.input_len), "output_len": r.n_tokens,
                     "ttft_s": (f - r.send_ns) / NS if f is not None else math.nan,
                     "e2e_s": (r.done_ns - r.send_ns) / NS, "itl_s": [float(x) for x in gaps],
                     "itl_token_s": per_token, "error": r.error, "start_s": (r.send_ns - t0) / NS, "peer": "{}"})
    return rows


def archive_cells(archive: Archive) -> list[CellRows]:
    """The archive's cells in run order: an import is one cell (the peer's run); a measured archive
    one per ``cell_id`` of its measured records (warm-up excluded), its duration the span from the
    cell's first send to its last completion (s), gaps between its rounds included."""
    if ArchiveView(archive).has("external.parquet"):
        rows = [{"start_s": math.nan, "peer": "{}"} | r for r in ArchiveView(archive).rows("external.parquet")]
        return [CellRows(None, None, None, rows, _source(archive)[2])]
    groups: dict[str, list[RequestRecord]] = {}
    for r in archive.records():
        if r.phase == "measured":
            groups.setdefault(r.cell_id, []).append(r)
    if not groups:
        return [CellRows(None, None, None, [], None)]
    out = []
    for cid, recs in groups.items():
        dur = (max(r.done_ns for r in recs) - min(r.send_ns for r in recs)) / NS
        out.append(CellRows(cid or None, recs[0].workload if cid else None, recs[0].concurrency if cid else None,
                            _measured_rows(recs), dur, tuple(r.wave_id or None for r in recs)))
    return out


def request_rows(archive: Archive) -> list[dict[str, Any]]:
    """Per-request rows of any archive (harness.store.peers.ROW_SCHEMA), in the peers' definitions,
    every cell's in run order (each cell's ``start_s`` from its own first send)."""
    return [r for c in archive_cells(archive) for r in c.rows]


def _tpot(row: Mapping[str, Any]) -> float:
    n = int(row["output_len"])
    return (float(row["e2e_s"]) - float(row["ttft_s"])) / (n - 1) if n > 1 else math.nan


def _ms_stats(name: str, values: Sequence[float], pcts: Sequence[int]) -> dict[str, float]:
    """``mean_/median_/std_/pNN_<name>_ms`` as both bench clients write them (numpy, population std)."""
    v = np.asarray([x for x in values if math.isfinite(x)], dtype=np.float64) * 1e3
    if v.size == 0:
        return {f"{s}_{name}_ms": math.nan for s in ("mean", "median", "std", *(f"p{p}" for p in pcts))}
    out = {f"mean_{name}_ms": float(v.mean()), f"median_{name}_ms": float(np.median(v)),
           f"std_{name}_ms": float(v.std())}
    return out | {f"p{p}_{name}_ms": float(np.percentile(v, p)) for p in pcts}


def bench_dict(rows: Sequence[Mapping[str, Any]], duration_s: float | None, fmt: str) -> dict[str, Any]:
    """The summary and detail lists of ``fmt`` (sglang-bench or vllm-bench), recomputed from rows."""
    ok = [r for r in rows if not r.get("error")]
    dur = duration_s if duration_s and duration_s > 0 else max(
        (float(r["start_s"]) + float(r["e2e_s"]) for r in ok if math.isfinite(float(r["start_s"]))),
        default=max((float(r["e2e_s"]) for r in ok), default=math.nan))
    dur = dur if dur > 0 else math.nan
    n_in, n_out = sum(int(r["input_len"]) for r in ok), sum(int(r["output_len"]) for r in ok)
    out: dict[str, Any] = {"duration": dur, "completed": len(ok), "total_input_tokens": n_in,
                           "total_output_tokens": n_out, "request_throughput": len(ok) / dur,
                           "output_throughput": n_out / dur}
    if fmt == "vllm-bench":
        out |= {"failed": len(rows) - len(ok), "total_token_throughput": (n_in + n_out) / dur}
    else:  # bench_serving's "concurrency": the mean number in flight, sum of e2e latencies / duration
        out |= {"input_throughput": n_in / dur, "total_throughput": (n_in + n_out) / dur,
                "concurrency": sum(float(r["e2e_s"]) for r in ok) / dur}
    pcts = _PCTS[fmt]
    out |= _ms_stats("ttft", [float(r["ttft_s"]) for r in ok], pcts)
    out |= _ms_stats("tpot", [_tpot(r) for r in ok], pcts)
    out |= _ms_stats("itl", [float(x) for r in ok for x in _itl(r, fmt)], pcts)
    out |= _ms_stats(_E2E_NAME[fmt], [float(r["e2e_s"]) for r in ok], pcts)
    return out | _bench_lists(rows, fmt)


def _itl(row: Mapping[str, Any], fmt: str) -> Sequence[float]:
    """A row's ITLs as ``fmt``'s tool takes them: per token for sglang-bench where the tokens per event
    are known (a measured archive), else the row's gaps as recorded (per chunk, or the import's own)."""
    per_token = row.get("itl_token_s")
    return list(per_token) if fmt == "sglang-bench" and per_token is not None else list(row["itl_s"])


def _bench_lists(rows: Sequence[Mapping[str, Any]], fmt: str) -> dict[str, Any]:
    out: dict[str, Any] = {"input_lens": [int(r["input_len"]) for r in rows],
                           "output_lens": [int(r["output_len"]) for r in rows],
                           "ttfts": [float(r["ttft_s"]) for r in rows], "itls": [list(_itl(r, fmt)) for r in rows]}
    if fmt == "vllm-bench":
        peers = [json.loads(r["peer"]) for r in rows]
        out["latencies"] = [float(r["e2e_s"]) for r in rows]
        out["start_times"] = [p.get("start_time", r["start_s"]) for p, r in zip(peers, rows, strict=True)]
    return out | {"errors": [r.get("error") or "" for r in rows]}


def _stat_block(values: Sequence[float]) -> dict[str, Any]:
    v = np.asarray([x for x in values if math.isfinite(x)], dtype=np.float64)
    if v.size == 0:
        return {"count": 0}
    return {"mean": float(v.mean()), "median": float(np.median(v)), "std_dev": float(v.std()),
            "min": float(v.min()), "max": float(v.max()), "count": int(v.size), "total_sum": float(v.sum()),
            "percentiles": {f"p{p}": float(np.percentile(v, p)) for p in (50, 90, 95, 99)}}


def _guidellm_request(r: Mapping[str, Any], verbatim: bool) -> dict[str, Any]:
    """One request in GuideLLM's per-request key names; the tool's own numbers when imported from it."""
    n, start = int(r["output_len"]), float(r["start_s"]) if math.isfinite(float(r["start_s"])) else 0.0
    ttft, e2e = float(r["ttft_s"]), float(r["e2e_s"])
    span = sum(r["itl_s"]) if r["itl_s"] else e2e - ttft  # last token - first token
    if verbatim:
        q = {k: v for k, v in json.loads(r["peer"]).items() if k in GUIDELLM_REQUEST_KEYS}
    else:
        q = {"prompt_tokens": int(r["input_len"]), "output_tokens": n, "request_start_time": start,
             "request_end_time": start + e2e, "request_latency": e2e, "time_to_first_token_ms": ttft * 1e3,
             "inter_token_latency_ms": span / (n - 1) * 1e3 if n > 1 else None,
             "time_per_output_token_ms": (ttft + span) / n * 1e3 if n > 0 else None}
    s = _f(q.get("request_start_time"))  # NaN (written as null) where the request never started
    timings = {"request_start": s, "first_token_iteration": s + _f(q.get("time_to_first_token_ms")) * 1e-3,
               "last_token_iteration": s + _f(q.get("time_per_output_token_ms")) * 1e-3 * n,
               "request_end": q.get("request_end_time")}
    return {"type_": "generative_request_stats", "request_id": str(r["index"]), **q,
            "info": {"status": "errored" if r.get("error") else "completed", "error": r.get("error"),
                     "timings": timings}}


def guidellm_dict(rows: Sequence[Mapping[str, Any]], duration_s: float | None,
                  summary: Mapping[str, Any] | None) -> dict[str, Any]:
    """A GuideLLM-shaped report: one benchmark, its requests and the metrics GuideLLM names.
    ``summary`` (a GuideLLM import's own summary) replaces the recomputed metrics when given."""
    reqs = [_guidellm_request(r, summary is not None) for r in rows]
    ok = [q for q, r in zip(reqs, rows, strict=True) if not r.get("error")]
    bad = [q for q, r in zip(reqs, rows, strict=True) if r.get("error")]
    metrics = {name: {"successful": _stat_block([_f(q.get(name)) for q in ok])} for name in _GUIDELLM_EXPORT}
    bench: dict[str, Any] = {"type_": "generative_benchmark", "duration": duration_s, "metrics": metrics,
                             "requests": {"successful": ok, "errored": bad,
                                          "incomplete": []}}
    if summary is not None:
        bench |= {k: summary[k] for k in ("duration", "start_time", "end_time") if k in summary}
        for key, v in summary.items():
            name, _, stat = key.partition(".")
            if name in _GUIDELLM_EXPORT and stat:
                node = metrics[name]["successful"]
                (node.setdefault("percentiles", {}) if stat.startswith("p") and stat[1:].isdigit() else node)[stat] = v
    return {"metadata": {"dsv4h_note": "GuideLLM-shaped subset written by dsv4h"}, "benchmarks": [bench]}



def _source(archive: Archive) -> tuple[str | None, dict[str, Any], float | None]:
    """(imported-from tool or None, its external.json or {}, the import's duration in s)."""
    if ArchiveView(archive).has("external.json"):
        ext: dict[str, Any] = ArchiveView(archive).doc("external.json")
        d = ext.get("duration_s", ext.get("summary", {}).get("duration"))
        return ext.get("tool"), ext, float(d) if isinstance(d, (int, float)) else None
    return None, {}, None


@dataclass(frozen=True)
class Exported:
    """What an export wrote: ``path`` (a file, or the directory of a per-cell export), ``layout``
    (:data:`LAYOUTS`) and one entry per cell (cell_id, workload, concurrency, data_origin, file, n_requests,
    valid: bool or None when unknown, invalid_rules: sorted list)."""

    path: Path
    layout: str
    cells: list[dict[str, Any]]


# How several cells go into one export (module docstring): the peer's own multi-run layout where it has
# one, else a directory of one file per cell with an index.
LAYOUTS = ("file", "jsonl-lines", "benchmarks", "csv-rows", "directory")
_MULTI = {"sglang-bench": "jsonl-lines", "guidellm": "benchmarks", "csv": "csv-rows", "vllm-bench": "directory"}
_EXT = {"sglang-bench": "jsonl", "vllm-bench": "json", "guidellm": "json", "csv": "csv"}
INDEX = "index.json"
_CSV_HEAD = ["cell_id", "workload", "concurrency", "data_origin", "valid", "invalid_rules", "index", "input_len",
             "output_len", "ttft_s", "e2e_s", "tpot_s", "n_itl", "start_s", "error"]
_SAFE_NAME = re.compile(r"[A-Za-z0-9][A-Za-z0-9._-]{0,127}")

_Judge = Callable[..., tuple[bool | None, tuple[str, ...]]]


def _judge(verdict: ExportVerdict | None) -> _Judge:
    """The verdict's :data:`Validity`, or (None, ()) for every row when there is no verdict (unknown)."""
    if verdict is None:
        return lambda *ids: (None, ())
    return verdict.validity


def _validity(judge: _Judge, ids: Sequence[str | None]) -> dict[str, Any]:
    valid, rules = judge(*ids)
    return {"dsv4h_valid": valid, "dsv4h_invalid_rules": sorted(rules)}


def _cell_prov(cell: CellRows, origin: str, judge: _Judge) -> dict[str, Any]:
    return {"dsv4h_data_origin": origin, "dsv4h_cell": cell.cell_id, "dsv4h_workload": cell.workload,
            "dsv4h_concurrency": cell.concurrency} | _validity(judge, cell.ids())


_SWEEP_CELL = re.compile(r"sweep-([0-9.e+-]+)rps")


def load_fields(archive: Archive, cell: CellRows, ext: Mapping[str, Any]) -> dict[str, Any]:
    """bench_serving's ``request_rate`` (req/s; ``inf`` when every request is sent at once, i.e.
    closed loop; ``"trace"`` for a trace replay) and ``max_concurrency`` (requests in flight at most;
    None when uncapped) of one exported cell: an import's own values (None where its tool had none);
    a rate-sweep cell its offered rate, uncapped; any other measured cell closed-loop at its plan's
    concurrency."""
    if cell.cell_id is None:
        summary = ext.get("summary") or {}
        return {"request_rate": summary.get("request_rate"), "max_concurrency": summary.get("max_concurrency")}
    if (m := _SWEEP_CELL.fullmatch(cell.cell_id)) is not None:
        return {"request_rate": float(m.group(1)), "max_concurrency": None}
    if archive.run.kind == "replay":
        return {"request_rate": "trace", "max_concurrency": None}
    return {"request_rate": math.inf, "max_concurrency": cell.concurrency}


def _bench_obj(archive: Archive, cell: CellRows, fmt: str, prov: dict[str, Any]) -> dict[str, Any]:
    tool, ext, _ = _source(archive)
    d = bench_dict(cell.rows, cell.duration_s, fmt)
    if tool == fmt:
        d = dict(ext.get("summary", {})) | _bench_lists(cell.rows, fmt)
    d.setdefault("backend", "external" if tool else archive.run.backend)
    if fmt != "sglang-bench":
        return dict(json_safe(d | prov))
    for key, v in load_fields(archive, cell, ext).items():
        d.setdefault(key, v)
    out = dict(json_safe(d | prov))
    if isinstance(d.get("request_rate"), float) and math.isinf(d["request_rate"]):
        out["request_rate"] = d["request_rate"]  # bench_serving writes Infinity (json.dumps), not null
    return out


def _csv_valid(valid: bool | None) -> str:
    return "" if valid is None else "true" if valid else "false"


def _csv_rows(w: Any, cell: CellRows, origin: str, judge: _Judge) -> None:
    for k, r in enumerate(cell.rows):
        valid, rules = judge(*cell.row_ids(k))
        w.writerow([cell.cell_id or "", cell.workload or "", "" if cell.concurrency is None else cell.concurrency,
                    origin, _csv_valid(valid), ";".join(sorted(rules)), r["index"], r["input_len"], r["output_len"],
                    r["ttft_s"], r["e2e_s"], _tpot(r), len(r["itl_s"]), r["start_s"], r.get("error") or ""])


def _file_validity(runs: Sequence[Mapping[str, Any]]) -> dict[str, Any]:
    """One file's validity over the runs it holds: valid only when each is (null when any is unknown)."""
    flags = [r["dsv4h_valid"] for r in runs]
    valid = None if any(f is None for f in flags) else all(flags)
    return {"dsv4h_valid": valid, "dsv4h_invalid_rules": sorted({x for r in runs for x in r["dsv4h_invalid_rules"]})}


def _render(archive: Archive, fmt: str, cells: Sequence[CellRows], prov: dict[str, Any], origin: str,
            judge: _Judge) -> bytes:
    """The bytes of one export file holding ``cells`` (one, or several in the format's multi-run layout)."""
    tool, ext, _ = _source(archive)
    if fmt == "csv":
        buf = io.StringIO()
        w = csv.writer(buf)
        w.writerow(_CSV_HEAD)
        for c in cells:
            _csv_rows(w, c, origin, judge)
        return buf.getvalue().encode()
    if fmt == "sglang-bench":  # one JSON object per line per run, as sglang.bench_serving appends them
        return "".join(json.dumps(_bench_obj(archive, c, fmt, prov | _cell_prov(c, origin, judge))) + "\n"
                       for c in cells).encode()
    if fmt == "vllm-bench":
        (c,) = cells
        return json.dumps(_bench_obj(archive, c, fmt, prov | _cell_prov(c, origin, judge))).encode()
    docs = [guidellm_dict(c.rows, c.duration_s, ext.get("summary") if tool == fmt else None) for c in cells]
    benches = [b | _cell_prov(c, origin, judge) for d, c in zip(docs, cells, strict=True) for b in d["benchmarks"]]
    return json.dumps(json_safe(docs[0] | {"benchmarks": benches} | prov | _file_validity(benches))).encode()


def _entry(c: CellRows, origin: str, file: str, judge: _Judge) -> dict[str, Any]:
    valid, rules = judge(*c.ids())
    return {"cell_id": c.cell_id, "workload": c.workload, "concurrency": c.concurrency, "data_origin": origin,
            "file": file, "n_requests": len(c.rows), "valid": valid, "invalid_rules": sorted(rules)}


def export_cells(archive: Archive, fmt: str, out: Path, *, cell: str | None = None,
                 files_per_cell: bool = False, verdict: ExportVerdict | None = None) -> Exported:
    """Write ``archive`` in a peer's format (module docstring). One cell (an import, a single-cell
    archive, or ``cell``) goes to the file ``out``; several go into the format's own multi-run layout
    in ``out``, or into the directory ``out`` as ``<cell_id>.<ext>`` plus :data:`INDEX` (vllm-bench, or
    ``files_per_cell``). Never flattened into one run: a directory export to a path that is a file or
    names one (has a suffix) is refused. ``verdict``: the archive's verdict (validity and data origin
    of every run, row and entry); None leaves validity unknown (null)."""
    if fmt not in EXPORTS:
        raise ArchiveError(f"unknown export format {fmt!r}", hint=f"use one of {', '.join(EXPORTS)}")
    tool, ext, _ = _source(archive)
    origin = verdict.data_origin if verdict is not None else data_origin(archive)
    judge = _judge(verdict)
    prov = {"dsv4h_archive": archive.archive_id, "dsv4h_claim_class": archive.run.claim_class,
            "dsv4h_data_origin": origin, "dsv4h_source_tool": tool,
            "dsv4h_summary": "verbatim" if tool == fmt else "recomputed", "dsv4h_derived": ext.get("derived", {}),
            "dsv4h_export_version": EXPORT_VERSION}
    cells = archive_cells(archive)
    ids = [c.cell_id for c in cells]
    if cell is not None:
        cells = [c for c in cells if c.cell_id == cell]
        if not cells:
            raise ArchiveError(f"archive {archive.archive_id} has no cell {cell!r}",
                               hint="its cells: " + (", ".join(str(i) for i in ids if i) or "none (export it whole)"))
    layout = "file" if len(cells) == 1 else "directory" if files_per_cell else _MULTI[fmt]
    if layout != "directory":
        atomic_write(out, _render(archive, fmt, cells, prov, origin, judge))
        return Exported(out, layout, [_entry(c, origin, out.name, judge) for c in cells])
    if (out.exists() and not out.is_dir()) or (not out.exists() and out.suffix):
        raise ArchiveError(f"archive {archive.archive_id} has {len(cells)} cells and {fmt} holds one run per file; "
                           f"{out} is a file name, and the cells are not merged into one run",
                           hint=f"pass --out DIRECTORY (one {fmt} file per cell plus {INDEX}), or --cell ID for one "
                                f"cell: {', '.join(str(i) for i in ids)}")
    out.mkdir(parents=True, exist_ok=True)
    entries = []
    for k, c in enumerate(cells):
        stem = c.cell_id if c.cell_id and _SAFE_NAME.fullmatch(c.cell_id) else f"cell-{k:03d}"
        name = f"{stem}.{_EXT[fmt]}"
        atomic_write(out / name, _render(archive, fmt, [c], prov, origin, judge))
        entries.append(_entry(c, origin, name, judge))
    atomic_write(out / INDEX, dump_json({"dsv4h_archive": archive.archive_id, "format": fmt, "data_origin": origin,
                                         "claim_class": archive.run.claim_class,
                                         "dsv4h_export_version": EXPORT_VERSION,
                                         "verdict": None if verdict is None else dict(verdict.summary),
                                         "cells": entries}))
    return Exported(out, layout, entries)


def export_archive(archive: Archive, fmt: str, out: Path, *, cell: str | None = None,
                   verdict: ExportVerdict | None = None) -> Path:
    """:func:`export_cells` with its defaults; returns the path written (file or directory)."""
    return export_cells(archive, fmt, out, cell=cell, verdict=verdict).path
