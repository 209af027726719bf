"""``dsv4h closure add|list|reopen``: rejected directions, kept closed until new evidence."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer

from harness.cli.common import WorkspaceOpt, console, default_workspace
from harness.cli.listing import Col, CsvOpt, JsonOpt, emit, wall_second
from harness.governance.io import add_closure, closure_states, reopen_direction, table_rows

app = typer.Typer(help="Closures: rejected directions with their evidence; reopened only with new evidence.\n\n"
                  "Example: dsv4h closure add --direction generic-ccl-flag-sweep --evidence 3f2a9c01 "
                  "--reason 'no gain in ABBA'", no_args_is_help=True)


def _ws(workspace: Path) -> Path:
    return workspace if str(workspace) != "." else default_workspace()


@app.command("add")
def add_cmd(
    direction: Annotated[str, typer.Option("--direction", help="slug of the rejected direction")],
    evidence: Annotated[str, typer.Option("--evidence", help="archive id (or path) that rejected it")],
    reason: Annotated[str, typer.Option("--reason", help="why it was rejected")],
    workspace: WorkspaceOpt = Path(),
) -> None:
    """Close a direction with its evidence archive and reason.

    Example: dsv4h closure add --direction mtp2-reuse --evidence 3f2a9c01 --reason "second position accepts 2%"
    """
    row = add_closure(_ws(workspace), direction, evidence, reason)
    console.print(f"closed {row['direction']} at {row['at']} by archive {row['evidence_archive_id']}: {row['reason']}")


@app.command("reopen")
def reopen_cmd(
    direction: Annotated[str, typer.Argument(help="slug of the closed direction")],
    evidence: Annotated[str, typer.Option("--evidence", help="NEW archive id (not the closing one)")],
    reason: Annotated[str, typer.Option("--reason", help="what is new")],
    workspace: WorkspaceOpt = Path(),
) -> None:
    """Reopen a closed direction with new evidence (appends a reopen row; the closure stays in the log).

    Example: dsv4h closure reopen mtp2-reuse --evidence 9b1c2d3e --reason "new predictor"
    """
    row = reopen_direction(_ws(workspace), direction, evidence, reason)
    console.print(f"reopened {row['direction']} at {row['at']} with archive {row['evidence_archive_id']} "
                  f"(closed by {row['closing_archive_id']}): {row['reason']}")


@app.command("list")
def list_cmd(
    workspace: WorkspaceOpt = Path(),
    log: Annotated[bool, typer.Option("--log", help="every row of the closure log, not just current states")] = False,
    json_out: JsonOpt = False,
    csv_out: CsvOpt = False,
) -> None:
    """Print every direction's current state (or the whole log with --log); archive ids are never
    cut; --json and --csv print every field.

    Example: dsv4h closure list -w ws
    """
    ws = _ws(workspace)
    rows = table_rows(ws, "closures") if log else closure_states(ws)
    if not rows and not (json_out or csv_out):
        console.print("no closures recorded")
        return
    shown = [r | {"state": r["action"] if log else ("closed" if r["action"] == "close" else "reopened"),
                  "at": wall_second(r.get("at"))} for r in rows]
    cols = (Col("direction", "direction"), Col("state", "action" if log else "state"),
            Col("evidence_archive_id", "evidence", ident=True), Col("closing_archive_id", "closed by", ident=True),
            Col("at", "at (UTC)"), Col("reason", "reason"))
    emit(console, rows if (json_out or csv_out) else shown, cols, json_out=json_out, csv_out=csv_out,
         title="closure log" if log else "directions (current state = last row)")
