"""The kind descriptor (harness.kinds): every stage covers exactly the registered kinds, every
reference resolves, and no module outside the descriptor and a kind's own modules tests a kind by
name or a spec by its class (the if-chains became lookups)."""

from __future__ import annotations

import ast
import shutil
from pathlib import Path
from typing import Any, Literal

import pytest
from matplotlib.figure import Figure
from testkit import run_block
from typer.testing import CliRunner

from harness.cli import app
from harness.cli.common import console
from harness.inputs.spec import SPEC_KINDS, SPEC_MODELS, LoadedSpec, SpecBase, kinds_hint, load_spec
from harness.kinds import KINDS, PROTOCOL_KINDS, KindInfo, kind_info, kind_of_run, resolve
from harness.measure.rows import COMMON_TABLES, ROW_MODELS, kind_tables
from harness.report.config import ReportConfig, Selection
from harness.report.figures import FigureResult, figure_jobs
from harness.report.render import default_templates_dir, kind_context, render_report
from harness.report.snapshot import ArchiveContent, freeze, snapshot_bytes
from harness.report.snapshot.freeze import kind_sections
from harness.report.summary import KindSummary, describe, kind_summaries
from harness.run import kinds as run_kinds
from harness.run.events import Reporter, silent
from harness.run.options import RunOptions
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
    for ref in (k.recover, k.plan, k.report, k.report_view, k.report_summary, *k.report_figures):
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
    # the ledger's archive tables come from the descriptor too: a kind's tables join by its entry alone
    assert set(ARCHIVE_TABLES) == {"runs", "requests", "energy"} | {t for k in KINDS.values() for t in k.ledger_tables}


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


# --- a kind added with no edit to an existing file: its KindInfo, spec model, runner, console, plan printer,
# entry builder and template partials (all in this module but the partials)

FAKE = KindInfo("fake-kind", "fake-protocol", "dsv4h campaign run", "fakes", report="test_kind_descriptor:fake_entry",
                report_figures=("test_kind_descriptor:fake_figure",),
                report_summary="test_kind_descriptor:fake_summary", spec_model="test_kind_descriptor:FakeSpec",
                run="test_kind_descriptor:fake_run", console="test_kind_descriptor:fake_console",
                plan="test_kind_descriptor:fake_plan", no_options="drop them: a fake run is run again")


class FakeSpec(SpecBase):
    """The fake kind's spec: the shared header and a note (its ``times`` how often it is written)."""

    kind: Literal["fake-kind"] = "fake-kind"
    protocol_class: Literal["fake-protocol"] = "fake-protocol"
    note: str
    times: int = 1


def _fake(loaded: LoadedSpec) -> FakeSpec:
    spec = loaded.spec
    assert isinstance(spec, FakeSpec)
    return spec


def fake_plan(loaded: LoadedSpec, *, json_out: bool = False, csv_out: bool = False) -> None:
    """The fake kind's plan: one line per planned write."""
    for k in range(_fake(loaded).times):
        console.print(f"fake plan {loaded.spec.name}: write {k}")


def fake_run(loaded: LoadedSpec, workspace: Path, reporter: Reporter, options: RunOptions) -> list[Path]:
    """The fake kind's runner: writes its note ``times`` times into the workspace; the files written."""
    out = [workspace / f"fake-{loaded.spec.name}-{k}.txt" for k in range(_fake(loaded).times)]
    for path in out:
        path.write_text(_fake(loaded).note)
    return out


def fake_console(loaded: LoadedSpec, ws: Path, *, percentiles: Any = None, options: RunOptions | None = None) -> None:
    """The fake kind's console: the run through the run stage's dispatch, then its summary."""
    written = run_kinds.run_loaded(loaded, ws, silent, options)
    console.print(f"fake summary: {len(written)} writes of {_fake(loaded).note!r}")
