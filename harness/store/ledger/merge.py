"""Merging another host's workspace into this one: the storage pieces (edge module: files).

The other host's directory is untrusted, read-only input, of either ledger layout (Delta tables of
schema 5, or the Parquet files of schema 4 an older dsv4h writes). Nothing in it is written, renamed or
deleted: its commit journal is never replayed, its ``.staging`` never touched, it is never migrated,
its Delta tables are read only from a checked copy (``harness.store.ledger.foreign_delta``);
no symlink in it is followed (every entry is checked with ``lstat``, files are opened with
``O_NOFOLLOW``) and no value read from it becomes a path unless it is an archive id (16 hex digits)
or a governance file name of the ledger's own grammar.

Rows never travel. An archive table's rows enter this workspace only by ingesting one of the other
host's archives (``<other>/archives/<archive id>/``) after verifying it: the directory must be a
plain copy (no symlink or special file anywhere, the manifest's id its name, every file listed with
its size) before it is copied (:func:`copy_foreign_archive`, into a hidden directory of this
workspace's ``archives/``, then re-hashed and renamed into place; an archive this workspace already has
is never overwritten). The orchestration (``harness.run.merge``) then ingests the copy and re-runs the
evidence rules on it, so every row, its validity included, is re-derived from the archive. The other
host's ledger files of archive tables are only read to report what is not merged
(:func:`ledger_refusals`): a file for an archive that was not merged, rows claiming another archive,
more or fewer rows than its archive gives.

Governance rows (:func:`merge_governance`: Parquet files, regular and at most
:data:`GOVERNANCE_MAX_BYTES`, named by the ledger's grammar; or rows of the other host's Delta
tables, validated column by column, ``harness.store.ledger.merge_rows``) are cast to the canonical
schema and validated (required columns present, every column castable, references to archives naming
archives of this workspace); valid rows not already here (by content) are appended in one
read-check-write per table, keeping their append key (their order), so merging twice adds nothing.
Every refusal is a :class:`Refusal` naming the file (a Delta table's rows: ``<table dir>#<archive id>``,
``#row<n>`` or ``#row<n>,<m>,… (<k> rows)`` for rows refused for the same reason, numbered from 0 in
append-key order) and the reason.

Bounds (:class:`MergeLimits`, flags of ``dsv4h ledger merge``): a Delta table with more log entries or
data files than ``--max-commits``, or a governance table with more rows than ``--max-rows`` (counted
by Parquet footers before it is read), stops the merge with one ``LedgerError`` naming the table, the
count, the limit and the flag; what was merged before it stays (each archive is all or nothing, and
merging again adds nothing twice).
"""

from __future__ import annotations

import json
import os
import re
import secrets
import shutil
import stat
from collections.abc import Iterable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq

from harness.errors import ArchiveError, LedgerError
from harness.formats import fsync_dir, open_regular, read_regular
from harness.store.archive import MANIFEST, is_archive_id, open_archive, verify_archive
from harness.store.archive_foreign import FOREIGN_MANIFEST_MAX_BYTES, foreign_archive_problems
from harness.store.ledger.core import (
    ARCHIVE_TABLES,
    GOVERNANCE_TABLES,
    PER_ARCHIVE,
    TABLES,
    append_checked,
    archive_rows,
    ingested_ids,
    rows_iso,
)
from harness.store.ledger.delta import DELTA_DIR
from harness.store.ledger.foreign_delta import FOREIGN_TABLE_MAX_BYTES, read_foreign_delta
from harness.store.ledger.layout import canonical, ledger_dir
from harness.store.ledger.merge_rows import check_rows, governance_problems, rows_label
from harness.store.ledger.migrate import SCHEMA4_SPLIT
from harness.store.ledger.parquet_layout import JOURNAL

__all__ = [
    "DEFAULT_LIMITS",
    "DEFAULT_MAX_COMMITS",
    "DEFAULT_MAX_ROWS",
    "MergeLimits",
    "MergeResult",
    "Refusal",
    "copy_foreign_archive",
    "discard_copy",
    "foreign_archive_dirs",
    "ledger_refusals",
    "merge_governance",
    "one_line",
    "other_root",
]

