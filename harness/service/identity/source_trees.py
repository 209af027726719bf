"""The state of a source tree a service runs from (edge module: git subprocesses, file reads).

:func:`source_tree_state` records, for one profile ``source_trees`` entry, the git commit and branch,
the dirty paths, a SHA-256 of the tracked changes (``git diff HEAD --binary``), the untracked files
listed and hashed, and the installed distribution (version, location, editable install and whether
it points into this tree). It reads and never writes: git runs with ``GIT_OPTIONAL_LOCKS=0`` (no index
refresh), no fsmonitor, no external diff or textconv driver (a hostile tree's config cannot run a
command), and a timeout. A missing path, a directory that is not a git tree, a missing git binary or a
git failure give an ``error`` string instead of an exception: a run records what it could.

Untracked files are hashed by streaming (1 MiB reads); at most ``max_untracked`` are listed and hashed
(``untracked_count`` is the full count, ``untracked_truncated`` says the list was cut), a file larger
than ``max_file_bytes`` is represented by its size, not its bytes (named in ``untracked_not_hashed``),
a symlink by its target text and a FIFO/socket/device by its kind (never opened).
"""

from __future__ import annotations

import hashlib
import importlib.metadata
import json
import os
import shutil
import stat
import subprocess
import sys
import threading
from pathlib import Path
from typing import Any
from urllib.parse import unquote, urlparse

from harness.hashing import sha256_json

__all__ = ["MAX_FILE_BYTES", "MAX_UNTRACKED", "distribution_state", "source_tree_state"]

MAX_UNTRACKED = 1000  # untracked files listed and hashed per tree
MAX_FILE_BYTES = 1 << 30  # an untracked file above this (bytes) is recorded by size only
_CHUNK = 1 << 20
_TIMEOUT_S = 60.0
# -c options that keep git from running anything a tree's own config names
_SAFE = ("-c", "core.fsmonitor=false", "-c", "core.untrackedCache=false")


class _GitFailed(Exception):
    pass


def _env() -> dict[str, str]:
    env = dict(os.environ)
    env.update({"GIT_OPTIONAL_LOCKS": "0", "GIT_TERMINAL_PROMPT": "0", "LC_ALL": "C"})
    env.pop("GIT_DIR", None)
    env.pop("GIT_WORK_TREE", None)
    env.pop("GIT_INDEX_FILE", None)
    return env


def _git(git: str, top: Path, *args: str, timeout: float = _TIMEOUT_S) -> bytes:
    try:
        res = subprocess.run([git, *_SAFE, "-C", str(top), *args], capture_output=True, timeout=timeout,
                             check=False, env=_env(), stdin=subprocess.DEVNULL)
    except subprocess.TimeoutExpired:
        raise _GitFailed(f"git {args[0]} timed out after {timeout:g} s") from None
    except OSError as exc:
        raise _GitFailed(f"git {args[0]}: {exc}") from None
    if res.returncode != 0:
        msg = res.stderr.decode("utf-8", "replace").strip().splitlines()
        raise _GitFailed(f"git {args[0]} exited {res.returncode}: {msg[-1] if msg else ''}".rstrip(": "))
    return res.stdout


def _git_sha256(git: str, top: Path, *args: str, timeout: float = _TIMEOUT_S) -> str:
    """SHA-256 of a git command's stdout, read in chunks (a large diff is never held whole)."""
    try:
        proc = subprocess.Popen([git, *_SAFE, "-C", str(top), *args], stdout=subprocess.PIPE,
                                stderr=subprocess.DEVNULL, stdin=subprocess.DEVNULL, env=_env())
    except OSError as exc:
        raise _GitFailed(f"git {args[0]}: {exc}") from None
    timer = threading.Timer(timeout, proc.kill)
    timer.start()
    h = hashlib.sha256()
    try:
        assert proc.stdout is not None
        while chunk := proc.stdout.read(_CHUNK):
            h.update(chunk)
        rc = proc.wait()
    finally:
        timer.cancel()
        if proc.poll() is None:
            proc.kill()
            proc.wait()
        if proc.stdout is not None:
            proc.stdout.close()
    if rc != 0:
        raise _GitFailed(f"git {args[0]} exited {rc}" + (f" (killed after {timeout:g} s)" if rc < 0 else ""))
    return h.hexdigest()


def _file_entry(path: Path, max_file_bytes: int) -> tuple[str, bool]:
    """(content hash, hashed in full) of one untracked entry, never following a link or opening a FIFO."""
    st = path.lstat()
    if stat.S_ISLNK(st.st_mode):
        return "symlink:" + hashlib.sha256(os.fsencode(os.readlink(path))).hexdigest(), True
    if not stat.S_ISREG(st.st_mode):
        return f"special:{stat.filemode(st.st_mode)[0]}", True
    if st.st_size > max_file_bytes:
        return f"size:{st.st_size}", False
    h = hashlib.sha256()
    fd = os.open(path, os.O_RDONLY | getattr(os, "O_NOFOLLOW", 0) | getattr(os, "O_NONBLOCK", 0))
    with os.fdopen(fd, "rb") as f:
        while chunk := f.read(_CHUNK):
            h.update(chunk)
    return h.hexdigest(), True


