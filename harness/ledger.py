"""Parquet ledgers appended per archive (edge module: files).

``<workspace>/ledgers/<table>.parquet`` for tables ``runs``, ``cells``, ``rounds``, ``waves``,
``requests`` (and ``comparisons`` for ABBA screens). Every row carries the archive id, claim class,
protocol class, backend, ``data_origin`` (``simulated`` for the built-in simulator, else
``measured``) and the ledger schema version. Ingesting an archive twice adds nothing. Appends are
atomic (rewrite through a temporary file and rename) under a lock file.

Open them in a notebook with ``pandas.read_parquet("ledgers/cells.parquet")``.

Ledger schema history (``LEDGER_SCHEMA_VERSION``):
  1 - first version (2026-11-29).
"""

from __future__ import annotations

import fcntl
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq

from harness.archive import Archive, atomic_write_table
from harness.errors import LedgerError
from harness.hashing import ids_hash16
from harness.records import RequestRecord

LEDGER_SCHEMA_VERSION = 1
TABLES = ("runs", "cells", "rounds", "waves", "requests", "comparisons")


def ledger_dir(workspace: Path) -> Path:
    """Where the ledgers of a workspace live."""
    return workspace / "ledgers"


@contextmanager
def _locked(directory: Path) -> Iterator[None]:
    directory.mkdir(parents=True, exist_ok=True)
    with (directory / ".lock").open("w") as fh:
        fcntl.flock(fh, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(fh, fcntl.LOCK_UN)


def read_table(workspace: Path, table: str) -> pa.Table | None:
    """One ledger table, or None when it does not exist yet."""
    if table not in TABLES:
        raise LedgerError(f"no ledger table '{table}'", hint=f"choose one of: {', '.join(TABLES)}")
    path = ledger_dir(workspace) / f"{table}.parquet"
    if not path.exists():
        return None
    try:
        return pq.read_table(path)
    except (OSError, pa.ArrowInvalid) as exc:
        raise LedgerError(f"{path}: cannot read: {exc}",
                          hint="restore the file from backup or re-ingest archives") from exc


def ingested_ids(workspace: Path) -> set[str]:
    """Archive ids already present in the ``runs`` table."""
    runs = read_table(workspace, "runs")
    return set(runs.column("archive_id").to_pylist()) if runs is not None else set()


def _append(workspace: Path, table: str, new: pa.Table) -> None:
    path = ledger_dir(workspace) / f"{table}.parquet"
    old = read_table(workspace, table)
    if old is not None:
        if "archive_id" in old.column_names and new.num_rows:
            ids = pa.array(sorted(set(new.column("archive_id").to_pylist())))
            old = old.filter(pc.invert(pc.is_in(old.column("archive_id"), value_set=ids)))
        merged = pa.concat_tables([old, new], promote_options="permissive")
    else:
        merged = new
    meta = {b"dsv4h.ledger_schema_version": str(LEDGER_SCHEMA_VERSION).encode(), b"dsv4h.table": table.encode()}
    atomic_write_table(path, merged.replace_schema_metadata(meta))


def _with_common(table: pa.Table, common: dict[str, Any]) -> pa.Table:
    for key, value in common.items():
        if key in table.column_names:
            table = table.drop_columns([key])
        table = table.append_column(key, pa.array([value] * table.num_rows))
    return table


def request_rows(records: Sequence[RequestRecord]) -> pa.Table:
    """Per-request summary rows (no per-event arrays): timings in seconds, output hash."""
    rows = []
    for r in records:
        f = r.first_token_ns
        rows.append({
            "rid": r.rid, "cell_id": r.cell_id, "wave_id": r.wave_id, "round_index": r.round_index,
            "wave_index": r.wave_index, "phase": r.phase, "workload": r.workload, "case_id": r.case_id,
            "input_hash": r.input_hash, "input_len": r.input_len, "concurrency": r.concurrency,
            "prompt_tokens": r.prompt_tokens, "cached_tokens": r.cached_tokens,
            "completion_tokens": r.completion_tokens, "n_tokens": r.n_tokens,
            "n_events": int(r.event_ns.size),
            "ttft_s": (f - r.send_ns) / 1e9 if f is not None else np.nan,
            "e2e_s": (r.done_ns - r.send_ns) / 1e9, "finish_reason": r.finish_reason,
            "http_status": r.http_status, "error": r.error, "ok": r.ok,
            "output_hash16": ids_hash16(r.output_ids) if r.output_ids.size else None,
        })
    return pa.Table.from_pylist(rows)


def ingest_archive(workspace: Path, archive: Archive) -> dict[str, int]:
    """Append one archive's rows to every ledger table; returns rows added per table.

    An archive already in the ``runs`` table adds nothing (returns an empty dict).
    """
    run = archive.manifest.get("run", {})
    with _locked(ledger_dir(workspace)):
        if archive.archive_id in ingested_ids(workspace):
            return {}
        backend = run.get("backend", "unknown")
        common = {
            "archive_id": archive.archive_id,
            "ledger_schema_version": LEDGER_SCHEMA_VERSION,
            "campaign": run.get("campaign", ""),
            "kind": run.get("kind", ""),
            "claim_class": run.get("claim_class", ""),
            "protocol_class": run.get("protocol_class", ""),
            "backend": backend,
            "data_origin": "simulated" if backend == "sim" else "measured",
            "archive_status": archive.status,
            "created_wall": run.get("created_wall", ""),
            "valid": True,
        }
        added: dict[str, int] = {}
        tables: dict[str, pa.Table] = {}
        for name in ("cells", "rounds", "waves"):
            if (archive.path / f"{name}.parquet").exists():
                tables[name] = archive.table(f"{name}.parquet")
        if (archive.path / "comparison.parquet").exists():
            tables["comparisons"] = archive.table("comparison.parquet")
        if (archive.path / "records.parquet").exists():
            tables["requests"] = request_rows(archive.records())
        for name, t in tables.items():
            if t.num_rows == 0:
                continue
            _append(workspace, name, _with_common(t, common))
            added[name] = t.num_rows
        run_row = {**common, "plan_id": run.get("plan_id", ""), "service": run.get("service_name", ""),
                   "n_cells": int(tables["cells"].num_rows) if "cells" in tables else 0,
                   "archive_path": str(archive.path), "resumed_from": run.get("resumed_from")}
        _append(workspace, "runs", pa.Table.from_pylist([run_row]))
        added["runs"] = 1
        return added