FAKE_HTML = ('{% if part == "toc" %}\n{% if fakes %}<li><a href="#fakes">Fakes</a></li>{% endif %}\n{% else %}\n'
             '{% if fakes %}\n<h2 id="fakes">Fakes</h2>\n{% for e in fakes %}<p>fake {{ e.note }} of {{ e.archive_id }}'
             ' ({{ e.status }})</p>\n{% endfor %}\n{% endif %}\n{% endif %}\n')
FAKE_MD = ("{% if fakes %}\n## Fakes\n\n{% for e in fakes %}\nfake {{ e.note }} of {{ e.archive_id }}\n{% endfor %}\n"
           "{% endif %}\n")


def fake_entry(c: Any, base: dict[str, Any], verdict: Any) -> dict[str, Any] | None:
    """The fake kind's snapshot entry: its archive entry plus its spec's note (None: no spec, no entry)."""
    return None if c.spec is None else base | {"note": c.spec["note"]}


def fake_summary(entries: Any, findings: Any) -> KindSummary:
    """The fake kind's summary: counted as fake runs named by their notes, each note's length a key number."""
    return KindSummary("fakes", "fake run", "fake runs", tuple(e["note"] for e in entries), key_numbers=tuple(
        {"subject": e["campaign"], "quantity": "note length", "value": float(len(e["note"])), "unit": "characters",
         "detail": e["archive_id"], "claim_class": e["claim_class"], "protocol_class": e["protocol_class"],
         "archive_id": e["archive_id"], "simulated": False} for e in entries))


def fake_figure(entry: dict[str, Any]) -> FigureResult:
    """The fake kind's one figure per entry (an empty canvas named after its archive)."""
    return FigureResult(f"fake-{entry['archive_id']}", Figure(figsize=(2, 1)), f"fake {entry['note']}", "fake")


