"""``dsv4h record propose|list|show``: records with their suites, control, gates and lineage."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated, Any

import typer
from rich.table import Table

from harness.cli.common import WorkspaceOpt, console, default_workspace
from harness.cli.listing import Col, CsvOpt, JsonOpt, emit, wall_second
from harness.governance.io import get_record, propose_record, table_rows

app = typer.Typer(help="Records: a three-suite median with its same-build control and the gates it passed.\n\n"
                  "Example: dsv4h record propose campaigns/records/example-sim-c1.yaml -w ws", no_args_is_help=True)


def _ws(workspace: Path) -> Path:
    return workspace if str(workspace) != "." else default_workspace()


def _pct(v: float | None) -> str:
    return "—" if v is None else f"{v:+.2f}%"


def render_record(row: dict[str, Any]) -> None:
    """Print one record: value, suites, control, gates, previous record and percentages."""
    c = row.get("content_json") or {}
    sim = " (SIMULATED)" if row["data_origin"] == "simulated" else ""
    console.print(f"[bold]record {row['record_id']}[/] {row['name']}{sim} — scope {row['scope']}, {row['metric']} "
                  f"at C{row['concurrency']}, {row['claim_class']}, {row['protocol_class']}")
    console.print(f"value: [bold]{row['value']:.6f}[/] {row['unit']} (median of {len(row['suite_ids'])} suite medians)")
    t = Table(title="suites", title_justify="left")
    for col in ("archive", "value", "n", "how", "created"):
        t.add_column(col, overflow="fold")
    for s in c.get("suites", []):
        t.add_row(s["archive_id"], f"{s['value']:.6f}", str(s["n"]), str(s["detail"]), str(s["created_wall"]))
    console.print(t)
    ctrl = c.get("control", {})
    vals = ", ".join(f"{a['archive_id']} {a['value']:.6f}" for a in ctrl.get("archives", []))
    console.print(f"control: {vals}; declared change {', '.join(ctrl.get('declared_change', []))}")
    for d in ctrl.get("declared_differences", []):
        console.print(f"  {d}")
    console.print(f"record over control: {_pct(row['over_control_pct'])}")
    for g in c.get("gates", []):
        console.print(f"gate {g['gate']}: passed on {g['archive_id']} ({g['value']} {g['op']} {g['threshold']} "
                      f"{g['unit']}, {g['checked_at']})")
    if row["previous_record_id"]:
        console.print(f"previous record {row['previous_record_id']}: {row['previous_value']:.6f}; this record "
                      f"{_pct(row['over_previous_pct'])} over it")
    else:
        console.print("previous record: none in this lineage (scope, metric, concurrency, claim class, origin)")
    console.print(f"recorded {row['recorded_at']} from {row['proposal_file']} "
                  f"(sha256 {row['proposal_sha256'][:16]}...)")


@app.command("propose")
def propose_cmd(
    file: Annotated[Path, typer.Argument(help="record proposal YAML")],
    workspace: WorkspaceOpt = Path(),
) -> None:
    """Check a proposal against its evidence and append it to the records ledger; refused (exit 7)
    with everything missing listed when the evidence is incomplete.

    Example: dsv4h record propose campaigns/records/example-sim-c1.yaml -w ws
    """
    ws = _ws(workspace)
    row = propose_record(file, ws)
    render_record(get_record(ws, row["record_id"]))


@app.command("list")
def list_cmd(workspace: WorkspaceOpt = Path(), json_out: JsonOpt = False, csv_out: CsvOpt = False) -> None:
    """Print every record, oldest first (--json and --csv print every field).

    Example: dsv4h record list -w ws
    """
    rows = table_rows(_ws(workspace), "records")
    if not rows and not (json_out or csv_out):
        console.print("no records yet (dsv4h record propose FILE)")
        return
    shown = [r | {"what": f"{r['name']}\n{r['scope']}", "metric_c": f"{r['metric']}\nC{r['concurrency']}",
                  "claim": f"{r['claim_class']}\n{r['data_origin']}", "n_suites": len(r["suite_ids"]),
                  "prev": _pct(r["over_previous_pct"]), "ctrl": _pct(r["over_control_pct"]),
                  "when": wall_second(r.get("recorded_at"))} for r in rows]
    cols = (Col("record_id", "id", ident=True), Col("what", "name / scope"), Col("metric_c", "metric"),
            Col("claim", "claim / origin"), Col("value", "value", "right", fmt=lambda v: f"{v:.3f}"),
            Col("n_suites", "suites", "right"), Col("prev", "vs previous", "right"), Col("ctrl", "vs control", "right"),
            Col("when", "recorded (UTC)"))
    emit(console, rows if (json_out or csv_out) else shown, cols, json_out=json_out, csv_out=csv_out,
         title=f"records ({len(rows)})")


@app.command("show")
def show_cmd(
    record_id: Annotated[str, typer.Argument(help="record id or unique prefix")],
    workspace: WorkspaceOpt = Path(),
) -> None:
    """Print one record with its suites, control, gates, previous record and percentage.

    Example: dsv4h record show 3f2a9c01
    """
    render_record(get_record(_ws(workspace), record_id))
