"""Model patches: a versioned series of unified diffs applied to an installed SGLang tree.

Parsing and validation (``parse_series``; diffs in ``harness.unified_diff``) are pure;
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

Series format history (``SERIES_FORMAT_VERSION``):
  1 - first version (2026-11-29): patches with id, file, sha256, target {package, version},
      description, default_off, enable {env, flag}, evidence, files {path: {base, patched}}.

State file format history (``STATE_FORMAT_VERSION``; ``<package dir>/.dsv4h-patches.json``):
  1 - first version (2026-11-29).
"""

from __future__ import annotations

import contextlib
import json
import os
import re
import time
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, field_validator, model_validator

from harness.errors import PatchError
from harness.hashing import sha256_bytes
from harness.spec import parse_model, read_yaml
from harness.unified_diff import FileDiff, _check_rel_path, apply_file_diff, parse_unified_diff

SERIES_FORMAT_VERSION = 1
STATE_FORMAT_VERSION = 1
STATE_FILE = ".dsv4h-patches.json"

_SHA256 = r"^[0-9a-f]{64}$"
_ID = r"^[a-z0-9][a-z0-9._-]*$"


# --- series model ----------------------------------------------------------------------------


class _Strict(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)


class PatchTarget(_Strict):
    """The package a patch is written against and the exact version its hashes come from."""

    package: str = Field(pattern=r"^[A-Za-z_][A-Za-z0-9_]*$")
    version: str = Field(min_length=1)


class EnableSpec(_Strict):
    """How a default-off patch is switched on at run time (an env var, a server flag, or both)."""

    env: str | None = Field(None, pattern=r"^[A-Za-z_][A-Za-z0-9_]*$")
    flag: str | None = Field(None, pattern=r"^--[a-z0-9][a-z0-9-]*$")

    @model_validator(mode="after")
    def _one(self) -> EnableSpec:
        if not self.env and not self.flag:
            raise ValueError("enable needs 'env' or 'flag' (how the default-off path is switched on)")
        return self


class FileHashes(_Strict):
    """sha256 of one target file before and after the patch; ``null`` = the file does not exist."""

    base: str | None = Field(None, pattern=_SHA256)
    patched: str | None = Field(None, pattern=_SHA256)

    @model_validator(mode="after")
    def _differ(self) -> FileHashes:
        if self.base == self.patched:
            raise ValueError("base and patched are equal: the patch would not change this file")
        return self


class PatchSpec(_Strict):
    """One patch of the series."""

    id: str = Field(pattern=_ID)
    file: str = Field(min_length=1, description="the unified diff, relative to the series file")
    sha256: str = Field(pattern=_SHA256, description="sha256 of the diff file")
    target: PatchTarget
    description: str = Field(min_length=1, description="what it changes")
    default_off: bool
    enable: EnableSpec | None = None
    evidence: list[str] = Field(min_length=1, description="the evidence or rule it relates to")
    files: dict[str, FileHashes] = Field(min_length=1)

    @field_validator("files")
    @classmethod
    def _paths(cls, v: dict[str, FileHashes]) -> dict[str, FileHashes]:
        for path in v:
            _check_rel_path(path)
        return v

    @model_validator(mode="after")
    def _enable(self) -> PatchSpec:
        if self.default_off and self.enable is None:
            raise ValueError(f"patch '{self.id}' is default_off but has no 'enable' (env or flag)")
        for path in self.files:
            if not path.startswith(self.target.package + "/"):
                raise ValueError(f"patch '{self.id}': file '{path}' is not inside package "
                                 f"'{self.target.package}/'")
        return self


