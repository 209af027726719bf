"""Result archives: atomic, SHA-256 hashed, versioned, never overwritten (edge module: files).

Layout of ``<workspace>/archives/<archive_id>/``: ``records/part-NNNNNN.parquet`` (raw records, one
part per streamed wave, in order), result tables, each named as the ledger table it becomes
(``waves.parquet``, ``rounds.parquet``, ``cells.parquet``, a sweep's ``sweep_cells.parquet`` ...;
``harness.kinds``), ``results.json``, ``spec.json``,
``service.json``, ``environment.json``, ``corpora.json``, ``events.jsonl`` and ``manifest.json``.
The manifest lists every other file with its SHA-256 and size; the archive id is the first 16 hex
digits of the SHA-256 of the manifest's canonical JSON, so an archive's name certifies its content.

While a run is in progress its files live in ``archives/.partial-<token>/``; raw records are
streamed there one Parquet part per wave as waves finish (so a crash loses at most the wave in
flight). ``finalize`` hashes every file, writes the manifest and renames the directory into place
in one step; an existing target is never replaced. The writer holds an exclusive lock on
``archives/.partial-<token>.lock`` for its whole life, so a partial directory whose lock is free
was left by a dsv4h that ended before finalizing (:func:`iter_partials`); ``harness.run.recover``
rolls such a directory forward into an archive.

Nothing read from an archive is trusted before it is verified: :func:`open_verified` re-hashes
every file and refuses (``ArchiveError``) naming each changed, missing or extra file; a Parquet or
JSON file that cannot be parsed is an ``ArchiveError`` naming the file, never a library traceback.
An archive that was resumed records the claim in ``<workspace>/.dsv4h/resumed/<id>`` (:func:`claim_resume`),
so it is never resumed twice.

Archive format history (``ARCHIVE_FORMAT_VERSION``):
  1 - first version (2026-11-29).
  2 - the manifest's ``run`` block is typed and versioned (``harness.store.runblock``); format 1
      archives are read through that module's reader (2026-11-30).
  3 - result tables and summaries (``cells``/``rounds``/``waves``.parquet, ``results.json``,
      ``sweep.json``) use the row models' names, units in the name (``harness.measure.rows``:
      ``median_tok_s``, ``http_output_tok_s``, a sweep's ``arrival_rate_req_s`` ...); :meth:`Archive.table`
      and :meth:`Archive.json` read the result files of format 1/2 archives under those names through
      ``harness.store.archive_legacy`` (2026-12-02). Added within format 3 (new files and columns, none
      changed): a formal matrix's ``coldness.json`` (its own ``coldness_version``) and the ``ttft_cold_*``,
      ``ttft_restarted_*``, ``ttft_warm_*`` columns of ``cells`` (``harness.measure.coldness``; archives
      without them read as before) (2026-12-02).
  4 - the service profiles recorded in ``spec.json`` and ``service.json`` are sectioned (``launch``,
      ``identity``, ``devices``: spec format 2, ``harness.inputs.spec.service_sections``); the flat
      profiles of format 1-3 archives are read through the same validator, so readers (evidence rules,
      ABBA/record profile comparisons, reports) see one shape. And every result table is stored under
      its ledger table's name, ``<table>.parquet`` (``harness.kinds``: a rate sweep's ``sweep_cells`` /
      ``sweep_rounds``, an SLA search's ``sla_cells`` / ``sla_rounds`` / ``sla_probes``, an ABBA
      screen's ``comparisons``, a matched run's ``matched_sd``, a trace replay's ``replay_runs``), so
      the ledger ingest renames nothing; :meth:`Archive.has` and :meth:`Archive.table` find such a file
      of a format 1-3 archive under the name it was written with (``cells.parquet``, ``probes.parquet``,
      ``comparison.parquet`` ...; ``harness.store.archive_legacy.legacy_file``), its files and manifest
      unchanged (2026-12-04: both changes landed together as one format).
  5 - ``comparisons.parquet`` and ``matched_sd.parquet`` columns named for what they hold:
      ``change_pct`` / ``http_change_pct`` (were ``ratio_pct`` / ``http_ratio_pct``, a percent change)
      and ``matched_sd``'s step times in seconds ``t_ar_s`` / ``t_sd_s`` / ``t_sd_implied_s`` (were
      ``*_ms``); a format-4 archive's rows are renamed and converted on ingest
      (``harness.store.ledger.layout.RENAMED``, ledger schema 6); its JSON summaries unchanged. And a
      formal matrix of a speculative server writes ``cycles.parquet`` (ledger table ``cycles``, beside
      ``cycles.json``) (2026-12-04).
  6 - the JSON summaries say the same: ``comparison.json`` and ``matched.json`` ``result``
      ``change_pct`` / ``http_change_pct`` (were ``ratio_pct`` / ``http_ratio_pct``); :meth:`Archive.json`
      reads a format 1-5 archive's result under the new names, and :meth:`Archive.table` a format 1-4
      archive's ``comparisons`` / ``matched_sd`` columns
      (``harness.store.archive_legacy.upgrade_result_json`` / ``upgrade_renamed_table``) (2026-12-04).
"""

