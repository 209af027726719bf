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
import hashlib
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq

from harness.errors import LedgerError
from harness.formats import atomic_write_table
from harness.measure.metrics import flat_list_column, request_timings
from harness.store.archive import Archive

LEDGER_SCHEMA_VERSION = 1
TABLES = ("runs", "cells", "rounds", "waves", "requests", "comparisons", "findings", "historical", "records",
          "closures", "gates", "freezes")


def ledger_dir(workspace: Path) -> Path:
    """Where the ledgers of a workspace live."""
    return workspace / "ledgers"


@contextmanager
def locked(directory: Path) -> Iterator[None]:
    """Hold the ledger directory's exclusive lock (``.lock``, flock) for the duration."""
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


def request_rows(records: pa.Table) -> pa.Table:
    """Per-request summary rows from a raw-record table (no per-event arrays): timings in seconds,
    token counts, output hash. Vectorised over the flattened event arrays."""
    n = records.num_rows
    t = request_timings(records)
    ooff, oids = flat_list_column(records.column("output_ids"))
    oids32 = oids.astype("<i4", copy=False)
    hashes = [
        hashlib.sha256(oids32[ooff[i]:ooff[i + 1]].tobytes()).hexdigest()[:16] if ooff[i + 1] > ooff[i] else None
        for i in range(n)
    ]
    errors = records.column("error")
    keep = ["rid", "cell_id", "wave_id", "round_index", "wave_index", "phase", "workload", "case_id",
            "input_hash", "input_len", "concurrency", "prompt_tokens", "cached_tokens", "completion_tokens",
            "finish_reason", "http_status", "error"]
    out = records.select([c for c in keep if c in records.column_names])
    extra = {
        "n_tokens": pa.array(t.n_tokens),
        "n_events": pa.array(t.n_events),
        "ttft_s": pa.array(t.ttft_s, type=pa.float64()),
        "e2e_s": pa.array(t.e2e_s, type=pa.float64()),
        "ok": pc.is_null(errors),
        "output_hash16": pa.array(hashes, type=pa.string()),
    }
    for name, col in extra.items():
        out = out.append_column(name, col)
    return out


def ingest_archive(workspace: Path, archive: Archive) -> dict[str, int]:
    """Append one archive's rows to every ledger table; returns rows added per table.

    An archive already in the ``runs`` table adds nothing (returns an empty dict).
    """
    run = archive.run
    with locked(ledger_dir(workspace)):
        if archive.archive_id in ingested_ids(workspace):
            return {}
        common = {
            "archive_id": archive.archive_id,
            "ledger_schema_version": LEDGER_SCHEMA_VERSION,
            "campaign": run.campaign,
            "kind": run.kind,
            "claim_class": run.claim_class,
            "protocol_class": run.protocol_class,
            "backend": run.backend,
            "data_origin": "simulated" if run.backend == "sim" else "measured",
            "archive_status": archive.status,
            "created_wall": run.created_wall,
            "identity_hash": run.identity_hash,
            "valid": True,
        }
        added: dict[str, int] = {}
        tables: dict[str, pa.Table] = {}
        for name in ("cells", "rounds", "waves"):
            if (archive.path / f"{name}.parquet").exists():
                tables[name] = archive.table(f"{name}.parquet")
        if (archive.path / "comparison.parquet").exists():
            tables["comparisons"] = archive.table("comparison.parquet")
        records = archive.records_table()
        if records.num_rows:
            tables["requests"] = request_rows(records)
        for name, t in tables.items():
            if t.num_rows == 0:
                continue
            _append(workspace, name, _with_common(t, common))
            added[name] = t.num_rows
        run_row = {**common, "plan_id": run.plan_id or "", "service": run.service_name,
                   "n_cells": int(tables["cells"].num_rows) if "cells" in tables else 0,
                   "archive_path": str(archive.path), "resumed_from": run.resumed_from}
        _append(workspace, "runs", pa.Table.from_pylist([run_row]))
        added["runs"] = 1
        return added
