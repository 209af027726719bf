"""``dsv4h sweep plan|run``: open-loop rate sweeps (protocol class rate-sweep)."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer

from harness.cli.common import WorkspaceOpt, console, resolve_workspace
from harness.cli.listing import Col, CsvOpt, JsonOpt, emit
from harness.inputs.corpus import load_corpus
from harness.inputs.sweep_spec import load_sweep
from harness.run.sweep import make_sweep_plan, run_sweep

app = typer.Typer(help="Open-loop rate sweeps (Poisson/gamma/constant arrivals, goodput under SLOs).\n\n"
                  "Example: dsv4h sweep run campaigns/sweep-demo.yaml -w ws", no_args_is_help=True)


@app.command("plan")
def plan_cmd(spec: Annotated[Path, typer.Argument(help="rate-sweep YAML file")],
             json_out: JsonOpt = False, csv_out: CsvOpt = False) -> None:
    """Print the planned rounds (rate, round, requests, planned span) and the plan id; run nothing.
    --json / --csv print one row per planned round and nothing else.

    Example: dsv4h sweep plan campaigns/sweep-demo.yaml
    """
    s, corpus_path = load_sweep(spec)
    plan = make_sweep_plan(s, load_corpus(corpus_path))
    rows = [{"plan_id": plan.plan_id, "rate_req_s": r.rate,
             "round": "warmup" if r.round_index < 0 else str(r.round_index), "requests": len(r.offsets_s),
             "span_s": r.offsets_s[-1] if r.offsets_s else 0.0, "process": s.arrivals.process} for r in plan.rounds]
    cols = (Col("rate_req_s", "rate req/s", "right", fmt=lambda v: f"{v:g}"), Col("round", "round"),
            Col("requests", "requests", "right"), Col("span_s", "planned span s", "right"))
    emit(console, rows, cols, json_out=json_out, csv_out=csv_out, title=f"sweep plan {plan.plan_id}")
    if not (json_out or csv_out):
        console.print(f"plan id {plan.plan_id}; process {s.arrivals.process}; protocol class rate-sweep")


@app.command("run")
def run_cmd(spec: Annotated[Path, typer.Argument(help="rate-sweep YAML file")],
            workspace: WorkspaceOpt = Path()) -> None:
    """Run a rate sweep into a hashed archive and the ledgers; print one line per rate.

    Example: dsv4h sweep run campaigns/sweep-demo.yaml -w ws
    """
    run_sweep_spec(spec, resolve_workspace(workspace))


def run_sweep_spec(spec: Path, ws: Path) -> None:
    """Run the rate sweep of ``spec`` into workspace ``ws`` and print its progress and outcome (the one
    path of 'dsv4h sweep run' and of 'dsv4h campaign run' given a ``kind: rate-sweep`` spec). Raises the
    run's error after the archive is finalized."""

    from harness.cli.evidence_cmd import findings_table
    from harness.cli.progress import SweepLive

    with SweepLive(console) as live:
        out = run_sweep(spec, ws, reporter=live)
    for c in out.cells:
        console.print(f"rate {c['rate']:g}: request throughput {c['request_throughput_median']:.2f} req/s, "
                      f"goodput {c['goodput_median']:.2f} req/s, TTFT p50 {c['ttft_p50_s'] * 1e3:.1f} ms, "
                      f"schedule {'kept' if c['schedule_kept'] else 'NOT kept'}")
    if out.finished.findings:
        console.print(findings_table(list(out.finished.findings), "evidence findings"))
    console.print(f"archive {out.finished.archive.archive_id} ({out.finished.archive.status})")
    if out.error is not None:
        raise out.error


@app.command("report")
def report_cmd(out: Annotated[Path, typer.Option("--out", help="output directory")],
               workspace: WorkspaceOpt = Path()) -> None:
    """Write the rate-sweep section: latency-vs-throughput curves with the goodput knee, per archive.

    Example: dsv4h sweep report -w ws --out ws/sweep
    """
    from harness.report.sweep import build_sweep_report

    console.print(f"wrote {build_sweep_report(resolve_workspace(workspace), out)}")
