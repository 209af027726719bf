"""The one descriptor of every run kind (pure, base layer): every stage derives its table from it.

A kind is one entry of :data:`KINDS`. Its entry names, as ``module:attribute`` references that the
stage which needs one resolves (:func:`resolve`), the kind's spec model (``inputs``), its runner and
recovery (``run``), its console (``cli``), its report-snapshot entry builder (``report``), the
templates' view of it (``report_view``), its part of the summary card (``report_summary``) and its own
ledger tables' row models (``row_models``: ``harness.measure.rows.ROW_MODELS`` is assembled from
them); and as data its protocol class, the result tables it writes into its archive (each as
``<table>.parquet``: an archive file is named as the ledger table it becomes, so nothing is renamed on
the way in), the report-snapshot list its entries go to, the command that starts it and the modules
that are the kind's own (only those may test a kind by name). Adding a kind is its own new files (its
report template partials among them, named after the kind) plus one entry here (docs/architecture.md,
"Adding a kind").

A reference names an attribute of a module of the stage that uses it, so this module imports none
of them: the layering (``pyproject.toml``'s importlinter contract) is unchanged by what it names.
"""

from __future__ import annotations

import importlib
from dataclasses import dataclass
from typing import Any

from harness.errors import ArchiveError

__all__ = [
    "EXTERNAL",
    "FORMAL",
    "KINDS",
    "MATCHED",
    "MATCHED_SECTION",
    "SPEC_KINDS",
    "KindInfo",
    "kind_info",
    "kind_of_run",
    "resolve",
    "table_file",
]

MATCHED_SECTION = "speculative.matched"
"""The report section of matched AR/SD runs (their acceptance is shown with them)."""

_LEG_TABLES = ("waves", "acceptance")


@dataclass(frozen=True)
class KindInfo:
    """One run kind (module docstring). ``ledger_tables``: the ledger tables the kind writes into its
    archive, each as ``<table>.parquet`` (the records' ``requests`` and ``energy.json``'s ``energy``
    rows are every kind's); ``side_tables``: its result tables that are no ledger table (also
    ``<name>.parquet``); ``cells`` / ``rounds``: which of them hold its cell and round rows (what the
    evidence rules and the verdict read as cells and rounds; "" when it has none);
    ``spec_model``, ``run``, ``recover``, ``console``, ``report``, ``report_view``, ``report_summary``
    (``(entries, findings) -> harness.report.summary.KindSummary``: its count noun, names, key numbers
    and verdicts on the summary card and in the description; none: counted among the other archives),
    ``report_figures`` (drawers ``(entry) -> FigureResult | None``, each over every entry of its
    section), ``row_models`` (a mapping table -> ``harness.measure.table_model.TableModel`` in the
    kind's measure module): ``module:attribute`` references (None: the kind has none, e.g. an import is
    not started from a spec; a kind with a ``report`` but no ``report_view`` is shown as its labelled
    entries); ``report_section``: the key of the snapshot list its entries join (dotted: nested), whose
    first part is the templates' name of its view; its report section's template partial is
    ``reports/templates/kinds/<name>.<html|md|tex>.j2`` (none: the report lists its archives only);
    ``modules``: the kind's own modules (dotted names)."""

    name: str
    protocol_class: str
    command: str
    report_section: str
    spec_model: str | None = None
    run: str | None = None
    recover: str | None = None
    console: str | None = None
    report: str | None = None
    report_view: str | None = None
    report_figures: tuple[str, ...] = ()
    timeline_source: str = ""  # its report timelines' ``source`` (the first measured wave per cell); "": none
    ledger_tables: tuple[str, ...] = ()
    side_tables: tuple[str, ...] = ()
    cells: str = ""
    rounds: str = ""
    modules: tuple[str, ...] = ()
    report_summary: str | None = None
    row_models: str | None = None  # its own ledger tables' models: ``module:attribute`` of a table -> TableModel
    plan: str | None = None  # the console's plan printer (``dsv4h campaign plan``): ``module:attribute``
    no_options: str = ""  # the hint refusing --resume/--workers for a kind that takes neither ("" takes them)

    @property
    def from_spec(self) -> bool:
        """Whether a spec file of this kind exists (``kind:`` in YAML)."""
        return self.spec_model is not None

    @property
    def tables(self) -> tuple[str, ...]:
        """Every result table the kind writes into its archive (ledger tables first), by stem."""
        return (*self.ledger_tables, *self.side_tables)

    @property
    def files(self) -> tuple[str, ...]:
        """The archive files of :attr:`tables` (``sweep_cells.parquet`` for ``sweep_cells``)."""
        return tuple(table_file(t) for t in self.tables)