from __future__ import annotations

import contextlib
import fcntl
import json
import os
import re
import secrets
import shlex
import time
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.parquet as pq

from harness.errors import ArchiveError
from harness.formats import atomic_write, atomic_write_table, dump_json, fsync_dir, json_default
from harness.hashing import sha256_file, sha256_json
from harness.interrupts import fault_point
from harness.records import RECORD_SCHEMA, RequestRecord, records_to_table, table_to_records
from harness.service.identity.record_shape import clean_service_doc
from harness.store.archive_legacy import (
    FIRST_CHANGE_NAMED_FORMAT,
    FIRST_CHANGE_NAMED_JSON_FORMAT,
    FIRST_CURRENT_FORMAT,
    FIRST_TABLE_NAMED_FORMAT,
    legacy_file,
    upgrade_json,
    upgrade_renamed_table,
    upgrade_result_json,
    upgrade_table,
)
from harness.store.runblock import RunBlock, read_run_block

__all__ = [
    "MANIFEST",
    "RECORDS_DIR",
    "Archive",
    "ArchiveWriter",
    "Partial",
    "already_resumed",
    "claim_resume",
    "find_archive",
    "find_partial",
    "iter_archives",
    "iter_partials",
    "open_archive",
    "open_verified",
    "read_json_file",
    "resumed_by",
    "verify_archive",
]

ARCHIVE_FORMAT_VERSION = 6
READABLE_FORMAT_VERSIONS = (1, 2, 3, 4, 5, 6)
MANIFEST = "manifest.json"
RECORDS_DIR = "records"
PARTIAL_PREFIX = ".partial-"
STATE_DIR = ".dsv4h"
_ID_PREFIX_RE = re.compile(r"[0-9a-f]{1,16}")
_TOKEN_RE = re.compile(r"[0-9A-Za-z][0-9A-Za-z_-]{0,63}")
_TMP_RE = re.compile(r"\..+\.tmp-.+")
ARCHIVE_ID_RE = re.compile(r"[0-9a-f]{16}")


def _lock_path(partial_dir: Path) -> Path:
    return partial_dir.parent / f"{partial_dir.name}.lock"


def _try_lock(path: Path) -> int | None:
    """An fd holding an exclusive flock on ``path`` (created if missing), or None when another
    open file holds it (a live writer)."""
    fd = os.open(path, os.O_RDWR | os.O_CREAT, 0o644)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except OSError:
        os.close(fd)
        return None
    return fd