class SeriesSpec(_Strict):
    """The series file."""

    format_version: int = SERIES_FORMAT_VERSION
    name: str = Field(pattern=_ID)
    description: str = ""
    patches: list[PatchSpec]

    @model_validator(mode="after")
    def _check(self) -> SeriesSpec:
        if self.format_version != SERIES_FORMAT_VERSION:
            raise ValueError(f"format_version {self.format_version} is not supported "
                             f"(this dsv4h reads {SERIES_FORMAT_VERSION})")
        ids = [p.id for p in self.patches]
        dup = sorted({i for i in ids if ids.count(i) > 1})
        if dup:
            raise ValueError(f"duplicate patch ids: {', '.join(dup)}")
        targets = {(p.target.package, p.target.version) for p in self.patches}
        if len(targets) > 1:
            raise ValueError(f"all patches of a series must target one package version, got {sorted(targets)}")
        chains: dict[str, list[str | None]] = {}
        for p in self.patches:
            for path, h in p.files.items():
                chain = chains.setdefault(path, [h.base])
                if chain[-1] != h.base:
                    raise ValueError(
                        f"patch '{p.id}': base of '{path}' is {_short(h.base)} but the previous patch "
                        f"touching it leaves {_short(chain[-1])}; record the hashes in series order")
                if h.patched in chain:
                    raise ValueError(f"patch '{p.id}': '{path}' returns to an earlier state of its hash "
                                     "chain; status would be ambiguous")
                chain.append(h.patched)
        return self

    @property
    def package(self) -> str | None:
        """The target package (None for an empty series)."""
        return self.patches[0].target.package if self.patches else None

    @property
    def version(self) -> str | None:
        """The target version (None for an empty series)."""
        return self.patches[0].target.version if self.patches else None


def _short(h: str | None) -> str:
    return "absent" if h is None else h[:12]


# --- loading a series ------------------------------------------------------------------------


@dataclass(frozen=True)
class Patch:
    """A validated patch: its spec, raw diff bytes and parsed file diffs."""

    spec: PatchSpec
    diff: bytes
    files: tuple[FileDiff, ...]


@dataclass(frozen=True)
class Series:
    """A validated series: spec, source path, sha256 of the series file and the patches in order."""

    spec: SeriesSpec
    path: str
    sha256: str
    patches: tuple[Patch, ...]

    @property
    def package(self) -> str:
        """The target package name."""
        return self.spec.package or "sglang"

    def chains(self) -> dict[str, list[tuple[str | None, str | None]]]:
        """Per target file, the (patch id, hash) chain: ``(None, base)`` then ``(id, patched)`` per patch."""
        out: dict[str, list[tuple[str | None, str | None]]] = {}
        for p in self.patches:
            for path, h in p.spec.files.items():
                out.setdefault(path, [(None, h.base)]).append((p.spec.id, h.patched))
        return out


def parse_series(data: Any, diffs: Mapping[str, bytes], *, source: str = "series.yaml",
                 series_sha256: str = "") -> Series:
    """Validate series ``data`` against the diff bytes of its patches (keyed by ``file``); pure.

    Raises ``SpecError`` for a malformed series and ``PatchError`` naming the patch when a diff is
    missing, its sha256 differs from the series, or the files it touches differ from ``files``.
    """
    spec = parse_model(SeriesSpec, data, source)
    patches: list[Patch] = []
    for p in spec.patches:
        if p.file not in diffs:
            raise PatchError(f"patch '{p.id}': diff file '{p.file}' not found (series {source})",
                             hint="restore the file or fix 'file' in the series")
        raw = diffs[p.file]
        digest = sha256_bytes(raw)
        if digest != p.sha256:
            raise PatchError(
                f"patch '{p.id}': {p.file} has sha256 {digest}, the series records {p.sha256}",
                hint="the diff changed after it was recorded; if the change is intended, record the new "
                "hashes (dsv4h patches describe) and add a history line to the series")
        files = parse_unified_diff(raw, f"patch '{p.id}' ({p.file})")
        touched = {f.path for f in files}
        if touched != set(p.files):
            raise PatchError(
                f"patch '{p.id}': the diff touches {sorted(touched)} but the series lists {sorted(p.files)}",
                hint="list exactly the diff's files under 'files' with their base and patched hashes")
        for f in files:
            h = p.files[f.path]
            if f.old_exists != (h.base is not None) or f.new_exists != (h.patched is not None):
                raise PatchError(f"patch '{p.id}': '{f.path}': creation/deletion in the diff disagrees with "
                                 "the series (null base = created, null patched = deleted)",
                                 hint="fix 'files' in the series")
        patches.append(Patch(p, raw, files))
    return Series(spec, source, series_sha256, tuple(patches))


