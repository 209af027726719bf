"""What shared objects the live processes of a service map, hashed (edge module: ``/proc``, psutil,
file hashing; docs/identity.md#mapped-libraries).

:func:`read_maps`, :func:`tree_pids` and :func:`mapped_libraries` take a snapshot; the pure parts
(``/proc/PID/maps`` parsing, :func:`check_requirements` against the profile's ``require_libraries``
and ``library_dirs``) live in ``harness.service.identity.mapped_rules`` and are re-exported here.

A file is hashed as the one the process maps, never merely as what its path names now: a mapping
flagged ``(deleted)`` or whose inode differs from the file now at that path (a library replaced
while the server runs) is hashed through ``/proc/PID/map_files`` where the kernel allows it, else it
gets no hash (``sha256`` None) rather than the hash of the replacement.
"""

from __future__ import annotations

import hashlib
import os
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import psutil

from harness.hashing import sha256_file
from harness.inputs.spec import LibraryRequirement
from harness.service.identity import mapped_rules
from harness.service.identity.mapped_rules import (
    GPU_DRIVER_GLOBS,
    MappedFile,
    library_workers,
    parse_map_entries,
    parse_maps,
    worker_pids,
)

__all__ = ["GPU_DRIVER_GLOBS", "HashCache", "MappedFile", "check_requirements", "library_workers",
           "mapped_libraries", "parse_map_entries", "parse_maps", "read_maps", "tree_pids", "worker_pids"]

_CHUNK = 1 << 20  # bytes read per step when hashing through map_files


def read_maps(pid: int) -> tuple[list[MappedFile], str | None]:
    """The shared objects ``pid`` maps, and an error (process gone, permission denied) instead of
    raising; on error the list is empty."""
    try:
        with open(f"/proc/{pid}/maps", encoding="utf-8", errors="surrogateescape") as fh:
            text = fh.read()
    except FileNotFoundError:
        return [], f"process {pid} is gone"
    except PermissionError:
        return [], f"no permission to read /proc/{pid}/maps"
    except OSError as exc:  # ESRCH while reading a process that is exiting
        return [], f"cannot read /proc/{pid}/maps: {exc.strerror or exc}"
    return parse_map_entries(text), None


def tree_pids(root_pid: int) -> list[int]:
    """``root_pid`` followed by all its descendants (psutil, recursive); empty when it is gone."""
    try:
        root = psutil.Process(root_pid)
        children = root.children(recursive=True)
    except psutil.Error:
        return []
    return [root_pid, *(c.pid for c in children)]


def _stream_sha256(fd: int) -> str:
    h = hashlib.sha256()
    while chunk := os.read(fd, _CHUNK):
        h.update(chunk)
    return h.hexdigest()


@dataclass
class HashCache:
    """SHA-256 of files keyed by ``(st_dev, st_ino, size, mtime_ns)``: each distinct file is hashed
    once, across processes and across the start and end snapshots of a run."""

    digests: dict[tuple[int, int, int, int], str] = field(default_factory=dict)

    def file(self, path: str, inode: int = 0) -> tuple[str | None, int | None]:
        """``(sha256, size)`` of the file at ``path``; ``(None, size)`` when it is not the file with
        ``inode`` (when given) and ``(None, None)`` when it cannot be read."""
        try:
            st = os.stat(path)
        except OSError:
            return None, None
        if inode and st.st_ino != inode:
            return None, st.st_size
        key = (st.st_dev, st.st_ino, st.st_size, st.st_mtime_ns)
        if key not in self.digests:
            try:
                self.digests[key] = sha256_file(path)
            except OSError:
                return None, st.st_size
        return self.digests[key], st.st_size

    def mapping(self, pid: int, addr_range: str) -> tuple[str | None, int | None]:
        """``(sha256, size)`` of the file ``pid`` maps at ``addr_range``, opened through
        ``/proc/PID/map_files`` (needs CAP_SYS_ADMIN or CAP_CHECKPOINT_RESTORE); ``(None, None)``
        when the kernel refuses."""
        try:
            fd = os.open(f"/proc/{pid}/map_files/{addr_range}", os.O_RDONLY)
        except OSError:
            return None, None
        try:
            st = os.fstat(fd)
            key = (st.st_dev, st.st_ino, st.st_size, st.st_mtime_ns)
            if key not in self.digests:
                self.digests[key] = _stream_sha256(fd)
            return self.digests[key], st.st_size
        except OSError:
            return None, None
        finally:
            os.close(fd)


