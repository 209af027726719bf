"""The public surface of harness.evidence (its ``__all__``) is exactly what the other packages of harness
import from it (pure: reads the sources)."""

from __future__ import annotations

import ast
from pathlib import Path

from harness import evidence

HARNESS = Path(evidence.__file__).resolve().parents[1]


def _imported_from_evidence() -> set[str]:
    """Names other packages import from ``harness.evidence`` or one of its modules."""
    names: set[str] = set()
    for path in HARNESS.rglob("*.py"):
        if HARNESS / "evidence" in path.parents:
            continue
        for node in ast.walk(ast.parse(path.read_text(), str(path))):
            if isinstance(node, ast.ImportFrom) and (node.module or "").startswith("harness.evidence"):
                names |= {a.name for a in node.names}
    return names


def test_all_lists_what_other_packages_import() -> None:
    assert set(evidence.__all__) == _imported_from_evidence()
    for name in evidence.__all__:
        assert getattr(evidence, name) is not None