def load_series(path: Path) -> Series:
    """Read and validate a series file and its diffs (paths relative to the series file)."""
    data = read_yaml(path)
    raw_series = path.read_bytes()
    diffs: dict[str, bytes] = {}
    if isinstance(data, dict):
        for entry in data.get("patches") or []:
            if isinstance(entry, dict) and isinstance(entry.get("file"), str):
                f = path.parent / entry["file"]
                if f.is_file():
                    diffs[entry["file"]] = f.read_bytes()
    return parse_series(data, diffs, source=str(path), series_sha256=sha256_bytes(raw_series))


# --- the target tree -------------------------------------------------------------------------

Layout = Literal["site-packages", "source-checkout"]


@dataclass(frozen=True)
class PackageTree:
    """Where the package lives: ``root`` holds the package directory (diff paths are relative to it)."""

    root: Path
    package: str
    layout: Layout
    version: str | None

    @property
    def package_dir(self) -> Path:
        """``root/<package>``."""
        return self.root / self.package

    @property
    def state_path(self) -> Path:
        """The state file written by apply/revert."""
        return self.package_dir / STATE_FILE


_VERSION_RES = (
    re.compile(r"""^__version__\s*=\s*(?:version\s*=\s*)?['"]([^'"]+)['"]""", re.M),
    re.compile(r"""^version\s*=\s*['"]([^'"]+)['"]""", re.M),
)


def _read_version(root: Path, package: str, layout: Layout) -> str | None:
    if layout == "site-packages":
        norm = package.replace("-", "_").lower()
        for info in sorted(root.glob("*.dist-info")):
            name = info.name[: -len(".dist-info")].rsplit("-", 1)[0].replace("-", "_").lower()
            meta = info / "METADATA"
            if name == norm and meta.is_file():
                for line in meta.read_text(encoding="utf-8", errors="replace").splitlines():
                    if line.startswith("Version:"):
                        return line.split(":", 1)[1].strip()
    candidates = [root / package / "_version.py", root / package / "version.py", root / "pyproject.toml"]
    for c in candidates:
        if c.is_file():
            text = c.read_text(encoding="utf-8", errors="replace")
            for rx in _VERSION_RES:
                m = rx.search(text)
                if m:
                    return m.group(1)
    return None


def locate_package(target: Path, package: str = "sglang") -> PackageTree:
    """Find ``package`` under ``target`` and say which layout it is.

    Accepted: a site-packages directory (holds ``sglang/`` and usually ``sglang-X.dist-info``), the
    ``sglang/`` package directory itself, a source checkout (``<checkout>/python/sglang``) or its
    ``python/`` directory. The version comes from the dist-info METADATA, else ``_version.py``,
    ``version.py`` or ``pyproject.toml``. Raises ``PatchError`` when no package is found.
    """
    target = target.expanduser()
    candidates = [target, target.parent if target.name == package else None, target / "python"]
    for root in candidates:
        if root is not None and (root / package / "__init__.py").is_file():
            source = (root / "pyproject.toml").is_file() or (root.parent / ".git").exists()
            has_dist = any(root.glob(f"{package}-*.dist-info"))
            layout: Layout = "source-checkout" if source and not has_dist else "site-packages"
            return PackageTree(root.resolve(), package, layout, _read_version(root, package, layout))
    raise PatchError(
        f"no '{package}' package under {target}",
        hint=f"pass a site-packages directory, the {package}/ directory, or a source checkout "
        f"(e.g. $(python -c 'import {package}, os; print(os.path.dirname({package}.__path__[0]))'))")


# --- status / apply / revert -----------------------------------------------------------------

PatchStatus = Literal["applied", "unapplied", "partial"]
Overall = Literal["applied", "unapplied", "mixed", "partial", "modified"]


@dataclass(frozen=True)
class FileState:
    """One target file: current sha256 (None = absent) and its position in the hash chain
    (number of series patches touching it that are applied; None = matches no hash: modified)."""

    path: str
    current: str | None
    position: int | None
    chain: tuple[tuple[str | None, str | None], ...]