def _library(pid: int, entry: MappedFile, cache: HashCache) -> dict[str, Any]:
    digest: str | None = None
    size: int | None = None
    if not entry.deleted and not entry.escaped:
        digest, size = cache.file(entry.path, entry.inode)
    if digest is None and entry.range:
        # deleted, replaced on disk, or an ambiguous escaped name (which may name another file):
        # only the mapping itself says what the process runs
        digest, size = cache.mapping(pid, entry.range)
    lib: dict[str, Any] = {"path": entry.path, "sha256": digest, "size": size, "deleted": entry.deleted}
    if entry.escaped:
        lib["escaped"] = True
    return lib


def mapped_libraries(pids: Sequence[int], roles: Mapping[int, str] | None = None,
                     cache: HashCache | None = None) -> dict[str, Any]:
    """A snapshot of the shared objects each of ``pids`` maps (``pids[0]`` is the tree's root, as
    :func:`tree_pids` lists it):

    ``{"root": pid | None, "pids": {str(pid): {"role", "libraries": [{"path", "sha256", "size",
    "deleted"}], "error"}}, "files": {path: sha256 | None}}``, keys sorted; in ``files`` a deleted
    mapping's path ends with `` (deleted)``. A path holding the kernel's ``\\012`` (a newline, or
    those characters) is kept as the kernel wrote it, its library has ``"escaped": true`` and it is
    hashed only through the mapping (never opened by that name, which may be another file).
    ``sha256`` is None for a file that could not be hashed as the mapped one (module docstring);
    ``size`` is in bytes.
    """
    cache = cache if cache is not None else HashCache()
    roles = roles or {}
    per_pid: dict[str, Any] = {}
    files: dict[str, str | None] = {}
    for pid in pids:
        entries, error = read_maps(pid)
        libs = [_library(pid, e, cache) for e in entries]
        for lib in libs:
            # a deleted mapping is another file than the one now at its path: its own key
            key = lib["path"] + (" (deleted)" if lib["deleted"] else "")
            if files.get(key) is None:
                files[key] = lib["sha256"]
        per_pid[str(pid)] = {"role": roles.get(pid), "libraries": sorted(libs, key=lambda d: d["path"]),
                             "error": error}
    return {"root": pids[0] if pids else None,
            "pids": dict(sorted(per_pid.items(), key=lambda kv: int(kv[0]))),
            "files": dict(sorted(files.items()))}


def _with_real(dirs: Sequence[str]) -> list[str]:
    return list(dict.fromkeys(p for d in dirs for p in (d, os.path.realpath(d))))


def check_requirements(mapped: Mapping[str, Any], requirements: Sequence[LibraryRequirement],
                       library_dirs: Sequence[str] | None, interpreter_prefixes: Sequence[str]) -> list[str]:
    """``harness.service.identity.mapped_rules.check_requirements`` with each of ``library_dirs`` and
    ``interpreter_prefixes`` also taken with its symlinks resolved (``/proc/PID/maps`` names files
    by their real path: ``/opt/intel/oneapi/ccl/latest`` is some ``…/ccl/2021.x``)."""
    dirs = None if library_dirs is None else _with_real(library_dirs)
    return mapped_rules.check_requirements(mapped, requirements, dirs, _with_real(interpreter_prefixes))
