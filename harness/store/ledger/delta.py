"""The ledger tables as Delta Lake tables (delta-rs, ``deltalake``) (edge module: files).

``<workspace>/ledgers/delta/<table>/`` holds one Delta table per ledger table (``_delta_log/`` and
its Parquet data files), every one with its table's canonical columns
(``harness.store.ledger.layout.SCHEMAS``; Delta has no nanosecond timestamp, so wall-clock anchors are
kept as ``timestamp[us, UTC]`` and read back as the canonical ``ns``). Every write is one Delta
transaction on one table: delta-rs commits version N+1 by creating its log entry only if it is absent,
and on losing that race re-checks the winner's actions for a conflict and retries. So writers on
several processes or hosts sharing the directory need no lock or journal of ours:

- :func:`append_archive`: an archive's rows of one table, appended with the Delta *application
  transaction* ``(app id = archive id, version 1)``. A table that already holds that transaction is
  not written again, and two writers racing to append the same archive conflict (delta-rs refuses
  the second: ``CommitFailedError``), so an archive's rows land at most once per table, whoever
  writes them and however often. The transaction carries its time and expires after
  :data:`TXN_RETENTION_DAYS` (the table property ``delta.setTransactionRetentionDuration``), so the
  snapshot every writer reads holds the last weeks' archives, not every archive ever ingested; an
  archive older than that is looked for in the table's rows instead (:func:`has_archive`).
- :func:`append_checked`: a read-check-write of a governance table (a record, a closure, a freeze):
  the rows are decided on the table as read at version V and committed as version V+1 or not at all
  (``max_commit_retries=0``); a writer that lost the race reads again and decides again.
- :func:`append_rows`: a governance append that checks nothing (a gate evaluation).
- :func:`successor`: the archive that resumed another, read from the ``runs`` table's application
  transaction ``resumed-from:<older id>`` (its version is the newer id), written with the newer
  archive's ``runs`` row: a lookup in the table's snapshot, no scan of its files.
- :func:`compact`: the table's small files rewritten into few (one transaction; no row changes). An
  archive append that leaves :data:`AUTO_COMPACT_FILES` data files runs it, so the files a writer
  must list stay bounded without anyone running ``dsv4h ledger optimize``.
- :func:`replace_archive`: an archive's rows replaced (``overwrite`` with the predicate
  ``archive_id = '<id>'``: one transaction), for the evidence rules run again on an archive.
- :func:`supersede`: an archive resumed by another: its rows of every archive table get
  ``valid = false``, ``superseded_by`` = the newer id (a Delta ``UPDATE`` per table; the rows stay, and
  ``as_of`` an earlier version still shows them valid).

Schema changes go through Delta's schema evolution (every write uses ``schema_mode="merge"``: a
column a newer row model adds is added; older rows read it null). :func:`read` / :func:`dataset`
read a table at its latest version or ``as_of`` an earlier one; :func:`optimize` compacts
(``optimize.compact``), checkpoints and vacuums files unreferenced for longer than ``retention_hours``
(default :data:`RETENTION_HOURS`, Delta's own 7 days, so ``as_of`` reaches back at least that far).
Only an archive id (16 hex digits) is ever put into a predicate.

Durability (:mod:`.durable`): every commit of ours is fsynced once delta-rs returns (its log entry,
the data files it adds, the directories), and every open first checks the table's newest log
entries (a zero-length, garbled or missing entry is one ``LedgerError`` naming it; the hint names
``dsv4h ledger repair``). A deltalake error is reduced to its first line (never a native backtrace).
Every table directory holds :data:`PLAIN_READ_MARKER`, a text file named like a Parquet file, so a
plain Parquet read of the directory (which would also see the files earlier versions replaced, and
count their rows twice) fails, naming it.
"""

from __future__ import annotations

import os
import time
from collections.abc import Callable
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any, TypeVar
from urllib.parse import unquote, urlparse

import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.dataset as ds
from deltalake import CommitProperties, DeltaTable, Transaction, write_deltalake
from deltalake.exceptions import CommitFailedError, DeltaError, TableNotFoundError

