"""What a mapped-libraries snapshot says (pure; docs/identity.md#mapped-libraries).

:func:`parse_maps` reads the ``/proc/PID/maps`` format; :func:`worker_pids`, :func:`check_requirements`
and :func:`library_workers` read a snapshot of ``harness.service.identity.mapped.mapped_libraries``.
"""

from __future__ import annotations

import fnmatch
import re
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from harness.inputs.spec import LibraryRequirement

_DELETED = " (deleted)"
_ESCAPED_NEWLINE = "\\012"  # how /proc/PID/maps writes a newline of a path
_SHARED_OBJECT = re.compile(r"\.so(\.|$)")  # libfoo.so, libfoo.so.1.2, foo.cpython-311-x86_64-linux-gnu.so

GPU_DRIVER_GLOBS = ("libcuda.so*", "libze_intel_gpu.so*", "libze_loader.so*", "libamdhip64.so*",
                    "libhsa-runtime64.so*")
"""A process mapping one of these has loaded a GPU runtime: without named roles, it is a worker
(:func:`worker_pids`)."""


@dataclass(frozen=True)
class MappedFile:
    """One mapped shared object of ``/proc/PID/maps``: path (without `` (deleted)``), whether the
    kernel flagged it deleted, its inode, the address range of its first mapping, and whether the
    path holds the kernel's escape of a newline (``escaped``, below)."""

    path: str
    deleted: bool = False
    inode: int = 0
    range: str = ""
    escaped: bool = False


def parse_map_entries(text: str) -> list[MappedFile]:
    """The shared objects (file name with ``.so`` at its end or before a version: ``libfoo.so``,
    ``libfoo.so.1.2``) of ``/proc/PID/maps`` text, first mapping of each
    path, in order of appearance. Anonymous mappings, ``[heap]``-style pseudo paths and other files
    are left out.

    The kernel writes a newline of a path as ``\\012`` and nothing else escaped, so ``\\012`` in a
    path is ambiguous (a newline, or those four characters of a real name): ``path`` is kept as the
    kernel wrote it and ``escaped`` set; such a path is never opened by name. Lines are split at
    ``\\n`` only (a path may hold ``\\r`` or other characters ``str.splitlines`` would split at)."""
    out: list[MappedFile] = []
    seen: set[str] = set()
    for line in text.split("\n"):
        # address perms offset dev inode pathname; the pathname may contain spaces
        parts = line.split(None, 5)
        if len(parts) < 6:
            continue
        path = parts[5].rstrip("\n")
        deleted = path.endswith(_DELETED)
        if deleted:
            path = path[: -len(_DELETED)]
        if not path.startswith("/") or not _SHARED_OBJECT.search(path.rsplit("/", 1)[-1]) or path in seen:
            continue
        seen.add(path)
        try:
            inode = int(parts[4])
        except ValueError:
            inode = 0
        out.append(MappedFile(path, deleted, inode, parts[0], _ESCAPED_NEWLINE in path))
    return out


def parse_maps(text: str) -> list[str]:
    """The mapped shared-object paths of ``/proc/PID/maps`` text (:func:`parse_map_entries`)."""
    return [e.path for e in parse_map_entries(text)]


def _libs(entry: Mapping[str, Any]) -> list[Mapping[str, Any]]:
    return [lib for lib in entry.get("libraries") or () if isinstance(lib, Mapping)]


def _basename(path: Any) -> str:
    return str(path).rsplit("/", 1)[-1]


def _matches(lib: Mapping[str, Any], globs: Iterable[str]) -> bool:
    return any(fnmatch.fnmatchcase(_basename(lib.get("path")), g) for g in globs)