GOVERNANCE_MAX_BYTES = 64 * 2**20
LEDGER_FILE_MAX_BYTES = 64 * 2**20
MERGE_PREFIX = ".merge-"
GOVERNANCE_FILE_RE = re.compile(r"(?P<key>[0-9]{8}T[0-9]{12})-(?:[0-9a-f]{8}|schema2)\.parquet")
ARCHIVE_FILE_RE = re.compile(r"(?P<id>[0-9a-f]{16})\.parquet")

DEFAULT_MAX_ROWS = 100_000
DEFAULT_MAX_COMMITS = 2_000
_DATA_FILE = ".parquet"


@dataclass(frozen=True)
class MergeLimits:
    """Bounds of what one merge reads of the other host (each a flag of ``dsv4h ledger merge``):
    ``max_rows`` per governance table (the rows of its Delta table's data files, by their Parquet
    footers, before the table is read; or of its Parquet files summed, each counting at least one);
    ``max_commits`` per Delta table: entries of its ``_delta_log/`` and data files, counted before
    anything of it is copied. At the defaults a merge stays under 1 GB and 20 s per table
    (``benchmarks/bounded_readers.py``)."""

    max_rows: int = DEFAULT_MAX_ROWS
    max_commits: int = DEFAULT_MAX_COMMITS


DEFAULT_LIMITS = MergeLimits()


@dataclass(frozen=True)
class Refusal:
    """Something of the other host's directory that was not merged: the file and the reason."""

    file: str
    reason: str

    def __str__(self) -> str:
        return f"{self.file}: {self.reason}"


@dataclass
class MergeResult:
    """What one merge did: archives ingested, archives already here, governance rows added per table,
    and every refusal."""

    archives: list[str] = field(default_factory=list)
    governance: dict[str, int] = field(default_factory=dict)
    present: int = 0
    refusals: list[Refusal] = field(default_factory=list)


def _lstat(path: Path) -> os.stat_result | None:
    try:
        return os.lstat(path)
    except FileNotFoundError:
        return None


def _real_dir(path: Path) -> bool | None:
    """True for a directory that is not a symlink, False for anything else, None when absent."""
    st = _lstat(path)
    return None if st is None else stat.S_ISDIR(st.st_mode)


def one_line(exc: BaseException) -> str:
    """An error's message on one line (a refusal is printed as one line)."""
    return " ".join(str(exc).split())


def other_root(workspace: Path, other: Path) -> Path:
    """The other host's workspace, checked: it holds ``ledgers/`` or ``archives/`` (each a real directory,
    never a symlink), and it is not this workspace. ``LedgerError`` otherwise."""
    root = other.resolve()
    led, arc = root / "ledgers", root / "archives"
    if not root.is_dir() or (_real_dir(led) is None and _real_dir(arc) is None):
        raise LedgerError(f"{other}: no ledgers/ directory (nor archives/) to merge",
                          hint="give the workspace directory that holds ledgers/ and archives/ (e.g. a copy from "
                          "another host)")
    if root == workspace.resolve() or (_real_dir(led) and led.resolve() == ledger_dir(workspace).resolve()):
        raise LedgerError(f"{other} is this workspace", hint="merge another host's workspace")
    for d in (led, arc):
        if _real_dir(d) is False:
            raise LedgerError(f"{d}: not a directory (a symlink?); nothing of another host is followed out of its "
                              "directory", hint="give a plain copy of the other host's workspace")
    return root


def foreign_archive_dirs(other: Path) -> tuple[list[Path], list[Refusal]]:
    """The archive directories of ``other/archives`` named by an archive id, sorted, and refusals for
    every other visible entry (hidden ones, e.g. partial runs, are not archives and are left alone)."""
    root = other / "archives"
    if not _real_dir(root):
        return [], []
    dirs: list[Path] = []
    refused: list[Refusal] = []
    for e in sorted(os.scandir(root), key=lambda e: e.name):
        if e.name.startswith("."):
            continue
        if not is_archive_id(e.name):
            refused.append(Refusal(e.path, "not an archive (its name is not an archive id, 16 hex digits)"))
        elif e.is_symlink() or not e.is_dir(follow_symlinks=False):
            refused.append(Refusal(e.path, "not a directory (a symlink?); links are never followed"))
        else:
            dirs.append(Path(e.path))
    return dirs, refused