from harness.errors import LedgerError
from harness.interrupts import fault_point
from harness.store.archive import is_archive_id
from harness.store.ledger import durable
from harness.store.ledger.layout import (
    ARCHIVE_TABLES,
    GOVERNANCE_TABLES,
    PER_ARCHIVE,
    RENAMED,
    SCHEMAS,
    TABLES,
    ledger_dir,
    renamed,
)

T = TypeVar("T")
DELTA_DIR = "delta"
RETENTION_HOURS = 168  # Delta's default (delta.deletedFileRetentionDuration = 7 days)
RESUMED = "resumed-from:"  # runs: the application transaction naming an archive's successor
# an append that leaves this many data files compacts the table: opening a table reads a list of its
# files, so this bounds what an ingest costs however many archives the ledger holds
AUTO_COMPACT_FILES = 128
# ... into files of at most this size, so a compaction rewrites a bounded amount (an older, full file stays)
AUTO_COMPACT_BYTES = 16 * 2**20
# An archive's application transaction expires this long after its ingest (Delta's
# delta.setTransactionRetentionDuration; delta-rs leaves it out of the snapshot it reads) ...
TXN_RETENTION_DAYS = 30
TXN_PROPERTY = "delta.setTransactionRetentionDuration"
TXN_INTERVAL = f"interval {TXN_RETENTION_DAYS} days"
# ... so its absence proves an archive absent only for one whose run started less than this ago (the
# difference covers clock skew between hosts)
TXN_TRUSTED_DAYS = TXN_RETENTION_DAYS - 7
# In every table directory: a plain Parquet read of the directory fails on it, naming it (a Delta
# directory also keeps the files that later versions replaced: a glob of it counts rows twice)
PLAIN_READ_MARKER = "NOT-A-PARQUET-FILE--read-this-Delta-table-with-deltalake-not-read_parquet.parquet"
PLAIN_READ_TEXT = (b"This directory is a Delta Lake table (dsv4h ledger). Its Parquet files include ones that\n"
                   b"later versions replaced, so a plain Parquet read counts rows twice. Read it with\n"
                   b"deltalake.DeltaTable(dir).to_pandas(), polars.read_delta(dir), DuckDB delta_scan(dir) or\n"
                   b"harness.ledger.read(workspace, table); or run 'dsv4h ledger export --parquet DIR'.\n")
ATTEMPTS = 50  # commits lost to other writers before a write gives up (each loss means another writer progressed)

__all__ = ["AUTO_COMPACT_FILES", "DELTA_DIR", "RETENTION_HOURS", "TXN_RETENTION_DAYS", "append_archive",
           "append_archives", "append_checked", "append_rows", "archive_ids", "archive_rows", "compact",
           "create_tables", "dataset", "delta_dir", "has_archive", "history", "optimize", "read", "rename_columns",
           "replace_archive", "successor", "supersede", "table_path"]


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


def _flat(exc: BaseException) -> str:
    """A deltalake error's first line (its message; never the native backtrace after it)."""
    return durable.first_line(exc)[:300]


def _durably(path: Path, since: int, op: Callable[[], T]) -> T:
    """``op()`` (one or more commits on the table at ``path`` after version ``since``), then every
    commit after ``since`` fsynced (:func:`harness.store.ledger.durable.sync_since`). The fault
    points ``ledger:committed`` (before the fsync) and ``ledger:synced`` are reached only when ``op``
    committed (an update that matched no row commits nothing)."""
    out = op()
    committed = durable.entry_path(path, since + 1).is_file()
    if committed:
        fault_point("ledger:committed")
    durable.sync_since(path, since)
    if committed:
        fault_point("ledger:synced")
    return out


def _path_of(dt: DeltaTable) -> Path:
    """The local directory of an open Delta table (its URI is ``file://`` and percent-encoded)."""
    uri = dt.table_uri
    return Path(unquote(urlparse(uri).path) if uri.startswith("file:") else uri)