def worker_pids(mapped: Mapping[str, Any]) -> list[str]:
    """The PIDs (as recorded, str) a snapshot's requirements are checked on:

    1. the PIDs with a role, when any has one (the server named its ranks);
    2. else, when some process maps a GPU driver library (:data:`GPU_DRIVER_GLOBS`): those of them
       that are not the tree's root (the root is the launcher; SGLang's and vLLM's ranks are its
       descendants), or the root alone when no descendant does; a tokenizer or detokenizer process
       that never touched a GPU is not held to a GPU library. Processes that could not be read are
       added (their libraries are unknown);
    3. else every process of the tree.
    """
    pids: Mapping[str, Any] = mapped.get("pids") or {}
    named = [p for p, e in pids.items() if isinstance(e, Mapping) and e.get("role")]
    if named:
        return named
    root = str(mapped.get("root"))
    on_gpu = [p for p, e in pids.items() if any(_matches(lib, GPU_DRIVER_GLOBS) for lib in _libs(e))]
    if not on_gpu:
        return list(pids)
    workers = [p for p in on_gpu if p != root] or on_gpu
    return workers + [p for p, e in pids.items() if e.get("error") and p not in workers]


def _who(pid: str, entry: Mapping[str, Any]) -> str:
    role = entry.get("role")
    return f"pid {pid} ({role})" if role else f"pid {pid}"


def _short(digest: Any) -> str:
    return f"{digest[:12]}..." if isinstance(digest, str) else "not hashable"


def _inside(path: str, dirs: Sequence[str]) -> bool:
    return any(path == d or path.startswith(d.rstrip("/") + "/") for d in dirs)


def _requirement(mapped: Mapping[str, Any], req: LibraryRequirement, workers: Sequence[str]) -> list[str]:
    pids: Mapping[str, Any] = mapped.get("pids") or {}
    want = f" with sha256 {req.sha256}" if req.sha256 else ""
    ok: list[str] = []
    msgs: list[str] = []
    for pid in workers:
        entry = pids[pid]
        hits = [lib for lib in _libs(entry) if _matches(lib, [req.name])]
        if entry.get("error"):
            msgs.append(f"{_who(pid, entry)} cannot be read ({entry['error']}): whether it maps {req.name} is unknown")
        elif not hits:
            msgs.append(f"{_who(pid, entry)} maps no file named {req.name}")
        elif req.sha256 and not any(lib.get("sha256") == req.sha256 for lib in hits):
            got = ", ".join(f"{lib.get('path')} (sha256 {_short(lib.get('sha256'))})" for lib in hits)
            msgs.append(f"{_who(pid, entry)} maps {got} but the profile requires {req.name}{want}")
        else:
            ok.append(pid)
    if req.every_worker:
        return msgs
    return [] if ok else [f"no process of the service maps {req.name}{want}: " + "; ".join(msgs)]


def check_requirements(mapped: Mapping[str, Any], requirements: Sequence[LibraryRequirement],
                       library_dirs: Sequence[str] | None, interpreter_prefixes: Sequence[str]) -> list[str]:
    """One human message per violation of a :func:`mapped_libraries` snapshot (empty: none).

    Each requirement is checked on :func:`worker_pids` (``every_worker``: each of them must map a
    file whose basename matches the glob, with ``sha256`` when given; else: at least one of them).
    With ``library_dirs``, every process of the tree may map shared objects only from those
    directories or under ``interpreter_prefixes`` (the interpreter's own prefix, system library dirs).
    """
    pids: Mapping[str, Any] = mapped.get("pids") or {}
    workers = worker_pids(mapped)
    msgs: list[str] = []
    if requirements and not workers:
        msgs.append("the snapshot has no process to check the required libraries on")
    for req in requirements:
        msgs.extend(_requirement(mapped, req, workers))
    if library_dirs is not None:
        allowed = [*library_dirs, *interpreter_prefixes]
        for pid, entry in pids.items():
            for lib in _libs(entry):
                path = str(lib.get("path"))
                if not _inside(path, allowed):
                    msgs.append(f"{_who(pid, entry)} maps {path} from outside library_dirs")
    return msgs


def library_workers(mapped: Mapping[str, Any], name: str, sha256: str | None = None) -> tuple[int, int]:
    """``(matching, workers)``: how many of :func:`worker_pids` map a file whose basename matches the
    glob ``name`` (with ``sha256`` when given), of how many workers."""
    pids: Mapping[str, Any] = mapped.get("pids") or {}
    workers = worker_pids(mapped)
    n = sum(1 for p in workers if any(_matches(lib, [name]) and (sha256 is None or lib.get("sha256") == sha256)
                                      for lib in _libs(pids[p])))
    return n, len(workers)
