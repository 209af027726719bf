"""``--percentiles`` on the tables printed from an archive (issue 24: "--percentiles 50,90,95,99 here
and in every latency table"): recomputed from the archive's records over the population the stored
p50/p90/p99 use, so the recomputed p50 equals the stored one."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from testkit import quick_decode_run, run_cli, tiny_sweep_spec

from harness.cli.listing import ms


@pytest.fixture(scope="module")
def workspace(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, str, str]:
    from harness.run.sweep import run_sweep

    d = tmp_path_factory.mktemp("pct")
    out, ws = quick_decode_run(d, "pct", 4)
    sweep = run_sweep(tiny_sweep_spec(d, "pct-sweep"), ws)
    assert sweep.error is None
    return ws, out.archive.archive_id, sweep.finished.archive.archive_id


def _row(text: str, *starts: str) -> list[str]:
    for line in text.splitlines():
        # a cell the machine's load invalidated reads "4!" (sim-lateness); its percentiles are still shown
        cells = [c.strip().removesuffix("!") for c in line.replace("┃", "│").strip().strip("│").split("│")]
        if cells[:len(starts)] == list(starts):
            return cells
    raise AssertionError(f"no row {starts} in\n{text}")


def test_archive_show_prints_the_chosen_percentiles(workspace: tuple[Path, str, str]) -> None:
    ws, matrix, _ = workspace
    code, out, _ = run_cli("archive", "show", matrix, "-w", str(ws), "--percentiles", "50,95,99.9")
    assert code == 0
    header = _row(out, "", "C", "metric")
    assert header[3:] == ["p50", "p95", "p99.9", "mean", "n"]
    cell = json.loads((ws / "archives" / matrix / "results.json").read_text())["cells"][0]
    ttft = _row(out, "D", "4", "TTFT")
    assert ttft[3] == ms(cell["latency"]["ttft_p50_s"])  # same population as the stored column
    assert int(ttft[-1]) == int(cell["latency"]["ttft_n"])
    itl = _row(out, "D", "4", "ITL")
    assert int(itl[-1]) == int(cell["latency"]["itl_n"])


def test_archive_show_of_a_sweep_prints_each_rate(workspace: tuple[Path, str, str]) -> None:
    ws, _, sweep = workspace
    code, out, _ = run_cli("archive", "show", sweep, "-w", str(ws), "--percentiles", "90,95")
    assert code == 0
    assert [line.split()[1] for line in out.splitlines() if line.startswith("rate ")] == ["4:", "8:"]
    assert _row(out, "rate req/s", "metric")[2:] == ["p90", "p95", "mean", "n"]
    for rate in ("4", "8"):
        assert int(_row(out, rate, "TTFT")[-1]) == 24  # 3 rounds of 8 measured requests


def test_archive_show_without_the_flag_keeps_the_stored_table(workspace: tuple[Path, str, str]) -> None:
    ws, matrix, _ = workspace
    code, out, _ = run_cli("archive", "show", matrix, "-w", str(ws))
    assert code == 0
    assert "TTFT" in out and "p95" not in out


@pytest.mark.parametrize("bad", ["50,,90", "0", "101", "fifty"])
def test_bad_percentiles_name_the_flag(workspace: tuple[Path, str, str], bad: str) -> None:
    ws, matrix, _ = workspace
    code, _, err = run_cli("archive", "show", matrix, "-w", str(ws), "--percentiles", bad)
    assert code == 2
    assert "--percentiles" in err