def mark_plain_reads(path: Path) -> None:
    """Put :data:`PLAIN_READ_MARKER` into a table directory that lacks it (fsynced)."""
    marker = path / PLAIN_READ_MARKER
    if marker.is_file():
        return
    tmp = path / f".{PLAIN_READ_MARKER}.{os.getpid()}.tmp"
    with open(tmp, "wb") as fh:
        fh.write(PLAIN_READ_TEXT)
        fh.flush()
        os.fsync(fh.fileno())
    os.replace(tmp, marker)


def open_table(workspace: Path, table: str, as_of: int | None = None) -> DeltaTable | None:
    """A table's Delta table (latest, or version ``as_of``), None when it was never created
    (``LedgerError`` when it cannot be opened, or ``as_of`` names no version it keeps)."""
    path = table_path(workspace, table)
    if not (path / "_delta_log").is_dir():
        if as_of is not None:
            raise LedgerError(f"{path}: no Delta table, so no version {as_of}",
                              hint="nothing was written to this table yet")
        return None
    durable.check(path)
    try:
        return DeltaTable(str(path), version=as_of)
    except (DeltaError, TableNotFoundError, OSError, ValueError) as exc:
        raise LedgerError(f"{path}: cannot open the Delta table{'' if as_of is None else f' at version {as_of}'}: "
                          f"{_flat(exc)}",
                          hint="'dsv4h ledger history' lists the versions; a version older than the vacuum "
                          "retention may be gone") from None


def _stored_type(t: pa.DataType) -> pa.DataType:
    return pa.timestamp("us", tz="UTC") if pa.types.is_timestamp(t) else t


def stored_schema(table: str) -> pa.Schema:
    """The Delta table's schema: the canonical one, wall times in microseconds."""
    return pa.schema([pa.field(f.name, _stored_type(f.type)) for f in SCHEMAS[table]])


def _stored(t: pa.Table) -> pa.Table:
    """``t`` as written: no schema metadata (Delta keeps its own), wall times in microseconds."""
    t = t.replace_schema_metadata(None)
    for i, f in enumerate(t.schema):
        if pa.types.is_timestamp(f.type) and f.type.unit != "us":
            t = t.set_column(i, f.name, pc.cast(t.column(i), _stored_type(f.type), safe=False))
    return t


def create_tables(workspace: Path) -> None:
    """Create every ledger table's (empty) Delta table that does not exist yet, so later writers only
    ever append to an existing table (two creating one at once: the loser finds it made)."""
    delta_dir(workspace).mkdir(parents=True, exist_ok=True)
    for table in TABLES:
        path = table_path(workspace, table)
        if (path / "_delta_log").is_dir():
            continue
        config = {TXN_PROPERTY: TXN_INTERVAL} if table in PER_ARCHIVE else None
        try:
            def make(path: Path = path, table: str = table, config: dict[str, str] | None = config) -> None:
                DeltaTable.create(str(path), stored_schema(table), mode="ignore", configuration=config)

            _durably(path, -1, make)
        except (CommitFailedError, DeltaError) as exc:
            if not (path / "_delta_log").is_dir() or not DeltaTable.is_deltatable(str(path)):
                raise LedgerError(f"{path}: cannot create the Delta table: {_flat(exc)}",
                                  hint="check the directory is writable") from None
        mark_plain_reads(path)


def _must_open(workspace: Path, table: str) -> DeltaTable:
    dt = open_table(workspace, table)
    if dt is None:
        create_tables(workspace)
        dt = open_table(workspace, table)
    assert dt is not None
    return dt


