"""``dsv4h campaign plan|run|schema``: formal matrix campaigns (and specs of every kind)."""

from __future__ import annotations

import json
from collections.abc import Sequence
from pathlib import Path
from typing import Annotated, Any

import typer
from rich.table import Table

from harness.cli.common import PercentilesOpt, WorkspaceOpt, console, resolve_workspace, startup_reap
from harness.cli.listing import CsvOpt, JsonOpt, emit
from harness.cli.outcome import end_run, print_energy, print_findings
from harness.cli.progress import LiveReporter
from harness.cli.render import PLAN_COLS, cells_at, fmt, latency_table, pd_table, plan_rows, plan_table
from harness.errors import SpecError
from harness.inputs.spec import SPEC_KINDS, CampaignSpec, LoadedSpec, kinds_hint, load_spec
from harness.kinds import kind_info, resolve
from harness.measure.latency import parse_percentiles
from harness.run.campaign import RunOutcome, load_corpora, make_plan
from harness.run.kinds import RunOptions, check_options, run_loaded
from harness.store.view import ArchiveView

app = typer.Typer(help="Formal matrix campaigns.\n\nExample: dsv4h campaign run campaigns/demo-matrix.yaml",
                  no_args_is_help=True)


@app.command("plan")
def plan_cmd(spec: Annotated[Path, typer.Argument(help="campaign YAML file")],
             json_out: JsonOpt = False, csv_out: CsvOpt = False) -> None:
    """Print the ordered cells, rounds and waves of a campaign and an estimate of wall time; run
    nothing. --json / --csv print one row per cell (every field) and nothing else.

    Example: dsv4h campaign plan campaigns/demo-matrix.yaml
    """
    loaded = load_spec(spec)
    info = kind_info(loaded.kind)
    if info.plan is None:
        raise SpecError(f"{spec}: kind '{loaded.kind}' has no plan to print: it runs fixed waves or a schedule "
                        "decided as it runs", hint=f"'dsv4h campaign run {spec}' runs it")
    if info.command != "dsv4h campaign run" and not (json_out or csv_out):
        console.print(f"{spec}: kind {loaded.kind}: planned as '{info.command.replace(' run', ' plan')} {spec}' does")
    resolve(info.plan)(loaded, json_out=json_out, csv_out=csv_out)


def plan_matrix(loaded: LoadedSpec, *, json_out: bool = False, csv_out: bool = False) -> None:
    """Print a formal matrix's plan (the formal kind's plan: ``dsv4h campaign plan``)."""
    s = loaded.spec
    if not isinstance(s, CampaignSpec):
        raise SpecError(f"{loaded.source}: kind '{s.kind}' is not a formal matrix",
                        hint="plan other kinds with 'dsv4h campaign plan'")
    plan = make_plan(s, load_corpora(loaded))
    if json_out or csv_out:
        emit(console, plan_rows(plan), PLAN_COLS, json_out=json_out, csv_out=csv_out)
        return
    console.print(plan_table(plan))
    if plan.estimate_s is not None:
        console.print(f"estimated wall time: {plan.estimate_s / 60:.1f} min ({plan.estimate_basis})")
    else:
        console.print("estimated wall time: unknown (no rate model for this backend); each decode round "
                      "needs at least its min_resident_seconds of resident windows")
    console.print(f"claim class: {s.claim_class}; protocol class: {s.protocol_class}; "
                  f"backend: {s.service.backend}" + (" (SIMULATED)" if s.service.backend == "sim" else ""))


def _float(v: Any) -> float:
    return float("nan") if v is None else float(v)


