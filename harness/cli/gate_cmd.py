"""``dsv4h gate check``: evaluate a gate file on an archive and keep the result."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer

from harness.cli.common import WorkspaceOpt, console, default_workspace
from harness.governance.io import check_gate, gate_failure

app = typer.Typer(help="Gates: a quantity of one archive compared with a threshold (campaigns/gates/*.yaml).\n\n"
                  "Example: dsv4h gate check campaigns/gates/fresh-response.yaml --archive 3f2a9c01",
                  no_args_is_help=True)


@app.callback()
def _gate() -> None:
    """Gates: a quantity of one archive compared with a threshold."""


@app.command("check")
def check_cmd(
    gate: Annotated[Path, typer.Argument(help="gate YAML file")],
    archive: Annotated[str, typer.Option("--archive", "-a", help="archive id, prefix or path")],
    candidate: Annotated[str | None, typer.Option("--candidate", help="candidate name the result counts for")] = None,
    workspace: WorkspaceOpt = Path(),
) -> None:
    """Evaluate GATE on ARCHIVE, append the result to the gates ledger and print it; exit 7 when it fails.

    Example: dsv4h gate check campaigns/gates/hw-gate-0.5ms-per-token.yaml --archive 9b1c2d3e --candidate direct-moe
    """
    ws = workspace if str(workspace) != "." else default_workspace()
    row = check_gate(gate, archive, ws, candidate=candidate)
    val = "no value" if row["value"] is None else f"{row['value']:.6g}"
    mark = "[bold green]PASSED[/]" if row["passed"] else "[bold red]FAILED[/]"
    sim = " (SIMULATED)" if row["data_origin"] == "simulated" else ""
    console.print(f"gate {row['gate']} on {row['archive_id']}{sim}: {row['quantity']} = {val} {row['unit']} "
                  f"(required {row['op']} {row['threshold']:g}) {mark}")
    console.print(f"  {row['detail']}; n = {row['n']}" + (f"; candidate {candidate}" if candidate else ""))
    if not row["passed"]:
        raise gate_failure(row)
