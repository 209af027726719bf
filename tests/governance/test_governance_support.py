"""Builders of small literal archives for the governance tests (no tests here).

Archives are written with the real ``ArchiveWriter`` so every reader (evidence rules, gates, record
facts) sees exactly what a campaign would write; values are chosen so no evidence rule blocks.
"""

from __future__ import annotations

import itertools
from pathlib import Path
from typing import Any

import numpy as np
import pyarrow as pa
from testkit import run_block

from harness.records import RequestRecord
from harness.store.archive import Archive, ArchiveWriter, open_archive

_COUNTER = itertools.count(1)

PROFILE: dict[str, Any] = {"name": "svc", "backend": "sim", "tp_size": None, "env": {},
                           "sim": {"profile": "paper-tp8", "step_factor": 1.0, "time_scale": 1.0}, "expect": {}}


def profile(**over: Any) -> dict[str, Any]:
    """The test service profile with nested overrides (``sim={"step_factor": 0.9}`` merges)."""
    out = {k: (dict(v) if isinstance(v, dict) else v) for k, v in PROFILE.items()}
    for k, v in over.items():
        if isinstance(v, dict) and isinstance(out.get(k), dict):
            out[k] = out[k] | v
        else:
            out[k] = v
    return out


def stream_record(i: int, *, case_id: str = "c000", n_tokens: int = 120, step_ms: float = 10.0,
                  ttft_ms: float = 50.0, cached: int | None = 0, error: str | None = None,
                  output: list[int] | None = None, phase: str = "measured", concurrency: int = 1,
                  workload: str = "decode", wave: str = "decode-c01-x.r0.w000") -> RequestRecord:
    """One streamed request: one event per token ``step_ms`` apart after ``ttft_ms``.

    Its single-stream rate (tokens 1..100) is exactly ``1000 / step_ms`` tok/s."""
    send = 1_000_000_000 * i
    first = send + int(ttft_ms * 1e6)
    ev = [first + int(k * step_ms * 1e6) for k in range(n_tokens)]
    return RequestRecord(
        rid=f"r{i}", send_ns=send, done_ns=ev[-1] + 1000 if ev else send + 1000, event_ns=np.asarray(ev, np.int64),
        event_tokens=np.arange(1, n_tokens + 1, dtype=np.int32),
        output_ids=np.asarray(output if output is not None else range(n_tokens), dtype=np.int32),
        prompt_tokens=512, cached_tokens=cached, completion_tokens=n_tokens, finish_reason="stop",
        http_status=200, error=error, phase=phase, workload=workload, case_id=case_id, concurrency=concurrency,
        wave_id=wave if phase == "measured" else wave.replace(".r0.", ".warmup."),
        cell_id=wave.split(".", maxsplit=1)[0],
        round_index=0, wave_index=0,
    )


