"""``dsv4h ledger repair``: a ledger whose Delta log a crash damaged, made whole again (edge module: files).

What a crash or power cut can leave (:mod:`.durable` refuses every table that has it): a zero-length,
truncated or garbled log entry, a missing version, a data file shorter than its commit says. Nothing
is deleted; every file taken out of a table is moved under ``ledgers/.quarantine/<UTC time>/``:

1. **Damaged entries aside.** For each table, the first damaged entry and every entry after it (the
   versions after it were committed on a state that lacked it), the checkpoints of those versions and
   the data files they added move to ``entries/<table>/``. The table is then at its last good version.
2. **Archive tables rebuilt from the archives** (any of ``runs``, ``cells``, ... ``findings`` damaged):
   the archives under ``<workspace>/archives/`` are the source of truth. Each archive table as it
   stood at its last good version is kept (read), then moved whole to ``tables/<table>/``; fresh
   tables are created and every archive is verified (every file against its SHA-256 manifest) and
   ingested by the caller's ``ingest`` (the CLI's: the evidence rules, then the rows, as
   ``dsv4h ledger ingest``). An archive that the old tables held and no verified archive on disk
   re-derives (its directory gone, or it fails verification) keeps its rows of the last good versions.
3. **Governance tables** (records, closures, gates, freezes, historical: appended data no archive
   re-derives) stay at their last good version; the rows of the entries moved aside that still read
   (an intact commit after the damaged one) are appended again, each ``append_key`` at most once.
4. **Every archive ingested, every resume superseded.** With or without damage, every verified archive
   not in the ledger is ingested (a writer killed part-way is completed), and every archive that a
   ``runs`` row says was resumed has its rows superseded (a supersede update lost with its entry is
   made again; the update is idempotent).

The rows a lost entry held are gone from the ledger unless an archive re-derives them; the report says
what was re-derived, carried and salvaged. Run it when no other dsv4h process writes the ledger.
"""

from __future__ import annotations

import json
import os
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path

import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.dataset as ds
import pyarrow.parquet as pq

from harness.errors import DsvError
from harness.formats import fsync_dir
from harness.store.archive import MANIFEST, is_archive_id
from harness.store.ledger import delta, durable
from harness.store.ledger.core import ensure_current, ingested_ids
from harness.store.ledger.layout import ARCHIVE_TABLES, GOVERNANCE_TABLES, PER_ARCHIVE, TABLES, ledger_dir

QUARANTINE = ".quarantine"
# An archive path -> rows it added per table (the CLI passes the evidence rules' ingest); raises a
# DsvError for an archive it refuses (verification failed)
Ingest = Callable[[Path], dict[str, int]]

__all__ = ["QUARANTINE", "Ingest", "Repaired", "damaged_tables", "repair_ledger"]


@dataclass
class Repaired:
    """What ``repair_ledger`` did: damage found (table -> "file: reason"), where it was moved, the
    archive tables rebuilt (table -> rows after), archives re-derived / carried / refused, governance
    rows salvaged, supersessions made again (old id -> new id)."""

    damaged: dict[str, str] = field(default_factory=dict)
    quarantine: Path | None = None
    moved: list[Path] = field(default_factory=list)
    rebuilt: dict[str, int] = field(default_factory=dict)
    rederived: dict[str, dict[str, int]] = field(default_factory=dict)
    carried: list[str] = field(default_factory=list)
    refused: list[str] = field(default_factory=list)
    salvaged: dict[str, int] = field(default_factory=dict)
    superseded: dict[str, str] = field(default_factory=dict)


def damaged_tables(workspace: Path) -> dict[str, durable.Damage]:
    """Each table of the workspace whose Delta log fails the check (:func:`durable.scan`)."""
    out = {}
    for table in TABLES:
        path = delta.table_path(workspace, table)
        if (path / durable.LOG).is_dir() and (bad := durable.scan(path)) is not None:
            out[table] = bad
    return out


def _move(src: Path, dest: Path, moved: list[Path]) -> None:
    dest.parent.mkdir(parents=True, exist_ok=True)
    os.replace(src, dest)
    moved.append(dest)


