"""The kind descriptor (harness.kinds): every stage covers exactly the registered kinds, every
reference resolves, and no module outside the descriptor and a kind's own modules tests a kind by
name or a spec by its class (the if-chains became lookups)."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest
from testkit import run_block

from harness.inputs.spec import SPEC_KINDS, SPEC_MODELS, SpecBase
from harness.kinds import KINDS, PROTOCOL_KINDS, kind_info, kind_of_run, resolve
from harness.measure.rows import COMMON_TABLES, ROW_MODELS, kind_tables
from harness.report.config import Selection
from harness.run import kinds as run_kinds
from harness.store.ledger.layout import ARCHIVE_TABLES, TABLES
from harness.store.runblock import RunBlock

ROOT = Path(__file__).resolve().parents[1]
NAMES = set(KINDS) | set(PROTOCOL_KINDS)
SPEC_CLASSES = {k.spec_model.split(":")[1] for k in KINDS.values() if k.spec_model}
OWN = {"harness.kinds"} | {m for k in KINDS.values() for m in k.modules}


def test_every_stage_covers_exactly_the_registered_kinds() -> None:
    assert tuple(k for k, v in KINDS.items() if v.spec_model) == SPEC_KINDS
    assert list(SPEC_MODELS) == list(SPEC_KINDS)
    assert list(run_kinds.KINDS) == list(KINDS)
    assert {PROTOCOL_KINDS[k.protocol_class] for k in KINDS.values()} == set(KINDS)  # one class per kind
    for name in KINDS:
        assert isinstance(run_block(kind=name), RunBlock)
        assert Selection(kinds=[name]).kinds == [name]
    with pytest.raises(ValueError, match="'future' is not a kind"):
        run_block(kind="future")
    with pytest.raises(ValueError, match="not a kind"):
        Selection(kinds=["future"])


@pytest.mark.parametrize("name", list(KINDS))
def test_every_reference_resolves(name: str) -> None:
    k = kind_info(name)
    if k.spec_model is not None:
        model = resolve(k.spec_model)
        assert issubclass(model, SpecBase)
        assert model.model_fields["kind"].default == name
        assert model.model_fields["protocol_class"].default == k.protocol_class
        assert k.run is not None and callable(resolve(k.run)) and callable(resolve(k.console or ""))
    for ref in (k.recover, k.plan, k.report):
        if ref is not None:
            assert callable(resolve(ref)), ref
    assert set(k.ledger_tables) <= set(ARCHIVE_TABLES) and not set(k.side_tables) & set(ARCHIVE_TABLES)
    assert {k.cells, k.rounds} - {""} <= set(k.tables)
    assert k.files == tuple(f"{t}.parquet" for t in k.tables)
    for module in k.modules:
        assert (ROOT / (module.replace(".", "/") + ".py")).is_file(), module
    assert kind_of_run(None, k.protocol_class) is k  # an older run block without its kind


def test_every_kinds_tables_are_declared_by_its_descriptor_entry() -> None:
    """ROW_MODELS is the shared tables plus what each entry's ``row_models`` names (no table twice), and
    every ledger table a kind writes has a model there: adding a kind edits no line of measure/rows.py."""
    own = kind_tables()
    declared = [t for tables in own.values() for t in tables]
    assert len(declared) == len(set(declared)) and not set(declared) & set(COMMON_TABLES)
    assert set(ROW_MODELS) == set(COMMON_TABLES) | set(declared) == set(TABLES)
    assert own["rate-sweep"] == resolve("harness.measure.sweep:TABLES") and set(own["sla-search"]) == {
        "sla_probes", "sla_rounds"}
    for name, k in KINDS.items():
        assert (k.row_models is None) == (name not in own), name
        assert set(k.ledger_tables) <= set(own.get(name, {})) | set(COMMON_TABLES), name
        assert all(ROW_MODELS[t] is m for t, m in own.get(name, {}).items()), name


def _module(path: Path) -> str:
    return ".".join(path.relative_to(ROOT).with_suffix("").parts).removesuffix(".__init__")


def _names_a_kind(side: ast.expr) -> bool:
    text = ast.unparse(side)
    return any(w in text for w in ("kind", "protocol", "proto"))


def test_no_kind_is_tested_by_name_outside_the_descriptor_and_its_own_modules() -> None:
    """A comparison of a kind or protocol-class value with a kind name, or an isinstance on a kind's
    spec model, is a per-kind branch: it belongs to the descriptor or to that kind's own modules."""
    compares, instances = [], []
    for path in sorted((ROOT / "harness").rglob("*.py")):
        mod = _module(path)
        if mod in OWN:
            continue
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.Compare):
                sides = [node.left, *node.comparators]
                consts = [e for s in sides for e in (s.elts if isinstance(s, ast.Tuple | ast.List | ast.Set) else [s])]
                if any(isinstance(c, ast.Constant) and c.value in NAMES for c in consts) and \
                        any(_names_a_kind(s) for s in sides):
                    compares.append(f"{mod}:{node.lineno}")
            if isinstance(node, ast.Call) and getattr(node.func, "id", None) == "isinstance" and len(node.args) == 2:
                used = {n.id for n in ast.walk(node.args[1]) if isinstance(n, ast.Name)}
                if used & SPEC_CLASSES:
                    instances.append(f"{mod}:{node.lineno}")
    assert (compares, instances) == ([], [])
