"""Options and helpers shared by CLI commands."""

from __future__ import annotations

import os
from pathlib import Path
from typing import Annotated, Any

import typer
from rich.console import Console
from rich.text import Text


class PlainConsole(Console):
    """A console whose plain-text lines are never hard-wrapped: a ``print`` of strings or
    :class:`~rich.text.Text` defaults to ``soft_wrap=True``, so a line that carries a command, an id
    or a path stays one line (the terminal folds it for display; a copy or a log keeps it whole).
    Tables and other renderables still fit the console width."""

    def print(self, *objects: Any, **kwargs: Any) -> None:
        if kwargs.get("soft_wrap") is None and all(isinstance(o, str | Text) for o in objects):
            kwargs["soft_wrap"] = True
        super().print(*objects, **kwargs)


console = PlainConsole()

WorkspaceOpt = Annotated[
    Path,
    typer.Option("--workspace", "-w", help="Directory holding archives/ and ledgers/ "
                 "(default: $DSV4H_WORKSPACE or the current directory)."),
]

PercentilesOpt = Annotated[str | None, typer.Option(
    "--percentiles", help="Latency percentiles to print, comma-separated numbers in (0, 100], e.g. "
    "50,90,95,99 (recomputed from the archive's records; default: the stored p50/p99 table).")]


def default_workspace() -> Path:
    """``$DSV4H_WORKSPACE`` or the current directory."""
    return Path(os.environ.get("DSV4H_WORKSPACE", "."))


def esc(value: object) -> str:
    """``value`` as text that rich prints literally (user strings are never read as markup)."""
    from rich.markup import escape

    return escape(str(value))


def resolve_workspace(workspace: Path) -> Path:
    """The workspace a command uses: ``-w`` when given, else ``$DSV4H_WORKSPACE`` or the current
    directory. Refused (``ArchiveError``) when that path exists and is not a directory."""
    from harness.errors import ArchiveError

    ws = workspace if str(workspace) != "." else default_workspace()
    if ws.exists() and not ws.is_dir():
        raise ArchiveError(f"workspace {ws} is a file, not a directory",
                           hint="pass a directory with -w (it is created when a run starts)")
    return ws


def existing_workspace(workspace: Path) -> Path:
    """:func:`resolve_workspace` for commands that only read: a workspace that does not exist is an
    error (exit 6), never an empty answer."""
    from harness.errors import ArchiveError

    ws = resolve_workspace(workspace)
    if not ws.is_dir():
        raise ArchiveError(f"workspace {ws} does not exist",
                           hint="pass the workspace of your runs with -w (or set DSV4H_WORKSPACE)")
    return ws


def startup_reap(workspace: Path) -> None:
    """Before a run: roll forward what an interrupted dsv4h left in the workspace (stranded partial
    archives, archives missing from the ledgers) and find servers a killed dsv4h left running; offer
    to stop them (asked on a terminal, else named with the command that stops them)."""
    import sys

    from harness.run.recover import recover_workspace
    from harness.service.launch.registry import left_behind, stop_launched

    if not workspace.is_dir():
        return
    report = recover_workspace(workspace)
    for r in report.recovered:
        console.print(f"recovered {esc(r.partial.name)} ({r.how}): archive {r.done.archive.archive_id} "
                      f"({r.done.archive.status}), now in the ledgers")
    for aid in report.settled:
        console.print(f"archive {aid} was missing from the ledgers: appended")
    for path, why in report.refused:
        console.print(f"[yellow]left as it is:[/] {esc(path)}: {esc(why)}")
    leftovers = left_behind(workspace)
    if not leftovers:
        return
    console.print(f"[bold yellow]{len(leftovers)} server(s) started by a dsv4h that is gone are still running:[/]")
    for e in leftovers:
        console.print(f"  {esc(e.describe())}")
    if sys.stdin.isatty() and typer.confirm("stop them now?", default=True):
        for e in leftovers:
            rep = stop_launched(e)
            console.print(f"stopped pid {e.process.pid}: SIGTERM to {list(rep.terminated)}, "
                          f"SIGKILL to {list(rep.killed)}")
    else:
        console.print(f"stop them with: dsv4h service reap --stop -w {esc(workspace)}")
