"""Ledger tables as Delta Lake tables (delta-rs, ``deltalake``) (edge module: files).

``<workspace>/ledgers/delta/<table>/`` holds one Delta table per ledger table (``_delta_log/`` and
its Parquet data files), every table with its canonical columns (``harness.store.ledger.layout.SCHEMAS``;
Delta keeps wall-clock anchors as ``timestamp[us, UTC]``, read back as the canonical ``ns``). Every
write is one Delta transaction on one table, so appends from several processes or hosts sharing the
directory need no lock or journal of ours: delta-rs commits a version by creating its log entry only
if absent and retries an append that lost the race. Schema changes go through Delta's schema
evolution (every write uses ``schema_mode="merge"``: a column a newer row model adds is added).

- :func:`write_archive`: one archive's rows of one table, replacing whatever rows of that archive
  the table had (``predicate archive_id = '<id>'``), so writing an archive again adds nothing.
- :func:`supersede`: an archive resumed by another: its rows of every archive table get
  ``valid = false``, ``superseded_by`` = the newer id (a Delta ``UPDATE`` per table; the rows stay,
  and ``--as-of`` an earlier version still shows them valid).
- :func:`migrate_to_delta`: the Parquet-layout ledger of the workspace (schema 3, read as 4 in memory,
  or 4) into the Delta tables: archives missing or whose rows differ (count or validity) are
  (re)written per table in one transaction, governance rows not yet present (by content) appended;
  every row kept (counted before and after: ``LedgerError`` when they differ). Running it again adds
  nothing.
- :func:`read` / :func:`dataset`: a table at its latest version or ``as_of`` an earlier one.
- :func:`optimize`: compaction (``optimize.compact``), a checkpoint, then ``vacuum`` of files
  unreferenced for longer than ``retention_hours`` (default :data:`RETENTION_HOURS`, Delta's own 7 days,
  so ``--as-of`` reaches back at least that far).

Only an archive id (16 hex digits) is ever put into a predicate.
"""

from __future__ import annotations

import json
from collections import Counter
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.dataset as ds
from deltalake import DeltaTable, write_deltalake
from deltalake.exceptions import DeltaError, TableNotFoundError

from harness.errors import LedgerError
from harness.store.archive import is_archive_id
from harness.store.ledger.layout import ARCHIVE_TABLES, GOVERNANCE_TABLES, PER_ARCHIVE, SCHEMAS, TABLES, ledger_dir

DELTA_DIR = "delta"
RETENTION_HOURS = 168  # Delta's default (delta.deletedFileRetentionDuration = 7 days)

__all__ = ["DELTA_DIR", "RETENTION_HOURS", "dataset", "delta_dir", "history", "migrate_to_delta", "optimize",
           "read", "supersede", "table_path", "write_archive"]


def delta_dir(workspace: Path) -> Path:
    """Where a workspace's Delta tables live."""
    return ledger_dir(workspace) / DELTA_DIR


def table_path(workspace: Path, table: str) -> Path:
    """One ledger table's Delta table directory (``LedgerError`` for an unknown table)."""
    if table not in TABLES:
        raise LedgerError(f"no ledger table '{table}'", hint=f"choose one of: {', '.join(TABLES)}")
    return delta_dir(workspace) / table


def _aid(value: str) -> str:
    if not is_archive_id(value):
        raise LedgerError(f"archive id {str(value)[:80]!r} is not 16 hex digits; it never enters a predicate",
                          hint="archive ids come from verified manifests; this value was forged or damaged")
    return value


def _open(workspace: Path, table: str, as_of: int | None = None) -> DeltaTable | None:
    path = table_path(workspace, table)
    if not (path / "_delta_log").is_dir():
        if as_of is not None:
            raise LedgerError(f"{path}: no Delta table, so no version {as_of}",
                              hint="run 'dsv4h ledger migrate --delta' (or ingest) first")
        return None
    try:
        return DeltaTable(str(path), version=as_of)
    except (DeltaError, TableNotFoundError, OSError, ValueError) as exc:
        raise LedgerError(f"{path}: cannot open the Delta table{'' if as_of is None else f' at version {as_of}'}: "
                          f"{' '.join(str(exc).split())[:300]}",
                          hint="'dsv4h ledger history' lists the versions; a version older than the vacuum "
                          "retention may be gone") from None


def _stored(t: pa.Table) -> pa.Table:
    """``t`` as written: no schema metadata (Delta keeps its own)."""
    return t.replace_schema_metadata(None)