KINDS: dict[str, KindInfo] = {k.name: k for k in (
    KindInfo("formal-matrix", "formal", "dsv4h campaign run", "formal",
             spec_model="harness.inputs.spec.formal:CampaignSpec", run="harness.run.campaign:run_kind",
             recover="harness.run.campaign:recover_matrix", console="harness.cli.campaign_cmd:run_matrix_cli",
             plan="harness.cli.campaign_cmd:plan_matrix",
             report="harness.report.snapshot.freeze:formal_entry",
             report_view="harness.report.kind_views:formal_view",
             report_summary="harness.report.kind_summaries:formal_summary",
             report_figures=("harness.report.figures:formal_matrix_figure", "harness.report.figures:latency_figure_of"),
             timeline_source="formal",
             ledger_tables=("cells", "rounds", "waves", "acceptance", "cycles"), cells="cells", rounds="rounds",
             row_models="harness.measure.results:TABLES",
             modules=("harness.inputs.spec.formal", "harness.run.campaign", "harness.cli.campaign_cmd",
                      "harness.governance.record_claims")),
    KindInfo("abba", "abba-screen", "dsv4h abba", "screens",
             spec_model="harness.inputs.spec.abba:AbbaSpec", run="harness.run.abba:run_kind",
             recover="harness.run.abba:recover_abba", console="harness.cli.abba_cmd:run_abba_cli",
             report="harness.report.snapshot.freeze:screen_entry",
             report_view="harness.report.kind_views:screens_view",
             report_summary="harness.report.kind_summaries:screens_summary",
             report_figures=("harness.report.figures:abba_figure",), timeline_source="abba",
             ledger_tables=(*_LEG_TABLES, "comparisons"), side_tables=("legs",),
             no_options="drop them: an ABBA screen's legs must be contiguous, so it is run again, never resumed",
             row_models="harness.measure.abba:TABLES",
             modules=("harness.inputs.spec.abba", "harness.run.abba", "harness.cli.abba_cmd", "harness.measure.abba")),
    KindInfo("rate-sweep", "rate-sweep", "dsv4h sweep run", "sweeps",
             spec_model="harness.inputs.spec.sweep:SweepSpec", run="harness.run.sweep:run_kind",
             recover="harness.run.sweep:recover_sweep", console="harness.cli.sweep_cmd:run_sweep_loaded_cli",
             plan="harness.cli.sweep_cmd:plan_loaded",
             report="harness.report.snapshot.sections:sweep_entry",
             report_view="harness.report.kind_views:sweeps_view",
             report_summary="harness.report.kind_summaries:sweeps_summary",
             report_figures=("harness.report.figures:sweep_figure",),
             ledger_tables=("sweep_cells", "sweep_rounds"), cells="sweep_cells", rounds="sweep_rounds",
             no_options="drop them: a rate sweep runs its planned arrival schedule as 'dsv4h sweep run'",
             row_models="harness.measure.sweep:TABLES",
             modules=("harness.inputs.spec.sweep", "harness.run.sweep", "harness.cli.sweep_cmd", "harness.report.sweep",
                      "harness.measure.sweep", "harness.store.archive_legacy")),
    KindInfo("matched-sd", "matched-sd", "dsv4h campaign run", MATCHED_SECTION,
             spec_model="harness.inputs.spec.matched:MatchedSdSpec", run="harness.run.matched:run_kind",
             recover="harness.run.matched:recover_matched", console="harness.cli.matched_cmd:run_matched_cli",
             report="harness.report.snapshot.speculative:matched_snapshot_entry",
             report_view="harness.report.kind_views:matched_view",
             report_summary="harness.report.kind_summaries:matched_summary",
             ledger_tables=(*_LEG_TABLES, "matched_sd"), side_tables=("legs",),
             no_options="drop them: a matched run's legs must be contiguous, so it is run again, never resumed",
             row_models="harness.measure.matched:TABLES",
             modules=("harness.inputs.spec.matched", "harness.run.matched", "harness.cli.matched_cmd",
                      "harness.measure.matched", "harness.report.snapshot.speculative")),
    KindInfo("trace-replay", "trace-replay", "dsv4h campaign run", "replays",
             spec_model="harness.inputs.spec.replay:ReplaySpec", run="harness.run.replay:run_kind",
             recover="harness.run.replay:recover_replay", console="harness.cli.replay_cmd:run_replay_loaded_cli",
             report="harness.report.snapshot.replay:replay_snapshot_entry",
             report_view="harness.report.kind_views:replays_view", ledger_tables=("replay_runs",),
             no_options="drop them: a trace replay runs its trace's schedule once, never resumed",
             row_models="harness.measure.replay:TABLES",
             modules=("harness.inputs.spec.replay", "harness.run.replay", "harness.cli.replay_cmd",
                      "harness.measure.replay", "harness.report.snapshot.replay")),
    KindInfo("sla-search", "sla-search", "dsv4h sla run", "sla",
             spec_model="harness.inputs.spec.sla:SlaSpec", run="harness.run.sla:run_kind",
             recover="harness.run.sla:recover_sla", console="harness.cli.sla_cmd:run_sla_loaded_cli",
             report="harness.report.snapshot.sla:sla_entry", report_view="harness.report.kind_views:sla_view",
             ledger_tables=("sla_rounds", "sla_probes"), side_tables=("sla_cells",),
             cells="sla_cells", rounds="sla_rounds",
             no_options="drop them: an SLA search's probes depend on each other, so it is run again",
             row_models="harness.measure.sla:TABLES",
             modules=("harness.inputs.spec.sla", "harness.run.sla", "harness.cli.sla_cmd", "harness.measure.sla",
                      "harness.report.snapshot.sla")),
    KindInfo("quick-bench", "quick-bench", "dsv4h bench", "archives",
             recover="harness.run.quick:recover_quick",
             modules=("harness.run.quick", "harness.cli.bench_cmd", "harness.measure.bench")),
    KindInfo("external", "external", "dsv4h import", "imports",
             recover="harness.run.kinds:refuse_external_recovery",
             report_view="harness.report.kind_views:imports_view",
             report_summary="harness.report.kind_summaries:imports_summary",
             modules=("harness.store.peers.importer", "harness.cli.peers_cmd", "harness.report.snapshot.imports")),
)}

