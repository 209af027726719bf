"""Durable Delta commits, and a check of a table's newest log entries (edge module: files).

delta-rs writes a commit's data files, then creates its log entry ``_delta_log/<version>.json``, and
calls no ``fsync``: a power cut after the entry's link can leave it zero-length, and delta-rs reads a
zero-length entry as an empty commit (the commit vanishes, silently). So:

- :func:`sync_since`: after every commit of ours, the new log entries, the data files their ``add``
  actions name, any checkpoint they made, and the directories (``_delta_log/`` and the table's) are
  fsynced (``os.fsync``; a directory through ``os.open(dir, O_RDONLY)``).
- :func:`scan` / :func:`check`: before a table is read or written, the entries after its last
  checkpoint (what delta-rs reads) are checked: each must be non-empty JSON lines whose every line is
  one Delta action and which holds at least one; their versions must follow each other with no gap;
  the data file of every ``add`` not removed later must be there with the size the entry says. The
  first entry that fails is a :class:`Damage`; :func:`check` raises it as one ``LedgerError`` naming
  the file, with a hint naming ``dsv4h ledger repair`` (``harness.store.ledger.repair``).

An entry checked once is remembered by its size, mtime and inode for the rest of the process, so a
table opened many times is parsed once (a data file's size is checked on every scan).
"""

from __future__ import annotations

import json
import os
import re
from dataclasses import dataclass
from pathlib import Path
from urllib.parse import unquote

from harness.errors import LedgerError

LOG = "_delta_log"
LAST_CHECKPOINT = "_last_checkpoint"
_ENTRY = re.compile(r"([0-9]{20})\.json")
_CHECKPOINT = re.compile(r"([0-9]{20})\.checkpoint(?:\.[0-9]+\.[0-9]+)?\.parquet")
ACTIONS = frozenset({"commitInfo", "add", "remove", "metaData", "protocol", "txn", "cdc", "domainMetadata",
                     "checkpointMetadata", "sidecar"})

__all__ = ["ACTIONS", "Damage", "Entry", "check", "entry_path", "first_line", "log_versions", "parse_entry",
           "scan", "sync_checkpoints", "sync_since"]


@dataclass(frozen=True)
class Entry:
    """One parsed log entry: the data files it adds (relative path, size in bytes) and removes."""

    version: int
    adds: tuple[tuple[str, int], ...]
    removes: tuple[str, ...]


@dataclass(frozen=True)
class Damage:
    """The first log entry of a table not to trust: ``version`` and everything after it."""

    table: Path
    file: Path
    version: int
    reason: str

    def error(self) -> LedgerError:
        """This damage as the one error readers and writers raise (exit 6)."""
        ws = self.table.parent.parent.parent
        return LedgerError(f"{self.file}: {self.reason}; the table '{self.table.name}' is not read or written "
                           "until it is repaired",
                           hint=f"run 'dsv4h ledger repair -w {ws}' (moves the entry aside, re-derives the "
                           "archive tables from the verified archives)")


_parsed: dict[str, tuple[tuple[int, int, int], Entry]] = {}


def first_line(exc: BaseException) -> str:
    """An exception's first non-blank line: a deltalake error's message without the native (Rust)
    backtrace delta-rs appends to it."""
    lines = [ln.strip() for ln in str(exc).splitlines() if ln.strip()]
    return lines[0] if lines else type(exc).__name__


def entry_path(table: Path, version: int) -> Path:
    """The log entry of ``version`` of the Delta table at ``table``."""
    return table / LOG / f"{version:020d}.json"


def _relative(path: str) -> str | None:
    """A data file path of an action as a path inside the table; None for one outside it (a URL or an
    absolute path: never written by dsv4h, never synced or checked here)."""
    p = unquote(path)
    if ":" in p.split("/", 1)[0] or p.startswith("/") or ".." in p.split("/"):
        return None
    return p


def parse_entry(file: Path, version: int) -> Entry:
    """The actions of one log entry (``ValueError`` naming why it is not a Delta commit)."""
    st = os.stat(file)
    key = (st.st_size, st.st_mtime_ns, st.st_ino)
    cached = _parsed.get(str(file))
    if cached is not None and cached[0] == key:
        return cached[1]
    raw = file.read_bytes()
    if not raw:
        raise ValueError("zero-length Delta commit entry (a write lost in a crash or power cut)")
    adds: list[tuple[str, int]] = []
    removes: list[str] = []
    n = 0
    for i, line in enumerate(raw.split(b"\n"), 1):
        if not line.strip():
            continue
        try:
            action = json.loads(line)
        except ValueError:
            raise ValueError(f"line {i} is not JSON (a truncated or garbled Delta commit entry)") from None
        if not isinstance(action, dict) or len(action) != 1 or next(iter(action)) not in ACTIONS:
            raise ValueError(f"line {i} is not one Delta action (a garbled Delta commit entry)")
        (kind, body), = action.items()
        n += 1
        if kind == "add" and isinstance(body, dict) and isinstance(body.get("path"), str):
            rel = _relative(body["path"])
            if rel is not None:
                adds.append((rel, int(body.get("size") or 0)))
        elif kind == "remove" and isinstance(body, dict) and isinstance(body.get("path"), str):
            rel = _relative(body["path"])
            if rel is not None:
                removes.append(rel)
    if not n:
        raise ValueError("no Delta action (no commitInfo, no add): an empty commit entry")
    entry = Entry(version, tuple(adds), tuple(removes))
    _parsed[str(file)] = (key, entry)
    return entry