def _retrying(workspace: Path, table: str, what: str, step: Callable[[], T]) -> T:
    """``step()`` (one commit attempt) until it commits: a ``CommitFailedError`` means another writer
    took the version (it progressed), so wait a little and try again, :data:`ATTEMPTS` times at most
    (then ``LedgerError``; a lost attempt wrote nothing)."""
    for attempt in range(ATTEMPTS):
        try:
            return step()
        except CommitFailedError:
            time.sleep(min(0.2, 0.005 * (attempt + 1)))
        except (DeltaError, OSError) as exc:
            raise LedgerError(f"{table_path(workspace, table)}: {what}: {_flat(exc)}",
                              hint="nothing of this write was committed; check the disk, then "
                              "'dsv4h ledger repair' if the table is refused") from None
    raise LedgerError(f"{table_path(workspace, table)}: {what}: {ATTEMPTS} commits lost to other writers",
                      hint="run the command again (nothing of it was written)")


def _of_kind(table: str, kinds: tuple[str, ...], what: str) -> None:
    if table not in kinds:
        raise LedgerError(f"'{table}' is not {what}", hint=f"one of {', '.join(kinds)}")


def _write(dt: DeltaTable, t: pa.Table, *, predicate: str | None = None,
           props: CommitProperties | None = None) -> None:
    """One transaction: an append, or (``predicate``) an overwrite of the rows it selects; fsynced."""
    path = _path_of(dt)
    if predicate is None:
        _durably(path, dt.version(), lambda: write_deltalake(dt, _stored(t), mode="append", schema_mode="merge",
                                                             commit_properties=props))
    else:
        _durably(path, dt.version(), lambda: write_deltalake(dt, _stored(t), mode="overwrite", predicate=predicate,
                                                             schema_mode="merge", commit_properties=props))


def has_archive(dt: DeltaTable, archive_id: str, created: datetime | None = None) -> bool:
    """Whether ``dt`` holds archive ``archive_id``'s rows: its application transaction, or else (it
    may have expired, :data:`TXN_RETENTION_DAYS`) a row with its id. ``created``: when the archive's
    run started (aware; its rows' ``created_wall``); for one that started less than :data:`TXN_TRUSTED_DAYS`
    ago the missing transaction is the answer and no row is read."""
    if dt.transaction_version(archive_id) is not None:
        return True
    if not is_archive_id(archive_id) or (created is not None and _recent(created)):
        return False  # (what is not an archive id is in no ledger)
    return int(dt.to_pyarrow_dataset().count_rows(filter=ds.field("archive_id") == archive_id)) > 0


def _recent(created: datetime) -> bool:
    """``created`` (aware) less than :data:`TXN_TRUSTED_DAYS` ago, and not in the future beyond the
    margin (a host whose clock is far off gets the row check)."""
    age = datetime.now(UTC) - created
    return -timedelta(days=TXN_RETENTION_DAYS - TXN_TRUSTED_DAYS) < age < timedelta(days=TXN_TRUSTED_DAYS)


def _created(t: pa.Table) -> datetime | None:
    """An archive's start from its rows (every archive row carries ``created_wall``); None if unknown."""
    if not t.num_rows or "created_wall" not in t.column_names:
        return None
    value = t.column("created_wall")[0].as_py()
    if not isinstance(value, datetime):
        return None
    return value if value.tzinfo else value.replace(tzinfo=UTC)


def _archive_txn(archive_id: str, created: datetime | None) -> Transaction:
    """``(archive id, 1)`` stamped now, or at the archive's start should that be later: a writer whose
    clock runs behind must not stamp a transaction that expires before :func:`has_archive` stops
    trusting its absence."""
    stamp = datetime.now(UTC) if created is None else max(datetime.now(UTC), created)
    return Transaction(archive_id, 1, last_updated=int(stamp.timestamp() * 1000))


def _make_expiring(d: DeltaTable) -> None:
    """Set :data:`TXN_PROPERTY` on a table made before archive transactions expired (one commit,
    once; the transactions it already holds carry no time and are kept); ``d`` is left up to date."""
    if TXN_PROPERTY not in d.metadata().configuration:
        path = _path_of(d)
        _durably(path, d.version(), lambda: d.alter.set_table_properties({TXN_PROPERTY: TXN_INTERVAL}))
        d.update_incremental()


