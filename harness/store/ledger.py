"""Parquet ledgers appended per archive (edge module: files).

``<workspace>/ledgers/<table>.parquet`` for tables ``runs``, ``cells``, ``rounds``, ``waves``,
``requests`` (and ``comparisons`` for ABBA screens). Every row carries the archive id, claim class,
protocol class, backend, ``data_origin`` (``simulated`` for the built-in simulator, owned or
attached, else ``measured``) and the ledger schema version. Ingesting an archive twice adds nothing; an archive
is verified (every file re-hashed) before any of its rows is read. Appends happen under a lock
file and are all-or-nothing per archive: every changed table is first written beside its target,
then a commit journal (``.commit.json``) lists the renames, then they are done; whoever takes the
lock next finishes the renames of a journal left by an interrupted commit and removes staged files
that never reached one.

When an archive that resumed another is ingested, the older archive's rows get
``valid = false`` and ``superseded_by`` = the newer archive's id (the newer one carries the old
records), so filtering on ``valid`` never counts a cell twice, in whichever order they are ingested.

Open them in a notebook with ``pandas.read_parquet("ledgers/cells.parquet")``.

Ledger schema history (``LEDGER_SCHEMA_VERSION``):
  1 - first version (2026-11-29).
  2 - ``superseded_by`` on every archive row (null, or the id of the archive that resumed this
      one); version-1 tables read with it null (2026-12-01).
"""

from __future__ import annotations

import fcntl
import hashlib
import json
import os
import secrets
from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq

from harness.errors import LedgerError
from harness.formats import atomic_write, atomic_write_table, dump_json, fsync_dir
from harness.interrupts import critical, fault_point
from harness.measure.metrics import flat_list_column, request_timings
from harness.store.archive import Archive, open_verified, resumed_by

LEDGER_SCHEMA_VERSION = 2
ARCHIVE_TABLES = ("runs", "cells", "rounds", "waves", "requests", "comparisons")
JOURNAL = ".commit.json"
_STAGE_PREFIX = ".stage-"
_held = [0]
TABLES = ("runs", "cells", "rounds", "waves", "requests", "comparisons", "findings", "historical", "records",
          "closures", "gates", "freezes")


def ledger_dir(workspace: Path) -> Path:
    """Where the ledgers of a workspace live."""
    return workspace / "ledgers"


@contextmanager
def locked(directory: Path) -> Iterator[None]:
    """Hold the ledger directory's exclusive lock (``.lock``, flock) for the duration; first finish
    any commit an interrupted writer left (module docstring)."""
    directory.mkdir(parents=True, exist_ok=True)
    with (directory / ".lock").open("w") as fh:
        fcntl.flock(fh, fcntl.LOCK_EX)
        _held[0] += 1
        try:
            _roll_forward(directory)
            yield
        finally:
            _held[0] -= 1
            fcntl.flock(fh, fcntl.LOCK_UN)


def _roll_forward(directory: Path) -> None:
    """Finish the renames of a commit journal (lock held); drop staged files no journal names."""
    journal = directory / JOURNAL
    if journal.is_file():
        try:
            renames = json.loads(journal.read_text())["renames"]
        except (OSError, ValueError, KeyError, TypeError) as exc:
            raise LedgerError(f"{journal}: unreadable commit journal: {exc}",
                              hint="restore the ledgers from a copy, or delete the journal and re-ingest "
                              "archives") from None
        for tmp, final in renames:
            if (directory / tmp).exists():
                os.replace(directory / tmp, directory / final)
                fault_point("ledger:renamed")
        fsync_dir(directory)
        journal.unlink()
        fsync_dir(directory)
    for stray in directory.glob(f"{_STAGE_PREFIX}*"):
        stray.unlink(missing_ok=True)


def commit_tables(workspace: Path, tables: Mapping[str, pa.Table]) -> None:
    """Replace several ledger tables as one step (call with the lock held): all or none of them
    change, even if the process is killed half-way (the next lock holder completes the commit)."""
    directory = ledger_dir(workspace)
    tag = secrets.token_hex(4)
    renames: list[list[str]] = []
    meta_version = str(LEDGER_SCHEMA_VERSION).encode()
    try:
        for name, table in tables.items():
            tmp = directory / f"{_STAGE_PREFIX}{tag}-{name}.parquet"
            meta = {b"dsv4h.ledger_schema_version": meta_version, b"dsv4h.table": name.encode()}
            atomic_write_table(tmp, table.replace_schema_metadata(meta))
            renames.append([tmp.name, f"{name}.parquet"])
            fault_point("ledger:staged")
        atomic_write(directory / JOURNAL, dump_json({"renames": renames}))
    except BaseException:
        for tmp_name, _ in renames:
            (directory / tmp_name).unlink(missing_ok=True)
        raise
    fault_point("ledger:journal-written")
    _roll_forward(directory)


