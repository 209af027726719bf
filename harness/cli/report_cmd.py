"""``dsv4h report build``: a frozen snapshot of archives, rendered as HTML, Markdown and LaTeX."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer

from harness.cli.common import WorkspaceOpt, console, default_workspace

app = typer.Typer(help="Reports: verify archives, freeze a snapshot, render figures and tables.\n\n"
                  "Example: dsv4h report build -w ./ws --config reports/demo/report.yaml --out ./ws/report",
                  no_args_is_help=True)


@app.callback()
def _report() -> None:
    """Reports: verify archives, freeze a snapshot, render figures and tables."""


@app.command("build")
def build_cmd(
    workspace: WorkspaceOpt = Path(),
    config: Annotated[Path | None, typer.Option(
        "--config", "-c", help="report config YAML (reports/<name>/report.yaml); default: every archive")] = None,
    out: Annotated[Path | None, typer.Option(
        "--out", "-o", help="report directory (default: <workspace>/report)")] = None,
    from_snapshot: Annotated[Path | None, typer.Option(
        "--from-snapshot", help="render from this snapshot (a report's results.json); no archives needed")] = None,
    latex: Annotated[bool, typer.Option("--latex", help="also write tables.tex (booktabs + hyperref)")] = False,
    jobs: Annotated[int | None, typer.Option(
        "--jobs", "-j", min=1, help="processes drawing figures (default: one per CPU); output is identical")] = None,
) -> None:
    """Build a report. Verifies every selected archive (a missing or changed archive stops the
    build, naming it), writes the frozen snapshot results.json, then renders report.html
    (self-contained), report.md, figures/*.{png,svg,pdf} and, with --latex, tables.tex from that
    snapshot alone. Set SOURCE_DATE_EPOCH to fix the recorded build time.

    Example: dsv4h report build -w ./ws --config reports/demo/report.yaml --out ./ws/report

    Example (rebuild anywhere): dsv4h report build --from-snapshot ./ws/report/results.json --out /tmp/r2
    """
    from harness.report.build import build_from_snapshot, build_report
    from harness.report.config import load_report_config

    ws = workspace if str(workspace) != "." else default_workspace()
    out_dir = out if out is not None else ws / "report"
    if from_snapshot is not None:
        if config is not None:
            from harness.errors import SpecError

            raise SpecError("--config and --from-snapshot exclude each other: a snapshot already fixes the "
                            "selection", hint="drop --config, or build from the workspace without --from-snapshot")
        rendered = build_from_snapshot(from_snapshot, out_dir, latex=latex, jobs=jobs)
    else:
        cfg = load_report_config(config) if config is not None else None
        rendered = build_report(ws, out_dir, config=cfg, latex=latex, jobs=jobs)
    console.print(f"report: {rendered.html} ({len(rendered.figures)} figure(s), {len(rendered.files)} files)")
    console.print(f"snapshot: {rendered.out_dir / 'results.json'} (sha256 {rendered.snapshot_sha256[:16]}...)")