def cycles_table(cells: list[dict[str, Any]], simulated: bool) -> Table:
    """A speculative server's cells: tokens per verify step, acceptance, T_SD from the stream and as
    implied by C*a/R, and whether they agree (docs/speculative.md)."""
    t = Table(title="speculative decoding per cell" + (" (SIMULATED)" if simulated else ""), title_justify="left",
              caption="a = 1 + accepted/steps (bonus in); acceptance = accepted/proposed (bonus out); "
              "acceptance alone is not a speed metric", caption_justify="left")
    for col in ("cell", "C", "a", "acceptance %", "T_SD stream ms", "C*a/R ms", "steps/s/request", "agree"):
        t.add_column(col, justify="left" if col == "cell" else "right")
    for c in cells:
        def ms(v: Any) -> str:
            return "—" if v is None else f"{float(v) * 1e3:.3f}"
        agree = "yes" if c.get("reconciled") is True else "NO" if c.get("reconciled") is False else "—"
        t.add_row(str(c.get("cell_id")), str(c.get("concurrency")), fmt(_float(c.get("tokens_per_step")), 4),
                  "—" if c.get("acceptance_rate") is None else f"{100 * float(c['acceptance_rate']):.2f}",
                  ms(c.get("t_sd_stream_s")), ms(c.get("t_sd_implied_s")),
                  fmt(_float(c.get("verify_steps_per_s_per_request")), 2), agree)
    return t


@app.command("run")
def run_cmd(
    spec: Annotated[Path, typer.Argument(help="campaign YAML file")],
    workspace: WorkspaceOpt = Path(),
    resume: Annotated[str | None, typer.Option("--resume", help="continue a partial/failed archive "
                                               "(path or id) into a new archive")] = None,
    workers: Annotated[str | None, typer.Option(
        "--workers", help="client worker processes per wave: N or auto (replaces the spec's load.workers)")] = None,
    percentiles: PercentilesOpt = None,
) -> None:
    """Run a campaign of any kind (through the kind registry). A formal matrix: one fresh service,
    cells in order, warmups excluded, three measured rounds per cell. A spec of kind abba runs an
    ABBA screen (as 'dsv4h abba'); one of kind rate-sweep runs a rate sweep (as 'dsv4h sweep run');
    one of kind matched-sd runs a matched AR/SD comparison (legs AR1 SD1 SD2 AR2 by default); one of
    kind sla-search runs an SLA search (as 'dsv4h sla run').
    Either way a hashed archive is written and the ledgers appended.

    Example: dsv4h campaign run campaigns/demo-matrix.yaml --workspace ./ws --percentiles 50,90,95,99
    """
    ws = resolve_workspace(workspace)
    ps = None if percentiles is None else parse_percentiles(percentiles)
    loaded = load_spec(spec)
    n_workers = None if workers is None else (workers if workers == "auto" else _int_option("--workers", workers))
    check_options(loaded, RunOptions(resume=None if resume is None else Path(resume), workers=n_workers))
    info = kind_info(loaded.kind)
    if info.console is None:
        raise SpecError(f"{spec}: kind {loaded.kind} is not run from a spec", hint=f"use '{info.command}'")
    if info.command.endswith(" run") and info.command != "dsv4h campaign run":
        console.print(f"{spec}: kind {loaded.kind}: running it as '{info.command} {spec}' does")
    options = RunOptions(resume=_resume_target(resume, ws) if resume is not None else None, workers=n_workers)
    resolve(info.console)(loaded, ws, percentiles=ps, options=options)


