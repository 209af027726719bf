"""Archive directories from a place that is not trusted (another host's workspace): their layout
checked without following any link or reading anything but the manifest (edge module: files). The
hashes are checked by :func:`harness.store.archive.open_verified` on the copy that is used.
"""

from __future__ import annotations

import json
import os
import stat
from pathlib import Path
from typing import Any

from harness.formats import read_regular
from harness.store.archive import MANIFEST, is_archive_id, manifest_id

FOREIGN_MANIFEST_MAX_BYTES = 64 * 2**20
_FOREIGN_MAX_DEPTH = 8


def foreign_files(path: Path) -> tuple[dict[str, int], list[str]]:
    """Walk an archive directory from a place that is not trusted without following any link:
    (regular files as relative path -> size, problems). A symlink, a special file (FIFO, socket,
    device) or a directory nested deeper than any archive has is a problem, never followed."""
    files: dict[str, int] = {}
    problems: list[str] = []

    def walk(d: Path, rel: str, depth: int) -> None:
        try:
            entries = sorted(os.scandir(d), key=lambda e: e.name)
        except OSError as exc:
            problems.append(f"unreadable directory: {rel or '.'} ({exc.strerror or exc})")
            return
        for e in entries:
            name = f"{rel}{e.name}"
            try:
                st = e.stat(follow_symlinks=False)
            except OSError as exc:
                problems.append(f"cannot stat: {name} ({exc.strerror or exc})")
                continue
            if stat.S_ISLNK(st.st_mode):
                problems.append(f"symlink: {name} (links are never followed out of another host's archive)")
            elif stat.S_ISDIR(st.st_mode):
                if depth >= _FOREIGN_MAX_DEPTH:
                    problems.append(f"directory nested too deep: {name}")
                else:
                    walk(Path(e.path), f"{name}/", depth + 1)
            elif stat.S_ISREG(st.st_mode):
                files[name] = st.st_size
            else:
                problems.append(f"not a regular file: {name}")

    walk(path, "", 0)
    return files, problems


def foreign_archive_problems(path: Path) -> list[str]:
    """What keeps an archive directory from an untrusted place (another host's workspace) from being
    taken as it is, checked without following links or reading anything but the manifest: the
    directory itself a symlink or not named by a 16-hex id; a symlink or special file anywhere in it;
    a manifest that cannot be read, whose id is not the directory's name or does not certify its
    content, or whose file entries are not plain relative paths; a file the manifest does not list
    or lists with another size. [] when the layout is sound (the hashes are checked by
    :func:`open_verified` on the copy that is used)."""
    try:
        st = os.lstat(path)
    except OSError as exc:
        return [f"cannot stat the archive directory ({exc.strerror or exc})"]
    if stat.S_ISLNK(st.st_mode):
        return ["the archive directory is a symlink (never followed)"]
    if not stat.S_ISDIR(st.st_mode):
        return ["not a directory"]
    if not is_archive_id(path.name):
        return [f"directory name {path.name!r} is not an archive id (16 hex digits)"]
    files, problems = foreign_files(path)
    if problems:
        return problems
    if MANIFEST not in files:
        return [f"no {MANIFEST}"]
    return _foreign_manifest_problems(path, files)


def _foreign_manifest_problems(path: Path, files: dict[str, int]) -> list[str]:
    """The manifest part of :func:`foreign_archive_problems` (``files``: what the walk found)."""
    problems: list[str] = []
    try:
        raw = read_regular(path / MANIFEST, FOREIGN_MANIFEST_MAX_BYTES, follow_symlinks=False)
        manifest = json.loads(raw.decode("utf-8"))
    except (OSError, ValueError, RecursionError) as exc:
        return [f"{MANIFEST}: cannot be read: {str(exc)[:200]}"]
    if not isinstance(manifest, dict) or not isinstance(manifest.get("files"), dict):
        return [f"{MANIFEST}: not a dsv4h manifest (no 'files' mapping)"]
    if manifest.get("archive_id") != path.name:
        return [f"{MANIFEST}: archive id {str(manifest.get('archive_id'))[:40]!r} is not the directory's name"]
    if manifest_id(manifest) != path.name:
        return [f"{MANIFEST}: its id does not certify its content"]
    listed: dict[str, Any] = manifest["files"]
    for rel, meta in sorted(listed.items()):
        parts = Path(rel).parts
        if not rel or Path(rel).is_absolute() or ".." in parts or "." in parts or rel != Path(rel).as_posix() \
                or rel == MANIFEST:
            problems.append(f"manifest: file entry {rel[:200]!r} is not a plain path inside the archive")
        elif rel not in files:
            problems.append(f"missing: {rel}")
        elif not isinstance(meta, dict) or meta.get("bytes") != files[rel]:
            problems.append(f"changed: {rel} (size {files[rel]} is not the manifest's)")
    problems += [f"extra: {rel}" for rel in sorted(files) if rel != MANIFEST and rel not in listed]
    return problems
