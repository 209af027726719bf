"""Older ledgers read in memory, as the current schema, to move them into the Delta tables (pure
reading; edge module: files).

Schema 3 kept ``ledgers/<table>/<archive id>.parquet`` without the marker ``ledgers/.schema``, with a
rate sweep's rows in ``cells`` and ``rounds`` and ``kind`` on every archive table; :func:`read_schema3`
reads one table of it as the current columns (a rate sweep's rows go to ``sweep_cells`` and
``sweep_rounds``, split by ``protocol_class``; every row kept, every value carried). Schema 2 kept one
file per table, ``ledgers/<table>.parquet`` (the first archive names); :func:`read_legacy` reads it
split per archive and renamed, in the canonical schema. A value that later names an archive
(``archive_id``, a run's ``resumed_from``) must be an archive id (16 hex digits): a schema-2 table
holding any other is refused whole (``LedgerError`` naming the file, the value and the reason).
Nothing here writes: ``harness.store.ledger.core`` moves the rows into the Delta tables and the old
files aside (``ledgers/.parquet-backup/``).
"""

from __future__ import annotations

from pathlib import Path

import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq

from harness.errors import LedgerError
from harness.store.archive import is_archive_id
from harness.store.archive_legacy import legacy_names
from harness.store.ledger.layout import (
    GOVERNANCE_TABLES,
    LEDGER_SCHEMA_VERSION,
    PER_ARCHIVE,
    SCHEMAS,
    TABLES,
    canonical,
    table_files,
)

__all__ = ["schema_version"]

BACKUP = ".schema2-backup"
BACKUP3 = ".schema3-backup"
MIGRATED_KEY = "00000000T000000000000-schema2"
SCHEMA_MARKER = ".schema"
# How schema 4 split an older ledger's rows by protocol class (a fact of that history, not today's kind
# tables: no SLA search existed before schema 4, whose own ledgers kept its rows in sweep_cells).
SCHEMA4_SPLIT: dict[str, dict[str, str]] = {"rate-sweep": {"cells": "sweep_cells", "rounds": "sweep_rounds"}}
# the schema-3 table a schema-4 table's rows came from
_SOURCE = {new: old for by_class in SCHEMA4_SPLIT.values() for old, new in by_class.items()}


def schema_version(directory: Path) -> int:
    """The schema of a ledger directory: the marker's number; else 3 when any table directory exists
    (schema 3 had no marker), 2 when a single-file table does; else the current one (nothing
    written yet)."""
    marker = directory / SCHEMA_MARKER
    if marker.is_file():
        try:
            return int(marker.read_text().strip())
        except ValueError:
            raise LedgerError(f"{marker}: not a schema number",
                              hint=f"write {LEDGER_SCHEMA_VERSION} into it if the ledger was migrated") from None
    if any((directory / t).is_dir() for t in TABLES):
        return 3
    if legacy_tables(directory):
        return 2
    return LEDGER_SCHEMA_VERSION


def split_rows(table: str, t: pa.Table, *, legacy: bool = False) -> dict[str, pa.Table]:
    """An older ledger's rows of ``table`` as current tables: rows of a protocol class with tables of
    its own (:data:`SCHEMA4_SPLIT`) go there, the rest stay in ``table``; each part canonical
    (pure; every row lands in exactly one part). ``legacy``: the rows use the first archive names (a
    schema-2 ledger), read under the row models' names (``harness.store.archive_legacy``)."""
    if "protocol_class" not in t.column_names or not t.num_rows:
        return {table: canonical(table, _renamed(t, table, None, legacy))} if t.num_rows else {}
    out: dict[str, pa.Table] = {}
    classes = pc.fill_null(pc.cast(t.column("protocol_class"), pa.string()), "")
    for cls in dict.fromkeys(classes.to_pylist()):
        part = t.filter(pc.equal(classes, cls))
        target = SCHEMA4_SPLIT.get(cls, {}).get(table, table)
        got = canonical(target, _renamed(part, table, cls, legacy))
        out[target] = pa.concat_tables([out[target], got]) if target in out else got
    return out


