"""Listings: ids never cut at 80 columns; --json and --csv on every listing (issue 17); one number
format, never an exponent, an em dash for a missing value (issue 24)."""

from __future__ import annotations

import csv
import io
import json
from pathlib import Path

import pytest
from hypothesis import given
from hypothesis import strategies as st
from rich.console import Console
from synthetic_archives import write_formal_archive
from typer.testing import CliRunner

from harness.cli import _register, app
from harness.cli.listing import Col, as_csv, as_json, table

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


# --- the one number format of the listings (issue 24) ---------------------------------------------


def test_num_known_answers() -> None:
    from harness.cli.listing import ms, num

    assert [num(1280.4), num(375.31), num(4.1818), num(0.023713), num(2.0), num(870866.78)] == [
        "1,280", "375.3", "4.18", "0.0237", "2", "870,867"]
    assert [num(None), num(float("nan")), num(float("inf")), num("x"), num(True)] == ["—"] * 5
    assert [num(1e-9), num(-0.0001), num(4.0, 2), num(1e21)] == ["0", "-0.000100", "4.00", f"{10**21:,}"]
    assert [ms(1.2804), ms(0.02371), ms(0.000512), ms(None)] == ["1,280", "23.7", "0.512", "—"]


@given(st.floats(allow_nan=False, allow_infinity=False, min_value=-1e30, max_value=1e30))
def test_num_never_writes_an_exponent(x: float) -> None:
    from harness.cli.listing import num

    text = num(x)
    assert "e" not in text.lower() and "n" not in text  # no exponent, no nan/inf
    value = float(text.replace(",", ""))
    places = len(text.split(".")[1]) if "." in text else 0
    assert abs(value - x) <= 0.5 * 10 ** -places * (1 + 1e-9) + abs(x) * 1e-15  # the number, rounded


def test_sweep_console_line_shows_throughput_and_every_latency() -> None:
    from harness.cli.sweep_cmd import sweep_cell_line

    cell = {"arrival_rate_req_s": 16.0, "request_throughput_median_req_s": 7.912,
            "output_throughput_median_tok_s": 1264.04,
            "goodput_median_req_s": 7.5, "ttft_p50_s": 1.2804, "ttft_p99_s": 2.5, "tpot_p50_s": 0.0512,
            "itl_p50_s": 0.02371, "e2e_p50_s": 9.87654, "schedule_kept": False}
    assert sweep_cell_line(cell) == (
        "rate 16: request throughput 7.91 req/s, output 1,264 tok/s, goodput 7.50 req/s, TTFT p50 1,280 p99 "
        "2,500 ms, TPOT p50 51.2 ms, ITL p50 23.7 ms, E2E p50 9,877 ms, schedule NOT kept")