FORMAL = KINDS["formal-matrix"]
"""The formal matrix kind: the protocol every formal claim (records, Table 2) comes from."""

MATCHED = KINDS["matched-sd"]
"""The matched AR/SD kind: its AR legs are native-ar services inside a speculative claim."""

EXTERNAL = KINDS["external"]
"""The imported-result kind: a killed import is recovered from its import marker."""

SPEC_KINDS: tuple[str, ...] = tuple(k.name for k in KINDS.values() if k.from_spec)
"""Every value a spec's ``kind`` may take, in the order the docs list them."""

PROTOCOL_KINDS: dict[str, str] = {k.protocol_class: k.name for k in KINDS.values()}
"""Protocol class -> kind (one protocol class per kind)."""


def table_file(table: str) -> str:
    """The archive file of result table ``table``: ``<table>.parquet`` (no other name is used)."""
    return f"{table}.parquet"


def kind_info(kind: str) -> KindInfo:
    """The descriptor of ``kind``; ``ArchiveError`` for a kind this dsv4h does not know (an archive
    or partial of it is left as it is rather than handled as another kind)."""
    entry = KINDS.get(kind)
    if entry is None:
        raise ArchiveError(f"kind {kind!r} is not a kind this dsv4h knows ({', '.join(KINDS)})",
                           hint="read it with the dsv4h version that wrote it")
    return entry


def kind_of_run(kind: str | None, protocol_class: str | None) -> KindInfo | None:
    """The descriptor of a run block's kind, or (an older archive without one) of its protocol class;
    None when neither is known."""
    if kind in KINDS:
        return KINDS[str(kind)]
    name = PROTOCOL_KINDS.get(str(protocol_class))
    return KINDS[name] if name is not None else None


def resolve(ref: str) -> Any:
    """The attribute a ``module:attribute`` reference names (imports the module)."""
    module, _, attr = ref.partition(":")
    return getattr(importlib.import_module(module), attr)