class ArchiveWriter:
    """Collects one run's files in a partial directory, then finalizes them into an archive."""

    def __init__(self, workspace: Path, *, token: str | None = None) -> None:
        self.root = workspace / "archives"
        self.root.mkdir(parents=True, exist_ok=True)
        self.token = token or f"{time.strftime('%Y%m%dT%H%M%S')}-{secrets.token_hex(3)}"
        if not _TOKEN_RE.fullmatch(self.token):
            raise ArchiveError(f"invalid archive token {self.token!r}")
        self.dir = self.root / f"{PARTIAL_PREFIX}{self.token}"
        self._lock_file = _lock_path(self.dir)
        self._lock_fd = _try_lock(self._lock_file)
        if self._lock_fd is None:
            raise ArchiveError(f"partial archive {self.dir} is in use by another running dsv4h",
                               hint="wait for that run to end, or pick another archive")
        (self.dir / RECORDS_DIR).mkdir(parents=True, exist_ok=True)
        self._wave_files: list[Path] = sorted((self.dir / RECORDS_DIR).glob("part-*.parquet"))
        self._records: pa.Table | None = None  # the streamed records read back, until the next wave

    def close(self) -> None:
        """Release the partial directory's lock (finalize does this; idempotent)."""
        fd, self._lock_fd = getattr(self, "_lock_fd", None), None
        if fd is not None:
            os.close(fd)

    def __del__(self) -> None:
        self.close()

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
        """Append one JSON line to ``name`` (written at once, so a crash keeps every finished line;
        a failed write, e.g. a full disk, is cut back so no half line is left)."""
        data = json.dumps(row, sort_keys=True, default=json_default).encode() + b"\n"
        fd = os.open(self.dir / name, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644)
        try:
            size = os.fstat(fd).st_size
            try:
                if os.write(fd, data) != len(data):
                    raise OSError(28, "short write (disk full?)", str(self.dir / name))
            except OSError:
                with contextlib.suppress(OSError):
                    os.ftruncate(fd, size)
                raise
        finally:
            os.close(fd)

    def write_wave(self, records: Sequence[RequestRecord]) -> Path:
        """Stream one finished wave's raw records to disk (atomic), in arrival order."""
        path = self.dir / RECORDS_DIR / f"part-{len(self._wave_files):06d}.parquet"
        atomic_write_table(path, records_to_table(records))
        self._wave_files.append(path)
        self._records = None
        return path

    def write_table(self, name: str, table: pa.Table) -> None:
        """Write a result table (Parquet) into the archive."""
        atomic_write_table(self.dir / name, table)

    def records_table(self) -> pa.Table:
        """All raw records streamed so far as one table, in order: read back from disk once and kept
        until the next wave is written (finishing a run reads its records once)."""
        if self._records is None:
            self._records = read_records_table(self.dir)
        return self._records

    def streamed_records(self) -> list[RequestRecord]:
        """All raw records streamed so far, in order (:meth:`records_table`)."""
        return table_to_records(self.records_table())

    def finalize(self, *, status: str, run: RunBlock) -> Path:
        """Hash every file, write the manifest and move the directory to
        ``archives/<archive_id>``. Returns the final path. Leftovers of interrupted atomic writes
        (hidden ``.NAME.tmp-*`` files) are removed first: they were never part of the run."""
        fault_point("finalize:start")
        if not self._wave_files:
            self.write_wave([])
        files = {}
        for path in sorted(self.dir.rglob("*")):
            if path.is_file() and path.name.startswith(".") and _TMP_RE.fullmatch(path.name):
                path.unlink()
            elif path.is_file() and not path.name.startswith("."):
                rel = path.relative_to(self.dir).as_posix()
                if rel != MANIFEST:  # only the archive's own; a nested manifest.json (a frozen corpus) is hashed
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
        fault_point("finalize:hashed")
        atomic_write(self.dir / MANIFEST, dump_json(manifest))
        fault_point("finalize:manifest-written")
        return self._publish(archive_id)

    def _publish(self, archive_id: str) -> Path:
        target = self.root / archive_id
        if target.exists():
            raise ArchiveError(f"archive {archive_id} already exists at {target}; archives are never "
                               f"overwritten", hint=f"the partial data is kept in {self.dir}")
        os.rename(self.dir, target)
        fsync_dir(self.root)
        fault_point("finalize:renamed")
        self.dir = target
        self._lock_file.unlink(missing_ok=True)
        self.close()
        return target

    def publish_existing_manifest(self) -> Path:
        """Roll forward a finalize that stopped after writing the manifest: the manifest must match
        every file (else ``ArchiveError`` naming them); then the directory is renamed into place."""
        problems = verify_archive(self.dir, check_name=False)
        if problems:
            raise ArchiveError(f"partial archive {self.dir} holds a manifest that does not match its files:\n  "
                               + "\n  ".join(problems),
                               hint="it was changed after its manifest was written; it is left as it is")
        return self._publish(str(open_archive(self.dir).manifest["archive_id"]))


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
        """Whether the archive holds file ``name`` (of a format 1-3 archive: under the name it was
        written with, module docstring)."""
        return (self.path / self.stored_name(name)).is_file()

    def stored_name(self, name: str) -> str:
        """The name file ``name`` has on disk: itself, or for an archive of format < 4 the name it
        was written with (``harness.store.archive_legacy.legacy_file``)."""
        if self.format_version >= FIRST_TABLE_NAMED_FORMAT:
            return name
        return legacy_file(name, self.run.protocol_class)

    @property
    def format_version(self) -> int:
        """The manifest's archive format version."""
        return int(self.manifest.get("format_version") or 1)

    def json(self, name: str) -> Any:
        """Load one JSON file of the archive (ArchiveError naming it when it cannot be parsed); a
        result summary of a format 1/2 archive under the row models' names (module docstring)."""
        obj = read_json_file(self.path / name)
        if self.format_version < FIRST_CURRENT_FORMAT:
            obj = upgrade_json(name, obj, self.run.protocol_class)
        if self.format_version < FIRST_CHANGE_NAMED_JSON_FORMAT:
            obj = upgrade_result_json(name, obj)
        if name == "service.json":  # its readers get the shapes dsv4h writes, whoever wrote it
            obj = clean_service_doc(obj)
        return obj

    def table(self, name: str) -> pa.Table:
        """Load one Parquet table of the archive (ArchiveError naming it when it cannot be read); a
        result table of a format 1/2 archive under the row models' names, of a format 1-3 archive
        under its current file name (module docstring)."""
        stored = self.stored_name(name)
        t = read_parquet_file(self.path / stored)
        if self.format_version < FIRST_CURRENT_FORMAT:
            t = upgrade_table(stored, t, self.run.protocol_class)
        if self.format_version < FIRST_CHANGE_NAMED_FORMAT:
            t = upgrade_renamed_table(name, t)
        return t

    def records_table(self) -> pa.Table:
        """The raw records as one Arrow table (parts concatenated in order)."""
        return read_records_table(self.path)

    def records(self) -> list[RequestRecord]:
        """The raw records."""
        return table_to_records(self.records_table())