def _set_aside(path: Path, bad: durable.Damage, dest: Path, moved: list[Path]) -> list[durable.Entry]:
    """Move entries ``bad.version`` onwards of the table at ``path`` (their checkpoints, the data files
    they add) under ``dest``; the entries that still parse are returned (their data files moved too)."""
    log = path / durable.LOG
    if bad.version < 0:  # the checkpoint pointer itself: delta-rs finds the checkpoints without it
        _move(bad.file, dest / durable.LOG / bad.file.name, moved)
        return []
    _, versions = durable.log_versions(path)
    kept: list[durable.Entry] = []
    for v in [v for v in versions if v >= bad.version]:
        f = durable.entry_path(path, v)
        try:
            entry: durable.Entry | None = durable.parse_entry(f, v)
        except (ValueError, OSError):
            entry = None
        _move(f, dest / durable.LOG / f.name, moved)
        for rel, _ in entry.adds if entry is not None else ():
            if (path / rel).is_file():
                _move(path / rel, dest / rel, moved)
        if entry is not None:
            kept.append(entry)
    for f in sorted(log.glob("*.checkpoint*.parquet")):
        if int(f.name[:20]) >= bad.version:
            _move(f, dest / durable.LOG / f.name, moved)
    pointer = log / durable.LAST_CHECKPOINT
    if pointer.is_file() and _pointed(pointer) >= bad.version:  # it names a checkpoint moved aside
        _move(pointer, dest / durable.LOG / pointer.name, moved)
    if bad.file.is_file() and bad.file.parent == path:  # a damaged data file no entry names any more
        _move(bad.file, dest / bad.file.name, moved)
    fsync_dir(log)
    fsync_dir(path)
    return kept


def _pointed(pointer: Path) -> int:
    """The version ``_last_checkpoint`` names (-1 when it cannot be read)."""
    try:
        return int(json.loads(pointer.read_bytes())["version"])
    except (ValueError, KeyError, TypeError, OSError):
        return -1


def _truncate(path: Path, dest: Path, moved: list[Path]) -> list[durable.Entry]:
    """Move every damaged entry of the table at ``path`` aside (:func:`_set_aside`, until it checks);
    a table left with no entry at all (version 0 was damaged) is moved whole to ``dest/emptied/`` and
    made again, empty. The entries moved aside that still parse are returned."""
    entries: list[durable.Entry] = []
    for _ in range(8):  # each pass removes at least one entry or the pointer; damage is never deeper
        bad = durable.scan(path)
        if bad is None:
            break
        entries += _set_aside(path, bad, dest / "entries" / path.name, moved)
    checkpoint, versions = durable.log_versions(path)
    if checkpoint < 0 and not versions:
        _move(path, dest / "emptied" / path.name, moved)
        delta.create_tables(path.parent.parent.parent)
    return entries


def _salvage(workspace: Path, table: str, entries: list[durable.Entry], dest: Path) -> int:
    """Append again the governance rows of intact entries moved aside whose ``append_key`` the table
    lacks; rows appended."""
    parts = []
    for e in entries:
        for rel, _ in e.adds:
            try:
                parts.append(pq.read_table(dest / rel))
            except (OSError, pa.ArrowException):
                continue  # an unreadable data file holds nothing to salvage
    if not parts:
        return 0
    rows = delta._canonical_read(table, pa.concat_tables(parts, promote_options="permissive"))
    have = delta.read(workspace, table)
    keys = set() if have is None else {k for k in have.column("append_key").to_pylist() if k}
    picked, seen = [], set()
    for i, k in enumerate(rows.column("append_key").to_pylist()):
        if k and k not in keys and k not in seen:
            seen.add(k)
            picked.append(i)
    if not picked:
        return 0
    delta.append_rows(workspace, table, rows.take(pa.array(picked, pa.int64())))
    return len(picked)


def _archive_dirs(workspace: Path) -> list[Path]:
    root = workspace / "archives"
    if not root.is_dir():
        return []
    dirs = [d for d in root.iterdir() if d.is_dir() and not d.name.startswith(".") and (d / MANIFEST).is_file()]
    return sorted(dirs, key=lambda d: (d.stat().st_mtime, d.name))


