"""``dsv4h sweep plan|run``: open-loop rate sweeps (protocol class rate-sweep)."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Annotated, Any

import typer
from rich.table import Table

from harness.cli.common import PercentilesOpt, WorkspaceOpt, console, esc, resolve_workspace, startup_reap
from harness.cli.listing import Col, CsvOpt, JsonOpt, emit, ms, num
from harness.cli.outcome import end_run, print_energy, print_findings
from harness.cli.render import latency_grid, sim_label
from harness.errors import SpecError
from harness.inputs.corpus import load_corpus
from harness.inputs.spec import LoadedSpec, SweepSpec, load_spec
from harness.inputs.sweep_plan import make_sweep_plan
from harness.measure.latency import parse_percentiles
from harness.measure.results import cell_latency_at
from harness.records import RequestRecord
from harness.run.kinds import RunOptions, run_loaded
from harness.run.sweep import SweepOutcome

app = typer.Typer(help="Open-loop rate sweeps (Poisson/gamma/constant arrivals, goodput under SLOs).\n\n"
                  "Example: dsv4h sweep run campaigns/sweep-demo.yaml -w ws", no_args_is_help=True)


@app.command("plan")
def plan_cmd(spec: Annotated[Path, typer.Argument(help="rate-sweep YAML file")],
             json_out: JsonOpt = False, csv_out: CsvOpt = False) -> None:
    """Print the planned rounds (rate, round, requests, planned span) and the plan id; run nothing.
    --json / --csv print one row per planned round and nothing else.

    Example: dsv4h sweep plan campaigns/sweep-demo.yaml
    """
    plan_loaded(load_spec(spec), json_out=json_out, csv_out=csv_out)


def plan_loaded(loaded: LoadedSpec, *, json_out: bool = False, csv_out: bool = False) -> None:
    """Print the planned rounds of a loaded rate-sweep spec (``dsv4h sweep plan``, ``campaign plan``)."""
    s = _sweep_spec(loaded)
    plan = make_sweep_plan(s, load_corpus(loaded.paths.corpora["sweep"]))
    rows = [{"plan_id": plan.plan_id, "rate_req_s": r.rate,
             "round": "warmup" if r.round_index < 0 else str(r.round_index), "requests": len(r.offsets_s),
             "span_s": r.offsets_s[-1] if r.offsets_s else 0.0, "process": s.arrivals.process} for r in plan.rounds]
    cols = (Col("rate_req_s", "rate req/s", "right", fmt=num), Col("round", "round"),
            Col("requests", "requests", "right"), Col("span_s", "planned span s", "right", fmt=num))
    emit(console, rows, cols, json_out=json_out, csv_out=csv_out, title=f"sweep plan {plan.plan_id}")
    if not (json_out or csv_out):
        console.print(f"plan id {plan.plan_id}; process {s.arrivals.process}; protocol class rate-sweep")


@app.command("run")
def run_cmd(spec: Annotated[Path, typer.Argument(help="rate-sweep YAML file")],
            workspace: WorkspaceOpt = Path(), percentiles: PercentilesOpt = None) -> None:
    """Run a rate sweep into a hashed archive and the ledgers; print one line per rate (and with
    --percentiles a latency table per rate at those percentiles, from the archive's records).

    Example: dsv4h sweep run campaigns/sweep-demo.yaml -w ws --percentiles 50,90,95,99
    """
    run_sweep_loaded_cli(load_spec(spec), resolve_workspace(workspace),
                         percentiles=None if percentiles is None else parse_percentiles(percentiles))


def _sweep_spec(loaded: LoadedSpec) -> SweepSpec:
    if not isinstance(loaded.spec, SweepSpec):
        raise SpecError(f"{loaded.source}: kind '{loaded.kind}' is not a rate sweep",
                        hint="run formal matrices and ABBA screens with 'dsv4h campaign run'")
    return loaded.spec


def sweep_latency_table(cells: Sequence[Mapping[str, Any]], rounds: Sequence[Mapping[str, Any]],
                        records: Sequence[RequestRecord], percentiles: Sequence[float], *, title: str,
                        simulated: bool = False) -> Table:
    """Latency of each offered rate (its measured requests of ok rounds) at ``percentiles``, in ms; the
    title says SIMULATED for ``simulated`` data."""
    at = cell_latency_at(records, {str(r["round_id"]): str(r["status"]) for r in rounds}, percentiles)
    rows = [("", num(c.get("arrival_rate_req_s")), at.get(str(c["cell_id"]), {})) for c in cells]
    return latency_grid(rows, percentiles, title=f"{title}: latency per offered rate (ms){sim_label(simulated)}",
                        caption="Rows by offered rate (req/s). Over the measured requests of each rate's ok rounds; "
                        "TPOT = (last - first token event) / tokens after the first event; ITL per token.",
                        head="rate req/s")


def run_sweep_loaded_cli(loaded: LoadedSpec, ws: Path, *, percentiles: Sequence[float] | None = None,
        options: RunOptions | None = None) -> None:
    """Run a loaded rate-sweep spec into workspace ``ws`` through the kind registry and print its
    progress and outcome (the one path of 'dsv4h sweep run' and of 'dsv4h campaign run' given a
    ``kind: rate-sweep`` spec): first the startup recovery of what a killed dsv4h left. Raises the run's
    error after the archive is finalized."""

    from harness.cli.progress import SweepLive

    _sweep_spec(loaded)
    startup_reap(ws)
    with SweepLive(console) as live:
        out = run_loaded(loaded, ws, live)
    assert isinstance(out, SweepOutcome)
    verdict = out.finished.verdict
    archive = out.finished.archive
    simulated = archive.run.simulated
    console.print(f"[bold]{esc(archive.run.campaign)}: rate sweep, per offered rate[/]{sim_label(simulated)}")
    for c in out.cells:
        console.print(sweep_cell_line(c) + (f"  {verdict.mark(c.get('cell_id'))}" if verdict is not None
                                            and verdict.concerns(c.get("cell_id")) else ""))
    if out.stopped is not None:
        not_run = ", ".join(f"{r:g}" for r in out.stopped["not_run"]) or "none"
        console.print(f"stopped at {out.stopped['at_rate_req_s']:g} req/s (over-saturated); not run: {not_run} req/s",
                      soft_wrap=True)
    if percentiles is not None:
        console.print(sweep_latency_table(out.cells, out.rounds, archive.records(), percentiles,
                                          title=esc(archive.run.campaign), simulated=simulated))
    print_energy(archive, simulated)
    print_findings(out.finished.findings, all_severities=True)
    a = out.finished.archive
    console.print(f"archive {a.archive_id} ({a.status})")
    end_run(verdict, error=out.error, status=a.status, archive_id=a.archive_id)


def sweep_cell_line(c: Mapping[str, Any]) -> str:
    """One rate's console line: medians of its ok rounds (request and output throughput, goodput) and its
    pooled latency in ms (TTFT p50/p99, TPOT, ITL and E2E p50), whether its schedule was kept and how many
    of its rounds were over-saturated (docs/saturation.md)."""
    return (f"rate {num(c.get('arrival_rate_req_s'))}: request throughput "
            f"{num(c.get('request_throughput_median_req_s'), 2)} req/s, "
            f"output {num(c.get('output_throughput_median_tok_s'))} tok/s, "
            f"goodput {num(c.get('goodput_median_req_s'), 2)} "
            f"req/s, TTFT p50 {ms(c.get('ttft_p50_s'))} p99 {ms(c.get('ttft_p99_s'))} ms, "
            f"TPOT p50 {ms(c.get('tpot_p50_s'))} ms, ITL p50 {ms(c.get('itl_p50_s'))} ms, "
            f"E2E p50 {ms(c.get('e2e_p50_s'))} ms, schedule {'kept' if c.get('schedule_kept') else 'NOT kept'}"
            + (f", OVER-SATURATED in {c['saturated_rounds']} round(s)" if c.get("saturated_rounds") else ""))


@app.command("report")
def report_cmd(out: Annotated[Path, typer.Option("--out", help="output directory")],
               workspace: WorkspaceOpt = Path()) -> None:
    """Write the rate-sweep section: latency-vs-throughput curves with the goodput knee, per archive.

    Example: dsv4h sweep report -w ws --out ws/sweep
    """
    from harness.report.sweep import build_sweep_report

    console.print(f"wrote {build_sweep_report(resolve_workspace(workspace), out)}")
