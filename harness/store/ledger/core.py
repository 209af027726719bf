"""Parquet ledgers appended per archive (edge module: files).

``<workspace>/ledgers/<table>/<key>.parquet`` (layout and canonical schemas: ``harness.store.ledger.layout``).
Archive tables ``runs``, ``cells``, ``rounds``, ``waves``, ``sweep_cells``, ``sweep_rounds``, ``requests``,
``comparisons`` (and ``findings``) hold one file per archive, named by its id; governance tables one file
per append; every table's columns come from its row model (``harness.measure.rows``). A rate sweep's
``cells.parquet`` / ``rounds.parquet`` go to ``sweep_cells`` / ``sweep_rounds``. Every archive row
carries the archive id, claim class, protocol class (only ``runs`` the kind as well), backend,
``data_origin`` (``simulated`` for the built-in simulator, owned or attached, else ``measured``; an
import: what its file says of its server, ``simulated``, ``external`` or ``unknown``) and the ledger
schema version. Ingesting an
archive twice adds nothing (its ``runs`` file exists); an archive is verified (every file re-hashed)
before any of its rows is read, once: a run's ``finish`` hands over the view its writer has just hashed
(``harness.store.finished``). A read never migrates a schema-2 or schema-3 ledger (:func:`read_table`
casts it in memory). Ingest never reads or rewrites another archive's files, except the one
archive a resumed run supersedes, so its cost does not grow with the ledger.

Writes happen under a lock file and are all-or-nothing per archive: every file is first written to
``ledgers/.staging/``, then a commit journal (``.commit.json``) lists the renames, then they are done;
whoever takes the lock next finishes the renames of a journal left by an interrupted commit and removes
staged files that never reached one. A journal is checked before any rename: each entry must move
``.staging/<staged name>`` to ``<table>/<archive id or append key>.parquet`` or ``.resumes/<archive id>``
of this ledger directory (anything else, ``..`` or an absolute path included, is a ``LedgerError`` and
nothing is renamed), and the staging area must be a real directory, not a symlink, before anything in it
is deleted. Only an archive id (16 hex digits) ever becomes a marker's name or is read from a marker.

When an archive that resumed another is ingested, the older archive's rows get ``valid = false`` and
``superseded_by`` = the newer archive's id (the newer one carries the old records), so filtering on
``valid`` never counts a cell twice, in whichever order they are ingested: the newer archive leaves a
marker ``ledgers/.resumes/<older id>`` naming itself, which an older archive ingested later finds.

Open them in a notebook with ``pandas.read_parquet("ledgers/cells/")`` or ``harness.ledger.read``.

Ledger schema history (``LEDGER_SCHEMA_VERSION``):
  1 - first version (2026-11-29).
  2 - ``superseded_by`` on every archive row (null, or the id of the archive that resumed this
      one); version-1 tables read with it null (2026-12-01).
  3 - one directory per table, one file per archive (governance: per append); one canonical schema
      per table (int64, float64, ``*_ns`` int64 instants, ``timestamp[ns, UTC]`` wall anchors such as
      ``created_wall``, ``anchor_wall`` and governance times); rates named with units
      (``median_tok_s``, ``http_output_tok_s``, ...); ``extra`` JSON for columns outside the schema;
      ``ledger_schema_version`` on every table, findings included. Schema-2 single-file tables are
      migrated once (``dsv4h ledger migrate``, or the first write), the old files kept in
      ``ledgers/.schema2-backup/`` (2026-12-01).
  4 - one row model per table (``harness.measure.rows``; the schemas derived from it, the archives of
      format 3 writing the same names, no rename map); a rate sweep's rows in ``sweep_cells`` and
      ``sweep_rounds``; ``kind`` only on ``runs``; the marker ``ledgers/.schema``. A schema-3 directory
      is read as schema 4 in memory and migrated by ``dsv4h ledger migrate`` or the first write, every
      row kept, old files in ``ledgers/.schema3-backup/`` (``harness.store.ledger.migrate``) (2026-12-02).
      Added within schema 4 (new tables, no existing file changes): ``matched_sd`` (matched AR/SD runs)
      and ``acceptance`` (speculative counts per measured wave) (2026-12-02).
      Added within schema 4: ``energy`` (energy per measurement window from ``energy.json``: a measured
      wave's resident window or a sweep round's window; J, W, output tokens per J, method, source)
      (2026-12-02).
      Added within schema 4: ``replay_runs`` (one row per trace replay, from ``replay.parquet``)
      (2026-12-02).
      Added within schema 4: ``sla_probes`` (one row per probe of an SLA search, ``probes.parquet``;
      the probes' cells and rounds go to ``sweep_cells`` / ``sweep_rounds`` with protocol class
      ``sla-search``) (2026-12-02).
"""