def _rebuild(workspace: Path, dest: Path, out: Repaired) -> dict[str, pa.Table]:
    """Read every archive table at its last good version, move it whole under ``dest``, create fresh
    ones; the rows read are returned (table -> rows)."""
    kept: dict[str, pa.Table] = {}
    for table in PER_ARCHIVE:
        path = delta.table_path(workspace, table)
        if not (path / durable.LOG).is_dir():
            continue
        t = delta.read(workspace, table)
        if t is not None and t.num_rows:
            kept[table] = t
        _move(path, dest / table, out.moved)
    fsync_dir(delta.delta_dir(workspace))
    delta.create_tables(workspace)
    return kept


def _carry(workspace: Path, kept: dict[str, pa.Table], out: Repaired) -> None:
    """Rows of archives the old tables held that no verified archive re-derived, appended as they were."""
    runs = kept.get("runs")
    if runs is None:
        return
    now = ingested_ids(workspace)
    missing = sorted({str(a) for a in runs.column("archive_id").to_pylist() if a and str(a) not in now})
    if not missing:
        return
    resumed = {str(r["archive_id"]): r["resumed_from"] for r in runs.to_pylist() if str(r["archive_id"]) in missing}
    for table in sorted(kept, key=lambda n: n == "runs"):  # runs last: it commits the archive
        t = kept[table]
        col = t.column("archive_id")
        parts = {a: t.filter(pc.fill_null(pc.equal(col, a), False)) for a in missing}
        parts = {a: p for a, p in parts.items() if p.num_rows}
        if parts:
            delta.append_archives(workspace, table, parts, resumed if table == "runs" else None)
    out.carried = missing


def _resupersede(workspace: Path, out: Repaired) -> None:
    """Supersede every resumed archive whose rows some archive table still shows valid or unmarked."""
    runs = delta.read(workspace, "runs")
    if runs is None:
        return
    ids = {str(a) for a in runs.column("archive_id").to_pylist()}
    pairs = {str(r["resumed_from"]): str(r["archive_id"]) for r in runs.to_pylist()
             if r.get("resumed_from") and str(r["resumed_from"]) in ids and is_archive_id(str(r["resumed_from"]))}
    if not pairs:
        return
    olds = pa.array(sorted(pairs), pa.string())
    todo: set[str] = set()
    for table in ARCHIVE_TABLES:
        t = delta.read(workspace, table, filter=ds.field("archive_id").isin(olds))
        for r in [] if t is None else t.select(["archive_id", "valid", "superseded_by"]).to_pylist():
            if r["valid"] is not False or r["superseded_by"] != pairs[str(r["archive_id"])]:
                todo.add(str(r["archive_id"]))
    for old in sorted(todo):
        delta.supersede(workspace, old, pairs[old])
        out.superseded[old] = pairs[old]


def repair_ledger(workspace: Path, ingest: Ingest) -> Repaired:
    """Repair the workspace's ledger (module docstring) and report what was done."""
    out = Repaired()
    ensure_current(workspace)
    found = damaged_tables(workspace)
    dest = ledger_dir(workspace) / QUARANTINE / datetime.now(UTC).strftime("%Y%m%dT%H%M%S%f")
    salvage: dict[str, list[durable.Entry]] = {}
    for table, bad in found.items():
        out.damaged[table] = f"{bad.file}: {bad.reason}"
        salvage[table] = _truncate(delta.table_path(workspace, table), dest, out.moved)
    if found:
        out.quarantine = dest
    rebuild = bool(set(found) & set(PER_ARCHIVE))
    kept = _rebuild(workspace, dest / "tables", out) if rebuild else {}
    for table in GOVERNANCE_TABLES:
        if table in salvage and (n := _salvage(workspace, table, salvage[table], dest / "entries" / table)):
            out.salvaged[table] = n
    for path in _archive_dirs(workspace):
        try:
            added = ingest(path)
        except DsvError as exc:
            out.refused.append(f"{path}: {exc}")
            continue
        if added:
            out.rederived[path.name] = added
    if rebuild:
        _carry(workspace, kept, out)
        out.rebuilt = {t: 0 if (r := delta.read(workspace, t)) is None else r.num_rows for t in PER_ARCHIVE}
    _resupersede(workspace, out)
    return out
