"""Where a target tree stands against a patch series: per file, per patch and overall (reads, never writes).

Contract: :func:`status` hashes every file the series touches and places it on its hash chain (base of
the first patch touching it, then each patch's post-image), so each patch is *applied*, *unapplied* or,
when its files disagree, *partial*; a file matching no hash in its chain is *modified*.
:func:`status_from_contents` does the same from contents already read (apply/revert use it before and
after planning); :func:`refuse_unsafe` is the refusal apply/revert share; :func:`patch_identity` is what
archives record about the patched tree.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal

from harness.errors import PatchError
from harness.hashing import sha256_bytes
from harness.patches.package_tree import PackageTree, locate_package, read_current
from harness.patches.series_spec import Series, short_hash

__all__ = [
    "FileState",
    "Overall",
    "PatchState",
    "PatchStatus",
    "SeriesStatus",
    "patch_identity",
    "read_contents",
    "refuse_unsafe",
    "status",
    "status_from_contents",
]


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


def status_from_contents(series: Series, tree: PackageTree, contents: Mapping[str, bytes | None]) -> SeriesStatus:
    """The status of ``tree`` given the ``contents`` of every file the series touches (``None`` = absent)."""
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


def read_contents(series: Series, tree: PackageTree) -> dict[str, bytes | None]:
    """The current bytes of every file the series touches (``None`` = absent), by path."""
    return {path: read_current(tree.root, path) for path in series.chains()}


def status(series: Series, target: Path) -> SeriesStatus:
    """Where each patch of ``series`` stands in the tree at ``target`` (reads, never writes)."""
    tree = locate_package(target, series.package)
    return status_from_contents(series, tree, read_contents(series, tree))


def refuse_unsafe(st: SeriesStatus, action: str) -> None:
    """Raise ``PatchError`` (``refusing to <action>``) when ``st`` has modified files, naming each with its
    hash and the chain it should be on, or half-applied patches, naming their files."""
    if st.overall == "modified":
        lines = []
        for f in st.files:
            if f.position is None:
                expected = ", ".join(short_hash(h) for _, h in f.chain)
                lines.append(f"  {f.path}: sha256 {short_hash(f.current)} matches none of [{expected}]")
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