from __future__ import annotations

import fcntl
import json
import os
import re
import secrets
import stat
from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.dataset as ds
import pyarrow.parquet as pq

from harness.errors import LedgerError
from harness.formats import atomic_write, atomic_write_table, dump_json, fsync_dir, read_regular
from harness.interrupts import critical, fault_point
from harness.measure.energy_rows import energy_rows
from harness.service.origin import backends_of, run_is_simulated
from harness.store.archive import STATE_DIR, Archive, is_archive_id, resumed_by
from harness.store.finished import FinishedArchive, load_finished, request_rows, run_anchor
from harness.store.ledger.delta import DELTA_DIR, mirror
from harness.store.ledger.layout import (
    ARCHIVE_FILE_TABLES,
    ARCHIVE_TABLES,
    GOVERNANCE_TABLES,
    LEDGER_SCHEMA_VERSION,
    PER_ARCHIVE,
    SCHEMAS,
    TABLES,
    append_key,
    archive_file,
    canonical,
    file_metadata,
    iso,
    ledger_dir,
    table_dir,
    table_files,
    with_common,
)
from harness.store.ledger.migrate import (
    mark_current,
    migrate_directory,
    needs_migration,
    read_legacy,
    read_schema3,
    schema_version,
)
from harness.store.runblock import RunBlock

JOURNAL = ".commit.json"
STAGING = ".staging"
RESUMES = ".resumes"
_held = [0]

__all__ = [
    "ARCHIVE_TABLES", "GOVERNANCE_TABLES", "JOURNAL", "LEDGER_SCHEMA_VERSION", "PER_ARCHIVE", "TABLES",
    "append_rows", "archive_rows", "commit_files", "ingest_archive", "ingest_view", "ingested", "ingested_ids",
    "ledger_dir", "locked", "read_table", "recover", "request_rows", "rows_iso", "run_anchor", "successor_of",
    "supersede",
]


@contextmanager
def locked(directory: Path) -> Iterator[None]:
    """Hold the ledger directory's exclusive lock (``.lock``, flock) for the duration, to write; first
    finish any commit an interrupted writer left, then migrate schema-2/3 tables (module docstring:
    migration happens on the first write, never on a read)."""
    with _lock(directory, migrate=True):
        yield


@contextmanager
def _lock(directory: Path, *, migrate: bool) -> Iterator[None]:
    directory.mkdir(parents=True, exist_ok=True)
    try:  # never through a symlink, never truncating: the lock file only ever holds the lock
        fd = os.open(directory / ".lock", os.O_WRONLY | os.O_CREAT | os.O_NOFOLLOW | os.O_CLOEXEC, 0o644)
    except OSError as exc:
        raise LedgerError(f"{directory / '.lock'}: cannot open the ledger lock ({exc.strerror or exc}; a symlink?)",
                          hint="move it aside; dsv4h recreates it") from None
    with os.fdopen(fd, "w") as fh:
        fcntl.flock(fh, fcntl.LOCK_EX)
        _held[0] += 1
        try:
            _roll_forward(directory)
            if migrate:
                if needs_migration(directory):
                    migrate_directory(directory)
                mark_current(directory)
            yield
        finally:
            _held[0] -= 1
            fcntl.flock(fh, fcntl.LOCK_UN)