def _copy_tree(src_fd: int, dst: Path, rel: str, listed: dict[str, int]) -> None:
    """Copy what ``src_fd`` (a directory opened with O_NOFOLLOW) holds into ``dst``, entry by entry
    through file descriptors (a link swapped in is never followed); only files ``listed`` (relative
    path -> size) and the manifest, each at most its listed size."""
    for e in os.scandir(src_fd):
        name = f"{rel}{e.name}"
        st = e.stat(follow_symlinks=False)
        if stat.S_ISDIR(st.st_mode):
            fd = os.open(e.name, os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW, dir_fd=src_fd)
            try:
                (dst / e.name).mkdir()
                _copy_tree(fd, dst / e.name, f"{name}/", listed)
            finally:
                os.close(fd)
            continue
        limit = listed.get(name)
        if not stat.S_ISREG(st.st_mode) or limit is None:
            raise ArchiveError(f"{name}: not a file its manifest lists (changed while it was copied?)")
        fd = os.open(e.name, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK, dir_fd=src_fd)
        try:
            if not stat.S_ISREG(os.fstat(fd).st_mode):
                raise ArchiveError(f"{name}: not a regular file")
            with open(dst / e.name, "xb") as out:
                size = 0
                while chunk := os.read(fd, 1 << 20):
                    size += len(chunk)
                    if size > limit:
                        raise ArchiveError(f"{name}: larger than its manifest says (changed while it was copied?)")
                    out.write(chunk)
                out.flush()
                os.fsync(out.fileno())
        finally:
            os.close(fd)
    fsync_dir(dst)


def copy_foreign_archive(workspace: Path, src: Path) -> tuple[Path, bool]:
    """Copy another host's archive directory ``src`` into ``workspace/archives/<id>``: checked first
    (``foreign_archive_problems``), copied without following links into a hidden ``.merge-*`` directory,
    re-hashed there (``verify_archive``), then renamed into place. Returns (the archive's path here,
    whether it was copied now); an archive already here is never overwritten (returned as it is).
    ``ArchiveError`` naming each problem; nothing is left behind then."""
    problems = foreign_archive_problems(src)
    if problems:
        raise ArchiveError("not a plain copy of an archive: " + "; ".join(problems))
    root = workspace / "archives"
    root.mkdir(parents=True, exist_ok=True)
    final = root / src.name
    if os.path.lexists(final):
        return final, False
    manifest = json.loads(read_regular(src / MANIFEST, FOREIGN_MANIFEST_MAX_BYTES, follow_symlinks=False))
    listed = {str(rel): int(meta["bytes"]) for rel, meta in manifest["files"].items()}
    listed[MANIFEST] = FOREIGN_MANIFEST_MAX_BYTES
    tmp = root / f"{MERGE_PREFIX}{secrets.token_hex(6)}"
    tmp.mkdir()
    try:
        fd = os.open(src, os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW)
        try:
            _copy_tree(fd, tmp, "", listed)
        finally:
            os.close(fd)
        problems = verify_archive(tmp, check_name=False)
        if not problems and open_archive(tmp).manifest.get("archive_id") != src.name:
            problems = ["the copy's manifest names another archive (changed while it was copied?)"]
        if problems:
            raise ArchiveError("its copy failed verification: " + "; ".join(problems))
        if os.path.lexists(final):
            shutil.rmtree(tmp)
            return final, False
        os.rename(tmp, final)
        fsync_dir(root)
    except BaseException:
        shutil.rmtree(tmp, ignore_errors=True)
        raise
    return final, True


def discard_copy(path: Path) -> None:
    """Remove an archive this merge copied and could not ingest (all or nothing per archive)."""
    shutil.rmtree(path, ignore_errors=True)
    fsync_dir(path.parent)


def _read_foreign_table(path: Path, limit: int, columns: list[str] | None = None) -> pa.Table:
    """A Parquet file of the other host (a regular file, not a link, at most ``limit`` bytes);
    ``ValueError`` with the reason otherwise."""
    st = _lstat(path)
    if st is None or stat.S_ISLNK(st.st_mode):
        raise ValueError("a symlink: never followed (what it points to is not read)")
    if not stat.S_ISREG(st.st_mode):
        raise ValueError("not a regular file; not read")
    data = read_regular(path, limit, follow_symlinks=False)
    try:
        return pq.read_table(pa.BufferReader(data), columns=columns)
    except (pa.ArrowException, OSError, ValueError, TypeError) as exc:
        raise ValueError(f"not a readable Parquet file: {one_line(exc)[:200]}") from None


