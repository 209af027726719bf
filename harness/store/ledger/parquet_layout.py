"""The Parquet ledger layout of schemas 2 to 4, read to migrate it (edge module: files).

Schema 4 kept ``<workspace>/ledgers/<table>/<archive id or append key>.parquet``, written under a lock
file through a commit journal (``.commit.json``: renames from ``.staging/``), with resume markers in
``.resumes/``; schema 3 the same without the marker ``ledgers/.schema``; schema 2 one file per table
(:mod:`.migrate` reads those two in memory). Nothing writes this layout any more: the ledgers are
Delta tables (schema 5, :mod:`.delta`). What is left here is what moving an older ledger into them
needs: :func:`read_table` (one table of any older layout, in the canonical schema, every row),
:func:`roll_forward` (finish a commit an interrupted schema-4 writer left, so its rows are kept) and
:func:`resume_markers`. A journal is checked before any rename: each entry must move
``.staging/<staged name>`` to ``<table>/<archive id or append key>.parquet`` or ``.resumes/<archive id>``
of this ledger directory (anything else, ``..`` or an absolute path included, is a ``LedgerError`` and
nothing is renamed), and the staging area must be a real directory, not a symlink, before anything in
it is deleted.
"""

from __future__ import annotations

import json
import os
import re
import stat
from pathlib import Path

import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.dataset as ds
import pyarrow.parquet as pq

from harness.errors import LedgerError
from harness.formats import fsync_dir, read_regular
from harness.interrupts import fault_point
from harness.store.archive import is_archive_id
from harness.store.ledger.layout import GOVERNANCE_TABLES, PER_ARCHIVE, SCHEMAS, TABLES, table_files
from harness.store.ledger.migrate import MIGRATED_KEY, read_legacy, read_schema3, schema_version

JOURNAL = ".commit.json"
STAGING = ".staging"
RESUMES = ".resumes"
PARQUET_SCHEMA = 4  # the last schema of this layout

__all__ = ["JOURNAL", "PARQUET_SCHEMA", "RESUMES", "STAGING", "has_layout", "read_table", "resume_markers",
           "roll_forward"]

_STAGED_RE = re.compile(r"[0-9a-f]{8}-[0-9]{1,9}(\.parquet)?")
_FINAL_RE = re.compile(r"(?P<table>[a-z_]+)/(?P<stem>[0-9a-f]{16}|[0-9]{8}T[0-9]{12}-(?:[0-9a-f]{8}|schema2))"
                       r"\.parquet|\.resumes/[0-9a-f]{16}")


def has_layout(directory: Path) -> bool:
    """Whether a ledger directory still holds files of this layout (a table directory or schema-2
    file, a journal, resume markers)."""
    return any((directory / t).is_dir() or (directory / f"{t}.parquet").is_file() for t in TABLES) \
        or os.path.lexists(directory / JOURNAL) or (directory / RESUMES).is_dir()


def _final_ok(rel: str) -> bool:
    m = _FINAL_RE.fullmatch(rel)
    return m is not None and (m.group("table") is None or m.group("table") in TABLES)


def _journal_renames(journal: Path) -> list[tuple[str, str]]:
    """The renames of a commit journal, each checked to stay inside the ledger directory; a journal
    with any other entry is a ``LedgerError`` (nothing renamed)."""
    hint = ("restore the ledgers from a copy, or move the journal aside and re-ingest archives; a journal only "
            "ever names files of its own ledger directory")
    try:
        st = os.lstat(journal)
        if not stat.S_ISREG(st.st_mode):
            raise LedgerError(f"{journal}: the commit journal is not a regular file (a symlink?); not replayed",
                              hint=hint)
        renames = json.loads(journal.read_text())["renames"]
    except (OSError, ValueError, KeyError, TypeError) as exc:
        raise LedgerError(f"{journal}: unreadable commit journal: {exc}",
                          hint="restore the ledgers from a copy, or delete the journal and re-ingest "
                          "archives") from None
    if not isinstance(renames, list):
        raise LedgerError(f"{journal}: 'renames' is not a list; not replayed", hint=hint)
    out: list[tuple[str, str]] = []
    for entry in renames:
        ok = isinstance(entry, list) and len(entry) == 2 and all(isinstance(x, str) for x in entry)
        tmp, final = (entry if ok else ("", ""))
        staged = tmp.split("/", 1)[1] if tmp.startswith(f"{STAGING}/") else ""
        if not ok or not _STAGED_RE.fullmatch(staged) or not _final_ok(final):
            raise LedgerError(f"{journal}: rename {str(entry)[:200]} leaves the ledger directory or names no "
                              "ledger file; nothing was renamed", hint=hint)
        out.append((tmp, final))
    return out


