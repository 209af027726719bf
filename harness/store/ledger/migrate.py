"""One-time migration of schema-1/2 ledgers to schema 3 (edge module: files).

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
from pathlib import Path

import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq

from harness.errors import LedgerError
from harness.formats import atomic_write, atomic_write_table, fsync_dir
from harness.store.archive import is_archive_id
from harness.store.ledger.layout import GOVERNANCE_TABLES, PER_ARCHIVE, SCHEMAS, TABLES, canonical

BACKUP = ".schema2-backup"
MIGRATED_KEY = "00000000T000000000000-schema2"


def legacy_tables(directory: Path) -> list[str]:
    """Tables of ``directory`` (a ledger dir) still in the single-file schema-2 layout."""
    return [t for t in TABLES if (directory / f"{t}.parquet").is_file()]


def _kind(t: pa.Table) -> str | None:
    if "kind" not in t.column_names or not t.num_rows:
        return None
    v = t.column("kind")[0].as_py()
    return str(v) if v is not None else None


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
        atomic_write_table(out / f"{aid}.parquet", canonical(table, part, _kind(part)))
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
    archive's rows with its own kind's column names, as :func:`migrate_table` writes them), or None
    when there is none. Nothing is written: reading an old ledger never migrates it."""
    path = directory / f"{table}.parquet"
    if not path.is_file():
        return None
    try:
        old = pq.read_table(path)
    except (OSError, pa.ArrowInvalid) as exc:
        raise LedgerError(f"{path}: cannot read the schema-2 table: {exc}",
                          hint="restore the file from a copy, or move it aside and re-ingest the archives") from exc
    if table in PER_ARCHIVE and "archive_id" in old.column_names:
        _path_values(path, table, old)  # refused as migration would refuse it: the ids name files later
    if table in GOVERNANCE_TABLES or "archive_id" not in old.column_names or not old.num_rows:
        return canonical(table, old).cast(SCHEMAS[table])
    parts = []
    for aid in dict.fromkeys(old.column("archive_id").to_pylist()):
        mine = pc.is_null(old.column("archive_id")) if aid is None else \
            pc.fill_null(pc.equal(old.column("archive_id"), aid), False)
        part = old.filter(mine)
        parts.append(canonical(table, part, _kind(part)).cast(SCHEMAS[table]))
    return pa.concat_tables(parts)


def migrate_directory(directory: Path) -> dict[str, int]:
    """Migrate every schema-2 table of a ledger directory (lock held); files written per table."""
    return {t: migrate_table(directory, t) for t in legacy_tables(directory)}
