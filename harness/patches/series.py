"""Model patches: a versioned series of unified diffs applied to an installed SGLang tree.

Parsing and validation (``parse_series``; diffs in ``harness.patches.unified_diff``) are pure;
``load_series``, ``status``, ``apply``, ``revert`` and ``patch_identity`` read the target tree, and
only ``apply``/``revert`` write it.

The series file (``model_patches/series.yaml``) lists each patch with the sha256 of its diff file
and, for every file the diff touches, the sha256 of that file before (``base``) and after
(``patched``) the patch (``null`` = the file does not exist). Those hashes make the operations
exact and safe:

* ``status`` compares every target file with its hash chain (base of the first patch touching it,
  then each patch's post-image), so each patch is *applied*, *unapplied* or, when its files
  disagree, *partial*; a file matching no hash in its chain is *modified*.
* ``apply`` refuses a tree with modified files or partial patches, naming the files; applies the
  hunks of every unapplied patch in memory (exact context, no fuzz, no offset: a hunk that does not
  match at its line is an error naming the file and hunk number), checks every result against the
  series' post-image hash, then writes each file atomically; on a write error the files already
  written are restored, so nothing is left half-applied. An already-applied series is reported as
  such and nothing is written.
* ``revert`` is the mirror image and restores the original bytes.

Paths inside the diffs start with the package directory (``sglang/srt/...``, optionally behind
``a/`` and ``b/``). The target may be a site-packages directory, the ``sglang/`` package directory
itself, or a source checkout (``<checkout>/python/sglang``); see ``locate_package``.

Contract of this module: it is the apply/revert engine (plan in memory, write atomically with rollback,
record the state file) and the only module of the series that writes; every write goes through this
module's ``atomic_write``. The rest lives in sibling modules and is re-exported here, so
``harness.patches.series`` stays the one import path: :mod:`.series_spec` (the series model, loading,
series format history), :mod:`.package_tree` (locating the package) and :mod:`.series_status` (status
and the patch identity).

State file format history (``STATE_FORMAT_VERSION``; ``<package dir>/.dsv4h-patches.json``):
  1 - first version (2026-11-29).
"""

from __future__ import annotations

import contextlib
import json
import os
import time
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal

from harness.errors import PatchError
from harness.formats import atomic_write
from harness.hashing import sha256_bytes
from harness.patches.package_tree import STATE_FILE, Layout, PackageTree, locate_package, read_current
from harness.patches.series_spec import (
    SERIES_FORMAT_VERSION,
    EnableSpec,
    FileHashes,
    Patch,
    PatchSpec,
    PatchTarget,
    Series,
    SeriesSpec,
    load_series,
    parse_series,
    short_hash,
)
from harness.patches.series_status import (
    FileState,
    Overall,
    PatchState,
    PatchStatus,
    SeriesStatus,
    patch_identity,
    read_contents,
    refuse_unsafe,
    status,
    status_from_contents,
)
from harness.patches.unified_diff import apply_file_diff, parse_unified_diff

__all__ = [
    "SERIES_FORMAT_VERSION",
    "STATE_FILE",
    "STATE_FORMAT_VERSION",
    "ChangeResult",
    "EnableSpec",
    "FileHashes",
    "FileState",
    "Layout",
    "Overall",
    "PackageTree",
    "Patch",
    "PatchSpec",
    "PatchState",
    "PatchStatus",
    "PatchTarget",
    "Series",
    "SeriesSpec",
    "SeriesStatus",
    "apply",
    "describe_diff",
    "load_series",
    "locate_package",
    "parse_series",
    "patch_identity",
    "revert",
    "status",
]

STATE_FORMAT_VERSION = 1


@dataclass(frozen=True)
class ChangeResult:
    """What apply/revert did: ``changed`` False when the tree was already in the asked state."""

    action: Literal["apply", "revert"]
    changed: bool
    patches: tuple[str, ...]
    files: dict[str, tuple[str | None, str | None]] = field(default_factory=dict)
    state_path: str | None = None
    tree: PackageTree | None = None


def _plan(series: Series, st: SeriesStatus, contents: dict[str, bytes | None], *,
          reverse: bool) -> tuple[list[str], dict[str, bytes | None]]:
    """Compute every new file content in memory; returns (patch ids acted on, changed contents)."""
    mem = dict(contents)
    done: list[str] = []
    states = {p.id: p.status for p in st.patches}
    order = list(reversed(series.patches)) if reverse else list(series.patches)
    for p in order:
        if states[p.spec.id] != ("applied" if reverse else "unapplied"):
            continue
        for fd in p.files:
            new = apply_file_diff(fd, mem[fd.path], reverse=reverse, where=f"patch '{p.spec.id}': ")
            h = p.spec.files[fd.path]
            want = h.base if reverse else h.patched
            got = None if new is None else sha256_bytes(new)
            if got != want:
                raise PatchError(
                    f"patch '{p.spec.id}': {fd.path}: the result has sha256 {short_hash(got)}, the series "
                    f"records {short_hash(want)}; nothing was written",
                    hint="the series' hashes do not match its diff; record them again (dsv4h patches describe)")
            mem[fd.path] = new
        done.append(p.spec.id)
    changed = {k: v for k, v in mem.items() if v != contents[k]}
    return done, changed


