"""The report's Timelines section: the first measured wave of each formal cell, drawn and listed, bounded."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from report_helpers import BUILD_TIME
from timeline_archives import FAILED_WAVE, write_timeline_archive

from harness.report.build import build_report
from harness.report.figures import figure_jobs, timeline_figure
from harness.report.timelines import MAX_TIMELINES, timeline_entries
from harness.store.archive import open_archive


@pytest.fixture(scope="module")
def report(tmp_path_factory: pytest.TempPathFactory) -> tuple[str, Path]:
    ws = tmp_path_factory.mktemp("ws")
    aid = write_timeline_archive(ws).archive_id
    out = ws / "report"
    build_report(ws, out, build_time=BUILD_TIME, findings_fn=False, jobs=1)
    return aid, out


def test_the_section_lists_one_timeline_per_cell(report: tuple[str, Path]) -> None:
    aid, out = report
    snap = json.loads((out / "results.json").read_text())
    assert [(t["archive_id"], t["wave_id"], t["source"]) for t in snap["timelines"]] == [
        (aid, FAILED_WAVE, "formal"), (aid, "decode-c03.r0.w0", "formal")]
    assert snap["timelines_omitted"] == 0
    html = (out / "report.html").read_text()
    md = (out / "report.md").read_text()
    assert '<h2 id="timelines">Timelines</h2>' in html and '<a href="#timelines">Timelines</a>' in html
    assert f"At most {MAX_TIMELINES} timelines per report" in html
    assert f'id="fig-timeline-{aid}-{FAILED_WAVE}"' in html and f'id="fig-timeline-{aid}-decode-c03.r0.w0"' in html
    assert "## Timelines" in md and f"figures/timeline-{aid}-{FAILED_WAVE}.png" in md
    assert (out / "figures" / f"timeline-{aid}-{FAILED_WAVE}.png").read_bytes().startswith(b"\x89PNG")


def test_the_number_of_timelines_is_bounded(tmp_path: Path) -> None:
    a = open_archive(write_timeline_archive(tmp_path).path)
    snapshot = {"formal": [{"archive_id": a.archive_id, "simulated": True}], "screens": []}
    entries, omitted = timeline_entries([a], snapshot, limit=1)
    assert [e["wave_id"] for e in entries] == [FAILED_WAVE] and omitted == 1
    assert [k for k, _ in figure_jobs({"timelines": entries})] == ["timeline"]


def test_the_figure_plots_the_rows() -> None:
    entry = {"archive_id": "0123456789abcdef", "wave_id": "w", "cell_id": "decode-c02", "concurrency": 2,
             "simulated": True, "resident": [0.1, 0.45], "http": [0.0, 0.46],
             "rows": [{"rid": "a", "send_s": 0.0, "first_token_s": 0.1, "last_token_s": 0.45, "done_s": 0.46,
                       "ok": True, "error": None, "n_tokens": 8},
                      {"rid": "b", "send_s": 0.01, "first_token_s": 0.11, "last_token_s": 0.16, "done_s": 0.17,
                       "ok": False, "error": "http 500", "n_tokens": 2}]}
    res = timeline_figure(entry)
    ok = [(p.get_x(), p.get_width(), p.get_y() + p.get_height() / 2) for p in res.artists["bars_ok"]]
    bad = [(p.get_x(), p.get_width(), p.get_y() + p.get_height() / 2) for p in res.artists["bars_failed"]]
    assert ok == [pytest.approx((0.0, 0.46, 0.0))] and bad == [pytest.approx((0.01, 0.16, 1.0))]
    assert list(res.artists["first_token"].get_xdata()) == pytest.approx([0.1, 0.11])
    assert list(res.artists["last_token"].get_xdata()) == pytest.approx([0.45, 0.16])
    assert [t.get_text().strip() for t in res.artists["error_labels"]] == ["b: http 500"]
    band = res.artists["resident"].get_window_extent()  # display units: compare with the data axis
    ax = res.fig.axes[0]
    x0, x1 = ax.transData.inverted().transform([[band.x0, 0], [band.x1, 0]])[:, 0]
    assert (x0, x1) == pytest.approx((0.1, 0.45), abs=1e-6)
    title = res.artists["title"].get_text()
    assert "archive 0123456789abcdef" in title and "wave w" in title and "C2" in title and "SIMULATED" in title
    assert res.stem == "timeline-0123456789abcdef-w"


def test_an_invalid_wave_is_titled_invalid_with_its_rules() -> None:
    from harness.report.timeline_figure import FAILED_COLOR, timeline_alt, timeline_caption

    row = {"rid": "a", "send_s": 0.0, "first_token_s": 0.1, "last_token_s": 0.4, "done_s": 0.5, "ok": True,
           "error": None, "n_tokens": 4}
    entry = {"archive_id": "0123456789abcdef", "wave_id": "w", "cell_id": "decode-c02", "concurrency": 2,
             "simulated": False, "resident": None, "http": None, "rows": [row], "invalid_rules": ["r1", "r2"]}
    res = timeline_figure(entry)
    title = res.artists["title"]
    assert title.get_text().endswith(" - INVALID (r1, r2)") and title.get_color() == FAILED_COLOR
    assert "INVALID (r1, r2)" in timeline_caption(entry) and "INVALID (r1, r2)" in timeline_alt(entry)
    valid = timeline_figure(entry | {"invalid_rules": []})
    assert "INVALID" not in valid.artists["title"].get_text() and "INVALID" not in valid.caption


def test_a_wave_a_blocking_finding_names_is_marked_invalid(tmp_path: Path) -> None:
    """The timeline of a wave the verdict invalidates says so (caption and heading); the other does not."""
    from harness.report.render import view_model

    ws = tmp_path / "ws"
    aid = write_timeline_archive(ws).archive_id

    def late(a: object) -> list[dict[str, object]]:
        return [{"rule": "sim-lateness", "severity": "blocking", "message": "late", "remedy": "re-run",
                 "archive_id": aid, "rows": ("decode-c03.r0.w0",)}]

    out = tmp_path / "report"
    build_report(ws, out, build_time=BUILD_TIME, findings_fn=late, jobs=1)
    snap = json.loads((out / "results.json").read_text())
    marks = {t["wave_id"]: t["invalid_rules"] for t in snap["timelines"]}
    assert marks == {FAILED_WAVE: [], "decode-c03.r0.w0": ["sim-lateness"]}
    (bad,) = [t for t in snap["timelines"] if t["invalid_rules"]]
    assert "INVALID (sim-lateness): not a result." in timeline_figure(bad).caption
    assert len(view_model(snap)["timelines"]) == 2
    html = (out / "report.html").read_text()
    sec = html[html.index('<h2 id="timelines">'):html.index('<h2 id="historical">')]
    assert sec.count('<span class="invalid"') == 1
