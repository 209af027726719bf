"""Ledgers appended per archive, as Delta Lake tables (edge module: files).

``<workspace>/ledgers/delta/<table>/`` holds one Delta table per ledger table (:mod:`.delta`; columns
from the row models, ``harness.store.ledger.layout``). Archive tables ``runs``, ``cells``, ``rounds``,
``waves``, ``sweep_cells``, ``sweep_rounds``, ``requests``, ``comparisons``, ... (and ``findings``)
hold every archive's rows; governance tables (records, closures, gates, freezes, historical) their
appended rows, ordered by ``append_key``. An archive's result file is named as the table it
goes to (a rate sweep's ``sweep_cells.parquet`` to ``sweep_cells``: archive format 4; an older
archive's files are read under those names, ``harness.store.archive_legacy``), so nothing is
renamed. Every archive row carries the archive id, claim class, protocol class (only ``runs``
the kind as well), backend, ``data_origin`` (``simulated`` for the built-in simulator, owned or
attached, else ``measured``; an import: what its file says of its server, ``simulated``,
``external`` or ``unknown``) and the ledger schema version.

Ingest (:func:`ingest_view`): an archive is verified (every file re-hashed) before any of its rows is
read, once (a run's ``finish`` hands over the view its writer has just hashed,
``harness.store.finished``); its rows, their validity already decided by the evidence rules when the
caller passes them (``mark``), are appended table by table, ``runs`` last, each append carrying the
archive's Delta application transaction (:func:`harness.store.ledger.delta.append_archive`). So:

- ingesting an archive again, from this process or another host sharing the directory, adds nothing;
  two processes ingesting archives into one ledger at once both land, with no lock or journal of ours;
- an archive is in the ledger once its ``runs`` row is (:func:`ingested`): a writer killed part-way
  leaves rows of an archive without its ``runs`` row, which readers here do not show
  (:func:`read_table`) and the next ingest of that archive completes (the tables that have it are
  skipped by their transaction);
- the cost of an ingest depends on the archive and on the table's files since the last
  ``dsv4h ledger optimize`` (opening a table reads its last checkpoint and the log after it), not on
  how many archives the ledger holds (``benchmarks/bench_ledger_delta.py``).

When an archive that resumed another is ingested, the older archive's rows get ``valid = false`` and
``superseded_by`` = the newer archive's id, so filtering on ``valid`` never counts a cell twice, in
whichever order they are ingested: the newer archive's ingest updates the older's rows once its own
``runs`` row is committed, and an older archive ingested later finds its successor in ``runs``
(``resumed_from``) both before writing and after, so two hosts ingesting the pair at once still end
with the older rows superseded.

Older ledgers (the Parquet layout of schemas 2 to 4, :mod:`.parquet_layout`) are read as they are,
in memory, and moved into the Delta tables by the first write or ``dsv4h ledger migrate``
(:func:`ensure_current`): every row kept (counted per table and archive before and after), the old
files moved to ``ledgers/.parquet-backup/``. That one-time move is the only step that takes a lock
file (``ledgers/.migrate.lock``, flock; it runs on the host that owns the old ledger).

Open them in a notebook with ``deltalake.DeltaTable("ledgers/delta/cells").to_pandas()``, polars
``read_delta``, DuckDB ``delta_scan`` or ``harness.ledger.read`` (``ledgers/README.md``); a plain
Parquet read of a table directory fails on its marker file (:mod:`.delta`), ``dsv4h ledger export
--parquet`` writes plain files. Commits are fsynced and a damaged log refused (:mod:`.durable`);
``dsv4h ledger repair`` mends one (:mod:`.repair`).

Ledger schema history (``LEDGER_SCHEMA_VERSION``):
  1 - first version (2026-11-29).
  2 - ``superseded_by`` on every archive row (null, or the id of the archive that resumed this
      one); version-1 tables read with it null (2026-12-01).
  3 - one directory per table, one file per archive (governance: per append); one canonical schema
      per table (int64, float64, ``*_ns`` int64 instants, ``timestamp[ns, UTC]`` wall anchors such as
      ``created_wall``, ``anchor_wall`` and governance times); rates named with units
      (``median_tok_s``, ``http_output_tok_s``, ...); ``extra`` JSON for columns outside the schema;
      ``ledger_schema_version`` on every table, findings included (2026-12-01).
  4 - one row model per table (``harness.measure.rows``; the schemas derived from it, the archives of
      format 3 writing the same names, no rename map); a rate sweep's rows in ``sweep_cells`` and
      ``sweep_rounds``; ``kind`` only on ``runs``; the marker ``ledgers/.schema`` (2026-12-02).
      Added within schema 4: ``matched_sd``, ``acceptance``, ``energy``, ``replay_runs``,
      ``sla_probes`` (2026-12-02).
  5 - Delta Lake tables (``ledgers/delta/<table>/``, :mod:`.delta`) replace the Parquet files, the
      commit journal, the lock and the resume markers; governance rows carry ``append_key`` (their
      order); wall anchors kept to the microsecond in the Delta files (read back as
      ``timestamp[ns, UTC]``). Schemas 2-4 are read in memory and moved on the first write
      (2026-12-02).
      Added within schema 5 (Delta schema evolution, older rows null): ``sla_rounds`` (an SLA
      search's rounds; before, they and its cells were ingested into ``sweep_rounds`` /
      ``sweep_cells``), ``findings.scope``, ``verdict_as_measured`` on ``comparisons`` and
      ``matched_sd`` (whose ``verdict`` is ``withheld`` on an invalid run) (2026-12-03); beside the
      tables, not in them (no reader's change, so no new schema): the plain-read marker file in every
      table directory (``delta.PLAIN_READ_MARKER``) and ``ledgers/.quarantine/`` (``dsv4h ledger
      repair``) (2026-12-04).
  6 - columns named for what they hold (``layout.RENAMED``): ``comparisons`` and ``matched_sd``
      ``ratio_pct`` / ``http_ratio_pct`` (a percent change, (candidate / control - 1) x 100) are
      ``change_pct`` / ``http_change_pct``; ``matched_sd`` ``t_ar_ms`` / ``t_sd_ms`` /
      ``t_sd_implied_ms`` are ``t_ar_s`` / ``t_sd_s`` / ``t_sd_implied_s`` (seconds, like every other
      time). A schema-5 ledger reads under the new names in memory and is rewritten by the first
      write or ``dsv4h ledger migrate`` (one overwrite per such table); rows of an older archive or
      ledger are renamed on the way in (:func:`.layout.canonical`). New table ``cycles`` (a formal
      cell's speculative cycle time, ``harness.measure.results.CycleRow``) (2026-12-04).
      Added within schema 6 (Delta schema evolution, older rows null): ``sla_probes.probe_id`` and
      ``attempt`` (one id per measurement of a probe; ``sla_probes`` rows are matched to findings by
      ``probe_id``, older rows by none) (2026-12-04).
"""