def _set_content(path: Path, data: bytes | None, mode: int | None) -> None:
    if data is None:
        with contextlib.suppress(FileNotFoundError):
            path.unlink()
    else:
        atomic_write(path, data, mode=mode)


def _commit(root: Path, originals: Mapping[str, bytes | None], changes: Mapping[str, bytes | None]) -> None:
    """Write every change (each file atomically); on any error restore what was written, re-raise."""
    modes: dict[str, int | None] = {}
    for rel in changes:
        p = root / rel
        modes[rel] = (p.stat().st_mode & 0o7777) if p.exists() else None
        parent = p.parent
        if not parent.is_dir():
            raise PatchError(f"cannot write {p}: directory {parent} does not exist; nothing was written",
                             hint="patches may only add files to existing package directories")
        if not os.access(parent, os.W_OK):
            raise PatchError(f"cannot write {p}: {parent} is not writable; nothing was written",
                             hint="run as the owner of the environment, or patch a copy (python -m venv + pip)")
    written: list[str] = []
    try:
        for rel, data in changes.items():
            written.append(rel)
            _set_content(root / rel, data, modes[rel])
    except BaseException as exc:
        problems = []
        for rel in reversed(written):  # the failed file is included: atomic writes leave it intact
            try:
                _set_content(root / rel, originals[rel], modes[rel])
            except OSError as exc2:  # pragma: no cover - the disk failing twice
                problems.append(f"{rel}: {exc2}")
        if not isinstance(exc, OSError):
            raise
        restored = "restored the originals" if not problems else f"COULD NOT RESTORE {problems}"
        raise PatchError(f"writing {root / written[-1]} failed ({exc}); {restored}",
                         hint="fix the cause (disk space, permissions) and run the command again") from exc


def _write_state(tree: PackageTree, series: Series, st_after: SeriesStatus,
                 files: Mapping[str, tuple[str | None, str | None]], action: str) -> str | None:
    applied = st_after.applied
    path = tree.state_path
    if not applied:
        with contextlib.suppress(FileNotFoundError):
            path.unlink()
        return None
    state = {
        "format_version": STATE_FORMAT_VERSION,
        "series": series.spec.name,
        "series_path": series.path,
        "series_sha256": series.sha256,
        "package": tree.package,
        "version": tree.version,
        "layout": tree.layout,
        "last_action": action,
        "time_utc": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
        "applied": [{"id": p.spec.id, "sha256": p.spec.sha256} for p in series.patches if p.spec.id in applied],
        "files": {k: {"before": b, "after": a} for k, (b, a) in sorted(files.items())},
        "current": {f.path: f.current for f in st_after.files},
    }
    atomic_write(path, (json.dumps(state, indent=1, sort_keys=True) + "\n").encode())
    return str(path)


def _change(series: Series, target: Path, *, reverse: bool) -> ChangeResult:
    action: Literal["apply", "revert"] = "revert" if reverse else "apply"
    tree = locate_package(target, series.package)
    contents = read_contents(series, tree)
    st = status_from_contents(series, tree, contents)
    refuse_unsafe(st, action)
    done, changes = _plan(series, st, contents, reverse=reverse)
    if not done:
        return ChangeResult(action, False, (), {}, str(tree.state_path) if tree.state_path.exists() else None, tree)
    _commit(tree.root, contents, changes)
    files = {k: (None if contents[k] is None else sha256_bytes(contents[k] or b""),
                 None if v is None else sha256_bytes(v)) for k, v in changes.items()}
    after = status_from_contents(series, tree, {**contents, **changes})
    state_path = _write_state(tree, series, after, files, action)
    return ChangeResult(action, True, tuple(done), files, state_path, tree)


def apply(series: Series, target: Path) -> ChangeResult:
    """Apply every unapplied patch of ``series`` to the tree at ``target`` (see the module doc).

    Idempotent: an applied series changes nothing (``changed`` False). Refuses (``PatchError``)
    a tree with modified files (named, with their hashes) or half-applied patches. A failing hunk
    names the file and the hunk number; nothing is written unless every patch applies.
    """
    return _change(series, target, reverse=False)


def revert(series: Series, target: Path) -> ChangeResult:
    """Un-apply every applied patch of ``series`` (in reverse order), restoring the original bytes;
    removes the state file when no patch remains applied. Same refusals as ``apply``."""
    return _change(series, target, reverse=True)


def describe_diff(diff: bytes, target: Path, package: str = "sglang", source: str = "<diff>") -> dict[str, Any]:
    """For authoring a series entry: the sha256 of ``diff`` and, per file, the base hash in the tree
    at ``target`` and the patched hash after applying ``diff`` in memory. Reads, never writes."""
    tree = locate_package(target, package)
    files: dict[str, dict[str, str | None]] = {}
    for fd in parse_unified_diff(diff, source):
        before = read_current(tree.root, fd.path)
        after = apply_file_diff(fd, before)
        files[fd.path] = {"base": None if before is None else sha256_bytes(before),
                          "patched": None if after is None else sha256_bytes(after)}
    return {"sha256": sha256_bytes(diff), "target": {"package": package, "version": tree.version},
            "files": files}