def log_versions(table: Path) -> tuple[int, list[int]]:
    """The table's newest checkpoint version (-1: none) and the versions of its JSON log entries."""
    log = table / LOG
    checkpoint, versions = -1, []
    with os.scandir(log) as it:
        for e in it:
            if m := _ENTRY.fullmatch(e.name):
                versions.append(int(m.group(1)))
            elif m := _CHECKPOINT.fullmatch(e.name):
                checkpoint = max(checkpoint, int(m.group(1)))
    return checkpoint, sorted(versions)


def _last_checkpoint_damage(table: Path) -> Damage | None:
    f = table / LOG / LAST_CHECKPOINT
    try:
        raw = f.read_bytes()
    except FileNotFoundError:
        return None
    try:
        doc = json.loads(raw)
        int(doc["version"])
    except (ValueError, KeyError, TypeError):
        return Damage(table, f, -1, "not a Delta checkpoint pointer (zero-length or garbled JSON)")
    return None


def scan(table: Path) -> Damage | None:
    """The first damaged log entry of the Delta table at ``table`` after its last checkpoint (module
    docstring), or None when every entry checks. A file found missing is looked for once more from a
    new listing: another writer's checkpoint may have let its log cleanup remove old entries, or its
    vacuum a file a newer entry removed, between the listing and the read."""
    bad = _scan(table)
    if bad is not None and not bad.file.exists():
        bad = _scan(table)
    return bad


def _scan(table: Path) -> Damage | None:
    if (bad := _last_checkpoint_damage(table)) is not None:
        return bad
    checkpoint, versions = log_versions(table)
    expected = checkpoint + 1
    entries: list[Entry] = []
    for v in versions:
        if v <= checkpoint:
            continue
        if v != expected:  # versions follow each other: a missing one is a lost entry
            return Damage(table, entry_path(table, expected), expected,
                          f"Delta commit entry missing (versions jump from {expected - 1} to {v})")
        try:
            entries.append(parse_entry(entry_path(table, v), v))
        except (ValueError, OSError) as exc:
            return Damage(table, entry_path(table, v), v, str(exc))
        expected = v + 1
    if checkpoint < 0 and not versions:
        return None
    removed = {p for e in entries for p in e.removes}
    for e in entries:
        for rel, size in e.adds:
            if rel in removed:
                continue
            try:
                got = os.stat(table / rel).st_size
            except FileNotFoundError:
                return Damage(table, table / rel, e.version, f"data file of version {e.version} missing")
            if got != size:
                return Damage(table, table / rel, e.version,
                              f"data file of version {e.version} is {got} bytes, its commit says {size} "
                              "(a write lost in a crash or power cut)")
    return None


def check(table: Path) -> None:
    """:func:`scan`, raising its damage as one ``LedgerError`` (exit 6; hint: ``dsv4h ledger repair``)."""
    if (table / LOG).is_dir() and (bad := scan(table)) is not None:
        raise bad.error()


def _fsync(path: Path) -> None:
    fd = os.open(path, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def sync_since(table: Path, since: int) -> list[Path]:
    """fsync what the commits after version ``since`` wrote: each log entry, the data files its
    ``add`` actions name, a checkpoint of its version (and ``_last_checkpoint``), then ``_delta_log/``
    and the table directory (and any directory a data file is in). Entries another writer committed
    meanwhile are synced too (harmless). Returns the files and directories synced, in order."""
    done: list[Path] = []
    dirs = {table / LOG, table}
    v = since + 1
    while (f := entry_path(table, v)).is_file():
        _fsync(f)
        done.append(f)
        try:
            entry = parse_entry(f, v)
        except ValueError:
            entry = Entry(v, (), ())  # a damaged entry is the next check's to report
        for rel, _ in entry.adds:
            data = table / rel
            if data.is_file():
                _fsync(data)
                done.append(data)
                dirs.add(data.parent)
        v += 1
    done += sync_checkpoints(table, range(since + 1, v))
    for d in sorted(dirs, key=lambda p: len(p.parts), reverse=True):  # innermost first
        _fsync(d)
        done.append(d)
    return done


def sync_checkpoints(table: Path, versions: range) -> list[Path]:
    """fsync the (single-file) checkpoints of ``versions`` and ``_last_checkpoint`` (not the dirs)."""
    log = table / LOG
    done = [f for v in versions if (f := log / f"{v:020d}.checkpoint.parquet").is_file()]
    if done and (log / LAST_CHECKPOINT).is_file():
        done.append(log / LAST_CHECKPOINT)
    for f in done:
        _fsync(f)
    return done
