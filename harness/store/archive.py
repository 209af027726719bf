"""Result archives: atomic, SHA-256 hashed, versioned, never overwritten (edge module: files).

Layout of ``<workspace>/archives/<archive_id>/``: ``records/part-NNNNNN.parquet`` (raw records, one
part per streamed wave, in order), result tables
(``waves.parquet``, ``rounds.parquet``, ``cells.parquet``), ``results.json``, ``spec.json``,
``service.json``, ``environment.json``, ``corpora.json``, ``events.jsonl`` and ``manifest.json``.
The manifest lists every other file with its SHA-256 and size; the archive id is the first 16 hex
digits of the SHA-256 of the manifest's canonical JSON, so an archive's name certifies its content.

While a run is in progress its files live in ``archives/.partial-<token>/``; raw records are
streamed there one Parquet part per wave as waves finish (so a crash loses at most the wave in
flight). ``finalize`` hashes every file, writes the manifest and renames the directory into place
in one step; an existing target is never replaced.

Archive format history (``ARCHIVE_FORMAT_VERSION``):
  1 - first version (2026-11-29).
  2 - the manifest's ``run`` block is typed and versioned (``harness.store.runblock``); format 1
      archives are read through that module's reader (2026-11-30).
"""

from __future__ import annotations

import json
import os
import secrets
import time
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.parquet as pq

from harness.errors import ArchiveError
from harness.formats import atomic_write, atomic_write_table, dump_json, json_default
from harness.hashing import sha256_file, sha256_json
from harness.records import RECORD_SCHEMA, RequestRecord, records_to_table, table_to_records
from harness.store.runblock import RunBlock, read_run_block

ARCHIVE_FORMAT_VERSION = 2
READABLE_FORMAT_VERSIONS = (1, 2)
MANIFEST = "manifest.json"
RECORDS_DIR = "records"
PARTIAL_PREFIX = ".partial-"


class ArchiveWriter:
    """Collects one run's files in a partial directory, then finalizes them into an archive."""

    def __init__(self, workspace: Path, *, token: str | None = None) -> None:
        self.root = workspace / "archives"
        self.root.mkdir(parents=True, exist_ok=True)
        self.token = token or f"{time.strftime('%Y%m%dT%H%M%S')}-{secrets.token_hex(3)}"
        self.dir = self.root / f"{PARTIAL_PREFIX}{self.token}"
        (self.dir / RECORDS_DIR).mkdir(parents=True, exist_ok=True)
        self._wave_files: list[Path] = sorted((self.dir / RECORDS_DIR).glob("part-*.parquet"))

    @classmethod
    def reopen(cls, partial_dir: Path) -> ArchiveWriter:
        """Continue a partial directory left by a crashed run."""
        name = partial_dir.name
        if not name.startswith(PARTIAL_PREFIX):
            raise ArchiveError(f"{partial_dir} is not a partial archive directory")
        return cls(partial_dir.parent.parent, token=name[len(PARTIAL_PREFIX):])

    def write_json(self, name: str, obj: Any) -> None:
        """Write (or replace, while partial) a JSON file in the archive."""
        atomic_write(self.dir / name, dump_json(obj))

    def write_bytes(self, name: str, data: bytes) -> None:
        """Write (or replace, while partial) a file in the archive."""
        atomic_write(self.dir / name, data)

    def append_event(self, event: dict[str, Any]) -> None:
        """Append one line to ``events.jsonl`` (the run's own log of what happened)."""
        self.append_jsonl("events.jsonl", event)

    def append_jsonl(self, name: str, row: dict[str, Any]) -> None:
        """Append one JSON line to ``name`` (flushed, so a crash keeps every finished line)."""
        with (self.dir / name).open("ab") as fh:
            fh.write(json.dumps(row, sort_keys=True, default=json_default).encode() + b"\n")
            fh.flush()

    def write_wave(self, records: Sequence[RequestRecord]) -> Path:
        """Stream one finished wave's raw records to disk (atomic), in arrival order."""
        path = self.dir / RECORDS_DIR / f"part-{len(self._wave_files):06d}.parquet"
        atomic_write_table(path, records_to_table(records))
        self._wave_files.append(path)
        return path

    def write_table(self, name: str, table: pa.Table) -> None:
        """Write a result table (Parquet) into the archive."""
        atomic_write_table(self.dir / name, table)

    def streamed_records(self) -> list[RequestRecord]:
        """All raw records streamed so far, in order."""
        return table_to_records(read_records_table(self.dir))

    def finalize(self, *, status: str, run: RunBlock) -> Path:
        """Hash every file, write the manifest and move the directory to
        ``archives/<archive_id>``. Returns the final path."""
        if not self._wave_files:
            self.write_wave([])
        files = {}
        for path in sorted(self.dir.rglob("*")):
            if path.is_file() and path.name != MANIFEST and not path.name.startswith("."):
                rel = path.relative_to(self.dir).as_posix()
                files[rel] = {"sha256": sha256_file(path), "bytes": path.stat().st_size}
        manifest = {
            "format": "dsv4h-archive",
            "format_version": ARCHIVE_FORMAT_VERSION,
            "status": status,
            "run": run.to_json(),
            "files": files,
        }
        archive_id = sha256_json(manifest)[:16]
        manifest["archive_id"] = archive_id
        atomic_write(self.dir / MANIFEST, dump_json(manifest))
        target = self.root / archive_id
        if target.exists():
            raise ArchiveError(f"archive {archive_id} already exists at {target}; archives are never "
                               f"overwritten", hint=f"the partial data is kept in {self.dir}")
        os.rename(self.dir, target)
        self.dir = target
        return target