def make_formal(ws: Path, *, value: float = 88.0, concurrency: int = 1, workload: str = "decode",
                pid: int | None = None, create_time: float | None = None, prof: dict[str, Any] | None = None,
                claim: str = "native-ar", status: str = "complete", created_wall: str = "2026-01-01T00:00:00+0000",
                records: list[RequestRecord] | None = None, cell_status: str = "complete",
                decode: dict[str, Any] | None = None, corpus_sha: str = "c0ffee", engine: str = "sim-0.1.0",
                cached: int = 0, protocol: str = "formal", kind: str = "formal-matrix",
                server_info: dict[str, Any] | None = None, stack: dict[str, Any] | None = None) -> Archive:
    """A formal-matrix archive with one cell (``workload`` at ``concurrency``, median ``value``); ``stack``
    is the service record's ``stack`` (absent when None)."""
    n = next(_COUNTER)
    pid = pid if pid is not None else 1000 + n
    create_time = create_time if create_time is not None else 1_700_000_000.0 + n
    prof = prof if prof is not None else profile()
    dec = {"min_resident_seconds": 30.0, "max_new_tokens": 2048, "ignore_eos": False, "temperature": 0.0,
           "cache_salt": "fresh", "rounds": 3, "warmup_waves": 1, "tiers": [concurrency],
           "max_waves_per_round": 200} | (decode or {})
    w = ArchiveWriter(ws, token=f"t{n}")
    w.write_json("spec.json", {"name": f"suite{n}", "kind": kind, "claim_class": claim, "protocol_class": protocol,
                               "decode": dec, "prefill": None, "service": prof})
    info = server_info if server_info is not None else {
        "_source": "/server_info", "version": engine, "tp_size": 8,
        "speculative_algorithm": None if claim == "native-ar" else "EAGLE",  # the server serves the claim
        "dsv4h_simulator": {"label": "simulated"}}
    w.write_json("service.json", {"services": [{"start_index": 1, "url": f"http://127.0.0.1:{pid}",
                                                "process": {"pid": pid, "create_time": create_time},
                                                "server_info": info, "profile": prof}
                                               | ({"stack": stack} if stack is not None else {})]})
    w.write_json("corpora.json", {"decode": {"manifest_sha256": corpus_sha},
                                  "prefill": {"manifest_sha256": corpus_sha}})
    w.write_json("environment.json", {"packages": {"sglang": None, "torch": None}})
    cid = f"{workload}-c{concurrency:02d}-x"
    ok = ["ok", "ok", "ok"] if cell_status == "complete" else ["ok", "failed", "ok"]
    w.write_table("cells.parquet", pa.Table.from_pylist([{
        "cell_id": cid, "workload": workload, "concurrency": concurrency, "status": cell_status,
        "rounds_required": 3, "round_tok_s": [value * 0.99, value, value * 1.01], "round_status": ok,
        "median_tok_s": value, "observed_min_tok_s": value * 0.99, "observed_max_tok_s": value * 1.01,
        "http_output_tok_s": value * 0.9,
        "cache_violations": 0}]))
    w.write_table("rounds.parquet", pa.Table.from_pylist([
        {"round_id": f"{cid}.r{k}", "cell_id": cid, "round_index": k, "workload": workload,
         "concurrency": concurrency, "status": s, "rate_tok_s": value, "seconds": 31.0} for k, s in enumerate(ok)]))
    if records is None:
        records = [stream_record(k, case_id=f"c{k:03d}", cached=cached, concurrency=concurrency,
                                 wave=f"{cid}.r0.w000", workload=workload) for k in range(3)]
    w.write_wave(records)
    run = {"campaign": f"suite{n}", "kind": kind, "claim_class": claim, "protocol_class": protocol,
           "backend": "sim", "created_wall": created_wall, "labels": ["simulated"], "service_starts": 1}
    return open_archive(w.finalize(status=status, run=run_block(**run)))


def make_abba(ws: Path, *, control_mean: float = 1000.0, candidate_mean: float = 1100.0, change_pct: float = 10.0,
              drift_pct: float = 0.1, spread_pct: float = 0.1, concurrency: int = 32,
              created_wall: str = "2026-01-01T00:00:00+0000") -> Archive:
    """An ABBA screen archive with a ``comparison.json`` result."""
    n = next(_COUNTER)
    w = ArchiveWriter(ws, token=f"a{n}")
    w.write_json("spec.json", {"name": f"abba{n}", "kind": "abba", "control": PROFILE, "candidate": PROFILE,
                               "workload": {"concurrency": concurrency}})
    w.write_json("service.json", {"services": []})
    legs = {leg: {"pid": k} for k, leg in enumerate(("A1", "B1", "B2", "A2"))}
    w.write_json("comparison.json", {"result": {
        "control_mean": control_mean, "candidate_mean": candidate_mean, "change_pct": change_pct,
        "drift_pct": drift_pct, "spread_pct": spread_pct, "verdict": "faster", "legs": list(legs)}, "legs": legs})
    run = {"campaign": f"abba{n}", "kind": "abba", "claim_class": "native-ar", "protocol_class": "abba-screen",
           "backend": "sim", "created_wall": created_wall, "labels": ["simulated"]}
    return open_archive(w.finalize(status="complete", run=run_block(**run)))