def ledger_refusals(workspace: Path, other: Path, merged: set[str], refused: set[str],
                    limits: MergeLimits = DEFAULT_LIMITS) -> list[Refusal]:
    """What of ``other/ledgers`` is not merged, without writing or following anything there: an
    unfinished commit journal (never replayed), schema-2 files (never migrated here), archive-table
    files for an archive not among ``merged`` (this workspace's archives after the merge), and files
    whose rows disagree with what their archive gives (other archive ids, another number of rows).
    Files of an archive in ``refused`` (whose archive was refused already) are not listed again.
    Rows of archive tables are never copied: those of merged archives are re-derived from them.
    ``LedgerError`` for a Delta table over ``limits.max_commits``."""
    led = other / "ledgers"
    if not _real_dir(led):
        return []
    out: list[Refusal] = []
    if _lstat(led / JOURNAL) is not None:
        out.append(Refusal(str(led / JOURNAL), "an unfinished commit of the other host: never replayed here "
                           "(finish it there with any dsv4h ledger command, then merge again)"))
    out += [Refusal(str(led / f"{t}.parquet"), "a schema-2 ledger file: never migrated or read here (run "
                    "'dsv4h ledger migrate' on its host, then merge again)")
            for t in TABLES if _lstat(led / f"{t}.parquet") is not None]
    for table, e in _table_entries(led, PER_ARCHIVE, out):
        if e.name.removesuffix(".parquet") not in refused:
            reason = _archive_file_problem(workspace, table, Path(e.path), merged)
            if reason:
                out.append(Refusal(e.path, reason))
    for table, t in _delta_tables(workspace, led, PER_ARCHIVE, out, limits):
        out += _delta_archive_problems(workspace, table, led / DELTA_DIR / table, t, merged, refused)
    return out


def _over(where: Path | str, what: str, limit: int, flag: str) -> LedgerError:
    return LedgerError(f"{where}: {what}, over the limit of {limit} ({flag}); nothing of it is merged",
                       hint=f"raise {flag} if this machine has the memory and time for it (the merge is idempotent: "
                       "run it again), or compact the table on its host ('dsv4h ledger optimize')")


def _parquet_rows(path: Path) -> int:
    """Rows of a Parquet file by its footer (opened without following a link); 0 when that cannot be
    read (the read that follows refuses it)."""
    try:
        fd = open_regular(path, FOREIGN_TABLE_MAX_BYTES, follow_symlinks=False)
    except (OSError, ValueError):
        return 0
    try:
        with os.fdopen(fd, "rb") as fh:
            return int(pq.ParquetFile(fh).metadata.num_rows)
    except (OSError, ValueError, pa.ArrowException):
        return 0


def _check_delta_size(d: Path, limits: MergeLimits, governance: bool) -> None:
    """Refuse (``LedgerError``) a Delta table of the other host with more log entries or data files
    than ``limits.max_commits``, or (a ``governance`` table) more rows than ``limits.max_rows`` in its
    data files; counted by directory listing and Parquet footers, before anything is copied."""
    log = d / "_delta_log"
    if _real_dir(log):
        with os.scandir(log) as it:
            commits = sum(1 for _ in it)
        if commits > limits.max_commits:
            raise _over(log, f"{commits} log entries (commits)", limits.max_commits, "--max-commits")
    if not _real_dir(d):
        return
    with os.scandir(d) as it:
        data = [Path(e.path) for e in it if e.name.endswith(_DATA_FILE) and not e.name.startswith(".")]
    if len(data) > limits.max_commits:
        raise _over(d, f"{len(data)} data files", limits.max_commits, "--max-commits")
    if governance:
        rows = 0
        for f in data:
            rows += _parquet_rows(f)
            if rows > limits.max_rows:
                raise _over(d, f"at least {rows} rows in its data files (field: rows)", limits.max_rows,
                            "--max-rows")


def _delta_tables(workspace: Path, led: Path, tables: Iterable[str], refused: list[Refusal],
                  limits: MergeLimits) -> Iterator[tuple[str, pa.Table]]:
    """(table, rows) of each of the other host's Delta tables (``ledgers/delta/<table>``), read from a
    checked copy (``harness.store.ledger.foreign_delta``) once its size is within ``limits``
    (``LedgerError`` otherwise); one that cannot be read safely is refused."""
    root = led / DELTA_DIR
    if not _dir_or_refuse(root, refused):
        return
    for table in tables:
        d = root / table
        if _lstat(d) is None:
            continue
        _check_delta_size(d, limits, table in GOVERNANCE_TABLES)
        try:
            yield table, read_foreign_delta(d, ledger_dir(workspace))
        except ValueError as exc:
            refused.append(Refusal(str(d), one_line(exc)[:400]))


