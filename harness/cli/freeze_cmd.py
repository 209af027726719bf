"""``dsv4h freeze`` and ``dsv4h reveal``: freeze-before-reveal for predictions and analysis plans."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer

from harness.cli.common import WorkspaceOpt, console, default_workspace
from harness.governance.io import freeze_file, reveal_failure, reveal_file


def _ws(workspace: Path) -> Path:
    return workspace if str(workspace) != "." else default_workspace()


def freeze(
    file: Annotated[Path, typer.Argument(help="prediction or analysis plan to freeze")],
    workspace: WorkspaceOpt = Path(),
) -> None:
    """Record FILE's SHA-256, size, path and wall time in the freezes ledger (before the results exist).

    The same content is never frozen twice: the existing freeze is reported instead.

    Example: dsv4h freeze predictions/c32-gain.yaml -w ws
    """
    row, created = freeze_file(file, _ws(workspace))
    if created:
        console.print(f"froze {row['path']} at {row['at']}: sha256 {row['sha256']} ({row['bytes']} bytes)")
    else:
        console.print(f"already frozen: this content (sha256 {row['sha256']}) was frozen at {row['at']} as "
                      f"{row['path']}; no new freeze recorded")


def reveal(
    file: Annotated[Path, typer.Argument(help="the frozen prediction or plan")],
    results: Annotated[str, typer.Option("--results", help="results archive id, prefix or path")],
    workspace: WorkspaceOpt = Path(),
) -> None:
    """Check FILE was frozen, unchanged, before the results archive was created (exit 7 if not).

    The outcome (passed, changed since freeze, never frozen, frozen after the results) is recorded
    in the freezes ledger either way.

    Example: dsv4h reveal predictions/c32-gain.yaml --results 3f2a9c01 -w ws
    """
    row = reveal_file(file, results, _ws(workspace))
    if not row["passed"]:
        raise reveal_failure(row)
    console.print(f"reveal passed: {row['path']} (sha256 {row['sha256'][:16]}...) frozen {row['freeze_at']}, "
                  f"results {row['results_archive_id']} created {row['results_created_wall']}")