def append_archive(workspace: Path, table: str, archive_id: str, t: pa.Table, *, resumed_from: str | None = None,
                   dt: DeltaTable | None = None) -> bool:
    """Append archive ``archive_id``'s rows of per-archive table ``table`` (every row carries that id)
    with the archive's application transaction; False (nothing written) when the table holds them
    already. Idempotent and safe against concurrent writers (module docstring). ``resumed_from``
    (``runs`` only): the archive it resumed, recorded as the transaction :func:`successor` reads.
    ``dt``: the table already open (brought up to date first; it is left at the new version)."""
    return append_archives(workspace, table, {archive_id: t},
                           {archive_id: resumed_from} if resumed_from else None, dt=dt) > 0


def _resume_txn(old_id: str, new_id: str) -> Transaction:
    """``resumed-from:<old>`` with the newer id as its version (64 bits as a signed long)."""
    return Transaction(RESUMED + _aid(old_id), int(_aid(new_id), 16) - 2**63)


def successor(dt: DeltaTable, archive_id: str) -> str | None:
    """The archive that resumed ``archive_id``, from the ``runs`` table's resume transaction (no scan)."""
    v = dt.transaction_version(RESUMED + _aid(archive_id))
    return None if v is None else f"{int(v) + 2**63:016x}"


def append_archives(workspace: Path, table: str, parts: dict[str, pa.Table],
                    resumed: dict[str, str | None] | None = None, *, dt: DeltaTable | None = None) -> int:
    """:func:`append_archive` of several archives in one transaction (archive id -> its rows); the
    archives the table holds already are left out. ``resumed``: archive id -> the archive it resumed
    (``runs``). Returns the rows written."""
    _of_kind(table, PER_ARCHIVE, "an archive table")
    for archive_id, t in parts.items():
        ids = set(t.column("archive_id").to_pylist()) if t.num_rows else set()
        if ids - {_aid(archive_id)}:
            raise LedgerError(f"rows for archive {archive_id} claim other archives: {sorted(map(str, ids))[:3]}",
                              hint="an archive's rows carry its own id")
    handle = [dt]
    started = {a: _created(t) for a, t in parts.items()}

    def attempt() -> int:
        d = handle[0]
        if d is None:
            d = handle[0] = _must_open(workspace, table)
        else:  # reading only the log entries since its version costs less than opening the table again
            d.update_incremental()
        _make_expiring(d)
        todo = {a: t for a, t in parts.items() if not has_archive(d, a, started[a])}
        if not todo:
            return 0
        txns = [_archive_txn(a, started[a]) for a in todo]
        txns += [_resume_txn(prev, a) for a in todo if (prev := (resumed or {}).get(a))]
        rows = pa.concat_tables([t.replace_schema_metadata(None) for t in todo.values()], promote_options="permissive")
        files = len(d.file_uris())
        _write(d, rows, props=CommitProperties(app_transactions=txns))
        if files + 1 >= AUTO_COMPACT_FILES:
            compact(workspace, table)
        return int(rows.num_rows)

    return _retrying(workspace, table, f"{len(parts)} archive(s) not appended", attempt)


def append_rows(workspace: Path, table: str, t: pa.Table) -> None:
    """Append rows to a governance table (one transaction; concurrent appends all land)."""
    _of_kind(table, GOVERNANCE_TABLES, "a governance table")
    if t.num_rows:
        _write(_must_open(workspace, table), t)


def append_checked(workspace: Path, table: str, decide: Callable[[pa.Table], pa.Table | None]) -> pa.Table | None:
    """Read governance table ``table``, let ``decide`` (its canonical rows -> rows to append, or None
    for nothing; it may raise) choose, and commit those rows only if nobody committed since the read;
    otherwise read and decide again. Returns what was appended."""
    _of_kind(table, GOVERNANCE_TABLES, "a governance table")

    def attempt() -> pa.Table | None:
        dt = _must_open(workspace, table)
        new = decide(_canonical_read(table, dt.to_pyarrow_table()))
        if new is None or not new.num_rows:
            return None
        _write(dt, new, props=CommitProperties(max_commit_retries=0))  # on the version read, or not at all
        return new

    return _retrying(workspace, table, "nothing appended", attempt)


