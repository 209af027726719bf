"""``dsv4h ledger import-historical``: results measured elsewhere, with their own labels (rule 4)."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer

from harness.cli.common import WorkspaceOpt, console, default_workspace
from harness.governance.io import import_historical_file


def import_historical(
    file: Annotated[Path, typer.Argument(help="historical-evidence YAML (e.g. ledgers/historical-sources/*.yaml)")],
    workspace: WorkspaceOpt = Path(),
) -> None:
    """Import historical entries into the historical ledger table (idempotent by entry_id; every
    row is labelled historical = true, data_origin = historical).

    Example: dsv4h ledger import-historical ledgers/historical-sources/report-2609.15627.yaml -w ws
    """
    ws = workspace if str(workspace) != "." else default_workspace()
    out = import_historical_file(file, ws)
    console.print(f"{file}: {len(out['added'])} historical entries added, {len(out['unchanged'])} already present "
                  f"(sha256 {out['sha256'][:16]}...)")
    console.print("historical rows keep their original protocol labels and are never presented as current (rule 4)")