def _delta_archive_problems(workspace: Path, table: str, where: Path, t: pa.Table, merged: set[str],
                            refused: set[str]) -> list[Refusal]:
    """What of one Delta table of the other host is not merged: rows of archives not merged (or not
    archive ids), per archive; rows whose number differs from what the merged archive gives."""
    if "archive_id" not in t.column_names:
        return [Refusal(str(where), "no archive_id column: not a ledger table; not merged")]
    out: list[Refusal] = []
    counts = pc.value_counts(pc.cast(t.column("archive_id"), pa.string())).to_pylist()
    for item in counts:
        aid, n = item["values"], int(item["counts"])
        if aid in refused:
            continue
        if aid is None or not is_archive_id(str(aid)):
            out.append(Refusal(str(where), f"{n} row(s) with archive_id {str(aid)[:40]!r}, not an archive id: "
                               "not merged"))
        elif aid not in merged:
            out.append(Refusal(f"{where}#{aid}", f"no verified archive {aid} was merged from the other host's "
                               "archives/: its rows are not merged (ledger rows only ever come from verified "
                               "archives)"))
        elif table in ARCHIVE_TABLES:
            mine = archive_rows(workspace, table, aid)
            want = 0 if mine is None else mine.num_rows
            if n != want:
                out.append(Refusal(f"{where}#{aid}", f"{n} rows where archive {aid} gives {want}: not merged "
                                   "(its rows are re-derived from it)"))
    return out


def _dir_or_refuse(path: Path, refused: list[Refusal]) -> bool:
    """Whether ``path`` is a real directory of the other host to read; a link or other file there is
    refused (never followed), an absent one is simply not there."""
    kind = _real_dir(path)
    if kind is False:
        refused.append(Refusal(str(path), "not a directory (a symlink?); never followed"))
    return bool(kind)


def _table_entries(led: Path, tables: Iterable[str], refused: list[Refusal]) -> Iterator[tuple[str, os.DirEntry[str]]]:
    """(table, entry) of every visible file entry of the other host's table directories, in name
    order; a table directory that is a link (or not a directory) is refused, never followed."""
    for table in tables:
        d = led / table
        if not _dir_or_refuse(d, refused):
            continue
        for e in sorted(os.scandir(d), key=lambda e: e.name):
            if not e.name.startswith((".", "_")):
                yield table, e


def _archive_file_problem(workspace: Path, table: str, path: Path, merged: set[str]) -> str | None:
    m = ARCHIVE_FILE_RE.fullmatch(path.name)
    if m is None:
        return "not named <archive id>.parquet; not read"
    aid = m.group("id")
    if aid not in merged:
        return (f"no verified archive {aid} was merged from the other host's archives/: its rows are not merged "
                "(ledger rows only ever come from verified archives)")
    try:
        t = _read_foreign_table(path, LEDGER_FILE_MAX_BYTES, ["archive_id"])
    except (OSError, ValueError) as exc:
        return f"cannot be read ({one_line(exc)[:200]}); the rows of archive {aid} are re-derived from it"
    claimed = sorted({str(v) for v in t.column("archive_id").to_pylist()} - {aid})
    if claimed:
        return (f"rows claim archive(s) {', '.join(c[:40] for c in claimed[:4])}: not merged (the rows of "
                f"archive {aid} are re-derived from it)")
    if table in ARCHIVE_TABLES:
        # a schema-3 host kept a rate sweep's rows in cells/rounds: count them with their sweep tables
        sweep = SCHEMA4_SPLIT["rate-sweep"].get(table)
        rows = [archive_rows(workspace, t, aid) for t in ((table,) if sweep is None else (table, sweep))]
        want = sum(r.num_rows for r in rows if r is not None)
        if t.num_rows != want:
            return (f"{t.num_rows} rows where archive {aid} gives {want}: not merged (its rows are re-derived "
                    "from it)")
    return None


# --- governance -----------------------------------------------------------------------------------


