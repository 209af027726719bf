"""Fixtures of the report tests: one synthetic workspace and its report, built once per session."""

from __future__ import annotations

from pathlib import Path

import pytest
from report_helpers import BUILD_TIME, make_workspace, stand_in_findings

from harness.report.build import build_report


@pytest.fixture(scope="session")
def built(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, dict[str, str], Path]:
    """(workspace, {f1, f2, abba: archive id}, report directory) of a report built with --latex and
    stand-in findings."""
    ws = tmp_path_factory.mktemp("ws")
    ids = make_workspace(ws)
    out = ws / "report"
    build_report(ws, out, latex=True, build_time=BUILD_TIME, findings_fn=stand_in_findings)
    return ws, ids, out
