"""``dsv4h ledger show|ingest``: Parquet ledgers."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer
from rich.table import Table

from harness.cli.common import WorkspaceOpt, console, esc, existing_workspace
from harness.store.archive import find_archive, iter_archives, open_archive
from harness.store.ledger import TABLES, ingest_archive, read_table

app = typer.Typer(help="Parquet ledgers (open them with pandas.read_parquet).\n\n"
                  "Example: dsv4h ledger show --table cells", no_args_is_help=True)

_DEFAULT_COLS = {
    "cells": ["archive_id", "campaign", "workload", "concurrency", "status", "median", "http_rate",
              "data_origin", "claim_class", "protocol_class", "valid"],
    "rounds": ["archive_id", "cell_id", "round_index", "status", "rate", "http_rate", "n_waves", "data_origin"],
    "runs": ["archive_id", "campaign", "kind", "claim_class", "protocol_class", "backend", "data_origin",
             "archive_status", "created_wall"],
}


def _ws(workspace: Path) -> Path:
    return existing_workspace(workspace)


@app.command("show")
def show_cmd(
    table: Annotated[str, typer.Option("--table", "-t", help=f"one of {', '.join(TABLES)}")] = "cells",
    workspace: WorkspaceOpt = Path(),
    limit: Annotated[int, typer.Option("--limit", "-n", help="most recent rows to show")] = 20,
    columns: Annotated[str | None, typer.Option("--columns", "-c", help="comma-separated columns")] = None,
) -> None:
    """Print the most recent rows of a ledger table.

    Example: dsv4h ledger show --table rounds -n 30
    """
    ws = _ws(workspace)
    t = read_table(ws, table)
    if t is None:
        console.print(f"ledger table '{esc(table)}' is empty (no archives ingested in {esc(ws)})")
        return
    df = t.to_pandas().tail(limit)
    cols = columns.split(",") if columns else [c for c in _DEFAULT_COLS.get(table, df.columns[:10]) if c in df.columns]
    missing = [c for c in cols if c not in df.columns]
    if missing:
        from harness.errors import LedgerError

        raise LedgerError(f"ledger table '{table}' has no column(s) {', '.join(missing)}",
                          hint=f"columns: {', '.join(map(str, df.columns))}")
    out = Table(title=f"{esc(table)} ({t.num_rows} rows, last {len(df)})")
    for c in cols:
        out.add_column(esc(c))
    for _, row in df[cols].iterrows():
        out.add_row(*[f"{v:,.2f}" if isinstance(v, float) else esc(v) for v in row])
    console.print(out)


@app.command("ingest")
def ingest_cmd(
    archives: Annotated[list[str] | None, typer.Argument(help="archive paths or ids (default: all)")] = None,
    workspace: WorkspaceOpt = Path(),
) -> None:
    """Append archives to the ledgers (an archive already ingested adds nothing). Every archive is
    verified first: a changed, missing or extra file refuses it (exit 6), naming the file.

    Example: dsv4h ledger ingest   # every archive of the workspace
    """
    ws = _ws(workspace)
    targets = [open_archive(find_archive(a, ws)) for a in archives] if archives else list(iter_archives(ws))
    for a in targets:
        added = ingest_archive(ws, a)
        msg = ", ".join(f"{k} +{v}" for k, v in sorted(added.items())) if added else "already ingested"
        console.print(f"{esc(a.archive_id)}: {msg}")


from harness.cli.historical_cmd import import_historical  # noqa: E402 - mounted under `dsv4h ledger`

app.command("import-historical")(import_historical)
