"""Listings: ids never cut at 80 columns; --json and --csv on every listing (issue 17)."""

from __future__ import annotations

import csv
import io
import json
from pathlib import Path

import pytest
from rich.console import Console
from typer.testing import CliRunner

from harness.cli import _register, app
from harness.cli.listing import Col, as_csv, as_json, table
from harness.report.synthetic import write_formal_archive

REPO = Path(__file__).resolve().parents[2]


def _render(t: object, width: int = 80) -> str:
    c = Console(record=True, width=width, color_system=None)
    c.print(t)
    return c.export_text()


def test_id_columns_are_never_cut_other_columns_fold() -> None:
    rows = [{"archive_id": "2dcd03b1f4e5a6c7", "campaign": "a-campaign-with-a-rather-long-name " * 3,
             "status": "complete"}]
    cols = (Col("archive_id", "archive id", ident=True), Col("campaign", "campaign"), Col("status", "status"))
    text = _render(table(rows, cols), width=60)
    assert "2dcd03b1f4e5a6c7" in text
    assert "…" not in text
    assert all(len(line) <= 60 for line in text.splitlines())


def test_csv_and_json_known_answers() -> None:
    rows = [{"a": 1, "b": float("nan"), "c": [1, 2]}, {"a": 2, "d": "x,y"}]
    assert as_csv(rows) == 'a,b,c,d\n1,nan,"[1, 2]",\n2,,,"x,y"\n'
    assert json.loads(as_json(rows)) == [{"a": 1, "b": None, "c": [1, 2]}, {"a": 2, "d": "x,y"}]


@pytest.fixture(scope="module")
def workspace(tmp_path_factory: pytest.TempPathFactory) -> Path:
    ws = tmp_path_factory.mktemp("ws")
    for seed in range(2):
        write_formal_archive(ws, seed=seed, tiers=(1, 2))
    return ws


def _invoke(*args: str) -> str:
    _register()
    result = CliRunner().invoke(app, list(args), env={"COLUMNS": "80"}, terminal_width=80)
    assert result.exit_code == 0, result.output
    return result.stdout


def test_archive_list_at_80_columns_shows_whole_ids(workspace: Path) -> None:
    ids = sorted(p.name for p in (workspace / "archives").iterdir())
    text = _invoke("archive", "list", "-w", str(workspace))
    for archive_id in ids:
        assert archive_id in text
    assert all(len(line) <= 80 for line in text.splitlines())
    rows = json.loads(_invoke("archive", "list", "-w", str(workspace), "--json"))
    assert sorted(r["archive_id"] for r in rows) == ids
    parsed = list(csv.DictReader(io.StringIO(_invoke("archive", "list", "-w", str(workspace), "--csv"))))
    assert sorted(r["archive_id"] for r in parsed) == ids and {"campaign", "claim_class"} <= set(parsed[0])


def test_campaign_and_sweep_plans_as_rows() -> None:
    rows = json.loads(_invoke("campaign", "plan", str(REPO / "campaigns/demo-matrix.yaml"), "--json"))
    assert len(rows) == 11 and rows[0]["cell_id"].startswith("prefill-c01-")
    text = _invoke("campaign", "plan", str(REPO / "campaigns/demo-matrix.yaml"))
    assert all(r["cell_id"] in text for r in rows)
    assert all(len(line) <= 80 for line in text.splitlines())
    sweep = list(csv.DictReader(io.StringIO(_invoke("sweep", "plan", str(REPO / "campaigns/sweep-demo.yaml"),
                                                    "--csv"))))
    assert sweep and {"rate_req_s", "round", "requests", "plan_id"} <= set(sweep[0])


def test_every_listing_offers_json_and_csv() -> None:
    listings = [("archive", "list"), ("ledger", "show"), ("campaign", "plan"), ("sweep", "plan"),
                ("closure", "list"), ("record", "list"), ("service", "status"), ("sim", "profiles"),
                ("gpu", "owners"), ("gpu", "memory")]
    _register()
    for group, cmd in listings:
        out = CliRunner().invoke(app, [group, cmd, "--help"], env={"COLUMNS": "200"}, terminal_width=200).output
        assert "--json" in out and "--csv" in out, (group, cmd)