@dataclass(frozen=True)
class Archive:
    """A finalized archive on disk."""

    path: Path
    manifest: dict[str, Any]

    @property
    def archive_id(self) -> str:
        """The id certified by the manifest."""
        return str(self.manifest["archive_id"])

    @property
    def status(self) -> str:
        """``complete``, ``partial`` (interrupted) or ``failed``."""
        return str(self.manifest.get("status", "unknown"))

    @property
    def run(self) -> RunBlock:
        """The typed run block (any supported manifest version)."""
        return read_run_block(self.manifest, str(self.path / MANIFEST))

    def has(self, name: str) -> bool:
        """Whether the archive holds file ``name``."""
        return (self.path / name).is_file()

    def json(self, name: str) -> Any:
        """Load one JSON file of the archive."""
        return json.loads((self.path / name).read_text(encoding="utf-8"))

    def table(self, name: str) -> pa.Table:
        """Load one Parquet table of the archive."""
        return pq.read_table(self.path / name)

    def records_table(self) -> pa.Table:
        """The raw records as one Arrow table (parts concatenated in order)."""
        return read_records_table(self.path)

    def records(self) -> list[RequestRecord]:
        """The raw records."""
        return table_to_records(self.records_table())


def read_records_table(directory: Path) -> pa.Table:
    """Concatenate the record parts under ``directory/records`` in order."""
    parts = sorted((directory / RECORDS_DIR).glob("part-*.parquet"))
    tables = [pq.read_table(p) for p in parts]
    return pa.concat_tables(tables) if tables else RECORD_SCHEMA.empty_table()


def manifest_id(manifest: dict[str, Any]) -> str:
    """Recompute the archive id from a manifest (excluding its own ``archive_id`` key)."""
    body = {k: v for k, v in manifest.items() if k != "archive_id"}
    return sha256_json(body)[:16]


def open_archive(path: Path) -> Archive:
    """Open an archive directory (or ``<workspace>/archives/<id>`` given by id prefix)."""
    if not (path / MANIFEST).is_file():
        raise ArchiveError(f"{path}: not an archive (no {MANIFEST})",
                           hint="give an archive directory, e.g. workspace/archives/<id>")
    try:
        manifest = json.loads((path / MANIFEST).read_text(encoding="utf-8"))
    except ValueError as exc:
        raise ArchiveError(f"{path / MANIFEST}: not valid JSON: {exc}") from exc
    if not isinstance(manifest, dict) or manifest.get("format_version") not in READABLE_FORMAT_VERSIONS:
        version = manifest.get("format_version") if isinstance(manifest, dict) else None
        raise ArchiveError(f"{path / MANIFEST}: archive format {version!r} is not supported "
                           f"(this dsv4h reads {', '.join(map(str, READABLE_FORMAT_VERSIONS))})",
                           hint="upgrade dsv4h, or check that this is a dsv4h archive")
    return Archive(path, manifest)


def find_archive(ref: str, workspace: Path) -> Path:
    """Resolve a path, an archive id, or a unique id prefix under ``<workspace>/archives``."""
    p = Path(ref)
    if (p / MANIFEST).is_file():
        return p
    root = workspace / "archives"
    matches = [d for d in root.glob(f"{ref}*") if (d / MANIFEST).is_file()] if root.is_dir() else []
    if len(matches) == 1:
        return matches[0]
    if len(matches) > 1:
        raise ArchiveError(f"archive id prefix '{ref}' is ambiguous: " + ", ".join(d.name for d in matches),
                           hint="give more digits of the id")
    raise ArchiveError(f"no archive '{ref}' (looked for a directory and under {root})",
                       hint="list archives with 'dsv4h archive list'")


def iter_archives(workspace: Path) -> Iterator[Archive]:
    """Every finalized archive under the workspace, oldest first (by directory mtime)."""
    root = workspace / "archives"
    if not root.is_dir():
        return
    dirs = [d for d in root.iterdir() if d.is_dir() and (d / MANIFEST).is_file()]
    for d in sorted(dirs, key=lambda d: (d.stat().st_mtime, d.name)):
        yield open_archive(d)


def verify_archive(path: Path) -> list[str]:
    """Re-hash every file; return problems (changed, missing, extra files, id mismatch); [] if intact."""
    arch = open_archive(path)
    problems: list[str] = []
    files: dict[str, Any] = arch.manifest.get("files", {})
    for rel, meta in sorted(files.items()):
        f = path / rel
        if not f.is_file():
            problems.append(f"missing: {rel}")
        elif sha256_file(f) != meta["sha256"]:
            problems.append(f"changed: {rel} (sha256 {sha256_file(f)[:16]}... != manifest {meta['sha256'][:16]}...)")
    for f in sorted(path.rglob("*")):
        if f.is_file() and f.name != MANIFEST:
            rel = f.relative_to(path).as_posix()
            if rel not in files:
                problems.append(f"extra: {rel}")
    recomputed = manifest_id(arch.manifest)
    if recomputed != arch.manifest.get("archive_id"):
        problems.append(f"manifest: id {arch.manifest.get('archive_id')} does not match its content ({recomputed})")
    elif path.name != recomputed:
        problems.append(f"directory name {path.name} is not the archive id {recomputed}")
    return problems