def _write(workspace: Path, table: str, t: pa.Table, predicate: str | None) -> None:
    path = table_path(workspace, table)
    path.parent.mkdir(parents=True, exist_ok=True)
    dt = _open(workspace, table)
    target: Any = dt if dt is not None else str(path)
    if predicate is None or dt is None:
        write_deltalake(target, _stored(t), mode="append", schema_mode="merge")
    else:
        write_deltalake(target, _stored(t), mode="overwrite", predicate=predicate, schema_mode="merge")


def write_archive(workspace: Path, table: str, archive_id: str, t: pa.Table) -> None:
    """Replace archive ``archive_id``'s rows of per-archive table ``table`` with ``t`` (every row of
    ``t`` must carry that id), in one transaction; an archive written again adds nothing."""
    if table not in PER_ARCHIVE:
        raise LedgerError(f"'{table}' is not an archive table", hint=f"one of {', '.join(PER_ARCHIVE)}")
    ids = set(t.column("archive_id").to_pylist()) if t.num_rows else set()
    if ids - {archive_id}:
        raise LedgerError(f"rows for archive {archive_id} claim other archives: {sorted(map(str, ids))[:3]}",
                          hint="an archive's rows carry its own id")
    _write(workspace, table, t, f"archive_id = '{_aid(archive_id)}'")


def append(workspace: Path, table: str, t: pa.Table) -> None:
    """Append rows to a governance table (one transaction)."""
    if table not in GOVERNANCE_TABLES:
        raise LedgerError(f"'{table}' is not a governance table", hint=f"one of {', '.join(GOVERNANCE_TABLES)}")
    if t.num_rows:
        _write(workspace, table, t, None)


def supersede(workspace: Path, old_id: str, new_id: str) -> dict[str, int]:
    """Mark every row of archive ``old_id`` in the archive tables ``valid = false``, ``superseded_by =
    new_id`` (one ``UPDATE`` transaction per table holding rows of it); rows updated per table."""
    old, new = _aid(old_id), _aid(new_id)
    out: dict[str, int] = {}
    for table in ARCHIVE_TABLES:
        dt = _open(workspace, table)
        if dt is None:
            continue
        done = dt.update(predicate=f"archive_id = '{old}' AND (valid OR valid IS NULL OR superseded_by IS NULL "
                         f"OR superseded_by <> '{new}')",
                         new_values={"valid": False, "superseded_by": new})
        n = int(done.get("num_updated_rows", 0))
        if n:
            out[table] = n
    return out


def _canonical_read(table: str, t: pa.Table) -> pa.Table:
    """A Delta table's rows in the canonical schema of ``table`` (``us`` wall times back to ``ns``;
    a canonical column the table lacks is null; a column schema evolution added is kept at the end)."""
    schema = SCHEMAS[table]
    cols, fields = [], []
    for f in schema:
        cols.append(pc.cast(t.column(f.name), f.type) if f.name in t.column_names else pa.nulls(t.num_rows, f.type))
        fields.append(f)
    for name in t.column_names:
        if name not in schema.names:
            cols.append(t.column(name))
            fields.append(t.schema.field(name))
    return pa.Table.from_arrays(cols, schema=pa.schema(fields, metadata=schema.metadata))


def read(workspace: Path, table: str, as_of: int | None = None) -> pa.Table | None:
    """A ledger table from its Delta table (latest version, or version ``as_of``), in the canonical
    schema, archive tables ordered by ``created_wall`` then ``archive_id``; None when it does not exist."""
    dt = _open(workspace, table, as_of)
    if dt is None:
        return None
    t = _canonical_read(table, dt.to_pyarrow_table())
    if t.num_rows and "created_wall" in t.column_names:
        t = t.take(pc.sort_indices(t, sort_keys=[("created_wall", "ascending"), ("archive_id", "ascending")]))
    return t


def dataset(workspace: Path, table: str, as_of: int | None = None) -> ds.Dataset | None:
    """The Arrow dataset of a table's Delta version (what DuckDB and polars read, offline)."""
    dt = _open(workspace, table, as_of)
    return None if dt is None else dt.to_pyarrow_dataset()


def history(workspace: Path, table: str) -> list[dict[str, Any]]:
    """A table's versions, newest first (version, timestamp ms, operation)."""
    dt = _open(workspace, table)
    if dt is None:
        return []
    return [{"version": h.get("version"), "timestamp": h.get("timestamp"), "operation": h.get("operation")}
            for h in dt.history()]