def test_a_new_kind_reaches_the_snapshot_and_the_report_from_its_descriptor_entry_alone(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A kind registered only in KINDS, with its entry builder and its template partials named after it,
    gets its snapshot section (freeze), its figures, its view (labelled entries), its report section and
    contents line (render, from a copy of the templates plus the partials) and its part of the summary card
    and description (its count, names and key numbers): no existing file names it."""
    monkeypatch.setitem(KINDS, FAKE.name, FAKE)
    templates = tmp_path / "templates"
    shutil.copytree(default_templates_dir(), templates)
    (templates / "kinds" / "fake-kind.html.j2").write_text(FAKE_HTML)
    (templates / "kinds" / "fake-kind.md.j2").write_text(FAKE_MD)
    run = {"campaign": "f", "claim_class": "native-ar", "backend": "sim", "created_wall": "2026-11-29", "labels": [],
           "kind": "fake-kind", "protocol_class": "fake-protocol"}
    contents = [ArchiveContent("f" * 16, {"status": "complete", "run": run}, "0" * 64, spec={"note": "seven"}),
                ArchiveContent("e" * 16, {"status": "complete", "run": run}, "0" * 64)]  # no spec: no entry
    assert list(kind_sections()) == ["formal", "screens", "sweeps", "speculative.matched", "replays", "sla", "fakes"]
    snap = freeze(contents, ReportConfig())
    assert [(e["archive_id"], e["note"], e["valid"]) for e in snap["fakes"]] == [("f" * 16, "seven", True)]
    assert snap["speculative"]["matched"] == [] and snap["formal"] == []
    assert [(ref, e["archive_id"]) for ref, e in figure_jobs(snap)] == [("test_kind_descriptor:fake_figure", "f" * 16)]
    out = render_report(snapshot_bytes(snap), tmp_path / "r", build_time="2026-11-29T00:00:00Z",
                        templates_dir=templates)
    assert out.figures == (f"fake-{'f' * 16}",) and (out.out_dir / "figures" / f"fake-{'f' * 16}.svg").is_file()
    html, md = out.html.read_text(), (out.out_dir / "report.md").read_text()
    assert '<li><a href="#fakes">Fakes</a></li>' in html
    assert f"<p>fake seven of {'f' * 16} (complete)</p>" in html and html.count("<p>fake ") == 1
    assert f"## Fakes\n\nfake seven of {'f' * 16}\n" in md
    assert "- **What was measured:** 2 archives; 1 fake run; 1 other. Campaigns: f." in md
    assert f"| f | note length | **[5.00](#archive-{'f' * 16})** | characters | {'f' * 16} |" in md
    assert describe(snap)[0] == ("This report holds 2 archives: 1 fake run (seven) and 1 other archive "
                                 "(listed under Archives).")


def test_the_report_sections_views_and_partials_are_the_descriptors() -> None:
    """Every kind with a snapshot entry has its section in the freeze, a view in the templates' context
    under its section's first part, and an HTML and Markdown partial; the main templates name no kind
    section or kind count but include the partials (and the summary partials) by kind."""
    sections = kind_sections()
    assert set(sections) == {k.report_section for k in KINDS.values() if k.report}
    views = kind_context({}, {})
    assert set(views) == {k.report_section.partition(".")[0] for k in KINDS.values() if k.report or k.report_view}
    for k in KINDS.values():
        if k.report_view is not None:
            assert callable(resolve(k.report_view)), k.report_view
        for fmt in ("html", "md"):
            assert (default_templates_dir() / "kinds" / f"{k.name}.{fmt}.j2").is_file() == bool(k.report_view), k.name
    for main in ("report.html.j2", "report.md.j2", "tables.tex.j2"):
        text = (default_templates_dir() / main).read_text()
        assert '{% include "kinds/" ~ kind ~ ' in text
        assert not any(f"{{% for e in {key} %}}" in text for key in views), main
        assert '{% include "kinds/" ~ kind ~ ".summary.' in text  # the kinds' own summary rows (verdicts)
        assert not any(f"sc.what.{part['key']}" in text for part in kind_summaries({}).values()), main


def test_a_new_kind_is_loaded_planned_and_run_through_the_cli_from_its_descriptor_entry_alone(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """The spec loader, ``campaign plan`` and ``campaign run`` read the kinds at call time: a kind
    registered after import is loaded from its YAML (its own model validating it), planned and run by
    its own plan printer, runner and console; options it refuses are refused by its descriptor."""
    spec = tmp_path / "fake.yaml"
    spec.write_text("kind: fake-kind\nname: fk\nnote: seven\ntimes: 2\n")
    ws = tmp_path / "ws"
    ws.mkdir()
    cli = CliRunner()
    assert "kind 'fake-kind' is not known" in str(cli.invoke(app, ["campaign", "plan", str(spec)]).exception)
    monkeypatch.setitem(KINDS, FAKE.name, FAKE)
    loaded = load_spec(spec)
    assert (type(loaded.spec), loaded.kind, _fake(loaded).note, loaded.spec.protocol_class) == (
        FakeSpec, "fake-kind", "seven", "fake-protocol")
    assert kinds_hint().endswith("kind: sla-search or kind: fake-kind")
    (tmp_path / "bad.yaml").write_text("kind: fake-kind\nname: fk\n")
    assert "note" in str(cli.invoke(app, ["campaign", "plan", str(tmp_path / "bad.yaml")]).exception)
    plan = cli.invoke(app, ["campaign", "plan", str(spec)])
    assert (plan.exit_code, plan.output) == (0, "fake plan fk: write 0\nfake plan fk: write 1\n")
    refused = cli.invoke(app, ["campaign", "run", str(spec), "-w", str(ws), "--workers", "2"])
    assert "kind fake-kind takes neither --resume nor --workers" in str(refused.exception)
    assert list(ws.iterdir()) == []
    run = cli.invoke(app, ["campaign", "run", str(spec), "-w", str(ws)])
    assert (run.exit_code, run.output) == (0, "fake summary: 2 writes of 'seven'\n"), run.output
    assert sorted(p.name for p in ws.glob("fake-*")) == ["fake-fk-0.txt", "fake-fk-1.txt"]
    assert (ws / "fake-fk-1.txt").read_text() == "seven"