def read_parquet_file(path: Path) -> pa.Table:
    """One Parquet file of an archive; a damaged file is an ``ArchiveError`` naming it."""
    try:
        return pq.read_table(path)
    except (OSError, pa.ArrowException, ValueError) as exc:
        raise ArchiveError(f"{path}: cannot read this Parquet file: {str(exc)[:200]}",
                           hint=f"the file is damaged; run 'dsv4h archive verify {path.parent}' "
                           "and restore the archive from a copy") from None


def read_json_file(path: Path) -> Any:
    """One JSON file of an archive; a damaged file is an ``ArchiveError`` naming it."""
    try:
        return json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError, RecursionError) as exc:
        raise ArchiveError(f"{path}: cannot read this JSON file: {str(exc)[:200]}",
                           hint="the file is damaged; verify the archive and restore it from a copy") from None


def read_records_table(directory: Path) -> pa.Table:
    """Concatenate the record parts under ``directory/records`` in order (ArchiveError naming a
    part that cannot be read or does not hold raw records)."""
    parts = sorted((directory / RECORDS_DIR).glob("part-*.parquet"))
    tables = [read_parquet_file(p) for p in parts]
    if not tables:
        return RECORD_SCHEMA.empty_table()
    try:
        return pa.concat_tables(tables, promote_options="permissive")
    except (pa.ArrowException, ValueError) as exc:
        raise ArchiveError(f"{directory / RECORDS_DIR}: record parts do not share one schema: {str(exc)[:200]}",
                           hint="a part was replaced by a foreign file; verify the archive") from None


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
    except (OSError, ValueError, RecursionError) as exc:
        raise ArchiveError(f"{path / MANIFEST}: not valid JSON: {str(exc)[:200]}",
                           hint="the manifest is damaged; restore the archive from a copy") from None
    if isinstance(manifest, dict) and not isinstance(manifest.get("files", {}), dict):
        raise ArchiveError(f"{path / MANIFEST}: 'files' is not a mapping",
                           hint="the manifest is damaged; restore the archive from a copy")
    if not isinstance(manifest, dict) or manifest.get("format_version") not in READABLE_FORMAT_VERSIONS:
        version = manifest.get("format_version") if isinstance(manifest, dict) else None
        raise ArchiveError(f"{path / MANIFEST}: archive format {version!r} is not supported "
                           f"(this dsv4h reads {', '.join(map(str, READABLE_FORMAT_VERSIONS))})",
                           hint="upgrade dsv4h, or check that this is a dsv4h archive")
    return Archive(path, manifest)


