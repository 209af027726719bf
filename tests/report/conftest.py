"""Fixtures of the report tests: synthetic workspaces and their reports, built once per session."""

from __future__ import annotations

from pathlib import Path

import pytest
from report_helpers import BUILD_TIME, make_workspace, stand_in_findings
from synthetic_archives import write_abba_archive, write_formal_archive

from harness.governance.io import import_historical_file
from harness.report.build import build_report
from harness.report.config import load_report_config

REPO = Path(__file__).resolve().parents[2]


@pytest.fixture(scope="session")
def built(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, dict[str, str], Path]:
    """(workspace, {f1, f2, abba, sweep: archive id}, report directory) of a report built with --latex and
    stand-in findings."""
    ws = tmp_path_factory.mktemp("ws")
    ids = make_workspace(ws)
    out = ws / "report"
    build_report(ws, out, latex=True, build_time=BUILD_TIME, findings_fn=stand_in_findings)
    return ws, ids, out


@pytest.fixture(scope="session")
def built_historical(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Path]:
    """(workspace, report directory) of the demo report config over one simulated formal matrix (memory,
    oracles), one ABBA screen and the 95 entries of ledgers/historical-sources/report-2609.15627.yaml; the same
    report without the historical section is in ``<workspace>/report-no-historical``."""
    ws = tmp_path_factory.mktemp("ws-historical")
    write_formal_archive(ws, campaign="demo-matrix", seed=1, memory_devices=1, memory_samples=12, oracles=True)
    write_abba_archive(ws, campaign="abba-demo", seed=3)
    import_historical_file(REPO / "ledgers" / "historical-sources" / "report-2609.15627.yaml", ws)
    out = ws / "report"
    cfg = load_report_config(REPO / "reports" / "demo" / "report.yaml")
    build_report(ws, out, config=cfg, build_time=BUILD_TIME, findings_fn=False)
    build_report(ws, ws / "report-no-historical", config=cfg.model_copy(update={"historical": False}),
                 build_time=BUILD_TIME, findings_fn=False)
    return ws, out
