"""One-time migrations of older ledgers to the current schema (edge module: files).

Schema 3 -> 4 (:func:`migrate_schema3`): a rate sweep's rows leave ``cells`` and ``rounds`` for
``sweep_cells`` and ``sweep_rounds`` (split by ``protocol_class``), ``kind`` leaves every archive
table but ``runs``, each archive file is rewritten in its table's schema-4 columns (every row kept,
every value carried; the old file copied first to ``ledgers/.schema3-backup/<table>/``), then the
marker ``ledgers/.schema`` says ``4``. Governance files are left as they are (their columns did not
change). Rewrites are atomic and idempotent and the marker is written last, so an interrupted
migration is simply run again. A ledger without the marker but with table directories is schema 3;
:func:`read_schema3` reads one table of it in memory, as the migration would write it (reads never
migrate).

Schema 2 kept one file per table, ``ledgers/<table>.parquet``. Migration splits each archive table into
one file per archive (``<table>/<archive id>.parquet``) and writes each governance table as one file
(``<table>/00000000T000000000000-schema2.parquet``, sorting before every later append), all in the
canonical schema (renamed rate columns, typed timestamps, ``extra``); a resumed archive leaves its
``.resumes`` marker. A value that becomes a file name (``archive_id``, a run's ``resumed_from``) must be
an archive id (16 hex digits): a table holding any other is refused whole (``LedgerError`` naming the
file, the value and the reason) before anything of it is written. Each old file is then moved to
``ledgers/.schema2-backup/``. Every write is atomic and the old file moves last, so an interrupted
migration is simply run again (call with the ledger lock held; ``harness.store.ledger.locked`` does it
the first time a schema-2 ledger is locked).
"""

from __future__ import annotations

import os
import shutil
from pathlib import Path

import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq

from harness.errors import LedgerError
from harness.formats import atomic_write, atomic_write_table, fsync_dir
from harness.store.archive import is_archive_id
from harness.store.archive_legacy import legacy_names
from harness.store.ledger.layout import (
    ARCHIVE_FILE_TABLES,
    GOVERNANCE_TABLES,
    LEDGER_SCHEMA_VERSION,
    PER_ARCHIVE,
    SCHEMAS,
    TABLES,
    canonical,
    table_files,
)

BACKUP = ".schema2-backup"
BACKUP3 = ".schema3-backup"
MIGRATED_KEY = "00000000T000000000000-schema2"
SCHEMA_MARKER = ".schema"
# the schema-3 table a schema-4 table's rows came from
_SOURCE = {new: old for by_class in ARCHIVE_FILE_TABLES.values() for old, new in by_class.items()}


def schema_version(directory: Path) -> int:
    """The schema of a ledger directory's table directories: the marker's number; else 3 when any
    table directory exists (schema 3 had no marker); else the current one (nothing written yet)."""
    marker = directory / SCHEMA_MARKER
    if marker.is_file():
        try:
            return int(marker.read_text().strip())
        except ValueError:
            raise LedgerError(f"{marker}: not a schema number",
                              hint=f"write {LEDGER_SCHEMA_VERSION} into it if the ledger was migrated") from None
    if any((directory / t).is_dir() for t in TABLES):
        return 3
    return LEDGER_SCHEMA_VERSION


def mark_current(directory: Path) -> None:
    """Write the schema marker (the ledger directory's tables are of the current schema)."""
    if not (directory / SCHEMA_MARKER).is_file():
        atomic_write(directory / SCHEMA_MARKER, f"{LEDGER_SCHEMA_VERSION}\n".encode())


