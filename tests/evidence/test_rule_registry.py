"""The evidence rule registry (harness.evidence.rules._registry), pure: every rule declares kinds that exist,
the registry and docs/evidence-rules.md's rule id table list the same ids, and for each kind the rules that
apply are the ones the table's "applies to kinds" column names."""

from __future__ import annotations

import pkgutil
from pathlib import Path

import pytest

from harness.evidence import rules as ev
from harness.evidence.findings import ArchiveData, Finding
from harness.evidence.rules import ALL, KIND_PROTOCOLS, REGISTRY, RULES, archive_kind, rule
from harness.evidence.rules._registry import registered
from harness.kinds import KINDS as DESCRIPTOR
from harness.run.kinds import KINDS

DOC = Path(__file__).resolve().parents[2] / "docs" / "evidence-rules.md"


def _doc_table() -> dict[str, frozenset[str]]:
    """Rule id -> the kinds its row's "applies to kinds" cell names (``all``: every kind)."""
    lines = DOC.read_text().splitlines()
    head = lines.index("| id | flags | severities | applies | applies to kinds |")
    out: dict[str, frozenset[str]] = {}
    for line in lines[head + 2:]:
        if not line.startswith("| `"):
            break
        cells = [c.strip() for c in line.strip().strip("|").split("|")]
        rid, kinds = cells[0].strip("`"), cells[-1]
        assert rid not in out, f"{rid} twice in the table"
        out[rid] = frozenset(KIND_PROTOCOLS) if kinds == "all" else frozenset(
            k.strip().strip("`") for k in kinds.split(","))
    return out


def _registered_ids() -> list[str]:
    return [i for r in REGISTRY for i in r.ids]


def test_kind_vocabulary_is_the_run_registry_s() -> None:
    assert dict(KIND_PROTOCOLS) == {k.name: k.protocol_class for k in KINDS.values()}
    assert set(KIND_PROTOCOLS) == set(DESCRIPTOR)  # the run block accepts exactly the descriptor's kinds
    assert len(set(KIND_PROTOCOLS.values())) == len(KIND_PROTOCOLS)  # one kind per protocol class


def test_every_rule_declares_known_kinds_and_unique_ids() -> None:
    assert len(REGISTRY) == len(RULES) == 35  # issue 37 added reported-counts
    for r in REGISTRY:
        assert r.ids, r.name
        assert r.kinds is ALL or (r.kinds and set(r.kinds) <= set(KIND_PROTOCOLS)), (r.name, r.kinds)
    ids = _registered_ids()
    assert len(ids) == len(set(ids)) == 36


def test_registry_and_docs_table_list_the_same_ids() -> None:
    table = _doc_table()
    assert set(_registered_ids()) == set(table)
    documented = {line.split()[0] for line in (ev.__doc__ or "").splitlines()
                  if line.startswith("  ") and not line.startswith("   ")}
    assert set(_registered_ids()) == documented  # the package docstring's id list too


@pytest.mark.parametrize("kind", sorted(KIND_PROTOCOLS))
def test_rules_that_apply_to_each_kind_are_the_documented_ones(kind: str) -> None:
    table = _doc_table()
    applied = {i for r in REGISTRY if r.applies_to(kind) for i in r.ids}
    assert applied == {rid for rid, kinds in table.items() if kind in kinds}


def test_an_archive_of_unknown_kind_gets_only_the_rules_for_every_kind() -> None:
    assert {i for r in REGISTRY if r.applies_to(None) for i in r.ids} == \
        {rid for rid, kinds in _doc_table().items() if kinds == frozenset(KIND_PROTOCOLS)}


def test_every_family_module_is_imported_and_registers_in_family_order() -> None:
    modules = {m.name for m in pkgutil.iter_modules(ev.__path__) if m.name != "_registry"}
    assert {m.__name__.rsplit(".", 1)[1] for m in ev.FAMILIES} == modules
    order = [m.__name__ for m in ev.FAMILIES]
    positions = [order.index(r.fn.__module__) for r in REGISTRY]
    assert positions == sorted(positions)
    for r in REGISTRY:  # the decorator returns the function itself: the family module's name is it
        assert getattr(ev, r.name) is r.fn is getattr(__import__(r.fn.__module__, fromlist=["_"]), r.name)


def test_archive_kind_is_the_run_s_kind_else_its_protocol_class_s() -> None:
    assert archive_kind({"kind": "rate-sweep", "protocol_class": "rate-sweep"}) == "rate-sweep"
    for kind, protocol in KIND_PROTOCOLS.items():
        assert archive_kind({"protocol_class": protocol}) == kind
    assert archive_kind({"kind": "future-kind", "protocol_class": "formal"}) == "formal-matrix"
    assert archive_kind({}) is None and archive_kind({"protocol_class": "other"}) is None


def test_check_runs_a_rule_only_on_its_kinds() -> None:
    cells = [{"cell_id": "c", "rounds_ok": 0, "rounds_planned": 3}]  # a sweep cell with no ok round
    sweep = ArchiveData("a1", {"protocol_class": "rate-sweep"}, {}, cells=cells, oracles=[{"passed": True}])
    assert "sweep-rounds" in {f.rule for f in ev.check(sweep)}
    for kind in ("formal-matrix", "abba", "quick-bench"):
        other = ArchiveData("a1", {"kind": kind, "protocol_class": KIND_PROTOCOLS[kind]}, {}, cells=cells)
        assert "sweep-rounds" not in {f.rule for f in ev.check(other)}
        assert ev.rule_sweep_rounds(other)  # called directly, a rule judges what it is given


def test_the_decorator_refuses_unknown_kinds_and_taken_ids() -> None:
    def fn(d: ArchiveData) -> list[Finding]:
        return []

    with pytest.raises(ValueError, match="kinds"):
        rule("new-id", kinds=("no-such-kind",))(fn)
    with pytest.raises(ValueError, match="kinds"):
        rule("new-id", kinds=())(fn)
    with pytest.raises(ValueError, match="twice"):
        rule("oracle", kinds=ALL)(fn)
    with pytest.raises(ValueError, match="at least one"):
        rule(kinds=ALL)(fn)
    assert len(REGISTRY) == len(registered()) == 35  # nothing was registered
