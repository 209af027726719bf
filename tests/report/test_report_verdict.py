"""The report reads each archive's one verdict (harness.evidence.verdict) and shows it as every other surface
does: invalid cells, rates and runs marked INVALID with their rules, verdicts on invalid runs withheld, the data
origin as decided, and the findings stored in the ledger rather than the rules run again."""

from __future__ import annotations

import dataclasses
import re
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from synthetic_archives import write_abba_archive, write_formal_archive, write_matched_archive, write_sweep_archive

from harness.evidence.findings import Finding
from harness.evidence.io import apply_findings
from harness.evidence.verdict import decide
from harness.report import figures as F
from harness.report.collect import collect, load_content
from harness.report.config import ReportConfig
from harness.report.render import render_report
from harness.report.snapshot import freeze, snapshot_bytes
from harness.report.summary import describe, summary_card
from harness.store.archive import Archive, open_archive
from harness.store.ledger import ingest_archive

BUILD = "2026-12-03T00:00:00Z"
RULE = "sim-lateness"


def _blocking(rows_of: Callable[[Archive], tuple[str, ...]], *, scope: str = "rows",
              rule: str = RULE) -> Callable[[Archive], list[dict[str, Any]]]:
    """A findings_fn: one blocking finding per archive naming ``rows_of(archive)`` (``scope`` as given)."""
    def fn(a: Archive) -> list[dict[str, Any]]:
        return [{"rule": rule, "severity": "blocking", "message": "the simulator ran late", "remedy": "re-run",
                 "archive_id": a.archive_id, "rows": rows_of(a), "scope": scope}]
    return fn


def _cell_id(a: Archive, workload: str, concurrency: int) -> str:
    return next(str(c["cell_id"]) for c in a.json("results.json")["cells"]
                if c["workload"] == workload and c["concurrency"] == concurrency)


def _render(snap: dict[str, Any], out: Path) -> tuple[str, str]:
    r = render_report(snapshot_bytes(snap), out, build_time=BUILD, jobs=1)
    return r.html.read_text(), (r.out_dir / "report.md").read_text()


def _pd_row(html: str, aid: str, concurrency: int) -> str:
    sec = html[html.index(f'id="formal-{aid}"'):]
    table = sec[sec.index('<table class="pd">'):sec.index("</table>")]
    rows = table.split("<tr>")[2:]  # after the header row
    (row,) = [r for r in rows if re.match(rf'\s*<td class="r">{concurrency}</td>', r)]
    return row


@pytest.fixture(scope="module")
def formal_report(tmp_path_factory: pytest.TempPathFactory) -> tuple[dict[str, Any], str, str, str, str]:
    """(snapshot, archive id, invalid cell id, html, md): a formal matrix whose decode C4 cell a blocking
    finding names (one of its rounds, spread to the cell)."""
    ws = tmp_path_factory.mktemp("ws-verdict")
    a = write_formal_archive(ws, campaign="late-matrix", seed=1, tiers=(1, 4, 8))
    cell = _cell_id(a, "decode", 4)
    snap = collect(ws, ReportConfig(), findings_fn=_blocking(lambda x: (f"{cell}.r1",)))
    html, md = _render(snap, ws / "report")
    return snap, a.archive_id, cell, html, md


def test_formal_cell_invalid_in_the_snapshot(formal_report: tuple[dict[str, Any], str, str, str, str]) -> None:
    snap, aid, cell, _, _ = formal_report
    (entry,) = snap["formal"]
    assert (entry["valid"], entry["invalid_rules"]) == (True, [])  # only the named cell, not the matrix
    marks = {c["cell_id"]: (c["valid"], c["invalid_rules"]) for c in entry["cells"]}
    assert marks.pop(cell) == (False, [RULE])
    assert marks and all(v == (True, []) for v in marks.values())
    rounds = {r["round_id"]: (r["valid"], r["invalid_rules"]) for r in entry["rounds"]}
    assert rounds.pop(f"{cell}.r1") == (False, [RULE])  # the named round
    assert all(v == (True, []) for v in rounds.values())  # never spread downward
    (archive,) = snap["archives"]
    assert (archive["valid"], archive["invalid_rules"], archive["superseded_by"]) == (False, [RULE], None)
    assert archive["verdict"]["blocking"] == [RULE] and archive["verdict"]["invalid_rows"] == sorted(
        [cell, f"{cell}.r1"])
    assert archive["findings_source"] == "rules" and archive["data_origin"] == "simulated"
    # the summary's key number never comes from the invalid cell, and the run is listed as invalid
    card = summary_card(snap)
    decode = next(n for n in card["key_numbers"] if n["quantity"] == "best resident decode cell median")
    assert "C8" in decode["detail"] and "1 cell with a blocking finding left out" in decode["detail"]
    assert [x["archive_id"] for x in card["invalid"]] == [aid] and card["superseded"] == []
    assert f"{aid} (late-matrix, {RULE})" in " ".join(describe(snap))


