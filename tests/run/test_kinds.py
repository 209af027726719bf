"""The kind registry (harness.run.kinds): one entry per kind, its protocol class agreeing with the
spec models and the quick screen, options refused by kinds that take none, and a partial of an
unknown kind refused by recovery rather than recovered as another kind."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from testkit import tiny_sweep_spec

from harness.errors import ArchiveError, SpecError
from harness.inputs.spec import SPEC_KINDS, SPEC_MODELS, load_spec
from harness.run import quick
from harness.run.kinds import KINDS, RunOptions, check_options, kind_entry, protocol_class, run_loaded
from harness.run.recover import recover_workspace
from harness.run.sweep import recover_sweep
from harness.store.archive import ArchiveWriter, iter_partials


def test_one_entry_per_kind_with_its_protocol_class() -> None:
    assert list(KINDS) == [*SPEC_KINDS, "quick-bench", "external"]
    assert {k: protocol_class(k) for k in KINDS} == {
        "formal-matrix": "formal", "abba": "abba-screen", "rate-sweep": "rate-sweep", "matched-sd": "matched-sd",
        "trace-replay": "trace-replay", "sla-search": "sla-search", "quick-bench": "quick-bench",
        "external": "external"}
    for kind in SPEC_KINDS:  # the spec models fix the same class
        assert SPEC_MODELS[kind].model_fields["protocol_class"].default == protocol_class(kind)
        assert KINDS[kind].runner is not None
    assert protocol_class("quick-bench") == quick.PROTOCOL_CLASS and KINDS["quick-bench"].runner is None
    assert KINDS["rate-sweep"].recover is recover_sweep
    assert KINDS["rate-sweep"].tables == ("sweep_cells", "sweep_rounds")
    assert KINDS["rate-sweep"].report_section == "sweeps"
    with pytest.raises(ArchiveError, match="'matrix' is not a kind"):
        kind_entry("matrix")


def test_kinds_without_options_refuse_them(tmp_path: Path) -> None:
    loaded = load_spec(tiny_sweep_spec(tmp_path))
    check_options(loaded, RunOptions())
    with pytest.raises(SpecError, match="kind rate-sweep takes neither --resume nor --workers"):
        check_options(loaded, RunOptions(workers=2))
    with pytest.raises(SpecError, match="kind rate-sweep takes neither"):
        run_loaded(loaded, tmp_path / "ws", lambda event: None, RunOptions(resume=tmp_path))
    assert not (tmp_path / "ws").exists()  # refused before anything ran


def test_a_partial_of_an_unknown_kind_is_left_as_it_is(tmp_path: Path) -> None:
    ws = tmp_path / "ws"
    writer = ArchiveWriter(ws, token="unknown-kind")
    writer.write_json("spec.json", {"kind": "future-kind", "name": "x"})
    writer.close()
    report = recover_workspace(ws)
    assert report.recovered == [] and len(report.refused) == 1
    assert "'future-kind' is not a kind this dsv4h knows" in report.refused[0][1]
    assert [p.path.name for p in iter_partials(ws)] == [writer.dir.name]
    assert json.loads((writer.dir / "spec.json").read_text())["kind"] == "future-kind"