def recover(workspace: Path) -> None:
    """Finish a commit an interrupted writer left (readers call this before reading)."""
    directory = ledger_dir(workspace)
    if (directory / JOURNAL).is_file() and not _held[0]:
        with locked(directory):
            pass


def read_table(workspace: Path, table: str) -> pa.Table | None:
    """One ledger table, or None when it does not exist yet."""
    if table not in TABLES:
        raise LedgerError(f"no ledger table '{table}'", hint=f"choose one of: {', '.join(TABLES)}")
    path = ledger_dir(workspace) / f"{table}.parquet"
    recover(workspace)
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


def _merged(old: pa.Table | None, new: pa.Table) -> pa.Table:
    """``old`` without rows of the archives in ``new``, then ``new``."""
    if old is None:
        return new
    if "archive_id" in old.column_names and new.num_rows:
        ids = pa.array(sorted(set(new.column("archive_id").to_pylist())))
        old = old.filter(pc.invert(pc.is_in(old.column("archive_id"), value_set=ids)))
    return pa.concat_tables([old, new], promote_options="permissive")


def supersede(table: pa.Table, old_id: str, new_id: str) -> pa.Table:
    """Rows of archive ``old_id`` marked ``valid = false``, ``superseded_by = new_id`` (pure)."""
    if "archive_id" not in table.column_names or not table.num_rows:
        return table
    mine = pc.fill_null(pc.equal(table.column("archive_id"), old_id), False)
    if not pc.any(mine).as_py():
        return table
    n = table.num_rows
    by = table.column("superseded_by") if "superseded_by" in table.column_names \
        else pa.nulls(n, pa.string())
    by = pc.if_else(mine, pa.scalar(new_id, pa.string()), pc.cast(by, pa.string()))
    valid = table.column("valid") if "valid" in table.column_names else pa.array([True] * n)
    valid = pc.if_else(mine, False, valid)
    for name, col in (("superseded_by", by), ("valid", valid)):
        if name in table.column_names:
            table = table.set_column(table.column_names.index(name), name, col)
        else:
            table = table.append_column(name, col)
    return table


def _simulated(archive: Archive) -> bool:
    """Simulator data: backend ``sim`` or labelled ``simulated``, or a server of the run identified
    itself as the dsv4h simulator (``server_info.dsv4h_simulator``, e.g. an attached one)."""
    if archive.run.simulated:
        return True
    services = archive.json("service.json").get("services", []) if archive.has("service.json") else []
    return any(isinstance(s, dict) and "dsv4h_simulator" in (s.get("server_info") or {}) for s in services)


def _with_common(table: pa.Table, common: dict[str, Any]) -> pa.Table:
    for key, value in common.items():
        if key in table.column_names:
            table = table.drop_columns([key])
        col = pa.nulls(table.num_rows, pa.string()) if value is None else pa.array([value] * table.num_rows)
        table = table.append_column(key, col)
    return table