def optimize(workspace: Path, retention_hours: int = RETENTION_HOURS) -> dict[str, dict[str, int]]:
    """Compact every Delta table of the workspace, checkpoint it, then vacuum files unreferenced for
    more than ``retention_hours`` (below Delta's 7 days only when asked: versions older than that can
    no longer be read ``as_of``). Per table: files before and after, files removed by vacuum, rows."""
    if retention_hours < 0:
        raise LedgerError(f"retention {retention_hours} h is negative", hint="give hours >= 0 (default 168)")
    out: dict[str, dict[str, int]] = {}
    for table in TABLES:
        dt = _open(workspace, table)
        if dt is None:
            continue
        before = len(dt.file_uris())
        dt.optimize.compact()
        dt.create_checkpoint()
        removed = dt.vacuum(retention_hours=retention_hours, dry_run=False,
                            enforce_retention_duration=retention_hours >= RETENTION_HOURS)
        dt = DeltaTable(str(table_path(workspace, table)))
        out[table] = {"files_before": before, "files_after": len(dt.file_uris()), "vacuumed": len(removed),
                      "rows": int(dt.count()), "version": int(dt.version())}
    return out


def _row_key(row: dict[str, Any]) -> str:
    return json.dumps({k: v for k, v in row.items() if k != "ledger_schema_version"}, sort_keys=True, default=str)


def _per_archive(t: pa.Table | None) -> Counter[tuple[str, int]]:
    """(archive id, valid rows) -> rows: what tells whether an archive's rows are the same."""
    if t is None or not t.num_rows:
        return Counter()
    valid = t.column("valid").to_pylist() if "valid" in t.column_names else [True] * t.num_rows
    c: Counter[tuple[str, int]] = Counter()
    n_valid: Counter[str] = Counter()
    for aid, v in zip(t.column("archive_id").to_pylist(), valid, strict=True):
        c[(str(aid), 0)] += 1
        n_valid[str(aid)] += bool(v)
    for aid, n in n_valid.items():
        c[(aid, 1)] = n
    return c


def migrate_to_delta(workspace: Path, source: Callable[[Path, str], pa.Table | None]) -> dict[str, int]:
    """Bring the Parquet-layout ledger into the Delta tables (module docstring); rows written per table.
    ``source``: the Parquet layout's reader (``harness.store.ledger.read_table``, schema 3 cast in
    memory). Every row it gives is then in the Delta tables (checked: ``LedgerError`` otherwise)."""
    written: dict[str, int] = {}
    for table in TABLES:
        src = source(workspace, table)
        if src is None or not src.num_rows:
            continue
        have = read(workspace, table)
        if table in PER_ARCHIVE:
            want, got = _per_archive(src), _per_archive(have)
            ids = sorted({a for key, n in want.items() if got.get(key, 0) != n for a in key[:1]})
            if ids:
                for a in ids:
                    _aid(a)
                mine = src.filter(pc.is_in(src.column("archive_id"), pa.array(ids, pa.string())))
                quoted = ", ".join(f"'{a}'" for a in ids)
                _write(workspace, table, mine, f"archive_id IN ({quoted})")
                written[table] = mine.num_rows
        else:
            seen = Counter(_row_key(r) for r in (have.select(src.column_names).to_pylist() if have else []))
            keep = []
            for i, r in enumerate(src.to_pylist()):
                k = _row_key(r)
                if seen[k]:
                    seen[k] -= 1
                else:
                    keep.append(i)
            if keep:
                append(workspace, table, src.take(pa.array(keep, pa.int64())))
                written[table] = len(keep)
        after = read(workspace, table)
        n_after = 0 if after is None else after.num_rows
        mine_after = _per_archive(after)
        if n_after < src.num_rows or (table in PER_ARCHIVE and any(mine_after.get(k, 0) != n
                                                                     for k, n in _per_archive(src).items())):
            raise LedgerError(f"{table}: {src.num_rows} rows in the Parquet ledger, {n_after} in the Delta table "
                              "after migration", hint="nothing was deleted; run 'dsv4h ledger migrate --delta' again")
    return written


def mirror(workspace: Path, files: dict[str, Any]) -> None:
    """Apply a Parquet-layout commit (``harness.store.ledger.commit_files``: ``<table>/<key>.parquet`` ->
    table) to the Delta tables: an archive file replaces that archive's rows (a superseded archive's
    rewritten files included), a governance file is appended; other entries (resume markers) are not
    table rows. Called only once the workspace has Delta tables (``ledgers/delta/``)."""
    for rel, content in files.items():
        table, _, name = rel.partition("/")
        if not isinstance(content, pa.Table) or table not in TABLES or not name.endswith(".parquet"):
            continue
        if table in PER_ARCHIVE:
            write_archive(workspace, table, name.removesuffix(".parquet"), content)
        else:
            append(workspace, table, content)