def compact(workspace: Path, table: str) -> bool:
    """Compact one table's small files into files of up to :data:`AUTO_COMPACT_BYTES`
    (``optimize.compact``: one transaction; rows unchanged, nothing vacuumed, every version still
    readable); False when a concurrent compaction won (nothing changed)."""
    dt = open_table(workspace, table)
    if dt is None:
        return False
    try:
        _durably(table_path(workspace, table), dt.version(),
                 lambda: dt.optimize.compact(target_size=AUTO_COMPACT_BYTES))
    except CommitFailedError:
        return False
    return True


def replace_archive(workspace: Path, table: str, archive_id: str, t: pa.Table) -> None:
    """Replace archive ``archive_id``'s rows of per-archive table ``table`` with ``t`` (one transaction)."""
    _of_kind(table, PER_ARCHIVE, "an archive table")
    pred = f"archive_id = '{_aid(archive_id)}'"
    _retrying(workspace, table, f"archive {archive_id} not rewritten",
              lambda: _write(_must_open(workspace, table), t, predicate=pred))


def rename_columns(workspace: Path, table: str) -> int:
    """Rewrite ``table`` with the columns schema 6 renamed under their new names and units
    (``layout.RENAMED``): one overwrite transaction whose schema drops the old columns (the
    archives' application transactions stay in the log; earlier versions keep the old names for
    ``as_of``). Returns the rows rewritten, 0 when the table holds none of the old columns."""
    dt = open_table(workspace, table)
    if dt is None or not set(RENAMED.get(table, {})) & set(dt.schema().to_arrow().names):
        return 0
    t = renamed(table, dt.to_pyarrow_table())
    _durably(table_path(workspace, table), dt.version(),
             lambda: write_deltalake(dt, _stored(t), mode="overwrite", schema_mode="overwrite"))
    return int(t.num_rows)


def supersede(workspace: Path, old_id: str, new_id: str) -> dict[str, int]:
    """Mark every row of archive ``old_id`` in the archive tables ``valid = false``, ``superseded_by =
    new_id`` (one ``UPDATE`` transaction per table holding such rows not yet marked); rows updated per table."""
    old, new = _aid(old_id), _aid(new_id)
    out: dict[str, int] = {}
    pred = (f"archive_id = '{old}' AND (valid OR valid IS NULL OR superseded_by IS NULL "
            f"OR superseded_by <> '{new}')")
    for table in ARCHIVE_TABLES:
        if not (table_path(workspace, table) / "_delta_log").is_dir():
            continue

        def attempt(table: str = table) -> int:
            dt = open_table(workspace, table)
            assert dt is not None
            done = _durably(table_path(workspace, table), dt.version(), lambda: dt.update(
                predicate=pred, new_values={"valid": False, "superseded_by": new}))
            return int(done.get("num_updated_rows", 0))

        n = _retrying(workspace, table, f"archive {old} not superseded", attempt)
        if n:
            out[table] = n
    return out


def _canonical_read(table: str, t: pa.Table) -> pa.Table:
    """A Delta table's rows in the canonical schema of ``table`` (``us`` wall times back to ``ns``;
    a canonical column the table lacks is null; a column schema evolution added is kept at the end; a
    column schema 6 renamed read under its new name, ``layout.renamed``)."""
    schema = SCHEMAS[table]
    t = renamed(table, t)
    cols, fields = [], []
    for f in schema:
        cols.append(pc.cast(t.column(f.name), f.type) if f.name in t.column_names else pa.nulls(t.num_rows, f.type))
        fields.append(f)
    for name in t.column_names:
        if name not in schema.names:
            cols.append(t.column(name))
            fields.append(t.schema.field(name))
    return pa.Table.from_arrays(cols, schema=pa.schema(fields, metadata=schema.metadata))