from __future__ import annotations

import fcntl
import os
from collections.abc import Callable, Iterator, Mapping
from contextlib import contextmanager, suppress
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.compute as pc
from deltalake import DeltaTable

from harness.errors import LedgerError
from harness.formats import atomic_write, fsync_dir, parse_wall
from harness.interrupts import critical, fault_point
from harness.kinds import kind_info, table_file
from harness.measure.energy_rows import energy_rows
from harness.measure.rows import RunRow, rows_table
from harness.service.identity.origin import backends_of, run_is_simulated
from harness.store.archive import STATE_DIR, Archive, is_archive_id, resumed_by
from harness.store.finished import FinishedArchive, load_finished, request_rows, run_anchor
from harness.store.ledger import delta
from harness.store.ledger import parquet_layout as old
from harness.store.ledger.layout import (
    ARCHIVE_TABLES,
    GOVERNANCE_TABLES,
    LEDGER_SCHEMA_VERSION,
    PER_ARCHIVE,
    RENAMED,
    SCHEMAS,
    TABLES,
    append_key,
    canonical,
    iso,
    ledger_dir,
    with_common,
)
from harness.store.ledger.migrate import SCHEMA_MARKER, schema_version
from harness.store.runblock import RunBlock

MIGRATE_LOCK = ".migrate.lock"
BACKUP = ".parquet-backup"
# What decides an archive's rows' validity before they are written: its tables -> the same tables with
# ``valid`` decided and a ``findings`` table added (harness.evidence.io.marker builds one from findings).
Mark = Callable[[dict[str, pa.Table]], dict[str, pa.Table]]