_STAGED_RE = re.compile(r"[0-9a-f]{8}-[0-9]{1,9}(\.parquet)?")
_FINAL_RE = re.compile(r"(?P<table>[a-z_]+)/(?P<stem>[0-9a-f]{16}|[0-9]{8}T[0-9]{12}-(?:[0-9a-f]{8}|schema2))"
                       r"\.parquet|\.resumes/[0-9a-f]{16}")


def _final_ok(rel: str) -> bool:
    """Whether ``rel`` names a file a commit may write (relative to the ledger directory)."""
    m = _FINAL_RE.fullmatch(rel)
    return m is not None and (m.group("table") is None or m.group("table") in TABLES)


def _journal_renames(journal: Path) -> list[tuple[str, str]]:
    """The renames of a commit journal, each checked to stay inside the ledger directory: from
    ``.staging/<staged name>`` to ``<table>/<archive id or append key>.parquet`` or
    ``.resumes/<archive id>``; a journal with any other entry is a ``LedgerError`` (nothing renamed)."""
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


def _roll_forward(directory: Path) -> None:
    """Finish the renames of a commit journal (lock held); drop staged files no journal names. Every
    rename is checked first (:func:`_journal_renames`), and the staging directory must be a real
    directory (not a symlink) before anything is renamed out of it or deleted in it."""
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


def commit_files(workspace: Path, files: Mapping[str, pa.Table | bytes]) -> None:
    """Write several ledger files (paths relative to the ledger directory; a table or raw bytes) as
    one step (call with the lock held): all or none of them change, even if the process is killed
    half-way (the next lock holder completes the commit)."""
    if not files:
        return
    bad = [rel for rel in files if not _final_ok(rel)]
    if bad:  # the journal must only ever name files its roll-forward accepts
        raise LedgerError(f"not a ledger file name: {bad[0][:200]!r}; nothing was written",
                          hint="a ledger file is <table>/<archive id or append key>.parquet or .resumes/<archive id>")
    directory = ledger_dir(workspace)
    staging = directory / STAGING
    staging.mkdir(parents=True, exist_ok=True)
    tag = secrets.token_hex(4)
    renames: list[list[str]] = []
    try:
        for n, (rel, content) in enumerate(files.items()):
            tmp = staging / f"{tag}-{n}{Path(rel).suffix}"
            renames.append([f"{STAGING}/{tmp.name}", rel])
            if isinstance(content, bytes):
                atomic_write(tmp, content)
            else:
                atomic_write_table(tmp, content.replace_schema_metadata(file_metadata(rel.split("/", 1)[0])))
            fault_point("ledger:staged")
        atomic_write(directory / JOURNAL, dump_json({"renames": renames}))
    except BaseException:
        for tmp_name, _ in renames:
            (directory / tmp_name).unlink(missing_ok=True)
        raise
    fault_point("ledger:journal-written")
    _roll_forward(directory)
    if (directory / DELTA_DIR).is_dir():  # the workspace keeps Delta tables in step (harness.store.ledger.delta)
        mirror(workspace, dict(files))


def recover(workspace: Path) -> None:
    """Finish a commit an interrupted writer left (readers call this before reading: the commit was
    decided when its journal was written). A schema-2 ledger is left as it is: readers cast its
    tables in memory (:func:`read_table`); migration happens on the first write."""
    directory = ledger_dir(workspace)
    if _held[0] or not directory.is_dir():
        return
    if os.path.lexists(directory / JOURNAL):
        with _lock(directory, migrate=False):
            pass


def _read_files(paths: list[Path], table: str) -> pa.Table:
    try:
        if len(paths) == 1:
            return pq.read_table(paths[0], schema=SCHEMAS[table])
        return ds.dataset([str(p) for p in paths], schema=SCHEMAS[table], format="parquet").to_table()
    except (OSError, pa.ArrowInvalid) as exc:
        raise LedgerError(f"{table_dir(paths[0].parent.parent.parent, table)}: cannot read: {exc}",
                          hint="restore the ledgers from a copy, or re-ingest archives") from exc


def _check(table: str) -> None:
    if table not in TABLES:
        raise LedgerError(f"no ledger table '{table}'", hint=f"choose one of: {', '.join(TABLES)}")


