"""Every package of harness states its public surface, and the others use only that (pure: reads the
sources). A name another package imports (``from harness.X... import name``, type-checking imports
included) is a module, or is listed in the ``__all__`` of the module it is imported from or of that
module's package (docs/architecture.md, "Public surface"). Within one package (``harness.X`` and
everything below it) any name may be used. ``harness.evidence`` declares exactly what the others import
(so do the subpackages of ``harness.service``: tests/service/test_service_surface.py)."""

from __future__ import annotations

import ast
from pathlib import Path

import harness
from harness import evidence

HARNESS = Path(harness.__file__).resolve().parent


def _module_name(root: Path, path: Path) -> str:
    parts = list(path.relative_to(root.parent).with_suffix("").parts)
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def _declared_all(tree: ast.Module) -> set[str] | None:
    """The literal ``__all__`` of a module, or None when it declares none."""
    for node in tree.body:
        if isinstance(node, ast.Assign) and any(isinstance(t, ast.Name) and t.id == "__all__" for t in node.targets):
            return set(ast.literal_eval(node.value))
        if isinstance(node, ast.AnnAssign) and isinstance(node.target, ast.Name) and node.target.id == "__all__":
            assert node.value is not None
            return set(ast.literal_eval(node.value))
    return None


def _package_of(name: str) -> str:
    """``harness.X`` of a module ``harness.X...`` (a module of the top level is its own package)."""
    return ".".join(name.split(".")[:2])


def private_imports(root: Path) -> list[str]:
    """Every import of one package from another (under ``root``, a package's directory) of a name
    that neither the module imported from nor its package declares public, as
    ``importer: from module import name``."""
    trees = {_module_name(root, p): (p, ast.parse(p.read_text(), str(p))) for p in sorted(root.rglob("*.py"))}
    declared = {name: _declared_all(tree) or set() for name, (_, tree) in trees.items()}
    out: list[str] = []
    for importer, (_, tree) in trees.items():
        for node in ast.walk(tree):
            if not (isinstance(node, ast.ImportFrom) and node.module and node.module.startswith(root.name + ".")):
                continue
            target = node.module
            if _package_of(target) == _package_of(importer):
                continue
            is_package = trees.get(target, (Path(),))[0].name == "__init__.py"
            package = target if is_package else target.rpartition(".")[0]
            for alias in node.names:
                public = declared.get(target, set()) | declared.get(package, set())
                if f"{target}.{alias.name}" not in trees and alias.name not in public:
                    out.append(f"{importer}: from {target} import {alias.name}")
    return out


def _bound_names(tree: ast.Module) -> set[str]:
    """Names a module binds at its top level (in ``if``/``try`` blocks too: type-checking imports)."""
    names: set[str] = set()
    stack: list[ast.stmt] = list(tree.body)
    while stack:
        node = stack.pop()
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            names.add(node.name)
        elif isinstance(node, (ast.Import, ast.ImportFrom)):
            names |= {(a.asname or a.name).split(".")[0] for a in node.names}
        elif isinstance(node, ast.Assign):
            names |= {t.id for t in node.targets if isinstance(t, ast.Name)}
        elif isinstance(node, ast.AnnAssign) and isinstance(node.target, ast.Name):
            names.add(node.target.id)
        elif isinstance(node, (ast.If, ast.Try)):
            stack.extend([*node.body, *node.orelse, *getattr(node, "finalbody", [])])
            stack.extend(s for h in getattr(node, "handlers", []) for s in h.body)
    return names


def test_other_packages_import_only_public_names() -> None:
    assert private_imports(HARNESS) == []


def test_every_public_name_is_defined_where_it_is_declared() -> None:
    missing = []
    for path in sorted(HARNESS.rglob("*.py")):
        tree = ast.parse(path.read_text(), str(path))
        declared = _declared_all(tree)
        if declared is not None:
            missing += [f"{path.relative_to(HARNESS.parent)}: {n}" for n in sorted(declared - _bound_names(tree))]
    assert missing == []


def test_every_package_and_its_cross_package_modules_declare_a_surface() -> None:
    """Each module another package imports names from declares ``__all__``, or its package does."""
    trees = {_module_name(HARNESS, p): ast.parse(p.read_text(), str(p)) for p in HARNESS.rglob("*.py")}
    bare: set[str] = set()
    for importer, tree in trees.items():
        for node in ast.walk(tree):
            if isinstance(node, ast.ImportFrom) and (node.module or "").startswith("harness.") and (
                    _package_of(node.module or "") != _package_of(importer)):
                target = node.module or ""
                names = [a.name for a in node.names if f"{target}.{a.name}" not in trees]
                parent = target.rpartition(".")[0]
                if names and _declared_all(trees[target]) is None and _declared_all(trees[parent]) is None:
                    bare.add(target)
    assert sorted(bare) == []


def _write(root: Path, files: dict[str, str]) -> None:
    for rel, text in files.items():
        (root / rel).parent.mkdir(parents=True, exist_ok=True)
        (root / rel).write_text(text)


def test_the_scan_names_each_private_import(tmp_path: Path) -> None:
    root = tmp_path / "harness"
    _write(root, {
        "__init__.py": "",
        "a/__init__.py": '__all__ = ["f"]\nfrom harness.a.m import f\n',
        "a/m.py": 'def f() -> None: ...\ndef g() -> None: ...\ndef _h() -> None: ...\n',
        "a/inner.py": "from harness.a.m import _h, g\n",  # one package: anything goes
        "c.py": '__all__ = ["k"]\nk = 1\nj = 2\n',
        "b/__init__.py": "",
        "b/x.py": ("from harness.a import m\nfrom harness.a.m import f, g\nfrom harness.a import f as f2\n"
                   "from harness.c import j, k\n"),
    })
    assert private_imports(root) == ["harness.b.x: from harness.a.m import g", "harness.b.x: from harness.c import j"]


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


def test_evidence_all_lists_exactly_what_other_packages_import() -> None:
    """harness.evidence's ``__all__`` is exactly what the other packages import from it."""
    assert set(evidence.__all__) == _imported_from_evidence()
    for name in evidence.__all__:
        assert getattr(evidence, name) is not None