def _is_path_ref(ref: str) -> bool:
    return "/" in ref or ref in (".", "..") or ref.startswith(("~", PARTIAL_PREFIX))


def find_archive(ref: str, workspace: Path) -> Path:
    """Resolve an archive directory path (absolute or relative), an archive id, or a unique id prefix
    (hex digits only) under ``<workspace>/archives``. Anything else (an empty reference, wildcards,
    a directory that is not an archive) is refused with ``ArchiveError``."""
    root = workspace / "archives"
    if not ref.strip():
        raise ArchiveError("an empty archive reference names no archive",
                           hint="give an archive id (or a unique prefix of its hex digits) or its directory")
    p = Path(ref).expanduser()
    if _is_path_ref(ref) or p.is_dir():
        if (p / MANIFEST).is_file():
            return p
        if p.name.startswith(PARTIAL_PREFIX) and p.is_dir():
            raise ArchiveError(f"{p} is an unfinalized (partial) archive directory, not an archive",
                               hint=f"'dsv4h archive recover -w {shlex.quote(str(workspace))}' finalizes it; its "
                               f"spec's 'dsv4h campaign run' with --resume {shlex.quote(str(p))} continues it")
        raise ArchiveError(f"{p}: not an archive (no {MANIFEST})",
                           hint="give an archive directory, e.g. workspace/archives/<id>, or an archive id")
    if not _ID_PREFIX_RE.fullmatch(ref):
        raise ArchiveError(f"no archive '{ref}': archive ids are 16 hex digits (0-9, a-f) and a prefix of them "
                           "selects one archive", hint="list archives with 'dsv4h archive list'")
    matches = sorted(d for d in root.iterdir() if d.name.startswith(ref) and (d / MANIFEST).is_file()) \
        if root.is_dir() else []
    if len(matches) == 1:
        return matches[0]
    if len(matches) > 1:
        raise ArchiveError(f"archive id prefix '{ref}' is ambiguous: " + ", ".join(d.name for d in matches),
                           hint="give more digits of the id")
    raise ArchiveError(f"no archive '{ref}' under {root}", hint="list archives with 'dsv4h archive list'")


def find_partial(ref: str, workspace: Path) -> Path | None:
    """The partial directory ``ref`` names (its path, its ``.partial-<token>`` name or its token), or None."""
    if not ref.strip():
        return None
    p = Path(ref).expanduser()
    if p.name.startswith(PARTIAL_PREFIX) and p.is_dir():
        return p
    if _TOKEN_RE.fullmatch(ref):
        cand = workspace / "archives" / f"{PARTIAL_PREFIX}{ref}"
        if cand.is_dir():
            return cand
    return None


def iter_archives(workspace: Path) -> Iterator[Archive]:
    """Every finalized archive under the workspace, oldest first (by directory mtime); partial
    directories (even one holding a manifest) are not archives (:func:`iter_partials`)."""
    root = workspace / "archives"
    if not root.is_dir():
        return
    dirs = [d for d in root.iterdir() if d.is_dir() and not d.name.startswith(".") and (d / MANIFEST).is_file()]
    for d in sorted(dirs, key=lambda d: (d.stat().st_mtime, d.name)):
        yield open_archive(d)


def verify_archive(path: Path, *, check_name: bool = True) -> list[str]:
    """Re-hash every file; return problems (changed, missing, extra files, id mismatch); [] if intact.
    ``check_name=False`` skips the directory-name check (a partial directory holding a manifest)."""
    arch = open_archive(path)
    problems: list[str] = []
    files: dict[str, Any] = arch.manifest.get("files", {})
    for rel, meta in sorted(files.items()):
        f = path / rel
        want = meta.get("sha256") if isinstance(meta, dict) else None
        if ".." in Path(rel).parts or Path(rel).is_absolute():
            problems.append(f"manifest: file entry {rel!r} points outside the archive")
        elif not f.is_file():
            problems.append(f"missing: {rel}")
        elif (got := sha256_file(f)) != want:
            problems.append(f"changed: {rel} (sha256 {got[:16]}... != manifest {str(want)[:16]}...)")
    for f in sorted(path.rglob("*")):
        if f.is_file():
            rel = f.relative_to(path).as_posix()
            if rel != MANIFEST and rel not in files:
                problems.append(f"extra: {rel}")
    recomputed = manifest_id(arch.manifest)
    if recomputed != arch.manifest.get("archive_id"):
        problems.append(f"manifest: id {arch.manifest.get('archive_id')} does not match its content ({recomputed})")
    elif check_name and path.name != recomputed:
        problems.append(f"directory name {path.name} is not the archive id {recomputed}")
    return problems