def test_formal_cell_invalid_in_the_html(formal_report: tuple[dict[str, Any], str, str, str, str]) -> None:
    _, aid, _, html, md = formal_report
    assert f"INVALID ({RULE})" in _pd_row(html, aid, 4)
    for c in (1, 8):
        assert "INVALID" not in _pd_row(html, aid, c)
    # the archive list and the round table say so too; Markdown marks the cell
    arch = html[html.index(f'<section class="archive" id="archive-{aid}">'):]
    assert f"INVALID ({RULE})" in arch[:arch.index("</section>")]
    assert md.count(f"**INVALID \\({RULE}\\)**") >= 2  # the cell and its named round


def test_formal_figure_draws_the_invalid_cell_apart(
        formal_report: tuple[dict[str, Any], str, str, str, str]) -> None:
    snap, _, cell, _, _ = formal_report
    entry = snap["formal"][0]
    res = F.formal_matrix_figure(entry)
    bad = next(c for c in entry["cells"] if c["cell_id"] == cell)
    xs, ys = (list(map(float, v)) for v in (res.artists["decode_invalid"].get_xdata(),
                                            res.artists["decode_invalid"].get_ydata()))
    assert (xs, ys) == ([4.0], [bad["median_tok_s"]])
    assert 4.0 not in [float(x) for x in res.artists["decode_median"].get_xdata()]  # not joined by the line
    assert RULE in res.artists["decode_invalid"].get_label() and "INVALID" in res.caption
    assert "prefill_invalid" not in res.artists


def test_run_scope_finding_invalidates_the_archive(tmp_path: Path) -> None:
    ws = tmp_path / "ws"
    a = write_formal_archive(ws, campaign="whole", seed=2, tiers=(1, 2))
    snap = collect(ws, ReportConfig(), findings_fn=_blocking(lambda x: (), scope="run", rule="run-broken"))
    (archive,) = snap["archives"]
    assert (archive["valid"], archive["invalid_rules"]) == (False, ["run-broken"])
    (entry,) = snap["formal"]
    assert (entry["valid"], entry["invalid_rules"]) == (False, ["run-broken"])
    assert all(not c["valid"] and c["invalid_rules"] == ["run-broken"] for c in entry["cells"])
    assert summary_card(snap)["key_numbers"] == []
    html, _ = _render(snap, tmp_path / "r")
    assert "complete; INVALID (run-broken), not a result" in html
    arch = html[html.index(f'<section class="archive" id="archive-{a.archive_id}">'):]
    assert "INVALID (run-broken)" in arch[:arch.index("</section>")]


def test_matched_and_abba_verdicts_withheld(tmp_path: Path) -> None:
    ws = tmp_path / "ws"
    m = write_matched_archive(ws, campaign="eagle-late", sd_rates=(444.0, 444.0))
    ab = write_abba_archive(ws, campaign="screen-late", seed=3)
    snap = collect(ws, ReportConfig(), findings_fn=_blocking(lambda x: ()))
    (mat,) = snap["speculative"]["matched"]
    assert (mat["archive_id"], mat["verdict"], mat["verdict_as_measured"]) == (m.archive_id, "withheld", "sd-faster")
    assert (mat["valid"], mat["invalid_rules"], mat["invalid_reason"]) == (False, [RULE], f"blocking finding: {RULE}")
    (scr,) = snap["screens"]
    assert (scr["archive_id"], scr["verdict"], scr["verdict_as_measured"]) == (ab.archive_id, "withheld", "faster")
    assert (scr["valid"], scr["invalid_rules"]) == (False, [RULE])
    (v,) = summary_card(snap)["verdicts"]
    assert (v["verdict"], v["change_pct"], v["withheld"]) == (f"withheld ({RULE})", None, True)
    html, md = _render(snap, tmp_path / "r")
    spec = html[html.index('<h2 id="speculative">'):]
    spec = spec[:spec.index('<h2 id="historical">')]
    row = spec[spec.index(f'<tr id="spec-{m.archive_id}">'):]
    assert f"withheld ({RULE})" in row[:row.index("</tr>")]
    assert "sd-faster" not in spec and "444" not in spec  # never shown as a win
    screen = html[html.index(f'id="screen-{ab.archive_id}"'):]
    screen = screen[:screen.index("</section>")]
    assert f"<strong>withheld ({RULE})</strong>" in screen and ">faster<" not in screen
    card = html[html.index('<section class="card" id="summary">'):]
    card = card[:card.index("</section>")]
    assert f"<strong>withheld ({RULE})</strong>" in card and "faster" not in card
    assert f"withheld \\({RULE}\\)" in md and "sd-faster" not in md
    assert F.abba_figure(scr).artists["annotation"].get_text().count(f"verdict: withheld ({RULE})") == 1