@dataclass(frozen=True)
class PatchState:
    """One patch: its status and, per file, ``applied``/``unapplied``/``modified``."""

    id: str
    status: PatchStatus | Literal["modified"]
    files: dict[str, str]


@dataclass(frozen=True)
class SeriesStatus:
    """The state of a target tree against a series."""

    tree: PackageTree
    overall: Overall
    patches: tuple[PatchState, ...]
    files: tuple[FileState, ...]
    version_expected: str | None

    @property
    def modified_files(self) -> list[str]:
        """Files matching no hash of their chain."""
        return [f.path for f in self.files if f.position is None]

    @property
    def applied(self) -> list[str]:
        """Ids of fully applied patches, in series order."""
        return [p.id for p in self.patches if p.status == "applied"]

    @property
    def version_matches(self) -> bool:
        """Whether the tree's version is the series' target version (unknown counts as no)."""
        return self.version_expected is None or self.tree.version == self.version_expected


def _read_current(root: Path, path: str) -> bytes | None:
    p = root / path
    try:
        return p.read_bytes()
    except FileNotFoundError:
        return None
    except IsADirectoryError as exc:
        raise PatchError(f"{p} is a directory", hint="check the target tree") from exc


def _status_from_contents(series: Series, tree: PackageTree, contents: Mapping[str, bytes | None]) -> SeriesStatus:
    files: list[FileState] = []
    pos: dict[str, int | None] = {}
    for path, chain in series.chains().items():
        data = contents[path]
        current = None if data is None else sha256_bytes(data)
        hashes = [h for _, h in chain]
        position = hashes.index(current) if current in hashes else None
        pos[path] = position
        files.append(FileState(path, current, position, tuple(chain)))
    states: list[PatchState] = []
    chains = series.chains()
    for p in series.patches:
        per: dict[str, str] = {}
        for path in p.spec.files:
            index = [pid for pid, _ in chains[path]].index(p.spec.id)  # 1-based position of this patch
            position = pos[path]
            per[path] = "modified" if position is None else ("applied" if position >= index else "unapplied")
        values = set(per.values())
        status: PatchStatus | Literal["modified"]
        if "modified" in values:
            status = "modified"
        elif values == {"applied"}:
            status = "applied"
        elif values == {"unapplied"}:
            status = "unapplied"
        else:
            status = "partial"
        states.append(PatchState(p.spec.id, status, per))
    kinds = {s.status for s in states}
    overall: Overall
    if any(f.position is None for f in files):
        overall = "modified"
    elif "partial" in kinds:
        overall = "partial"
    elif kinds <= {"applied"}:
        overall = "applied"
    elif kinds == {"unapplied"}:
        overall = "unapplied"
    else:
        overall = "mixed"
    return SeriesStatus(tree, overall, tuple(states), tuple(files), series.spec.version)


def _tree_for(series: Series, target: Path) -> PackageTree:
    return locate_package(target, series.package)


def _read_all(series: Series, tree: PackageTree) -> dict[str, bytes | None]:
    return {path: _read_current(tree.root, path) for path in series.chains()}


def status(series: Series, target: Path) -> SeriesStatus:
    """Where each patch of ``series`` stands in the tree at ``target`` (reads, never writes)."""
    tree = _tree_for(series, target)
    return _status_from_contents(series, tree, _read_all(series, tree))


def _refuse_unsafe(st: SeriesStatus, series: Series, action: str) -> None:
    if st.overall == "modified":
        lines = []
        for f in st.files:
            if f.position is None:
                expected = ", ".join(_short(h) for _, h in f.chain)
                lines.append(f"  {f.path}: sha256 {_short(f.current)} matches none of [{expected}]")
        version = ("" if st.version_matches else
                   f" (tree has {st.tree.package} {st.tree.version or 'of unknown version'}, "
                   f"the series targets {st.version_expected})")
        raise PatchError(
            f"refusing to {action}: {len(lines)} file(s) of {st.tree.package_dir} differ from the series' "
            f"expected base and patched versions{version}:\n" + "\n".join(lines),
            hint=f"reinstall {st.tree.package}=={st.version_expected} (pip install --force-reinstall "
            "--no-deps), or rebase the series onto this tree")
    if st.overall == "partial":
        bad = [f"  {p.id}: " + ", ".join(f"{k} {v}" for k, v in p.files.items())
               for p in st.patches if p.status == "partial"]
        raise PatchError(f"refusing to {action}: some patches are half-applied:\n" + "\n".join(bad),
                         hint="restore the named files from a clean install of the package")


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
                    f"patch '{p.spec.id}': {fd.path}: the result has sha256 {_short(got)}, the series "
                    f"records {_short(want)}; nothing was written",
                    hint="the series' hashes do not match its diff; record them again (dsv4h patches describe)")
            mem[fd.path] = new
        done.append(p.spec.id)
    changed = {k: v for k, v in mem.items() if v != contents[k]}
    return done, changed