def read_table(workspace: Path, table: str) -> pa.Table | None:
    """One ledger table (every file, canonical schema), or None when it has no file yet. Archive
    tables in order of ``created_wall`` then archive id; governance tables in append order."""
    _check(table)
    recover(workspace)
    directory = ledger_dir(workspace)
    legacy = read_legacy(directory, table)  # a schema-2 file, cast in memory (never migrated here)
    if table in PER_ARCHIVE and schema_version(directory) < LEDGER_SCHEMA_VERSION:
        old = read_schema3(directory, table)  # a schema-3 directory, cast in memory (never migrated here)
        parts = [t for t in (legacy, old) if t is not None]
        if not parts:
            return None
        return _ordered(parts[0] if len(parts) == 1 else pa.concat_tables(parts))
    paths = table_files(table_dir(workspace, table))
    if not paths and legacy is None:
        return None
    if table in GOVERNANCE_TABLES:
        return pa.concat_tables(([legacy] if legacy is not None else []) + [_read_files([p], table) for p in paths])
    parts = ([legacy] if legacy is not None else []) + ([_read_files(paths, table)] if paths else [])
    return _ordered(parts[0] if len(parts) == 1 else pa.concat_tables(parts))


def _ordered(t: pa.Table) -> pa.Table:
    if t.num_rows and "created_wall" in t.column_names:
        order = pc.sort_indices(t, sort_keys=[("created_wall", "ascending"), ("archive_id", "ascending")])
        t = t.take(order)
    return t


def archive_rows(workspace: Path, table: str, archive_id: str) -> pa.Table | None:
    """One archive's rows of an archive table (its one file), or None when it has none."""
    _check(table)
    path = archive_file(workspace, table, archive_id)
    return _read_files([path], table) if path.is_file() else None


def rows_iso(table: pa.Table | None) -> list[dict[str, Any]]:
    """Rows as dicts, wall-clock timestamps as ISO 8601 text (what the governance rules compare)."""
    if table is None:
        return []
    rows: list[dict[str, Any]] = table.to_pylist()
    walls = [f.name for f in table.schema if pa.types.is_timestamp(f.type)]
    for r in rows:
        for k in walls:
            r[k] = iso(r[k])
    return rows


def append_rows(workspace: Path, table: str, rows: list[dict[str, Any]]) -> Path:
    """Append rows to a governance table as one new file (call with the lock held); never rewrites
    an older file. Missing columns are null; returns the new file."""
    if table not in GOVERNANCE_TABLES:
        raise LedgerError(f"'{table}' is not a governance table", hint=f"one of {', '.join(GOVERNANCE_TABLES)}")
    directory = table_dir(workspace, table)
    now = datetime.now(UTC)
    last = table_files(directory)
    if last and last[-1].name[:21] >= append_key(now)[:21]:
        # keep append order even when two appends share a microsecond or the clock stepped back
        prev = datetime.strptime(last[-1].name[:21], "%Y%m%dT%H%M%S%f").replace(tzinfo=UTC)
        now = prev + timedelta(microseconds=1)
    # wall times arrive as ISO text (canonical() parses them); every other column as the schema says
    loose = pa.schema([pa.field(f.name, pa.string()) if pa.types.is_timestamp(f.type) else f
                       for f in SCHEMAS[table]])
    new = pa.Table.from_pylist([{n: r.get(n) for n in loose.names} for r in rows], schema=loose)
    rel = f"{table}/{append_key(now)}.parquet"
    commit_files(workspace, {rel: canonical(table, new)})
    return ledger_dir(workspace) / rel


def ingested(workspace: Path, archive_id: str) -> bool:
    """Whether the archive's ``runs`` file exists (one stat, whatever the ledger's size)."""
    return archive_file(workspace, "runs", archive_id).is_file()