def test_sweep_rate_invalid_and_knee_withheld(tmp_path: Path) -> None:
    ws = tmp_path / "ws"
    write_sweep_archive(ws, campaign="sweep-late", seed=4)
    snap = collect(ws, ReportConfig(), findings_fn=_blocking(lambda x: ("sweep-4rps.r0",)))
    (e,) = snap["sweeps"]
    marks = {c["cell_id"]: (c["valid"], c["invalid_rules"]) for c in e["cells"]}
    assert marks == {"sweep-2rps": (True, []), "sweep-4rps": (False, [RULE]), "sweep-8rps": (True, [])}
    assert (e["valid"], e["invalid_rules"]) == (False, [RULE])  # the knee is a conclusion over every rate
    assert not [n for n in summary_card(snap)["key_numbers"] if n["quantity"] == "goodput at the knee"]
    html, _ = _render(snap, tmp_path / "r")
    sec = html[html.index('<h2 id="sweeps">'):]
    sec = sec[:sec.index("</section>")]
    assert f"goodput knee: withheld ({RULE})" in sec
    rows = sec[sec.index("<tbody>"):].split("<tr>")[1:]
    assert [("INVALID" in r) for r in rows] == [False, True, False]
    res = F.sweep_figure(e)
    assert "knee" not in res.artists and len(res.artists["invalid"].get_xdata()) == 1


def test_report_reads_the_findings_stored_in_the_ledger(tmp_path: Path) -> None:
    """A finding no rule would produce, stored with the archive's ledger rows, is what the report shows."""
    ws = tmp_path / "ws"
    a = write_formal_archive(ws, campaign="ledgered", seed=5, tiers=(1, 2))
    ingest_archive(ws, open_archive(a.path))
    cell = _cell_id(a, "prefill", 2)
    hand = Finding("hand-made-rule", "blocking", "stored by hand", "none", a.archive_id, (cell,))
    apply_findings(ws, a.archive_id, [hand])
    snap = collect(ws, ReportConfig())  # the default: each archive's verdict
    (archive,) = snap["archives"]
    assert archive["findings_source"] == "ledger" and archive["verdict"]["source"] == "ledger"
    assert [f["rule"] for f in snap["findings"]] == ["hand-made-rule"]  # the stored one, not the rules'
    assert (archive["valid"], archive["invalid_rules"]) == (False, ["hand-made-rule"])
    marks = {c["cell_id"]: c["invalid_rules"] for c in snap["formal"][0]["cells"] if not c["valid"]}
    assert marks == {cell: ["hand-made-rule"]}
    assert summary_card(snap)["verdict_sources"] == {"ledger": 1, "rules": 0}
    html, _ = _render(snap, tmp_path / "r")
    assert "INVALID (hand-made-rule)" in _pd_row(html, a.archive_id, 2)
    assert "verdicts read from the ledger for 1 archive" in html


def test_summary_uses_the_decided_data_origin(tmp_path: Path) -> None:
    """The description counts what the verdict decided, not a recomputation from the run block."""
    ws = tmp_path / "ws"
    a = write_formal_archive(ws, campaign="origin", seed=6, tiers=(1,))
    content = load_content(open_archive(a.path), findings_fn=None)
    measured = dataclasses.replace(content, verdict=decide(a.archive_id, "measured", []))
    snap = freeze([measured], ReportConfig())
    assert (snap["archives"][0]["data_origin"], snap["archives"][0]["simulated"]) == ("measured", False)
    assert "Every archive was measured on a live service" in " ".join(describe(snap))
    snap = freeze([content], ReportConfig())  # without a verdict: decided from the content (the simulator)
    assert snap["archives"][0]["data_origin"] == "simulated"
    assert "Every archive is SIMULATED" in " ".join(describe(snap))


def test_older_snapshot_renders_without_marks(tmp_path: Path) -> None:
    """A format 9 snapshot (no invalid_rules, no data_origin) still renders; absent marks read as valid."""
    import json

    ws = tmp_path / "ws"
    write_formal_archive(ws, campaign="old", seed=7, tiers=(1,))
    snap = json.loads(snapshot_bytes(collect(ws, ReportConfig(), findings_fn=False)))
    snap["snapshot_format_version"] = 9
    for a in snap["archives"]:
        for k in ("data_origin", "findings_source", "verdict", "invalid_rules"):
            a.pop(k)
    for e in snap["formal"]:
        e.pop("invalid_rules")
        for row in e["cells"] + e["rounds"]:
            row.pop("valid")
            row.pop("invalid_rules")
    html = render_report(json.dumps(snap).encode(), tmp_path / "r", build_time=BUILD, jobs=1).html.read_text()
    assert 'class="invalid"' not in html and "Every archive is SIMULATED" in html