__all__ = [
    "ARCHIVE_TABLES", "GOVERNANCE_TABLES", "LEDGER_SCHEMA_VERSION", "PER_ARCHIVE", "TABLES", "Mark",
    "append_checked", "append_rows", "archive_rows", "ensure_current", "ingest_archive", "ingest_view",
    "ingested", "ingested_ids", "is_current", "ledger_dir", "read_table", "replace_archive_rows", "request_rows",
    "rows_iso", "run_anchor", "successor_of",
]


# --- the one-time move of an older ledger ---------------------------------------------------------


def is_current(workspace: Path) -> bool:
    """Whether the workspace's ledger is of the current schema (Delta tables; nothing older left)."""
    directory = ledger_dir(workspace)
    return (directory / SCHEMA_MARKER).is_file() and schema_version(directory) == LEDGER_SCHEMA_VERSION


def _is_delta(workspace: Path) -> bool:
    """Whether the ledger is Delta tables (schema 5, read under schema 6's names, or the current one)."""
    directory = ledger_dir(workspace)
    return (directory / SCHEMA_MARKER).is_file() and schema_version(directory) in (5, LEDGER_SCHEMA_VERSION)


@contextmanager
def _migration_lock(directory: Path) -> Iterator[None]:
    directory.mkdir(parents=True, exist_ok=True)
    try:  # never through a symlink, never truncating: the lock file only ever holds the lock
        fd = os.open(directory / MIGRATE_LOCK, os.O_WRONLY | os.O_CREAT | os.O_NOFOLLOW | os.O_CLOEXEC, 0o644)
    except OSError as exc:
        raise LedgerError(f"{directory / MIGRATE_LOCK}: cannot open the migration lock "
                          f"({exc.strerror or exc}; a symlink?)", hint="move it aside; dsv4h recreates it") from None
    with os.fdopen(fd, "w") as fh:
        fcntl.flock(fh, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(fh, fcntl.LOCK_UN)


def ensure_current(workspace: Path) -> dict[str, int]:
    """Make the workspace's ledger current before a write (every writer calls it): a new ledger gets
    its Delta tables and marker (safe beside another writer doing the same); an older one (Parquet
    layout, schemas 2-4) is moved into them once, under the migration lock (module docstring); a
    schema-5 ledger's tables holding columns schema 6 renamed are rewritten under the new names.
    Returns rows moved per table ({} when there was nothing to move)."""
    if is_current(workspace):
        return {}
    directory = ledger_dir(workspace)
    moved: dict[str, int] = {}
    if old.has_layout(directory):
        with _migration_lock(directory):
            if is_current(workspace):
                return {}
            moved = _move_old(workspace)
    elif (directory / SCHEMA_MARKER).is_file() and schema_version(directory) == 5:
        with _migration_lock(directory):
            if is_current(workspace):
                return {}
            moved = {t: n for t in RENAMED if (n := delta.rename_columns(workspace, t))}
    delta.create_tables(workspace)
    atomic_write(directory / SCHEMA_MARKER, f"{LEDGER_SCHEMA_VERSION}\n".encode())
    fsync_dir(directory)
    return moved


def _groups(t: pa.Table, where: str) -> dict[str, pa.Table]:
    ids = t.column("archive_id").to_pylist()
    bad = sorted({str(a) for a in ids if not is_archive_id(str(a))})
    if bad:
        raise LedgerError(f"{where}: rows with archive_id {bad[0][:80]!r}, not an archive id (16 hex digits); "
                          "nothing was moved", hint="move the file aside (and re-ingest its archive) or restore it")
    col = t.column("archive_id")
    return {a: t.filter(pc.equal(col, a)) for a in dict.fromkeys(ids)}


def _move_old(workspace: Path) -> dict[str, int]:
    """Every row of the older ledger into the Delta tables (migration lock held): archive rows per
    archive with its transaction (a second run skips what landed), governance rows whose append key
    is not there yet; counted before and after, then the old files moved aside."""
    directory = ledger_dir(workspace)
    old.roll_forward(directory)  # a commit an interrupted schema-4 writer decided is kept
    dest = directory / BACKUP / datetime.now(UTC).strftime("%Y%m%dT%H%M%S%f")
    if os.path.lexists(delta.delta_dir(workspace)):
        # Delta tables made beside the old layout (an earlier mirror, or a move cut short): their rows
        # carry no archive transactions, so they are set aside and every row is taken from the old files
        dest.mkdir(parents=True)
        os.replace(delta.delta_dir(workspace), dest / delta.DELTA_DIR)
    sources = {t: src for t in TABLES if (src := old.read_table(directory, t)) is not None and src.num_rows}
    grouped = {t: _groups(src, str(directory / t)) for t, src in sources.items() if t in PER_ARCHIVE}
    delta.create_tables(workspace)  # only once every old table was read and every archive id checked
    moved: dict[str, int] = {}
    for table, src in sources.items():
        where = str(directory / table)
        if table in PER_ARCHIVE:
            groups = grouped[table]
            pairs = zip(src.column("archive_id").to_pylist(), src.column("resumed_from").to_pylist(), strict=True) \
                if table == "runs" else ()
            resumed = {a: r for a, r in pairs if r and is_archive_id(str(r)) and r != a}
            moved[table] = delta.append_archives(workspace, table, groups, resumed)
            got = delta.read(workspace, table)
            have = {} if got is None else _counts(got)
            short = [a for a, part in groups.items() if have.get(a, 0) != part.num_rows]
            if short:
                raise LedgerError(f"{where}: archive {short[0]} has {groups[short[0]].num_rows} rows in the old "
                                  f"ledger, {have.get(short[0], 0)} in its Delta table; the old files were kept",
                                  hint="run 'dsv4h ledger migrate' again")
        else:
            got = delta.read(workspace, table)
            keys = set() if got is None else set(got.column("append_key").to_pylist())
            new = src.filter(pc.invert(pc.is_in(src.column("append_key"), pa.array(sorted(keys), pa.string()))))
            delta.append_rows(workspace, table, new)
            moved[table] = new.num_rows
            after = delta.read(workspace, table)
            if after is None or after.num_rows < src.num_rows:
                raise LedgerError(f"{where}: {src.num_rows} rows in the old ledger, "
                                  f"{0 if after is None else after.num_rows} in its Delta table; the old files "
                                  "were kept", hint="run 'dsv4h ledger migrate' again")
    _set_aside(directory, dest)
    return {t: n for t, n in moved.items() if n}


def _counts(t: pa.Table) -> dict[str, int]:
    vc = pc.value_counts(t.column("archive_id"))
    return {str(v["values"]): int(v["counts"]) for v in vc.to_pylist()}


def _set_aside(directory: Path, dest: Path) -> None:
    """Move the older layout's files into ``dest`` (``.parquet-backup/<UTC time>/``; kept, never read again)."""
    dest.mkdir(parents=True, exist_ok=True)
    names = [*TABLES, *(f"{t}.parquet" for t in TABLES), old.RESUMES, old.STAGING, old.JOURNAL, ".lock",
             ".schema2-backup", ".schema3-backup"]
    for name in names:
        if os.path.lexists(directory / name):
            os.replace(directory / name, dest / name)
    fsync_dir(dest)
    fsync_dir(directory)


# --- reading ----------------------------------------------------------------------------------------


def _check(table: str) -> None:
    if table not in TABLES:
        raise LedgerError(f"no ledger table '{table}'", hint=f"choose one of: {', '.join(TABLES)}")


def read_table(workspace: Path, table: str) -> pa.Table | None:
    """One ledger table (canonical schema; archive tables in order of ``created_wall`` then archive
    id, governance tables in append order), or None when it has no row. Only committed archives'
    rows (those with a ``runs`` row; module docstring). An older ledger not moved yet is read as it
    is, in memory: a read never migrates."""
    _check(table)
    directory = ledger_dir(workspace)
    if not directory.is_dir():
        return None
    if not _is_delta(workspace):
        return old.read_table(directory, table) if old.has_layout(directory) else None
    t = delta.read(workspace, table)
    if t is None or not t.num_rows:
        return None
    if table in PER_ARCHIVE and table != "runs":
        done = pa.array(sorted(delta.archive_ids(workspace, "runs")), pa.string())
        t = t.filter(pc.fill_null(pc.is_in(t.column("archive_id"), value_set=done), False))
    return t if t.num_rows else None


def archive_rows(workspace: Path, table: str, archive_id: str) -> pa.Table | None:
    """One archive's rows of an archive table, or None when it has none."""
    _check(table)
    if not _is_delta(workspace):
        t = read_table(workspace, table)
        if t is None:
            return None
        t = t.filter(pc.fill_null(pc.equal(t.column("archive_id"), archive_id), False))
        return t if t.num_rows else None
    return delta.archive_rows(workspace, table, archive_id)


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


def ingested(workspace: Path, archive_id: str) -> bool:
    """Whether the archive's ``runs`` row is committed (the runs table's transaction for it; when that
    is missing, which it is for an archive older than its retention, the table's ``archive_id`` column)."""
    if not _is_delta(workspace):
        return archive_id in ingested_ids(workspace)
    dt = delta.open_table(workspace, "runs")
    return dt is not None and delta.has_archive(dt, archive_id)


def ingested_ids(workspace: Path) -> set[str]:
    """Archive ids with a committed ``runs`` row."""
    if not _is_delta(workspace):
        t = read_table(workspace, "runs")
        return set() if t is None else {str(a) for a in t.column("archive_id").to_pylist() if a is not None}
    return delta.archive_ids(workspace, "runs")


def successor_of(workspace: Path, archive_id: str) -> str | None:
    """The archive that resumed ``archive_id``: the first ``runs`` row saying so, else (only when a
    resume of it was claimed in this workspace) the finalized archive on disk that says so. Only an
    archive id (16 hex digits) is ever used or returned (``LedgerError`` naming another value)."""
    if not is_archive_id(archive_id):
        raise LedgerError(f"archive id {archive_id[:80]!r} is not 16 hex digits; it is never used as a file name",
                          hint="archive ids come from verified manifests; this value was forged or damaged")
    if _is_delta(workspace):
        return _successor(workspace, archive_id, delta.open_table(workspace, "runs"))
    t = read_table(workspace, "runs")
    found = [] if t is None else [str(r["archive_id"]) for r in t.to_pylist() if r.get("resumed_from") == archive_id]
    found += [v for k, v in old.resume_markers(ledger_dir(workspace)).items() if k == archive_id]
    return found[0] if found else _claimed(workspace, archive_id)


def _successor(workspace: Path, archive_id: str, runs: DeltaTable | None) -> str | None:
    """:func:`successor_of` in a current ledger, from an open ``runs`` table."""
    later = None if runs is None else delta.successor(runs, archive_id)
    return later if later is not None else _claimed(workspace, archive_id)


def _claimed(workspace: Path, archive_id: str) -> str | None:
    """The finalized archive on disk that says it resumed ``archive_id``, only when a resume of it
    was claimed in this workspace."""
    if not (workspace / STATE_DIR / "resumed" / archive_id).is_file():
        return None
    on_disk = resumed_by(workspace, archive_id)
    return on_disk if is_archive_id(on_disk) else None


# --- governance appends ---------------------------------------------------------------------------


def _governance(table: str) -> None:
    if table not in GOVERNANCE_TABLES:
        raise LedgerError(f"'{table}' is not a governance table", hint=f"one of {', '.join(GOVERNANCE_TABLES)}")


def _next_key(existing: pa.Table | None) -> str:
    """An append key after every key of ``existing`` (keeps append order when two appends share a
    microsecond or the clock stepped back)."""
    now = datetime.now(UTC)
    keys = [] if existing is None else [k for k in existing.column("append_key").to_pylist() if k]
    last = max(keys, default="")
    if last and last[:21] >= append_key(now)[:21] and last[:8].isdigit():
        with suppress(ValueError):
            now = datetime.strptime(last[:21], "%Y%m%dT%H%M%S%f").replace(tzinfo=UTC) + timedelta(microseconds=1)
    return append_key(now)


def _governance_table(table: str, rows: list[dict[str, Any]], key: str) -> pa.Table:
    # wall times arrive as ISO text (canonical() parses them); every other column as the schema says
    loose = pa.schema([pa.field(f.name, pa.string()) if pa.types.is_timestamp(f.type) else f
                       for f in SCHEMAS[table]])
    new = pa.Table.from_pylist([{n: r.get(n) for n in loose.names} | {"append_key": r.get("append_key") or key}
                                for r in rows], schema=loose)
    return canonical(table, new)


def append_rows(workspace: Path, table: str, rows: list[dict[str, Any]]) -> None:
    """Append rows to a governance table (one transaction; concurrent appends all land). Missing
    columns are null; a row without ``append_key`` gets one."""
    _governance(table)
    ensure_current(workspace)
    if rows:
        delta.append_rows(workspace, table, _governance_table(table, rows, append_key()))


def append_checked(workspace: Path, table: str,
                   decide: Callable[[list[dict[str, Any]]], list[dict[str, Any]] | None]) -> list[dict[str, Any]]:
    """A read-check-write of a governance table: ``decide`` gets its rows (oldest first, wall times
    as ISO text) and returns the rows to append (or None; it may raise, and nothing is written);
    they are committed only if the table did not change since that read, else read and decided
    again (``harness.store.ledger.delta.append_checked``). Returns the rows appended."""
    _governance(table)
    ensure_current(workspace)
    out: list[dict[str, Any]] = []

    def step(current: pa.Table) -> pa.Table | None:
        out.clear()
        current = delta.ordered(current)
        rows = decide(rows_iso(current))
        if not rows:
            return None
        out.extend(rows)
        return _governance_table(table, rows, _next_key(current))

    delta.append_checked(workspace, table, step)
    return list(out)


# --- ingest ---------------------------------------------------------------------------------------


def data_origin(archive: Archive, run: RunBlock | None = None) -> str:
    """``simulated`` or ``measured`` for a dsv4h run (``harness.service.identity.origin.run_is_simulated`` of
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
    for table in kind_info(view.run.kind).ledger_tables:  # the kind descriptor's tables, one file each
        t = view.files.table(table_file(table))
        if t is not None:
            tables[table] = t
    if view.files.has("energy.json"):  # energy per measurement window (harness.measure.energy_rows)
        rows = energy_rows(view.files.doc("energy.json"))
        if rows:
            tables["energy"] = rows_table("energy", rows)
    try:
        requests = view.requests
    except (pa.ArrowException, KeyError, ValueError, TypeError) as exc:
        raise LedgerError(f"archive {view.archive_id}: its records cannot be summarised: {str(exc)[:200]}",
                          hint="the archive's record parts are not dsv4h raw records") from None
    if requests is not None:
        tables["requests"] = requests
    return tables


def _resumed_from(archive_id: str, resumed_from: str | None) -> str | None:
    """The archive a run resumed, checked to be another archive's id (``LedgerError`` otherwise)."""
    if not resumed_from:
        return None
    for what, value in (("archive id", archive_id), ("resumed_from", resumed_from)):
        if not is_archive_id(value):
            raise LedgerError(f"archive {archive_id[:80]}: {what} {str(value)[:80]!r} is not an archive id "
                              "(16 hex digits); it never names an archive in the ledger",
                              hint="the archive's run block is damaged or forged; it is not ingested")
    if resumed_from == archive_id:
        raise LedgerError(f"archive {archive_id}: resumed_from names the archive itself",
                          hint="the archive's run block is damaged or forged; it is not ingested")
    return resumed_from


def ingest_archive(workspace: Path, archive: Archive | FinishedArchive, mark: Mark | None = None) -> dict[str, int]:
    """Append one archive's rows to every ledger table; returns rows added per table.

    An :class:`Archive` is verified first (``ArchiveError`` naming each changed, missing or extra
    file) and read into a :class:`FinishedArchive`; a view is used as it is (it was verified when it
    was built). An archive already ingested adds nothing (returns an empty dict). ``mark`` decides
    the rows' validity and adds their findings (``harness.evidence.io.marker``) before anything is
    written. One critical section; :func:`ingest_view` is the same without it, for a caller that
    holds one (``finish``).
    """
    view = archive if isinstance(archive, FinishedArchive) else load_finished(archive)
    with critical():
        return ingest_view(workspace, view, mark)


def ingest_view(workspace: Path, view: FinishedArchive, mark: Mark | None = None) -> dict[str, int]:
    """:func:`ingest_archive` of a verified view, without a critical section of its own (module
    docstring: the order of the writes and what a second or concurrent ingest does)."""
    ensure_current(workspace)
    archive, run = view.archive, view.run
    aid = archive.archive_id
    runs = delta.open_table(workspace, "runs")  # one snapshot: is it in, who resumed it (no scans)
    if runs is not None and delta.has_archive(runs, aid, _started(run.created_wall)):
        return {}
    prev = _resumed_from(aid, run.resumed_from)
    successor = _successor(workspace, aid, runs)
    common = {
        "archive_id": aid, "ledger_schema_version": LEDGER_SCHEMA_VERSION, "campaign": run.campaign,
        "claim_class": run.claim_class, "protocol_class": run.protocol_class, "backend": run.backend,
        "data_origin": data_origin(archive, run), "archive_status": archive.status,
        "created_wall": run.created_wall, "identity_hash": run.identity_hash,
        "valid": successor is None, "superseded_by": successor,
    }
    source = _archive_tables(view)
    tables = {name: canonical(name, with_common(t, common)) for name, t in source.items() if t.num_rows}
    n_cells = sum(int(source[t].num_rows) for t in ("cells", "sweep_cells", "sla_probes") if t in source)
    run_row = RunRow(kind=run.kind, plan_id=run.plan_id or "", service=run.service_name, n_cells=n_cells,
                     archive_path=str(archive.path), resumed_from=prev)
    tables["runs"] = canonical("runs", with_common(rows_table("runs", [run_row]), common))
    if mark is not None:
        tables = mark(tables)
    return append_tables(workspace, aid, tables, prev, successor, runs)


def _started(created_wall: str) -> datetime | None:
    """A run block's start as an instant, None when it cannot be read as one (the ledger then
    looks for the archive's rows rather than trust a missing transaction)."""
    try:
        return parse_wall(created_wall)
    except (ValueError, OverflowError):
        return None


def append_tables(workspace: Path, archive_id: str, tables: Mapping[str, pa.Table], resumed_from: str | None,
                  successor: str | None, runs: DeltaTable | None = None) -> dict[str, int]:
    """The ledger half of :func:`ingest_view`: an archive's canonical rows per table (``runs``
    included) appended, ``runs`` last, then the supersession of the archive it resumed and, should a
    successor have been ingested meanwhile (another host), its own. ``successor``: the one found
    before the rows were built; ``runs``: the runs table as opened then (kept up to date here, so it
    is opened once). Rows added per table."""
    added: dict[str, int] = {}
    runs = runs if runs is not None else delta.open_table(workspace, "runs")
    for name in sorted(tables, key=lambda n: n == "runs"):  # runs last: it commits the archive
        prev, dt = (resumed_from, runs) if name == "runs" else (None, None)
        if delta.append_archive(workspace, name, archive_id, tables[name], resumed_from=prev, dt=dt) \
                and name != "findings":
            added[name] = tables[name].num_rows
        fault_point("ledger:appended")
    runs = runs if runs is not None else delta.open_table(workspace, "runs")
    assert runs is not None
    runs.update_incremental()  # after our runs row: what other hosts committed meanwhile
    if resumed_from is not None and delta.has_archive(runs, resumed_from):
        delta.supersede(workspace, resumed_from, archive_id)
    later = delta.successor(runs, archive_id)  # a successor ingested meanwhile, on another host
    if later is not None and later != successor:
        delta.supersede(workspace, archive_id, later)
    return added


def replace_archive_rows(workspace: Path, tables: Mapping[str, pa.Table], archive_id: str) -> None:
    """Replace archive ``archive_id``'s rows of each given table (one transaction per table): the
    evidence rules run again on an ingested archive (``harness.evidence.io.apply_findings``)."""
    ensure_current(workspace)
    for table, t in tables.items():
        delta.replace_archive(workspace, table, archive_id, t)