def _renamed(t: pa.Table, table: str, protocol_class: str | None, legacy: bool) -> pa.Table:
    if not legacy:
        return t
    names = legacy_names(table, protocol_class)
    cols = t.column_names
    return t.rename_columns([names.get(c, c) if names.get(c, c) not in cols else c for c in cols])


def _read_raw(path: Path) -> pa.Table:
    try:
        return pq.read_table(path)
    except (OSError, pa.ArrowInvalid) as exc:
        raise LedgerError(f"{path}: cannot read: {exc}",
                          hint="restore the ledgers from a copy, or re-ingest archives") from exc


def read_schema3(directory: Path, table: str) -> pa.Table | None:
    """One archive table of a schema-3 ledger directory as schema 4, in memory (what
    :func:`migrate_schema3` would write), or None when it has no rows. Nothing is written."""
    source = _SOURCE.get(table, table)
    parts = []
    for path in table_files(directory / source):
        got = split_rows(source, _read_raw(path)).get(table)
        if got is not None:
            parts.append(got.cast(SCHEMAS[table]))
    return pa.concat_tables(parts) if parts else None


def legacy_tables(directory: Path) -> list[str]:
    """Tables of ``directory`` (a ledger dir) still in the single-file schema-2 layout."""
    return [t for t in TABLES if (directory / f"{t}.parquet").is_file()]


def _path_values(path: Path, table: str, old: pa.Table) -> list[tuple[str, str | None]]:
    """(archive id, resumed_from) of each archive of a schema-2 archive table, in order of first
    appearance; ``LedgerError`` naming the file, the value and the reason when either is not an
    archive id (16 hex digits): they become file names, so nothing is written then."""
    hint = ("a schema-2 ledger only ever holds archive ids there; move the file aside (and re-ingest the "
            "archives) or restore it from a copy")
    out: list[tuple[str, str | None]] = []
    for aid in dict.fromkeys(old.column("archive_id").to_pylist()):
        if aid is None:
            continue
        if not is_archive_id(aid):
            raise LedgerError(f"{path}: archive_id {str(aid)[:80]!r} is not an archive id (16 hex digits); it "
                              f"would become a file name, so the {table} table is not migrated", hint=hint)
        prev = None
        if table == "runs" and "resumed_from" in old.column_names:
            part = old.filter(pc.fill_null(pc.equal(old.column("archive_id"), aid), False))
            prev = part.column("resumed_from")[0].as_py() or None
            if prev is not None and (not is_archive_id(prev) or prev == aid):
                raise LedgerError(f"{path}: resumed_from {str(prev)[:80]!r} of archive {aid} is not an archive "
                                  f"id (16 hex digits) of another archive; it would become a file name, so the "
                                  f"{table} table is not migrated", hint=hint)
        out.append((aid, prev))
    return out


def read_legacy(directory: Path, table: str) -> pa.Table | None:
    """A schema-2 table file of ``directory`` cast to ``table``'s canonical schema in memory (each
    archive's rows split and renamed by its protocol class, as :func:`migrate_table` writes them), or
    None when there is none. Nothing is written: reading an old ledger never migrates it."""
    source = _SOURCE.get(table, table)
    path = directory / f"{source}.parquet"
    if not path.is_file():
        return None
    try:
        old = pq.read_table(path)
    except (OSError, pa.ArrowInvalid) as exc:
        raise LedgerError(f"{path}: cannot read the schema-2 table: {exc}",
                          hint="restore the file from a copy, or move it aside and re-ingest the archives") from exc
    if source in PER_ARCHIVE and "archive_id" in old.column_names:
        _path_values(path, source, old)  # refused as migration would refuse it: the ids name files later
    if source in GOVERNANCE_TABLES or "archive_id" not in old.column_names or not old.num_rows:
        return canonical(table, old).cast(SCHEMAS[table]) if source == table else None
    parts = []
    for aid in dict.fromkeys(old.column("archive_id").to_pylist()):
        mine = pc.is_null(old.column("archive_id")) if aid is None else \
            pc.fill_null(pc.equal(old.column("archive_id"), aid), False)
        got = split_rows(source, old.filter(mine), legacy=True).get(table)
        if got is not None:
            parts.append(got.cast(SCHEMAS[table]))
    return pa.concat_tables(parts) if parts else None