def ingested_ids(workspace: Path) -> set[str]:
    """Archive ids present in the ``runs`` table (its file names, and the ids of a schema-2 ``runs``
    file not migrated yet)."""
    recover(workspace)
    ids = {p.stem for p in table_files(table_dir(workspace, "runs"))}
    legacy = read_legacy(ledger_dir(workspace), "runs")
    if legacy is not None:
        ids |= {str(a) for a in legacy.column("archive_id").to_pylist() if a is not None}
    return ids


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


def superseded_files(workspace: Path, old_id: str, new_id: str) -> dict[str, pa.Table]:
    """The rewritten files of archive ``old_id`` once ``new_id`` supersedes it (only its own files)."""
    out: dict[str, pa.Table] = {}
    for name in ARCHIVE_TABLES:
        t = archive_rows(workspace, name, old_id)
        if t is not None:
            new = supersede(t, old_id, new_id)
            if not new.equals(t):
                out[f"{name}/{old_id}.parquet"] = new
    return out


def successor_of(workspace: Path, archive_id: str) -> str | None:
    """The archive that resumed ``archive_id``: its ledger marker, else (only when a resume of it was
    claimed in this workspace) the finalized archive on disk that says so. Only an archive id (16
    hex digits) is ever used as the marker's name or taken from its content: another value is a
    ``LedgerError`` naming it."""
    if not is_archive_id(archive_id):
        raise LedgerError(f"archive id {archive_id[:80]!r} is not 16 hex digits; it is never used as a file name",
                          hint="archive ids come from verified manifests; this value was forged or damaged")
    marker = ledger_dir(workspace) / RESUMES / archive_id
    if os.path.lexists(marker):
        try:
            text = read_regular(marker, 64, follow_symlinks=False).decode("ascii").strip()
        except (OSError, ValueError) as exc:
            raise LedgerError(f"{marker}: unreadable resume marker: {exc}",
                              hint="move it aside and re-ingest the archive that resumed this one") from None
        if not text:
            return None
        if not is_archive_id(text):
            raise LedgerError(f"{marker}: resume marker names {text[:80]!r}, not an archive id",
                              hint="move it aside and re-ingest the archive that resumed this one")
        return text
    if not (workspace / STATE_DIR / "resumed" / archive_id).is_file():
        return None
    found = resumed_by(workspace, archive_id)
    return found if is_archive_id(found) else None


def resume_files(workspace: Path, archive_id: str, resumed_from: str | None) -> dict[str, pa.Table | bytes]:
    """What ingesting (or merging) archive ``archive_id`` that resumed ``resumed_from`` writes beside its
    own files: the marker, and the older archive's superseded files when it is in the ledger. Both
    ids must be archive ids (16 hex digits), else ``LedgerError``: a stored value never becomes a path."""
    if not resumed_from:
        return {}
    for what, value in (("archive id", archive_id), ("resumed_from", resumed_from)):
        if not is_archive_id(value):
            raise LedgerError(f"archive {archive_id[:80]}: {what} {str(value)[:80]!r} is not an archive id "
                              "(16 hex digits); it is never used as a file name",
                              hint="the archive's run block is damaged or forged; it is not ingested")
    if resumed_from == archive_id:
        raise LedgerError(f"archive {archive_id}: resumed_from names the archive itself",
                          hint="the archive's run block is damaged or forged; it is not ingested")
    out: dict[str, pa.Table | bytes] = {f"{RESUMES}/{resumed_from}": archive_id.encode()}
    out.update(superseded_files(workspace, resumed_from, archive_id))
    return out


def data_origin(archive: Archive, run: RunBlock | None = None) -> str:
    """``simulated`` or ``measured`` for a dsv4h run (``harness.service.origin.run_is_simulated`` of
    its run block and services); an import's own ``external.json`` ``data_origin`` (``simulated``,
    ``external`` or ``unknown``: what its file says of its server, harness.store.peers), ``unknown``
    for an import made before that was recorded or recovered without it (claim class ``external``).
    ``run``: the archive's run block when the caller has parsed it already."""
    if archive.has("external.json"):
        return str(archive.json("external.json").get("data_origin") or "unknown")
    run = run or archive.run
    if run.claim_class == "external":
        return "unknown"
    services = archive.json("service.json").get("services", []) if archive.has("service.json") else []
    return "simulated" if run_is_simulated(backends_of(run.backend), run.labels, services) else "measured"


