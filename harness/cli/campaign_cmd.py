"""``dsv4h campaign plan|run``: formal matrix campaigns."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer

from harness.cli.common import WorkspaceOpt, console, default_workspace
from harness.cli.progress import LiveReporter
from harness.cli.render import pd_table, plan_table
from harness.errors import ArchiveError
from harness.pipeline import load_corpora, make_plan, run_campaign
from harness.spec import load_campaign

app = typer.Typer(help="Formal matrix campaigns.\n\nExample: dsv4h campaign run campaigns/demo-matrix.yaml",
                  no_args_is_help=True)


@app.command("plan")
def plan_cmd(spec: Annotated[Path, typer.Argument(help="campaign YAML file")]) -> None:
    """Print the ordered cells, rounds and waves of a campaign and an estimate of wall time; run
    nothing.

    Example: dsv4h campaign plan campaigns/demo-matrix.yaml
    """
    s = load_campaign(spec)
    corpora = load_corpora(s, spec)
    plan = make_plan(s, corpora)
    console.print(plan_table(plan))
    if plan.estimate_s is not None:
        console.print(f"estimated wall time: {plan.estimate_s / 60:.1f} min ({plan.estimate_basis})")
    else:
        console.print("estimated wall time: unknown (no rate model for this backend); each decode round "
                      "needs at least its min_resident_seconds of resident windows")
    console.print(f"claim class: {s.claim_class}; protocol class: {s.protocol_class}; "
                  f"backend: {s.service.backend}" + (" (SIMULATED)" if s.service.backend == "sim" else ""))


@app.command("run")
def run_cmd(
    spec: Annotated[Path, typer.Argument(help="campaign YAML file")],
    workspace: WorkspaceOpt = Path(),
    resume: Annotated[str | None, typer.Option("--resume", help="continue a partial/failed archive "
                                               "(path or id) into a new archive")] = None,
) -> None:
    """Run a formal matrix: one fresh service, cells in order, warmups excluded, three measured
    rounds per cell; writes a hashed archive and appends the ledgers.

    Example: dsv4h campaign run campaigns/demo-matrix.yaml --workspace ./ws
    """
    ws = workspace if str(workspace) != "." else default_workspace()
    resume_path = None
    if resume is not None:
        from harness.archive import find_archive

        resume_path = find_archive(resume, ws)
    with LiveReporter(console) as reporter:
        outcome = run_campaign(spec, ws, reporter=reporter, resume=resume_path)
    simulated = outcome.archive.manifest["run"]["backend"] == "sim"
    console.print(pd_table(outcome.results.cells, title=f"{outcome.plan.campaign}: formal native P/D matrix",
                           simulated=simulated))
    console.print(f"archive {outcome.archive.archive_id} [{outcome.status}] at {outcome.archive.path}")
    if outcome.ledger_rows:
        console.print("ledgers: " + ", ".join(f"{k} +{v}" for k, v in sorted(outcome.ledger_rows.items())))
    if outcome.error is not None:
        raise outcome.error
    if outcome.status != "complete":
        raise ArchiveError(f"archive {outcome.archive.archive_id} is {outcome.status}")