def split_rows(table: str, t: pa.Table, *, legacy: bool = False) -> dict[str, pa.Table]:
    """An older ledger's rows of ``table`` as current tables: rows of a protocol class with tables of
    its own (:data:`ARCHIVE_FILE_TABLES`) go there, the rest stay in ``table``; each part canonical
    (pure; every row lands in exactly one part). ``legacy``: the rows use the first archive names (a
    schema-2 ledger), read under the row models' names (``harness.store.archive_legacy``)."""
    if "protocol_class" not in t.column_names or not t.num_rows:
        return {table: canonical(table, _renamed(t, table, None, legacy))} if t.num_rows else {}
    out: dict[str, pa.Table] = {}
    classes = pc.fill_null(pc.cast(t.column("protocol_class"), pa.string()), "")
    for cls in dict.fromkeys(classes.to_pylist()):
        part = t.filter(pc.equal(classes, cls))
        target = ARCHIVE_FILE_TABLES.get(cls, {}).get(table, table)
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


def migrate_schema3(directory: Path) -> dict[str, int]:
    """Migrate a schema-3 ledger directory to schema 4 (lock held; module docstring); files written per table."""
    written: dict[str, int] = {}
    for table in PER_ARCHIVE:
        if table in _SOURCE:
            continue
        for path in table_files(directory / table):
            parts = split_rows(table, _read_raw(path))
            backup = directory / BACKUP3 / table
            backup.mkdir(parents=True, exist_ok=True)
            if not (backup / path.name).exists():
                shutil.copy2(path, backup / path.name)
            for target, rows in parts.items():
                (directory / target).mkdir(exist_ok=True)
                atomic_write_table(directory / target / path.name, rows)
                written[target] = written.get(target, 0) + 1
            if table not in parts:  # every row moved to another table
                path.unlink()
            fsync_dir(directory / table)
    atomic_write(directory / SCHEMA_MARKER, f"{LEDGER_SCHEMA_VERSION}\n".encode())
    fsync_dir(directory)
    return written


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


def migrate_table(directory: Path, table: str) -> int:
    """Migrate one schema-2 table file of ``directory``; returns the number of files written. Every
    value that names a file (``archive_id``, a run's ``resumed_from``) is checked to be an archive id
    before anything is written (``LedgerError`` naming the file, the value and the reason)."""
    path = directory / f"{table}.parquet"
    try:
        old = pq.read_table(path)
    except (OSError, pa.ArrowInvalid) as exc:
        raise LedgerError(f"{path}: cannot read the schema-2 table to migrate it: {exc}",
                          hint="restore the file from a copy, or move it aside and re-ingest the archives") from exc
    archives = _path_values(path, table, old) if table in PER_ARCHIVE and "archive_id" in old.column_names else []
    out = directory / table
    out.mkdir(parents=True, exist_ok=True)
    written = 0
    if table in GOVERNANCE_TABLES:
        atomic_write_table(out / f"{MIGRATED_KEY}.parquet", canonical(table, old))
        written = 1
    for aid, prev in archives:
        part = old.filter(pc.fill_null(pc.equal(old.column("archive_id"), aid), False))
        for target, rows in split_rows(table, part, legacy=True).items():
            (directory / target).mkdir(exist_ok=True)
            atomic_write_table(directory / target / f"{aid}.parquet", rows)
            written += 1
        if prev is not None:
            (directory / ".resumes").mkdir(exist_ok=True)
            atomic_write(directory / ".resumes" / prev, aid.encode())
    backup = directory / BACKUP
    backup.mkdir(exist_ok=True)
    os.replace(path, backup / path.name)
    fsync_dir(backup)
    fsync_dir(directory)
    return written


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


def migrate_directory(directory: Path) -> dict[str, int]:
    """Bring a ledger directory to the current schema (lock held): schema-2 tables first (written
    straight as the current schema), then a schema-3 directory's files; files written per table."""
    older = schema_version(directory) < LEDGER_SCHEMA_VERSION  # before schema-2 files make directories
    out = {t: migrate_table(directory, t) for t in legacy_tables(directory)}
    if older:
        for t, n in migrate_schema3(directory).items():
            out[t] = out.get(t, 0) + n
    mark_current(directory)
    return out


def needs_migration(directory: Path) -> bool:
    """Whether a ledger directory holds tables older than the current schema."""
    return bool(legacy_tables(directory)) or schema_version(directory) < LEDGER_SCHEMA_VERSION