def roll_forward(directory: Path) -> None:
    """Finish the renames of a commit journal an interrupted schema-4 writer left (the caller holds
    the migration lock); drop staged files no journal names. Every rename is checked first, and the
    staging directory must be a real directory (not a symlink) before anything is renamed out of it
    or deleted in it."""
    journal = directory / JOURNAL
    staging = directory / STAGING
    try:
        staging_st: os.stat_result | None = os.lstat(staging)
    except FileNotFoundError:
        staging_st = None
    if staging_st is not None and not stat.S_ISDIR(staging_st.st_mode):
        raise LedgerError(f"{staging}: the staging area is not a directory (a symlink?); nothing was renamed "
                          "or deleted", hint="move it aside; dsv4h recreates it")
    if os.path.lexists(journal):
        renames = _journal_renames(journal)
        parents = set()
        for tmp, final in renames:
            if os.path.lexists(directory / tmp):
                (directory / final).parent.mkdir(parents=True, exist_ok=True)
                os.replace(directory / tmp, directory / final)
                parents.add((directory / final).parent)
                fault_point("ledger:renamed")
        for p in sorted(parents):
            fsync_dir(p)
        journal.unlink()
        fsync_dir(directory)
    if staging_st is not None:
        for stray in staging.iterdir():
            if not stray.is_dir() or stray.is_symlink():
                stray.unlink(missing_ok=True)
    for stray in directory.glob(".stage-*"):  # staged by a schema-2 writer that never reached its journal
        if not stray.is_dir() or stray.is_symlink():
            stray.unlink(missing_ok=True)


def _read_files(paths: list[Path], table: str) -> pa.Table:
    try:
        if len(paths) == 1:
            return pq.read_table(paths[0], schema=SCHEMAS[table])
        return ds.dataset([str(p) for p in paths], schema=SCHEMAS[table], format="parquet").to_table()
    except (OSError, pa.ArrowInvalid) as exc:
        raise LedgerError(f"{paths[0].parent}: cannot read: {exc}",
                          hint="restore the ledgers from a copy, or re-ingest archives") from exc


def _keyed(t: pa.Table, key: str) -> pa.Table:
    """Governance rows of one file with its append key (the file's name: their order)."""
    col = pa.array([key] * t.num_rows, pa.string())
    return t.set_column(t.column_names.index("append_key"), "append_key", col)


def read_table(directory: Path, table: str) -> pa.Table | None:
    """One table of an older ledger directory (schema 2, 3 or 4; a pending journal is not replayed
    here), in the canonical schema, every row; None when it has none. Archive tables in order of
    ``created_wall`` then archive id; governance rows in append order, each with its file's name as
    ``append_key``. Nothing is written."""
    legacy = read_legacy(directory, table)  # a schema-2 file, cast in memory
    if legacy is not None and table in GOVERNANCE_TABLES:
        legacy = _keyed(legacy, MIGRATED_KEY)
    if table in PER_ARCHIVE and schema_version(directory) < PARQUET_SCHEMA:
        parts = [t for t in (legacy, read_schema3(directory, table)) if t is not None]
    else:
        paths = table_files(directory / table)
        if table in GOVERNANCE_TABLES:
            parts = ([legacy] if legacy is not None else []) + [_keyed(_read_files([p], table), p.stem)
                                                                 for p in paths]
        else:
            parts = ([legacy] if legacy is not None else []) + ([_read_files(paths, table)] if paths else [])
    if not parts:
        return None
    t = parts[0] if len(parts) == 1 else pa.concat_tables(parts)
    if t.num_rows and "created_wall" in t.column_names:
        t = t.take(pc.sort_indices(t, sort_keys=[("created_wall", "ascending"), ("archive_id", "ascending")]))
    return t


def resume_markers(directory: Path) -> dict[str, str]:
    """``.resumes/<older id>`` -> the newer id it names (archive ids only; anything else is skipped:
    a marker never names a file by its content)."""
    out: dict[str, str] = {}
    d = directory / RESUMES
    if not d.is_dir() or d.is_symlink():
        return out
    for p in d.iterdir():
        if not is_archive_id(p.name) or p.is_symlink() or not p.is_file():
            continue
        try:
            text = read_regular(p, 64, follow_symlinks=False).decode("ascii").strip()
        except (OSError, ValueError):
            continue
        if is_archive_id(text):
            out[p.name] = text
    return out
