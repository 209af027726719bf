"""Any archive, measured or imported, in a peer tool's format (edge module: files).

:func:`export_archive` writes an sglang.bench_serving JSONL line, a ``vllm bench serve`` JSON, a
GuideLLM-shaped report JSON or CSV (one row per request) from per-request rows (:func:`request_rows`):
an imported archive's ``external.parquet``, or a measured archive's raw records in the peers'
definitions (ITL per chunk, TPOT ``(e2e - ttft) / (N - 1)``, harness.measure.latency ``bench-serving``).

Summary numbers: exported to the format the archive was imported from, the tool's own summary is
written verbatim (``dsv4h_summary: "verbatim"``) with the per-request lists rebuilt from the rows, so a
round trip gives back the fields both sides have. Otherwise every summary number is recomputed from the
rows with the target tool's definitions (``dsv4h_summary: "recomputed"``); row fields the source did not
have and dsv4h derived are named in ``dsv4h_derived``. Every file carries the archive id and claim class.
"""

from __future__ import annotations

import csv
import io
import json
import math
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import numpy as np

from harness.errors import ArchiveError
from harness.formats import atomic_write, json_safe
from harness.formats import finite_float as _f
from harness.store.archive import Archive
from harness.store.peers import GUIDELLM_REQUEST_KEYS

EXPORTS = ("sglang-bench", "vllm-bench", "guidellm", "csv")
NS = 1e9
_PCTS = {"sglang-bench": (90, 95, 99), "vllm-bench": (50, 90, 99)}
_E2E_NAME = {"sglang-bench": "e2e_latency", "vllm-bench": "e2el"}
_GUIDELLM_EXPORT = ("request_latency", "time_to_first_token_ms", "inter_token_latency_ms", "time_per_output_token_ms")


def request_rows(archive: Archive) -> list[dict[str, Any]]:
    """Per-request rows of any archive (harness.store.peers.ROW_SCHEMA), in the peers' definitions."""
    if archive.has("external.parquet"):
        return [{"start_s": math.nan, "peer": "{}"} | r for r in archive.table("external.parquet").to_pylist()]
    recs = [x for x in archive.records() if x.phase == "measured"]
    t0 = min((r.send_ns for r in recs), default=0)
    rows = []
    for i, r in enumerate(recs):
        f = r.first_token_ns
        idx = np.flatnonzero(np.diff(np.concatenate(([0], r.event_tokens.astype(np.int64)))) > 0)
        times = r.event_ns[idx]
        rows.append({"index": i, "input_len": int(r.prompt_tokens or r.input_len), "output_len": r.n_tokens,
                     "ttft_s": (f - r.send_ns) / NS if f is not None else math.nan,
                     "e2e_s": (r.done_ns - r.send_ns) / NS, "itl_s": [float(x) / NS for x in np.diff(times)],
                     "error": r.error, "start_s": (r.send_ns - t0) / NS, "peer": "{}"})
    return rows


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
    else:
        out |= {"input_throughput": n_in / dur, "total_throughput": (n_in + n_out) / dur}
    pcts = _PCTS[fmt]
    out |= _ms_stats("ttft", [float(r["ttft_s"]) for r in ok], pcts)
    out |= _ms_stats("tpot", [_tpot(r) for r in ok], pcts)
    out |= _ms_stats("itl", [float(x) for r in ok for x in r["itl_s"]], pcts)
    out |= _ms_stats(_E2E_NAME[fmt], [float(r["e2e_s"]) for r in ok], pcts)
    return out | _bench_lists(rows, fmt)


def _bench_lists(rows: Sequence[Mapping[str, Any]], fmt: str) -> dict[str, Any]:
    out: dict[str, Any] = {"input_lens": [int(r["input_len"]) for r in rows],
                           "output_lens": [int(r["output_len"]) for r in rows],
                           "ttfts": [float(r["ttft_s"]) for r in rows], "itls": [list(r["itl_s"]) for r in rows]}
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
    """(imported-from tool or None, its external.json or {}, run duration in s)."""
    if archive.has("external.json"):
        ext: dict[str, Any] = archive.json("external.json")
        d = ext.get("duration_s", ext.get("summary", {}).get("duration"))
        return ext.get("tool"), ext, float(d) if isinstance(d, (int, float)) else None
    recs = [r for r in archive.records() if r.phase == "measured"]
    dur = (max(r.done_ns for r in recs) - min(r.send_ns for r in recs)) / NS if recs else None
    return None, {}, dur


def export_archive(archive: Archive, fmt: str, out: Path) -> Path:
    """Write ``archive`` in a peer's format (module docstring); returns the path written."""
    if fmt not in EXPORTS:
        raise ArchiveError(f"unknown export format {fmt!r}", hint=f"use one of {', '.join(EXPORTS)}")
    rows = request_rows(archive)
    tool, ext, dur = _source(archive)
    verbatim = tool == fmt
    prov = {"dsv4h_archive": archive.archive_id, "dsv4h_claim_class": archive.run.claim_class,
            "dsv4h_source_tool": tool, "dsv4h_summary": "verbatim" if verbatim else "recomputed",
            "dsv4h_derived": ext.get("derived", {})}
    if fmt == "csv":
        buf = io.StringIO()
        w = csv.writer(buf)
        w.writerow(["index", "input_len", "output_len", "ttft_s", "e2e_s", "tpot_s", "n_itl", "start_s", "error"])
        for r in rows:
            w.writerow([r["index"], r["input_len"], r["output_len"], r["ttft_s"], r["e2e_s"], _tpot(r),
                        len(r["itl_s"]), r["start_s"], r.get("error") or ""])
        data = buf.getvalue().encode()
    elif fmt in ("sglang-bench", "vllm-bench"):
        d = bench_dict(rows, dur, fmt)
        if verbatim:
            d = dict(ext.get("summary", {})) | _bench_lists(rows, fmt)
        d.setdefault("backend", "external" if tool else archive.run.backend)
        text = json.dumps(json_safe(d | prov))
        data = (text + "\n").encode() if fmt == "sglang-bench" else text.encode()
    else:
        doc = guidellm_dict(rows, dur, ext.get("summary") if verbatim else None)
        data = json.dumps(json_safe(doc | prov)).encode()
    atomic_write(out, data)
    return out