def _write_atomic(path: Path, data: bytes, mode: int | None) -> None:
    tmp = path.with_name(f".{path.name}.dsv4h-tmp-{os.getpid()}")
    try:
        with open(tmp, "wb") as f:
            f.write(data)
            f.flush()
            os.fsync(f.fileno())
        if mode is not None:
            os.chmod(tmp, mode)
        os.replace(tmp, path)
    except BaseException:
        with contextlib.suppress(OSError):
            tmp.unlink()
        raise


def _set_content(path: Path, data: bytes | None, mode: int | None) -> None:
    if data is None:
        with contextlib.suppress(FileNotFoundError):
            path.unlink()
    else:
        _write_atomic(path, data, mode)


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
    _write_atomic(path, (json.dumps(state, indent=1, sort_keys=True) + "\n").encode(), None)
    return str(path)


def _change(series: Series, target: Path, *, reverse: bool) -> ChangeResult:
    action: Literal["apply", "revert"] = "revert" if reverse else "apply"
    tree = _tree_for(series, target)
    contents = _read_all(series, tree)
    st = _status_from_contents(series, tree, contents)
    _refuse_unsafe(st, series, action)
    done, changes = _plan(series, st, contents, reverse=reverse)
    if not done:
        return ChangeResult(action, False, (), {}, str(tree.state_path) if tree.state_path.exists() else None, tree)
    _commit(tree.root, contents, changes)
    files = {k: (None if contents[k] is None else sha256_bytes(contents[k] or b""),
                 None if v is None else sha256_bytes(v)) for k, v in changes.items()}
    after = _status_from_contents(series, tree, {**contents, **changes})
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


def patch_identity(series: Series, target: Path) -> dict[str, Any]:
    """What joins the service identity in archives: the series (name, sha256), the tree (package,
    version, layout), each patch's id, diff sha256, status, default_off and enabling switch, and the
    current sha256 of every file the series touches. Deterministic for a given tree (no times)."""
    st = status(series, target)
    by_id = {p.id: p for p in st.patches}
    return {
        "series": series.spec.name,
        "series_format_version": series.spec.format_version,
        "series_sha256": series.sha256,
        "package": st.tree.package,
        "version": st.tree.version,
        "version_expected": st.version_expected,
        "layout": st.tree.layout,
        "status": st.overall,
        "patches": [
            {
                "id": p.spec.id,
                "sha256": p.spec.sha256,
                "status": by_id[p.spec.id].status,
                "default_off": p.spec.default_off,
                "enable": p.spec.enable.model_dump() if p.spec.enable else None,
            }
            for p in series.patches
        ],
        "files": {f.path: f.current for f in st.files},
    }


def describe_diff(diff: bytes, target: Path, package: str = "sglang", source: str = "<diff>") -> dict[str, Any]:
    """For authoring a series entry: the sha256 of ``diff`` and, per file, the base hash in the tree
    at ``target`` and the patched hash after applying ``diff`` in memory. Reads, never writes."""
    tree = locate_package(target, package)
    files: dict[str, dict[str, str | None]] = {}
    for fd in parse_unified_diff(diff, source):
        before = _read_current(tree.root, fd.path)
        after = apply_file_diff(fd, before)
        files[fd.path] = {"base": None if before is None else sha256_bytes(before),
                          "patched": None if after is None else sha256_bytes(after)}
    return {"sha256": sha256_bytes(diff), "target": {"package": package, "version": tree.version},
            "files": files}