def _row_key(row: dict[str, Any]) -> str:
    return json.dumps({k: v for k, v in row.items() if k not in ("ledger_schema_version", "append_key")},
                      sort_keys=True, default=str)


def merge_governance(workspace: Path, other: Path,
                     limits: MergeLimits = DEFAULT_LIMITS) -> tuple[dict[str, int], list[Refusal]]:
    """Add the other host's valid governance rows that this workspace lacks (module docstring):
    (rows added per table, refusals). Rows come from its Parquet files (schema 4) and from its Delta
    tables (read from a checked copy), validated column by column (``merge_rows.check_rows``); per
    table one read-check-write, so merging twice, or beside another writer, adds each row once. Call
    after the archives are merged. ``LedgerError`` for a table over ``limits``, before it is read."""
    led = other / "ledgers"
    if not _real_dir(led):
        return {}, []
    refused: list[Refusal] = []
    archives = ingested_ids(workspace)
    found: dict[str, list[pa.Table]] = {}
    counted: dict[str, int] = {}
    for table, e in _table_entries(led, GOVERNANCE_TABLES, []):  # its refusals come with the read below
        counted[table] = counted.get(table, 0) + max(1, _parquet_rows(Path(e.path)))
        if counted[table] > limits.max_rows:
            raise _over(led / table, f"at least {counted[table]} rows in its files (field: rows; a file "
                        "counts at least one)", limits.max_rows, "--max-rows")
    for table, e in _table_entries(led, GOVERNANCE_TABLES, refused):
        try:
            found.setdefault(table, []).append(_governance_file(table, Path(e.path), archives))
        except (OSError, ValueError) as exc:
            refused.append(Refusal(e.path, one_line(exc)[:400]))
    for table, raw in _delta_tables(workspace, led, GOVERNANCE_TABLES, refused, limits):
        if raw.num_rows > limits.max_rows:  # the footers said fewer: the log names files twice
            raise _over(led / DELTA_DIR / table, f"{raw.num_rows} rows (field: rows)", limits.max_rows, "--max-rows")
        # row numbers in append order, not in delta-rs's file order
        rows = raw.sort_by("append_key") if "append_key" in raw.column_names else raw
        good, bad = check_rows(table, rows, archives)
        if good is not None:
            found.setdefault(table, []).append(good)
        refused += [Refusal(f"{led / DELTA_DIR / table}{rows_label(rows)}", why[:400]) for rows, why in bad]
    added: dict[str, int] = {}
    for table, parts in found.items():
        rows = [r for part in parts for r in rows_iso(part)]

        def decide(current: list[dict[str, Any]], rows: list[dict[str, Any]] = rows) -> list[dict[str, Any]]:
            seen = {_row_key(r) for r in current}
            keep = []
            for r in rows:
                if (k := _row_key(r)) not in seen:
                    seen.add(k)
                    keep.append(r)
            return keep

        n = len(append_checked(workspace, table, decide))
        if n:
            added[table] = n
    return added, refused


def _canonical_or_refuse(table: str, raw: pa.Table, archives: set[str]) -> pa.Table:
    try:  # the append key is kept as the other host wrote it: the rows' order there
        t = canonical(table, raw)
    except (pa.ArrowException, ValueError, TypeError) as exc:
        raise ValueError(f"not a {table} table: {one_line(exc)[:200]}") from None
    problems = governance_problems(table, raw, t, archives)
    if problems:
        raise ValueError(f"refused ({len(problems)} problem(s)): " + "; ".join(problems[:6]))
    return t


def _governance_file(table: str, path: Path, archives: set[str]) -> pa.Table:
    """One governance file of the other host's Parquet layout, canonical and validated (its rows keep
    the file's name as ``append_key``); ``ValueError`` naming the reason it is refused."""
    m = GOVERNANCE_FILE_RE.fullmatch(path.name)
    if m is None:
        raise ValueError(f"not a {table} file name (<yyyymmddThhmmssffffff>-<8 hex>.parquet); not read")
    raw = _read_foreign_table(path, GOVERNANCE_MAX_BYTES)
    raw = raw.drop_columns([c for c in ("append_key",) if c in raw.column_names])
    raw = raw.append_column("append_key", pa.array([path.name.removesuffix(".parquet")] * raw.num_rows, pa.string()))
    return _canonical_or_refuse(table, raw, archives)