def run_matrix_cli(loaded: LoadedSpec, ws: Path, *, percentiles: Sequence[float] | None = None,
                   options: RunOptions | None = None) -> None:
    """Run a loaded formal matrix into ``ws`` (after the startup recovery) and print Table 2, its
    latency, energy and speculative cycles, the archive and the findings (the formal kind's console).
    Raises the run's error, or ``EvidenceError`` for a blocking finding, after the archive is finalized."""
    startup_reap(ws)
    with LiveReporter(console) as reporter:
        outcome = run_loaded(loaded, ws, reporter, options or RunOptions())
    assert isinstance(outcome, RunOutcome)
    ps = percentiles
    verdict = outcome.verdict
    simulated = verdict.simulated if verdict is not None else outcome.archive.run.simulated
    console.print(pd_table(outcome.results.cells, title=f"{outcome.plan.campaign}: formal native P/D matrix",
                           simulated=simulated, verdict=verdict))
    cells = outcome.results.cells
    if ps is not None:
        cells = tuple(cells_at(cells, outcome.archive.records(), {r.round_id: r.status for r in outcome.results.rounds},
                               ps))
    lat = latency_table(cells, title=outcome.plan.campaign, simulated=simulated, percentiles=ps, verdict=verdict)
    if lat is not None:
        console.print(lat)
    print_energy(outcome.archive, simulated)
    cycles = ArchiveView(outcome.archive).doc("cycles.json")
    if cycles is not None:
        console.print(cycles_table(cycles.get("cells") or [], simulated))
    console.print(f"archive {outcome.archive.archive_id} ({outcome.status}) at {outcome.archive.path}")
    if outcome.ledger_rows:
        console.print("ledgers: " + ", ".join(f"{k} +{v}" for k, v in sorted(outcome.ledger_rows.items())))
    print_findings(outcome.findings)
    end_run(verdict, error=outcome.error, status=outcome.status, archive_id=outcome.archive.archive_id)


@app.command("schema")
def schema_cmd(
    kind: Annotated[str | None, typer.Option(
        "--kind", help="one spec kind: " + ", ".join(SPEC_KINDS) + " (default: every kind, a oneOf)")] = None,
    markdown: Annotated[bool, typer.Option(
        "--markdown", help="print the field reference (docs/spec-reference.md) instead")] = False,
) -> None:
    """Print the JSON Schema of every spec kind (a oneOf; --kind for one) for editors, or with
    --markdown the field reference docs/spec-reference.md holds (type, default, unit, meaning).

    Save it; a spec starting with this line is then checked and completed by the YAML language server:

    # yaml-language-server: $schema=spec.schema.json

    Example: dsv4h campaign schema > spec.schema.json
    """
    from harness.inputs.spec_reference import json_schema, reference_markdown

    if kind is not None and kind not in SPEC_KINDS:
        raise SpecError(f"--kind '{kind}' is not known", hint=kinds_hint("--kind "))
    if markdown:
        if kind is not None:
            raise SpecError("--markdown covers every kind; --kind selects a JSON Schema",
                            hint="drop --kind: dsv4h campaign schema --markdown")
        typer.echo(reference_markdown(), nl=False)
        return
    typer.echo(json.dumps(json_schema(kind), indent=2))


def spec_kind(spec: Path) -> str:
    """The ``kind`` of a spec file (``formal-matrix`` when it declares none), as the one loader decides
    it (harness.inputs.spec.load_spec). Raises ``SpecError`` for a missing, unreadable or invalid file."""
    return load_spec(spec).kind


def _resume_target(ref: str, ws: Path) -> Path:
    """The archive ``--resume`` names: an archive (id, prefix, relative or absolute path), or a
    stranded partial directory, which is finalized first (it then resumes like any partial archive)."""
    from harness.run.recover import recover_partial
    from harness.store.archive import find_archive, find_partial

    partial = find_partial(ref, ws)
    if partial is None:
        return find_archive(ref, ws)
    done = recover_partial(ws, partial)
    console.print(f"finalized the stranded partial {partial.name} as archive {done.done.archive.archive_id}; "
                  "resuming from it")
    return done.done.archive.path


def _int_option(name: str, value: str) -> int:
    try:
        return int(value)
    except ValueError:
        raise SpecError(f"{name} must be an integer or 'auto', got {value!r}", hint=f"e.g. {name} 4") from None


from harness.cli.slurm_cmd import job_end, jobs, submit  # noqa: E402 - Slurm jobs, mounted under `dsv4h campaign`

app.command("submit")(submit)
app.command("jobs")(jobs)
app.command("job-end")(job_end)