def open_verified(path: Path) -> Archive:
    """Open an archive only after re-hashing every file: any changed, missing or extra file (or a
    manifest that does not certify its id) raises ``ArchiveError`` naming each of them. Use it
    wherever an archive's content becomes something new (resume, ledgers, evidence, reports,
    records)."""
    problems = verify_archive(path)
    if problems:
        raise ArchiveError(f"archive {path} failed verification; refusing to use it:\n  " + "\n  ".join(problems),
                           hint="an archive must not be edited; restore it from a copy, or re-run the campaign")
    return open_archive(path)


def is_archive_id(value: object) -> bool:
    """Whether ``value`` is an archive id: exactly 16 lowercase hex digits (the only stored value
    that may become a file or directory name)."""
    return isinstance(value, str) and ARCHIVE_ID_RE.fullmatch(value) is not None


# --- partial directories and resume claims --------------------------------------------------------


@dataclass(frozen=True)
class Partial:
    """A ``.partial-<token>`` directory: ``live`` while a running dsv4h holds its lock."""

    path: Path
    token: str
    live: bool
    has_manifest: bool


def iter_partials(workspace: Path) -> Iterator[Partial]:
    """Every partial directory under the workspace, oldest first; ``live`` ones are still written."""
    root = workspace / "archives"
    if not root.is_dir():
        return
    dirs = [d for d in root.iterdir() if d.is_dir() and d.name.startswith(PARTIAL_PREFIX)]
    for d in sorted(dirs, key=lambda d: (d.stat().st_mtime, d.name)):
        fd = _try_lock(_lock_path(d))
        if fd is not None:
            os.close(fd)
        yield Partial(d, d.name[len(PARTIAL_PREFIX):], fd is None, (d / MANIFEST).is_file())


def claim_resume(workspace: Path, archive_id: str, token: str) -> None:
    """Record that run ``token`` resumes ``archive_id``; refuse (``ArchiveError``) when another run
    already did: an archive is resumed at most once (its successor carries its records)."""
    claims = workspace / STATE_DIR / "resumed"
    claims.mkdir(parents=True, exist_ok=True)
    try:
        atomic_write(claims / archive_id, dump_json({"archive_id": archive_id, "run_token": token}), exclusive=True)
    except FileExistsError:
        raise already_resumed(archive_id, resumed_by(workspace, archive_id) or "another run") from None


def resumed_by(workspace: Path, archive_id: str) -> str | None:
    """What resumed ``archive_id``: the finalized archive whose run says so, else the run token of
    the claim (its partial directory), else None."""
    for d in (workspace / "archives").iterdir() if (workspace / "archives").is_dir() else []:
        if d.is_dir() and not d.name.startswith(".") and (d / MANIFEST).is_file():
            with contextlib.suppress(ArchiveError, OSError):
                m = open_archive(d).manifest
                if isinstance(m.get("run"), dict) and m["run"].get("resumed_from") == archive_id:
                    return str(m.get("archive_id"))
    claim = workspace / STATE_DIR / "resumed" / archive_id
    if not claim.is_file():
        return None
    try:
        token = json.loads(claim.read_text()).get("run_token")
    except (OSError, ValueError, AttributeError):
        return "another run"
    return f"the run in {PARTIAL_PREFIX}{token}"


def already_resumed(archive_id: str, successor: str) -> ArchiveError:
    """The refusal to resume an archive a second time."""
    return ArchiveError(f"archive {archive_id} was already resumed into {successor}; resuming it again would "
                        "count its records twice",
                        hint="resume the newer archive instead (it carries these records); 'dsv4h archive list' "
                        "shows it")
