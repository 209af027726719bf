"""Unified diffs (pure): parse them and apply one file's hunks with exact context.

No fuzz and no offset: a hunk that does not match at its line is a ``PatchError`` naming the file and
the hunk number. Used by ``harness.patches.series`` for model patch series.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from harness.errors import PatchError

__all__ = ["FileDiff", "Hunk", "apply_file_diff", "parse_unified_diff"]


def check_rel_path(path: str) -> str:
    parts = path.split("/")
    if path.startswith("/") or "\\" in path or any(p in ("", ".", "..") for p in parts):
        raise ValueError(f"path '{path}' must be relative, '/'-separated, without '.', '..' or empty parts")
    return path




@dataclass(frozen=True)
class Hunk:
    """One ``@@ -a,b +c,d @@`` hunk: lines as (op, bytes including the line ending)."""

    old_start: int
    old_len: int
    new_start: int
    new_len: int
    lines: tuple[tuple[str, bytes], ...]

    def old_block(self) -> list[bytes]:
        """The pre-image lines (context and removals)."""
        return [b for op, b in self.lines if op in (" ", "-")]

    def new_block(self) -> list[bytes]:
        """The post-image lines (context and additions)."""
        return [b for op, b in self.lines if op in (" ", "+")]


@dataclass(frozen=True)
class FileDiff:
    """The hunks of one file; ``old_exists``/``new_exists`` are False for ``/dev/null``."""

    path: str
    old_exists: bool
    new_exists: bool
    hunks: tuple[Hunk, ...]


_HUNK_RE = re.compile(rb"^@@ -(\d+)(?:,(\d+))? \+(\d+)(?:,(\d+))? @@")


def _diff_path(raw: bytes, source: str, lineno: int) -> str | None:
    try:
        text = raw.rstrip(b"\r\n").split(b"\t", 1)[0].decode("utf-8", "strict").strip()
    except UnicodeDecodeError as exc:
        raise PatchError(f"{source}:{lineno}: the path is not UTF-8", hint="use UTF-8 paths") from exc
    if text == "/dev/null":
        return None
    if text.startswith(("a/", "b/")):
        text = text[2:]
    try:
        return check_rel_path(text)
    except ValueError as exc:
        raise PatchError(f"{source}:{lineno}: {exc}", hint="diff paths look like a/sglang/srt/x.py") from exc


def parse_unified_diff(data: bytes, source: str = "<diff>") -> tuple[FileDiff, ...]:
    """Parse a unified diff (``diff -u`` or ``git diff`` output) into file diffs.

    Lines outside ``---``/``+++`` headers and hunks (``diff --git``, ``index``, comments) are
    ignored. Renames, binary diffs and fuzz are not supported. Raises ``PatchError`` naming
    ``source`` and the line for anything malformed, including hunk line counts that disagree
    with the header.
    """
    lines = data.splitlines(keepends=True)
    files: list[FileDiff] = []
    seen: set[str] = set()
    i = 0
    while i < len(lines):
        if not (lines[i].startswith(b"--- ") and i + 1 < len(lines) and lines[i + 1].startswith(b"+++ ")):
            if lines[i].startswith(b"@@"):
                raise PatchError(f"{source}:{i + 1}: hunk without a ---/+++ file header",
                                 hint="regenerate the diff with diff -u or git diff")
            if lines[i].startswith((b"GIT binary patch", b"Binary files ", b"rename from ", b"copy from ")):
                raise PatchError(f"{source}:{i + 1}: binary diffs, renames and copies are not supported",
                                 hint="express the change as text hunks on one path")
            i += 1
            continue
        old = _diff_path(lines[i][4:], source, i + 1)
        new = _diff_path(lines[i + 1][4:], source, i + 2)
        header_line = i + 1
        i += 2
        if old is None and new is None:
            raise PatchError(f"{source}:{header_line}: both sides are /dev/null", hint="fix the diff header")
        if old is not None and new is not None and old != new:
            raise PatchError(f"{source}:{header_line}: renames are not supported ({old} -> {new})",
                             hint="write the change as a removal and a new file")
        path = new if new is not None else old
        assert path is not None
        if path in seen:
            raise PatchError(f"{source}:{header_line}: '{path}' appears twice in one diff",
                             hint="merge its hunks into one file section")
        seen.add(path)
        hunks: list[Hunk] = []
        while i < len(lines) and lines[i].startswith(b"@@"):
            hunk, i = _parse_hunk(lines, i, source)
            if hunks and hunk.old_start < hunks[-1].old_start + hunks[-1].old_len:
                raise PatchError(f"{source}:{i}: hunks of '{path}' overlap or are out of order",
                                 hint="regenerate the diff")
            hunks.append(hunk)
        if not hunks:
            raise PatchError(f"{source}:{header_line}: '{path}' has no hunks", hint="regenerate the diff")
        files.append(FileDiff(path, old is not None, new is not None, tuple(hunks)))
    if not files:
        raise PatchError(f"{source}: no file sections (--- / +++ headers) found",
                         hint="the file must be a unified diff")
    return tuple(files)


def _parse_hunk(lines: list[bytes], i: int, source: str) -> tuple[Hunk, int]:
    m = _HUNK_RE.match(lines[i])
    if not m:
        raise PatchError(f"{source}:{i + 1}: malformed hunk header {lines[i][:60]!r}",
                         hint="hunk headers look like @@ -10,6 +10,8 @@")
    old_start, new_start = int(m.group(1)), int(m.group(3))
    old_len = int(m.group(2)) if m.group(2) is not None else 1
    new_len = int(m.group(4)) if m.group(4) is not None else 1
    header = i + 1
    i += 1
    body: list[tuple[str, bytes]] = []
    n_old = n_new = 0
    while n_old < old_len or n_new < new_len:
        if i >= len(lines):
            raise PatchError(f"{source}:{header}: hunk is truncated (expected {old_len} old and {new_len} "
                             f"new lines, found {n_old} and {n_new})", hint="regenerate the diff")
        line = lines[i]
        if line.startswith(b"\\"):
            _strip_last_newline(body, source, i)
            i += 1
            continue
        op = line[:1].decode("latin-1")
        if line in (b"\n", b"\r\n"):  # an empty context line whose leading space was stripped
            op, content = " ", line
        elif op in (" ", "-", "+"):
            content = line[1:]
        else:
            raise PatchError(f"{source}:{i + 1}: unexpected line in hunk: {line[:60]!r}",
                             hint="hunk lines start with ' ', '-' or '+'; check the line counts in the header")
        if op in (" ", "-"):
            n_old += 1
        if op in (" ", "+"):
            n_new += 1
        body.append((op, content))
        i += 1
    if n_old != old_len or n_new != new_len:
        raise PatchError(f"{source}:{header}: hunk line counts disagree with its header "
                         f"(-{old_len} +{new_len}, found -{n_old} +{n_new})", hint="regenerate the diff")
    if i < len(lines) and lines[i].startswith(b"\\"):
        _strip_last_newline(body, source, i)
        i += 1
    return Hunk(old_start, old_len, new_start, new_len, tuple(body)), i


def _strip_last_newline(body: list[tuple[str, bytes]], source: str, i: int) -> None:
    if not body or not body[-1][1].endswith(b"\n"):
        raise PatchError(f"{source}:{i + 1}: misplaced '\\ No newline at end of file'", hint="fix the diff")
    op, content = body[-1]
    body[-1] = (op, content[:-2] if content.endswith(b"\r\n") else content[:-1])


def apply_file_diff(fd: FileDiff, content: bytes | None, *, reverse: bool = False,
                    where: str = "") -> bytes | None:
    """Apply (or with ``reverse`` un-apply) ``fd`` to ``content`` (None = file absent); pure.

    Every hunk must match exactly at its stated line (no fuzz, no offset search) and the result
    must put each hunk's post-image at its stated new line. Returns the new bytes, or None when
    the diff deletes the file. Raises ``PatchError`` naming ``where``, the file and the hunk number.
    """
    label = f"{where}{fd.path}"
    src_exists, dst_exists = (fd.new_exists, fd.old_exists) if reverse else (fd.old_exists, fd.new_exists)
    if content is None and src_exists:
        raise PatchError(f"{label}: file is missing", hint="check the target tree")
    if content is not None and not src_exists:
        raise PatchError(f"{label}: file already exists but the diff creates it", hint="check the target tree")
    old_lines = content.splitlines(keepends=True) if content is not None else []
    out: list[bytes] = []
    pos = 0
    for k, h in enumerate(fd.hunks, start=1):
        start, length, before, after, new_start, new_len = (
            (h.new_start, h.new_len, h.new_block(), h.old_block(), h.old_start, h.old_len) if reverse
            else (h.old_start, h.old_len, h.old_block(), h.new_block(), h.new_start, h.new_len))
        idx = start - 1 if length > 0 else start
        if idx < pos or idx + length > len(old_lines):
            raise PatchError(f"{label}: hunk {k} does not apply: lines {start}-{start + length - 1} are beyond "
                             f"the end of the file ({len(old_lines)} lines)",
                             hint="the file differs from the version the diff was made against")
        found = old_lines[idx: idx + length]
        if found != before:
            j = next(n for n, (a, b) in enumerate(zip(found, before, strict=True)) if a != b)
            raise PatchError(
                f"{label}: hunk {k} does not apply at line {start}: line {idx + j + 1} is "
                f"{found[j][:80]!r}, the diff expects {before[j][:80]!r}",
                hint="the file differs from the version the diff was made against")
        out.extend(old_lines[pos:idx])
        expected_at = new_start - 1 if new_len > 0 else new_start
        if len(out) != expected_at:
            raise PatchError(f"{label}: hunk {k}: its post-image would start at line {len(out) + 1}, the "
                             f"header says {new_start}", hint="the diff's hunk headers are inconsistent")
        out.extend(after)
        pos = idx + length
    out.extend(old_lines[pos:])
    if not dst_exists:
        if out:
            raise PatchError(f"{label}: the diff deletes the file but {len(out)} lines would remain",
                             hint="the file differs from the version the diff was made against")
        return None
    return b"".join(out)