def _archive_tables(view: FinishedArchive) -> dict[str, pa.Table]:
    tables: dict[str, pa.Table] = {}
    own = ARCHIVE_FILE_TABLES.get(view.run.protocol_class, {})
    for name in ("cells", "rounds", "waves"):
        if view.archive.has(f"{name}.parquet"):
            tables[own.get(name, name)] = view.archive.table(f"{name}.parquet")
    if view.archive.has("comparison.parquet"):
        tables["comparisons"] = view.archive.table("comparison.parquet")
    for name, table in (("matched.parquet", "matched_sd"), ("acceptance.parquet", "acceptance"),
                        ("replay.parquet", "replay_runs"), ("probes.parquet", "sla_probes")):
        if view.archive.has(name):
            tables[table] = view.archive.table(name)
    if view.archive.has("energy.json"):  # energy per measurement window (harness.measure.energy_rows)
        rows = energy_rows(view.archive.json("energy.json"))
        if rows:
            tables["energy"] = pa.Table.from_pylist(rows)
    try:
        requests = view.requests
    except (pa.ArrowException, KeyError, ValueError, TypeError) as exc:
        raise LedgerError(f"archive {view.archive_id}: its records cannot be summarised: {str(exc)[:200]}",
                          hint="the archive's record parts are not dsv4h raw records") from None
    if requests is not None:
        tables["requests"] = requests
    return tables


def ingest_archive(workspace: Path, archive: Archive | FinishedArchive) -> dict[str, int]:
    """Append one archive's rows to every ledger table, all or nothing; returns rows added per table.

    An :class:`Archive` is verified first (``ArchiveError`` naming each changed, missing or extra
    file) and read into a :class:`FinishedArchive`; a view is used as it is (it was verified when it
    was built). An archive already in the ``runs`` table adds nothing (returns an empty dict).
    Ingesting an archive that resumed another supersedes the other's rows (module docstring). Reads
    and writes only this archive's files (and the superseded archive's). One critical section;
    :func:`ingest_view` is the same without it, for a caller that holds one (``finish``).
    """
    view = archive if isinstance(archive, FinishedArchive) else load_finished(archive)
    with critical():
        return ingest_view(workspace, view)


def ingest_view(workspace: Path, view: FinishedArchive) -> dict[str, int]:
    """:func:`ingest_archive` of a verified view, without a critical section of its own."""
    archive = view.archive
    run = view.run
    aid = archive.archive_id
    tables = _archive_tables(view)
    with locked(ledger_dir(workspace)):
        if ingested(workspace, aid):
            return {}
        successor = successor_of(workspace, aid)
        common = {
            "archive_id": aid,
            "ledger_schema_version": LEDGER_SCHEMA_VERSION,
            "campaign": run.campaign,
            "claim_class": run.claim_class,
            "protocol_class": run.protocol_class,
            "backend": run.backend,
            "data_origin": data_origin(archive, run),
            "archive_status": archive.status,
            "created_wall": run.created_wall,
            "identity_hash": run.identity_hash,
            "valid": successor is None,
            "superseded_by": successor,
        }
        added: dict[str, int] = {}
        files: dict[str, pa.Table | bytes] = {}
        for name, t in tables.items():
            if t.num_rows == 0:
                continue
            files[f"{name}/{aid}.parquet"] = canonical(name, with_common(t, common))
            added[name] = t.num_rows
        run_row = {**common, "kind": run.kind, "plan_id": run.plan_id or "", "service": run.service_name,
                   "n_cells": sum(int(tables[t].num_rows) for t in ("cells", "sweep_cells") if t in tables),
                   "archive_path": str(archive.path), "resumed_from": run.resumed_from}
        files[f"runs/{aid}.parquet"] = canonical("runs", with_common(pa.table({"plan_id": [run_row["plan_id"]]}),
                                                                     run_row))
        added["runs"] = 1
        files.update(resume_files(workspace, aid, run.resumed_from))
        commit_files(workspace, files)
        return added
