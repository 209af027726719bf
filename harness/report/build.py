"""``dsv4h report build`` as a library call (edge module: reads archives, writes the report).

Two entry points, one renderer:

- :func:`build_report`: select archives of a workspace, verify each, freeze the snapshot, write
  it as ``<out>/results.json`` and render the report from those bytes;
- :func:`build_from_snapshot`: render the same report from a snapshot file alone (no archives).

Both return a :class:`~harness.report.render.RenderedReport`. The build time is the only value not
taken from the snapshot: ``SOURCE_DATE_EPOCH`` (seconds) when set, else the current UTC time.
"""

from __future__ import annotations

import os
from datetime import UTC, datetime
from pathlib import Path

from harness.errors import SpecError
from harness.report.collect import FindingsFn, collect
from harness.report.config import ReportConfig
from harness.report.render import RenderedReport, render_report
from harness.report.snapshot import snapshot_bytes

__all__ = ["build_from_snapshot", "build_report"]


def build_time_now() -> str:
    """The build time as ``YYYY-MM-DDTHH:MM:SSZ`` (UTC): ``SOURCE_DATE_EPOCH`` when set, else now."""
    epoch = os.environ.get("SOURCE_DATE_EPOCH")
    if epoch:
        try:
            moment = datetime.fromtimestamp(int(epoch), tz=UTC)
        except ValueError as exc:
            raise SpecError(f"SOURCE_DATE_EPOCH={epoch!r} is not an integer number of seconds",
                            hint="unset it or give seconds since 1970") from exc
    else:
        moment = datetime.now(tz=UTC)
    return moment.strftime("%Y-%m-%dT%H:%M:%SZ")


def build_report(workspace: Path, out_dir: Path, *, config: ReportConfig | None = None, latex: bool = False,
                 build_time: str | None = None, templates_dir: Path | None = None,
                 findings_fn: FindingsFn | bool | None = True, jobs: int | None = None) -> RenderedReport:
    """Select, verify and freeze the archives of ``workspace`` (``config`` defaults to every
    archive), write ``<out_dir>/results.json`` and render the report from it. ``jobs``: figure
    worker processes (default: automatic; the output does not depend on it).

    Raises ``ArchiveError`` when a selected archive is missing or fails verification (naming it and
    what changed), or when nothing is selected; ``SpecError`` for missing templates.
    """
    snapshot = collect(workspace, config or ReportConfig(), findings_fn=findings_fn)
    data = snapshot_bytes(snapshot)
    return render_report(data, out_dir, build_time=build_time or build_time_now(), latex=latex,
                         templates_dir=templates_dir, jobs=jobs)


def build_from_snapshot(snapshot_path: Path, out_dir: Path, *, latex: bool = False, build_time: str | None = None,
                        templates_dir: Path | None = None, jobs: int | None = None) -> RenderedReport:
    """Render the report of an existing snapshot file into ``out_dir`` (no archives needed).
    Raises ``SpecError`` when the file is missing or is not a snapshot this version renders."""
    if not snapshot_path.is_file():
        raise SpecError(f"{snapshot_path}: no such snapshot file",
                        hint="give the results.json of a report directory")
    data = snapshot_path.read_bytes()
    return render_report(data, out_dir, build_time=build_time or build_time_now(), latex=latex,
                         templates_dir=templates_dir, source=str(snapshot_path), jobs=jobs)
