"""The public surface of each subpackage of harness.service (its ``__all__``) is exactly what the other
packages of harness import from its modules, and importing a subpackage imports none of its modules
(pure: reads the sources; one fresh interpreter)."""

from __future__ import annotations

import ast
import importlib
import subprocess
import sys
from pathlib import Path

import pytest

from harness import service

SERVICE = Path(service.__file__).resolve().parent
HARNESS = SERVICE.parent
SUBPACKAGES = ("launch", "identity", "devices")


def _imported_from(sub: str) -> set[str]:
    """Names other packages import from ``harness.service.<sub>``'s modules, less those named as their
    module is (a package attribute of that name is the module)."""
    names: set[str] = set()
    for path in HARNESS.rglob("*.py"):
        if SERVICE / sub in path.parents:
            continue
        for node in ast.walk(ast.parse(path.read_text(), str(path))):
            if isinstance(node, ast.ImportFrom) and (node.module or "").startswith(f"harness.service.{sub}."):
                module = (node.module or "").split(".")[3]
                names |= {a.name for a in node.names if a.name != module}
    return names


@pytest.mark.parametrize("sub", SUBPACKAGES)
def test_all_lists_what_other_packages_import(sub: str) -> None:
    package = importlib.import_module(f"harness.service.{sub}")
    assert set(package.__all__) == _imported_from(sub)
    for name in package.__all__:
        assert getattr(package, name) is not None


def test_importing_a_subpackage_imports_none_of_its_modules() -> None:
    code = ("import sys, harness.service.launch, harness.service.identity, harness.service.devices\n"
            "print(sorted(m for m in sys.modules if m.count('.') > 2 and m.startswith('harness.service.')))")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    assert out.strip() == "[]"
