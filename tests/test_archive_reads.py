"""Every reader outside harness.store reads an archive's declared result files through its typed view
(harness.store.view.ArchiveView: doc/table/rows/lines/has), never by opening the file by its name:
``archive.json("x.json")``, ``archive.table("x.parquet")``, ``archive.path / "x.json"`` or
``archive.path / name``. A file renamed in ``ARCHIVE_FILES`` then reaches every reader at once. (A run's
own partial directory is not an archive yet: recovery reads it with ``harness.run.partial``.)"""

from __future__ import annotations

import ast
from pathlib import Path

from harness.store.view import ARCHIVE_FILES

ROOT = Path(__file__).resolve().parents[1]
VIEW_METHODS = {"doc", "table", "rows", "lines", "has"}


def _declared_constants() -> set[str]:
    """Module-level names bound to a declared file's name anywhere in the package (``COLDNESS_FILE``)."""
    out: set[str] = set()
    for path in (ROOT / "harness").rglob("*.py"):
        for node in ast.parse(path.read_text()).body:
            if isinstance(node, ast.Assign) and isinstance(node.value, ast.Constant) \
                    and node.value.value in ARCHIVE_FILES:
                out |= {t.id for t in node.targets if isinstance(t, ast.Name)}
    return out


def _names_file(arg: ast.expr, constants: set[str]) -> bool:
    """Whether ``arg`` is a declared file's name (literal or a constant bound to one)."""
    if isinstance(arg, ast.Constant):
        return arg.value in ARCHIVE_FILES
    name = arg.id if isinstance(arg, ast.Name) else arg.attr if isinstance(arg, ast.Attribute) else None
    return name in constants


def _makes_view(value: ast.expr | None) -> bool:
    """``ArchiveView(...)``, ``<x>.files`` (FinishedArchive's view), or a conditional giving one."""
    if isinstance(value, ast.Call):
        return getattr(value.func, "id", getattr(value.func, "attr", None)) == "ArchiveView"
    if isinstance(value, ast.Attribute):
        return value.attr == "files"
    if isinstance(value, ast.IfExp):
        return _makes_view(value.body) or _makes_view(value.orelse)
    return False


def _view_names(tree: ast.AST) -> set[str]:
    """Names a module binds to a view: assigned from one, or parameters annotated ``ArchiveView``."""
    out: set[str] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Assign | ast.AnnAssign | ast.NamedExpr) and _makes_view(node.value):
            targets = node.targets if isinstance(node, ast.Assign) else [node.target]
            out |= {t.id for t in targets if isinstance(t, ast.Name)}
        if isinstance(node, ast.arg) and node.annotation is not None and "ArchiveView" in ast.unparse(node.annotation):
            out.add(node.arg)
    return out


def direct_reads(source: str, constants: set[str]) -> list[int]:
    """Lines of ``source`` that open a declared archive file by name (module docstring)."""
    tree = ast.parse(source)
    views = _view_names(tree)
    hits: list[int] = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute):
            recv, method = node.func.value, node.func.attr
            on_view = _makes_view(recv) or (isinstance(recv, ast.Name) and recv.id in views)
            by_name = method in VIEW_METHODS and bool(node.args) and _names_file(node.args[0], constants)
            # Archive.json(name) has no view twin (the view's is doc()); the view's own methods only on a view
            if (method == "json" and node.args) or (by_name and not on_view):
                hits.append(node.lineno)
        if isinstance(node, ast.BinOp) and isinstance(node.op, ast.Div) and isinstance(node.left, ast.Attribute) \
                and node.left.attr == "path":
            right = node.right
            # MANIFEST, RECORDS_DIR: the manifest and records stay with Archive; a variable may name any file
            variable = isinstance(right, ast.Name) and not right.id.isupper()
            if _names_file(right, constants) or variable:
                hits.append(node.lineno)
    return sorted(set(hits))


def test_the_checker_finds_each_direct_read_and_passes_the_view() -> None:
    src = ('def f(archive, name, fa):\n'
           '    a = archive.json("spec.json")\n'
           '    b = archive.table("cells.parquet")\n'
           '    c = (archive.path / "waves.parquet").read_text()\n'
           '    d = archive.path / name\n'
           '    e = archive.has(COLDNESS_FILE)\n'
           '    files = ArchiveView(archive)\n'
           '    g = files.table("cells.parquet"), fa.files.doc("spec.json")\n'
           '    g = ArchiveView(archive).rows("waves.parquet")\n'
           '    h = archive.path / MANIFEST, archive.path / RECORDS_DIR\n')
    assert direct_reads(src, {"COLDNESS_FILE"}) == [2, 3, 4, 5, 6]


def test_no_module_outside_the_store_opens_a_declared_archive_file_by_name() -> None:
    constants = _declared_constants()
    assert "COLDNESS_FILE" in constants  # harness.measure.coldness names coldness.json
    found = {}
    for path in sorted((ROOT / "harness").rglob("*.py")):
        rel = path.relative_to(ROOT)
        if rel.parts[:2] == ("harness", "store"):
            continue
        lines = direct_reads(path.read_text(), constants)
        if lines:
            found[str(rel)] = lines
    assert found == {}
