"""The model patch series: the series file's schema, and loading it with its diffs (pure but for reading).

Contract: :func:`parse_series` validates series data against the diff bytes of its patches and reads no
file; :func:`load_series` reads ``series.yaml`` and the diffs it names (paths relative to the series
file). Both return a :class:`Series` or raise ``SpecError`` (malformed series) / ``PatchError`` (a diff
missing or disagreeing with the series). Nothing here looks at a target tree; status, apply and revert
live in :mod:`harness.patches.series_status` and :mod:`harness.patches.series`.

The series file (``model_patches/series.yaml``) lists each patch with the sha256 of its diff file
and, for every file the diff touches, the sha256 of that file before (``base``) and after
(``patched``) the patch (``null`` = the file does not exist). Per target file those hashes form a chain
(base of the first patch touching it, then each patch's post-image) that must be consistent and never
return to an earlier state.

Series format history (``SERIES_FORMAT_VERSION``):
  1 - first version (2026-11-29): patches with id, file, sha256, target {package, version},
      description, default_off, enable {env, flag}, evidence, files {path: {base, patched}}.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from pydantic import Field, field_validator, model_validator

from harness.errors import PatchError
from harness.formats import Strict, parse_model, read_yaml
from harness.hashing import sha256_bytes
from harness.patches.unified_diff import FileDiff, check_rel_path, parse_unified_diff

__all__ = [
    "SERIES_FORMAT_VERSION",
    "EnableSpec",
    "FileHashes",
    "Patch",
    "PatchSpec",
    "PatchTarget",
    "Series",
    "SeriesSpec",
    "load_series",
    "parse_series",
    "short_hash",
]

SERIES_FORMAT_VERSION = 1

_SHA256 = r"^[0-9a-f]{64}$"
_ID = r"^[a-z0-9][a-z0-9._-]*$"


# --- series model ----------------------------------------------------------------------------


class PatchTarget(Strict):
    """The package a patch is written against and the exact version its hashes come from."""

    package: str = Field(pattern=r"^[A-Za-z_][A-Za-z0-9_]*$")
    version: str = Field(min_length=1)


class EnableSpec(Strict):
    """How a default-off patch is switched on at run time (an env var, a server flag, or both)."""

    env: str | None = Field(None, pattern=r"^[A-Za-z_][A-Za-z0-9_]*$")
    flag: str | None = Field(None, pattern=r"^--[a-z0-9][a-z0-9-]*$")

    @model_validator(mode="after")
    def _one(self) -> EnableSpec:
        if not self.env and not self.flag:
            raise ValueError("enable needs 'env' or 'flag' (how the default-off path is switched on)")
        return self


class FileHashes(Strict):
    """sha256 of one target file before and after the patch; ``null`` = the file does not exist."""

    base: str | None = Field(None, pattern=_SHA256)
    patched: str | None = Field(None, pattern=_SHA256)

    @model_validator(mode="after")
    def _differ(self) -> FileHashes:
        if self.base == self.patched:
            raise ValueError("base and patched are equal: the patch would not change this file")
        return self


class PatchSpec(Strict):
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
            check_rel_path(path)
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


class SeriesSpec(Strict):
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
                        f"patch '{p.id}': base of '{path}' is {short_hash(h.base)} but the previous patch "
                        f"touching it leaves {short_hash(chain[-1])}; record the hashes in series order")
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



def short_hash(h: str | None) -> str:
    """A sha256 shortened for messages: its first 12 digits, or ``absent`` for ``None`` (no file)."""
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
