"""The target tree: where the patched package (``sglang``) lives, its layout and version (reads only).

Contract: :func:`locate_package` finds the package under a site-packages directory, the package
directory itself or a source checkout and returns a :class:`PackageTree`; :func:`read_current` reads one
target file (``None`` = absent). Nothing here writes; only :mod:`harness.patches.series` (apply/revert)
does. Paths inside the diffs start with the package directory (``sglang/srt/...``), so they are relative
to :attr:`PackageTree.root`.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import Path
from typing import Literal

from harness.errors import PatchError

__all__ = ["STATE_FILE", "Layout", "PackageTree", "locate_package", "read_current"]

#: The state file apply/revert keep in the package directory (see :mod:`harness.patches.series`).
STATE_FILE = ".dsv4h-patches.json"

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


def read_current(root: Path, path: str) -> bytes | None:
    """The bytes of ``root/path``, ``None`` when the file does not exist; ``PatchError`` for a directory."""
    p = root / path
    try:
        return p.read_bytes()
    except FileNotFoundError:
        return None
    except IsADirectoryError as exc:
        raise PatchError(f"{p} is a directory", hint="check the target tree") from exc
