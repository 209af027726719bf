"""``dsv4h evidence check``: evidence rules as findings beside the numbers."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer
from rich.table import Table

from harness.cli.common import WorkspaceOpt, console, esc, existing_workspace
from harness.errors import EvidenceError
from harness.evidence.findings import Finding
from harness.evidence.io import apply_findings, check_archive
from harness.store.archive import find_archive, iter_archives, open_verified

app = typer.Typer(help="Evidence rules (docs/evidence-rules.md) as findings.\n\nExample: dsv4h evidence check -w ws",
                  no_args_is_help=True)

_STYLE = {"blocking": "bold red", "warning": "yellow", "info": "dim"}


def findings_table(findings: list[Finding], title: str) -> Table:
    """Findings as a two-column grid that reads at 80 columns: severity, then the rule and its
    message, the remedy and the rows it concerns (first four named)."""
    t = Table.grid(padding=(0, 1))
    t.title = f"{title} ({len(findings)})"
    t.title_justify = "left"
    t.add_column(no_wrap=True)
    t.add_column(overflow="fold")
    for f in findings:
        rows = ", ".join(f.rows[:4]) + (f" (+{len(f.rows) - 4})" if len(f.rows) > 4 else "")
        detail = f"[bold]{esc(f.rule)}[/]: {esc(f.message)}\n[dim]remedy:[/] {esc(f.remedy)}"
        if rows:
            detail += f"\n[dim]rows:[/] {esc(rows)}"
        t.add_row(f"[{_STYLE[f.severity]}]{esc(f.severity)}[/]", detail)
    return t


@app.command("check")
def check_cmd(
    archives: Annotated[list[str] | None, typer.Argument(help="archive paths or ids (default: every archive)")] = None,
    workspace: WorkspaceOpt = Path(),
    no_fail: Annotated[bool, typer.Option("--no-fail", help="exit 0 even with blocking findings")] = False,
) -> None:
    """Run every evidence rule over archives, print the findings, and mark ledger rows touched by
    blocking findings as valid = false (exit 7 when any finding is blocking).

    Example: dsv4h evidence check 3f2a9c01 -w ws
    """
    ws = existing_workspace(workspace)
    refs = [find_archive(a, ws) for a in archives] if archives else [a.path for a in iter_archives(ws)]
    targets = [open_verified(p) for p in refs]  # a changed archive is refused before any rule reads it
    n_blocking = 0
    for a in targets:
        findings = check_archive(a)
        changed = apply_findings(ws, a.archive_id, findings)
        run = a.run
        title = esc(f"archive {a.archive_id} — {run.campaign} ({run.protocol_class}, "
                    f"{run.backend}{', SIMULATED' if run.simulated else ''})")
        if findings:
            console.print(findings_table(findings, title))
        else:
            console.print(f"{title}: no findings")
        if changed:
            console.print("ledger rows marked valid = false: " + ", ".join(f"{k} {v}" for k, v in changed.items()))
        n_blocking += sum(1 for f in findings if f.blocking)
    if n_blocking and not no_fail:
        raise EvidenceError(f"{n_blocking} blocking finding(s)", hint="fix them or keep those rows out of any claim")
