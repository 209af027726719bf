"""The report's Energy section and the ``energy`` ledger table from an archive's ``energy.json``: an ABBA
screen whose legs drew known power (the simulator's 960 W model) over known windows, frozen, rendered
and ingested."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from ledger_helpers import ledger_table
from synthetic_archives import write_abba_archive

from harness.report.collect import collect
from harness.report.config import ReportConfig
from harness.report.render import render_report
from harness.report.snapshot import SNAPSHOT_FORMAT_VERSION, load_snapshot, snapshot_bytes
from harness.store.ledger import ingest_archive

BUILD = "2026-12-02T00:00:00Z"
# per leg: (seconds, output tokens) of its two windows; every window at 960 W (8 x 100 W + 4 x 40 W)
WINDOWS = {"A1": [(2.0, 480), (2.0, 400)], "B1": [(1.0, 300), (3.0, 600)], "B2": [(2.0, 960), (2.0, 960)],
           "A2": [(1.0, 100), (1.0, 200)]}
POWER_W = 960.0


def energy_doc(unbracketed: str | None = None) -> dict[str, Any]:
    rows = []
    service = {"A1": 0, "B1": 1, "B2": 1, "A2": 2}
    for leg, windows in WINDOWS.items():
        for j, (secs, tokens) in enumerate(windows):
            joules = POWER_W * secs
            row = {"wave_id": f"{leg}.measured.w{j:03d}", "cell_id": leg, "concurrency": 4, "window": "resident",
                   "service": service[leg], "start_ns": 0, "end_ns": int(secs * 1e9), "seconds": secs,
                   "method": "energy-counter", "energy_j": joules, "mean_power_w": POWER_W, "tokens": tokens,
                   "tokens_per_joule": tokens / joules, "joules_per_token": joules / tokens, "reason": None,
                   "devices": [{"device": d} for d in range(8)]}
            if leg == unbracketed and j == 1:
                row |= {"method": None, "energy_j": None, "mean_power_w": None, "tokens_per_joule": None,
                        "joules_per_token": None, "reason": "window not bracketed: last sample before the end"}
            rows.append(row)
    return {"format": 2, "sampler": {"source": "sim", "interval_s": 0.02},
            "samplers": [{"source": "sim", "interval_s": 0.02}] * 3, "waves": rows}


@pytest.fixture(scope="module")
def energy_report(tmp_path_factory: pytest.TempPathFactory) -> tuple[dict[str, Any], str, str, str, Path]:
    ws = tmp_path_factory.mktemp("ws-energy")
    a = write_abba_archive(ws, concurrency=4, energy=energy_doc(unbracketed="A2"))
    snap = collect(ws, ReportConfig(), findings_fn=False)
    out = render_report(snapshot_bytes(snap), ws / "report", build_time=BUILD)
    return snap, a.archive_id, out.html.read_text(), (out.out_dir / "report.md").read_text(), ws


def test_snapshot_energy_per_leg(energy_report: tuple[dict[str, Any], str, str, str, Path]) -> None:
    snap, aid, _, _, _ = energy_report
    assert snap["snapshot_format_version"] == SNAPSHOT_FORMAT_VERSION >= 7
    (e,) = snap["energy"]
    assert (e["archive_id"], e["kind"], e["simulated"], e["valid"]) == (aid, "abba", True, True)
    cells = {c["cell_id"]: c for c in e["cells"]}
    assert list(cells) == ["A1", "B1", "B2", "A2"]
    a1, b1, b2, a2 = (cells[x] for x in ("A1", "B1", "B2", "A2"))
    assert a1["median_tokens_per_j"] == pytest.approx((480 / 1920 + 400 / 1920) / 2)
    assert b1["median_tokens_per_j"] == pytest.approx((300 / 960 + 600 / 2880) / 2)
    assert b2["median_tokens_per_j"] == pytest.approx(0.5) and b2["energy_j"] == pytest.approx(3840.0)
    assert all(c["mean_power_w"] == pytest.approx(POWER_W) for c in cells.values())
    assert (a1["methods"], a1["sources"], a1["interval_s"]) == (["energy-counter"], ["sim"], [0.02])
    # A2's second window is not bracketed: counted, never estimated
    assert (a2["windows"], a2["windows_measured"]) == (2, 1) and a2["median_tokens_per_j"] == pytest.approx(100 / 960)
    assert a2["unmeasured_reason"].startswith("window not bracketed")


def test_energy_section_renders_labelled_simulated(energy_report: tuple[dict[str, Any], str, str, str, Path]) -> None:
    _, aid, html, md, _ = energy_report
    sec = html[html.index('<h2 id="energy">'):]
    sec = sec[:sec.index("</table>")]
    assert '<a href="#energy">Energy</a>' in html
    assert "<code>B2</code>" in sec and "0.5000" in sec and "960.0" in sec and "energy-counter" in sec
    assert "SIMULATED" in sec and "1 of 2" in sec
    part = md[md.index("## Energy"):]
    row = next(line for line in part.splitlines() if "`A1`" in line)
    assert "resident" in row and "0.2292" in row and "960.0" in row and "sim (SIMULATED)" in row
    assert "**[SIMULATED]**" in row and aid in row


def test_snapshot_before_format_7_loads_without_energy(energy_report: tuple[dict[str, Any], str, str, str, Path]
                                                       ) -> None:
    snap = dict(energy_report[0])
    snap.pop("energy")
    snap["snapshot_format_version"] = 6
    assert load_snapshot(snapshot_bytes(snap), "results.json")["energy"] == []


def test_energy_json_is_ingested_into_the_energy_table(tmp_path: Path) -> None:
    a = write_abba_archive(tmp_path, concurrency=4, energy=energy_doc())
    added = ingest_archive(tmp_path, a)
    assert added["energy"] == 8
    rows = ledger_table(tmp_path, "energy").to_pylist()
    assert {r["archive_id"] for r in rows} == {a.archive_id} and {r["protocol_class"] for r in rows} == {"abba-screen"}
    b2 = [r for r in rows if r["cell_id"] == "B2"]
    assert [r["output_tokens_per_j"] for r in b2] == [0.5, 0.5] and {r["service_index"] for r in b2} == {1}
    assert {r["data_origin"] for r in rows} == {"simulated"} and all(r["valid"] for r in rows)
    assert all(r["extra"] is None and r["window_kind"] == "resident" and r["devices"] == 8 for r in rows)
