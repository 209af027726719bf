"""``dsv4h sweep plan|run``: open-loop rate sweeps (protocol class rate-sweep)."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated, Any

import typer

from harness.cli.common import WorkspaceOpt, console, resolve_workspace
from harness.inputs.corpus import load_corpus
from harness.inputs.sweep_spec import load_sweep
from harness.run.sweep import make_sweep_plan, run_sweep

app = typer.Typer(help="Open-loop rate sweeps (Poisson/gamma/constant arrivals, goodput under SLOs).\n\n"
                  "Example: dsv4h sweep run campaigns/sweep-demo.yaml -w ws", no_args_is_help=True)


@app.command("plan")
def plan_cmd(spec: Annotated[Path, typer.Argument(help="rate-sweep YAML file")]) -> None:
    """Print the planned rounds (rate, round, requests, planned span) and the plan id; run nothing.

    Example: dsv4h sweep plan campaigns/sweep-demo.yaml
    """
    s, corpus_path = load_sweep(spec)
    plan = make_sweep_plan(s, load_corpus(corpus_path))
    for r in plan.rounds:
        span = r.offsets_s[-1] if r.offsets_s else 0.0
        kind = "warmup" if r.round_index < 0 else f"round {r.round_index}"
        console.print(f"{r.rate:g} req/s  {kind:8}  {len(r.offsets_s):5d} requests over {span:.2f} s")
    console.print(f"plan id {plan.plan_id}; process {s.arrivals.process}; protocol class rate-sweep")


@app.command("run")
def run_cmd(spec: Annotated[Path, typer.Argument(help="rate-sweep YAML file")],
            workspace: WorkspaceOpt = Path()) -> None:
    """Run a rate sweep into a hashed archive and the ledgers; print one line per rate.

    Example: dsv4h sweep run campaigns/sweep-demo.yaml -w ws
    """
    ws = resolve_workspace(workspace)

    def report(kind: str, **data: Any) -> None:
        if kind == "sweep-round-done":
            row = data["row"]
            console.print(f"{row['rate']:g} req/s round {row['round_index']}: {row['n_ok']}/{row['n_requests']} ok, "
                          f"goodput {row['goodput']:.2f} req/s, client lag p99 {row['client_lag_p99_s'] * 1e3:.1f} ms")

    out = run_sweep(spec, ws, reporter=report)
    for c in out.cells:
        console.print(f"rate {c['rate']:g}: request throughput {c['request_throughput_median']:.2f} req/s, "
                      f"goodput {c['goodput_median']:.2f} req/s, TTFT p50 {c['ttft_p50_s'] * 1e3:.1f} ms, "
                      f"schedule {'kept' if c['schedule_kept'] else 'NOT kept'}")
    for f in out.finished.findings:
        console.print(f"[{f.severity}] {f.rule}: {f.message}")
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
