"""Options and helpers shared by CLI commands."""

from __future__ import annotations

import os
from pathlib import Path
from typing import Annotated

import typer
from rich.console import Console

console = Console()

WorkspaceOpt = Annotated[
    Path,
    typer.Option("--workspace", "-w", help="Directory holding archives/ and ledgers/ "
                 "(default: $DSV4H_WORKSPACE or the current directory)."),
]


def default_workspace() -> Path:
    """``$DSV4H_WORKSPACE`` or the current directory."""
    return Path(os.environ.get("DSV4H_WORKSPACE", "."))