def ordered(t: pa.Table) -> pa.Table:
    """Archive rows by ``created_wall`` then archive id; governance rows by ``append_key``."""
    if not t.num_rows:
        return t
    if "created_wall" in t.column_names:
        return t.take(pc.sort_indices(t, sort_keys=[("created_wall", "ascending"), ("archive_id", "ascending")]))
    if "append_key" in t.column_names:
        return t.take(pc.sort_indices(pc.fill_null(t.column("append_key"), "")))  # keyless (older) rows first
    return t


def read(workspace: Path, table: str, as_of: int | None = None, *, filter: Any = None) -> pa.Table | None:
    """A ledger table from its Delta table (latest version, or version ``as_of``), in the canonical
    schema and order (:func:`ordered`); ``filter``: a pyarrow dataset expression. None when the table
    does not exist."""
    dt = open_table(workspace, table, as_of)
    if dt is None:
        return None
    raw = dt.to_pyarrow_table() if filter is None else dt.to_pyarrow_dataset().to_table(filter=filter)
    return ordered(_canonical_read(table, raw))


def archive_rows(workspace: Path, table: str, archive_id: str) -> pa.Table | None:
    """One archive's rows of an archive table (None when it has none)."""
    t = read(workspace, table, filter=pc.field("archive_id") == _aid(archive_id))
    return t if t is not None and t.num_rows else None


def archive_ids(workspace: Path, table: str = "runs") -> set[str]:
    """The archive ids ``table`` holds rows of."""
    dt = open_table(workspace, table)
    if dt is None:
        return set()
    col = dt.to_pyarrow_dataset().to_table(columns=["archive_id"]).column("archive_id")
    return {str(a) for a in col.to_pylist() if a is not None}


def dataset(workspace: Path, table: str, as_of: int | None = None) -> ds.Dataset | None:
    """The Arrow dataset of a table's Delta version (what DuckDB and polars read, offline)."""
    dt = open_table(workspace, table, as_of)
    return None if dt is None else dt.to_pyarrow_dataset()


def history(workspace: Path, table: str) -> list[dict[str, Any]]:
    """A table's versions, newest first (version, timestamp ms, operation)."""
    dt = open_table(workspace, table)
    if dt is None:
        return []
    return [{"version": h.get("version"), "timestamp": h.get("timestamp"), "operation": h.get("operation")}
            for h in dt.history()]


def optimize(workspace: Path, retention_hours: int = RETENTION_HOURS) -> dict[str, dict[str, int]]:
    """Compact every Delta table of the workspace, checkpoint it, then vacuum files unreferenced for
    more than ``retention_hours`` (below Delta's 7 days only when asked: versions older than that can
    no longer be read ``as_of``). Per table: files before and after, files removed by vacuum, rows.
    Safe beside writers: a compaction that loses to a concurrent commit is retried by delta-rs or
    fails without changing the table."""
    if retention_hours < 0:
        raise LedgerError(f"retention {retention_hours} h is negative", hint="give hours >= 0 (default 168)")
    out: dict[str, dict[str, int]] = {}
    for table in TABLES:
        dt = open_table(workspace, table)
        if dt is None:
            continue
        path = table_path(workspace, table)
        before = len(dt.file_uris())
        try:
            _durably(path, dt.version(), dt.optimize.compact)
            dt.create_checkpoint()
            durable.sync_checkpoints(path, range(dt.version(), dt.version() + 1))
            before_vacuum = dt.version()
            removed = dt.vacuum(retention_hours=retention_hours, dry_run=False,
                                enforce_retention_duration=retention_hours >= RETENTION_HOURS)
        except DeltaError as exc:
            raise LedgerError(f"{path}: optimize: {_flat(exc)}",
                              hint="a compaction that lost to a concurrent commit changed nothing; run it again"
                              ) from None
        durable.sync_since(path, before_vacuum)  # vacuum's own log entries, and the directories it removed from
        mark_plain_reads(path)
        dt = DeltaTable(str(path))
        out[table] = {"files_before": before, "files_after": len(dt.file_uris()), "vacuumed": len(removed),
                      "rows": int(dt.count()), "version": int(dt.version())}
    return out