def request_rows(records: pa.Table, anchor: Mapping[str, Any] | None = None) -> pa.Table:
    """Per-request summary rows from a raw-record table (no per-event arrays): the four instants
    (``send_ns``, ``first_token_ns``, ``last_token_ns``, ``done_ns``: client monotonic int64 ns, -1 when
    absent), latencies in seconds, token counts, count method, output hash, and the run's wall-clock
    anchor (``anchor_wall_ns`` / ``anchor_perf_ns``: one wall time and the monotonic reading taken with
    it) so a notebook can place every instant on the wall clock and recompute every rate and latency
    from this table alone. Vectorised over the flattened event arrays (harness.measure.metrics)."""
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
            "finish_reason", "http_status", "error", "count_method"]
    out = records.select([c for c in keep if c in records.column_names])
    anchor = anchor or {}
    extra = {
        "send_ns": pa.array(t.send_ns, type=pa.int64()),
        "first_token_ns": pa.array(t.first_ns, type=pa.int64()),
        "last_token_ns": pa.array(t.last_ns, type=pa.int64()),
        "done_ns": pa.array(t.done_ns, type=pa.int64()),
        "anchor_wall_ns": pa.array([anchor.get("wall_ns")] * n, type=pa.int64()),
        "anchor_perf_ns": pa.array([anchor.get("perf_counter_ns")] * n, type=pa.int64()),
        "first_event_tokens": pa.array(t.first_tokens),
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


def run_anchor(archive: Archive) -> dict[str, Any]:
    """The run's wall-clock anchor (the ``run-start`` event of ``events.jsonl``); {} when absent."""
    path = archive.path / "events.jsonl"
    if not path.is_file():
        return {}
    for line in path.read_text(encoding="utf-8").splitlines():
        try:
            event = json.loads(line)
        except ValueError:
            continue
        if isinstance(event, dict) and event.get("event") == "run-start":
            return {k: event.get(k) for k in ("wall_ns", "perf_counter_ns", "wall_iso")}
    return {}


def _successor(workspace: Path, archive_id: str) -> str | None:
    """The archive that resumed ``archive_id``: from the ``runs`` table, else from the archives on disk."""
    runs = read_table(workspace, "runs")
    if runs is not None and "resumed_from" in runs.column_names:
        hit = runs.filter(pc.fill_null(pc.equal(runs.column("resumed_from"), archive_id), False))
        if hit.num_rows:
            return str(hit.column("archive_id")[0].as_py())
    found = resumed_by(workspace, archive_id)
    return found if found is not None and len(found) == 16 and " " not in found else None


def _archive_tables(archive: Archive) -> dict[str, pa.Table]:
    tables: dict[str, pa.Table] = {}
    for name in ("cells", "rounds", "waves"):
        if (archive.path / f"{name}.parquet").exists():
            tables[name] = archive.table(f"{name}.parquet")
    if (archive.path / "comparison.parquet").exists():
        tables["comparisons"] = archive.table("comparison.parquet")
    records = archive.records_table()
    if records.num_rows:
        try:
            tables["requests"] = request_rows(records, run_anchor(archive))
        except (pa.ArrowException, KeyError, ValueError, TypeError) as exc:
            raise LedgerError(f"archive {archive.archive_id}: its records cannot be summarised: {str(exc)[:200]}",
                              hint="the archive's record parts are not dsv4h raw records") from None
    return tables


def ingest_archive(workspace: Path, archive: Archive) -> dict[str, int]:
    """Append one archive's rows to every ledger table, all or nothing; returns rows added per table.

    The archive is verified first (``ArchiveError`` naming each changed, missing or extra file). An
    archive already in the ``runs`` table adds nothing (returns an empty dict). Ingesting an archive
    that resumed another supersedes the other's rows (module docstring).
    """
    archive = open_verified(archive.path)
    run = archive.run
    tables = _archive_tables(archive)
    with critical(), locked(ledger_dir(workspace)):
        if archive.archive_id in ingested_ids(workspace):
            return {}
        successor = _successor(workspace, archive.archive_id)
        common = {
            "archive_id": archive.archive_id,
            "ledger_schema_version": LEDGER_SCHEMA_VERSION,
            "campaign": run.campaign,
            "kind": run.kind,
            "claim_class": run.claim_class,
            "protocol_class": run.protocol_class,
            "backend": run.backend,
            "data_origin": "simulated" if _simulated(archive) else "measured",
            "archive_status": archive.status,
            "created_wall": run.created_wall,
            "identity_hash": run.identity_hash,
            "valid": successor is None,
            "superseded_by": successor,
        }
        added: dict[str, int] = {}
        new: dict[str, pa.Table] = {}
        for name, t in tables.items():
            if t.num_rows == 0:
                continue
            new[name] = _with_common(t, common)
            added[name] = t.num_rows
        run_row = {**common, "plan_id": run.plan_id or "", "service": run.service_name,
                   "n_cells": int(tables["cells"].num_rows) if "cells" in tables else 0,
                   "archive_path": str(archive.path), "resumed_from": run.resumed_from}
        new["runs"] = pa.Table.from_pylist([run_row], schema=_run_schema(run_row))
        added["runs"] = 1
        out: dict[str, pa.Table] = {}
        for name in ARCHIVE_TABLES:
            old = read_table(workspace, name)
            table = _merged(old, new[name]) if name in new else old
            if table is not None and run.resumed_from:
                table = supersede(table, run.resumed_from, archive.archive_id)
            if table is not None and (name in new or table is not old):
                out[name] = table
        commit_tables(workspace, out)
        return added


def _run_schema(row: Mapping[str, Any]) -> pa.Schema:
    """The ``runs`` row's schema: strings where a value may be null."""
    fields = []
    for key, value in row.items():
        if isinstance(value, bool):
            fields.append(pa.field(key, pa.bool_()))
        elif isinstance(value, int):
            fields.append(pa.field(key, pa.int64()))
        else:
            fields.append(pa.field(key, pa.string()))
    return pa.schema(fields)