def _porcelain_paths(raw: bytes) -> list[str]:
    """Paths of ``git status --porcelain=v1 -z`` (a rename's source path is skipped)."""
    out: list[str] = []
    parts = raw.split(b"\0")
    i = 0
    while i < len(parts):
        entry = parts[i]
        i += 1
        if len(entry) < 4:
            continue
        out.append(os.fsdecode(entry[3:]))
        if entry[:1] in (b"R", b"C"):
            i += 1
    return sorted(out)


def _git_state(git: str, top: Path, max_untracked: int, max_file_bytes: int) -> dict[str, Any]:
    try:
        commit: str | None = _git(git, top, "rev-parse", "--verify", "-q", "HEAD").decode().strip()
    except _GitFailed:
        commit = None  # a repository without commits
    branch: str | None = None
    if commit:
        name = _git(git, top, "rev-parse", "--abbrev-ref", "HEAD").decode().strip()
        branch = None if name == "HEAD" else name
    dirty = _porcelain_paths(_git(git, top, "status", "--porcelain=v1", "-z", "--untracked-files=all"))
    diff = (_git_sha256(git, top, "diff", "HEAD", "--binary", "--no-ext-diff", "--no-textconv")
            if commit else None)
    listed = sorted(os.fsdecode(p) for p in
                    _git(git, top, "ls-files", "--others", "--exclude-standard", "-z").split(b"\0") if p)
    kept = listed[:max_untracked]
    pairs: list[list[str]] = []
    not_hashed: list[str] = []
    for rel in kept:
        try:
            digest, whole = _file_entry(top / rel, max_file_bytes)
        except OSError as exc:  # vanished or unreadable since git listed it
            digest, whole = f"error:{exc.strerror or exc}", False
        pairs.append([rel, digest])
        if not whole:
            not_hashed.append(rel)
    return {"root": str(top), "commit": commit, "branch": branch, "dirty_paths": dirty, "dirty": bool(dirty),
            "diff_sha256": diff, "untracked": kept, "untracked_count": len(listed),
            "untracked_truncated": len(listed) > len(kept), "untracked_not_hashed": not_hashed,
            "untracked_sha256": sha256_json(pairs)}


def _url_path(url: str) -> Path | None:
    parsed = urlparse(url)
    return Path(unquote(parsed.path)) if parsed.scheme == "file" else None


def distribution_state(distribution: str, tree: Path | None) -> dict[str, Any]:
    """The installed distribution as this interpreter sees it: version, location, and, from its
    ``direct_url.json``, whether it is an editable install and whether that install's directory is
    ``tree`` or inside it (a ``pip install -e python/`` of a repository counts as pointing here).
    Raises ``importlib.metadata.PackageNotFoundError`` when it is not installed."""
    dist = importlib.metadata.distribution(distribution)
    editable = False
    url: str | None = None
    raw = dist.read_text("direct_url.json")
    if raw:
        try:
            direct = json.loads(raw)
        except ValueError:
            direct = {}
        if isinstance(direct, dict):
            url = direct.get("url") if isinstance(direct.get("url"), str) else None
            info = direct.get("dir_info")
            editable = bool(isinstance(info, dict) and info.get("editable"))
    points = False
    target = _url_path(url) if url else None
    if editable and target is not None and tree is not None:
        t, root = target.resolve(), tree.resolve()
        points = t == root or root in t.parents
    return {"name": dist.metadata["Name"] or distribution, "version": dist.version,
            "location": str(dist.locate_file("")), "editable": editable, "url": url, "editable_points_here": points}


def source_tree_state(name: str, path: Path | str, distribution: str | None, *,
                      max_untracked: int = MAX_UNTRACKED, max_file_bytes: int = MAX_FILE_BYTES) -> dict[str, Any]:
    """The recorded state of one source tree: ``{"name", "path", "git", "distribution", "error"}``.

    ``git`` is None when the path is not (inside) a git work tree; ``distribution`` is None when none
    is named or it is not installed. ``error`` joins every problem met (None when there was none)."""
    p = Path(path)
    errors: list[str] = []
    git_rec: dict[str, Any] | None = None
    git = shutil.which("git")
    if not p.is_dir():
        errors.append(f"{p}: no such directory")
    elif git is None:
        errors.append("no git binary on PATH; the tree's git state is not recorded")
    else:
        try:
            top = Path(_git(git, p, "rev-parse", "--show-toplevel").decode().strip())
            git_rec = _git_state(git, top, max_untracked, max_file_bytes)
        except _GitFailed as exc:
            errors.append(f"{p}: not a readable git work tree ({exc})")
    dist_rec: dict[str, Any] | None = None
    if distribution:
        try:
            dist_rec = distribution_state(distribution, p if p.is_dir() else None)
        except importlib.metadata.PackageNotFoundError:
            errors.append(f"distribution {distribution!r} is not installed in {sys.executable}")
        except (OSError, ValueError) as exc:
            errors.append(f"distribution {distribution!r}: {exc}")
    return {"name": name, "path": str(p), "git": git_rec, "distribution": dist_rec,
            "error": "; ".join(errors) if errors else None}
