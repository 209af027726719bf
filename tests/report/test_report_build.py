"""End to end: verify, freeze, render; rebuild from the snapshot alone; refuse tampered archives."""

from __future__ import annotations

import json
import re
import shutil
from pathlib import Path

import pytest
from report_helpers import BUILD_TIME, make_workspace, tree_bytes
from typer.testing import CliRunner

from harness.cli.report_cmd import app
from harness.errors import ArchiveError, SpecError
from harness.report.build import build_from_snapshot, build_report, build_time_now
from harness.report.collect import collect, evidence_checker
from harness.report.config import ReportConfig, Selection
from harness.report.render import normalize_build_time
from harness.report.snapshot import SNAPSHOT_FORMAT_VERSION

runner = CliRunner()


def test_outputs_and_snapshot_contents(built: tuple[Path, dict[str, str], Path]) -> None:
    ws, ids, out = built
    names = {p.relative_to(out).as_posix() for p in out.rglob("*") if p.is_file()}
    assert {"results.json", "report.html", "report.md", "tables.tex"} <= names
    for stem in (f"formal-{ids['f1']}", f"formal-{ids['f2']}", f"abba-{ids['abba']}", f"memory-{ids['f1']}",
                 "historical"):
        assert {f"figures/{stem}.{ext}" for ext in ("png", "svg", "pdf")} <= names
    snap = json.loads((out / "results.json").read_text())
    assert snap["snapshot_format_version"] == SNAPSHOT_FORMAT_VERSION
    assert {a["archive_id"] for a in snap["archives"]} == set(ids.values())
    manifest = (ws / "archives" / ids["f1"] / "manifest.json").read_bytes()
    import hashlib

    entry = next(a for a in snap["archives"] if a["archive_id"] == ids["f1"])
    assert entry["manifest_sha256"] == hashlib.sha256(manifest).hexdigest()
    archived = json.loads((ws / "archives" / ids["f1"] / "results.json").read_text())
    frozen = next(f for f in snap["formal"] if f["archive_id"] == ids["f1"])
    order = sorted(archived["cells"], key=lambda c: (c["workload"] != "prefill", c["concurrency"]))
    assert [c["round_tok_s"] for c in frozen["cells"]] == [c["round_tok_s"] for c in order]
    assert len(frozen["rounds"]) == len(archived["rounds"])
    assert snap["screens"][0]["legs"][0]["leg"] == "A1" and len(snap["screens"][0]["legs"][0]["wave_rates"]) == 2
    assert snap["oracles"][0]["oracle"] == "france" and snap["memory"][0]["archive_id"] == ids["f1"]
    assert len(snap["historical"]) == 5 and snap["findings_source"] == "harness.evidence.rules"
    assert "build" not in json.dumps(snap).lower().replace("rebuild", "")  # no build time in the snapshot


def test_html_is_self_contained_labelled_and_linked(built: tuple[Path, dict[str, str], Path]) -> None:
    _, ids, out = built
    html = (out / "report.html").read_text()
    assert not re.search(r'<(link|iframe|object|embed)\b', html)
    assert not re.search(r'\bsrc="(?!data:)', html) and "url(" not in html
    assert len(re.findall(r'<img src="data:image/png;base64,', html)) == 8  # + a latency figure per matrix
    assert "default-src 'none'" in html  # the page may not load anything external
    assert "SIMULATED" in html and "observed range" in html
    for m in re.finditer(r"confidence interval", html):
        assert "not" in html[max(0, m.start() - 40):m.start()]
    # formal and screen results live in separate sections, in that order
    assert html.index('id="formal"') < html.index(f'id="formal-{ids["f1"]}"') < html.index('id="screens"')
    assert html.index('id="screens"') < html.index(f'id="screen-{ids["abba"]}"') < html.index('id="historical"')
    # every archive has an anchor with its manifest hash; numbers link to it
    for aid in ids.values():
        assert f'id="archive-{aid}"' in html and f'href="#archive-{aid}"' in html
    snap = json.loads((out / "results.json").read_text())
    cell = next(c for c in snap["formal"][0]["cells"] if c["workload"] == "decode" and c["concurrency"] == 1)
    assert f'href="#archive-{ids["f1"]}" title="from archive {ids["f1"]}">{cell["median_tok_s"]:.2f}</a>' in html
    for v in cell["round_tok_s"]:
        assert f">{v:.2f}</a>" in html
    # stand-in findings beside the numbers: the blocked cell is struck through and badged
    assert "stand-in-blocking" in html and 'class="r blocked"' in html
    assert html.count("Built at ") == 1 and BUILD_TIME in html
    assert "historical, not a controlled series" in html or "not a controlled series" in html


def test_markdown_and_latex(built: tuple[Path, dict[str, str], Path]) -> None:
    _, ids, out = built
    md = (out / "report.md").read_text()
    assert f"(#archive-{ids['f1']})" in md and f'<a id="archive-{ids["abba"]}"></a>' in md
    assert f"figures/formal-{ids['f1']}.png" in md and "**[SIMULATED]**" in md
    assert md.count("\n- [info: stand-in-info](#finding-") == 3  # one finding per line, every archive
    assert "\n\nLimits of these claims:" in md
    tex = (out / "tables.tex").read_text()
    assert f"\\hypertarget{{archive-{ids['f1']}}}" in tex and f"\\hyperlink{{archive-{ids['f1']}}}" in tex
    assert tex.count("\\begin{table}") == 5 and "SIMULATED" in tex  # summary, 2 matrices, 1 screen, archives
    assert "\\label{tab:summary}" in tex and "native-ar" in tex
    assert "_" not in re.sub(r"\\_|\\label\{[^}]*\}|%.*", "", tex)  # underscores escaped


def test_rebuild_from_snapshot_is_identical(built: tuple[Path, dict[str, str], Path], tmp_path: Path) -> None:
    _, _, out = built
    copy = tmp_path / "elsewhere" / "results.json"
    copy.parent.mkdir()
    shutil.copy(out / "results.json", copy)  # no archives next to it
    # the fixture drew figures in worker processes; this rebuild draws them in this process
    again = build_from_snapshot(copy, tmp_path / "r2", latex=True, build_time="2027-01-01T00:00:00Z", jobs=1)
    a, b = tree_bytes(out), tree_bytes(again.out_dir)
    assert a.keys() == b.keys()
    assert [k for k in a if a[k] != b[k]] == []
    html = (again.out_dir / "report.html").read_text()
    assert "2027-01-01T00:00:00Z" in html and normalize_build_time(html).count("BUILD-TIME") == 2
    # rebuilding in place over an earlier report is allowed and gives the same files
    build_from_snapshot(again.out_dir / "results.json", again.out_dir, latex=True, build_time=BUILD_TIME)
    assert tree_bytes(again.out_dir) == a


def test_tampered_or_missing_archive_stops_the_build(tmp_path: Path) -> None:
    ids = make_workspace(tmp_path, historical=False)
    target = tmp_path / "archives" / ids["abba"] / "comparison.json"
    target.write_text(target.read_text().replace('"verdict": "faster"', '"verdict": "slower"'))
    with pytest.raises(ArchiveError) as exc:
        build_report(tmp_path, tmp_path / "out", build_time=BUILD_TIME, findings_fn=False)
    assert ids["abba"] in exc.value.message and "changed: comparison.json" in exc.value.message
    assert not (tmp_path / "out" / "report.html").exists()
    # leaving the tampered archive out of the selection builds the rest
    cfg = ReportConfig(select=Selection(kinds=["formal-matrix"]))
    build_report(tmp_path, tmp_path / "out", config=cfg, build_time=BUILD_TIME, findings_fn=False)
    with pytest.raises(ArchiveError, match=r"archive 0123456789abcdef .*missing"):
        build_report(tmp_path, tmp_path / "o2", config=ReportConfig(select=Selection(archive_ids=["0123456789abcdef"])),
                     findings_fn=False)
    (tmp_path / "archives" / ids["f2"] / "manifest.json").unlink()
    with pytest.raises(ArchiveError, match=f"{ids['f2']} \\(missing: manifest.json\\)"):
        build_report(tmp_path, tmp_path / "o3", config=cfg, findings_fn=False)


def test_real_evidence_rules_and_unavailable_evidence(tmp_path: Path) -> None:
    ids = make_workspace(tmp_path, historical=False)
    snap = collect(tmp_path, ReportConfig())  # each archive's verdict when harness.evidence is importable
    if evidence_checker() is not None:
        assert snap["findings_source"] == "harness.evidence.verdict"
        # no ledger in this workspace: every verdict was decided by running the rules now
        assert {a["findings_source"] for a in snap["archives"]} == {"rules"}
        # the failed decode round of f1 is reported by the formal-rounds rule
        assert any(f["rule"] == "formal-rounds" and f["archive_id"] == ids["f1"] for f in snap["findings"])
    cfg = ReportConfig(select=Selection(kinds=["abba"]))
    out = build_report(tmp_path, tmp_path / "r", config=cfg, build_time=BUILD_TIME, findings_fn=False)
    html = out.html.read_text()
    assert "Evidence checks were not available" in html and "No historical ledger" in html


def test_refuses_foreign_out_dir_and_bad_snapshot(tmp_path: Path) -> None:
    (tmp_path / "out").mkdir()
    (tmp_path / "out" / "thesis.tex").write_text("mine")
    make_workspace(tmp_path / "ws", historical=False)
    with pytest.raises(ArchiveError, match="not empty"):
        build_report(tmp_path / "ws", tmp_path / "out", findings_fn=False)
    assert (tmp_path / "out" / "thesis.tex").read_text() == "mine"
    with pytest.raises(SpecError, match="no such snapshot"):
        build_from_snapshot(tmp_path / "nope.json", tmp_path / "o")
    archive_results = next((tmp_path / "ws" / "archives").glob("*/results.json"))
    with pytest.raises(SpecError, match="not a report snapshot"):
        build_from_snapshot(archive_results, tmp_path / "o")
    with pytest.raises(ArchiveError, match="no archive"):
        build_report(tmp_path / "empty", tmp_path / "o", findings_fn=False)


def test_build_time_from_source_date_epoch(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("SOURCE_DATE_EPOCH", "0")
    assert build_time_now() == "1970-01-01T00:00:00Z"
    monkeypatch.setenv("SOURCE_DATE_EPOCH", "x")
    with pytest.raises(SpecError):
        build_time_now()


def test_cli_build_and_rebuild(built: tuple[Path, dict[str, str], Path], tmp_path: Path,
                               monkeypatch: pytest.MonkeyPatch) -> None:
    result = runner.invoke(app, ["build", "--help"])
    assert result.exit_code == 0 and "Example" in result.output and "--from-snapshot" in result.output
    ws = built[0]
    monkeypatch.setenv("SOURCE_DATE_EPOCH", "1795000000")
    cfg = tmp_path / "report.yaml"
    cfg.write_text("title: CLI report\nselect: {kinds: [abba]}\nfindings: false\n")
    result = runner.invoke(app, ["build", "-w", str(ws), "--config", str(cfg), "--out", str(tmp_path / "r")])
    assert result.exit_code == 0, result.output
    html = (tmp_path / "r" / "report.html").read_text()
    assert "CLI report" in html and "This report holds 1 archive: 1 ABBA screen (screen-a)." in html
    assert "formal P/D" not in html and 'id="formal"' not in html  # nothing formal selected, nothing said
    result = runner.invoke(app, ["build", "--from-snapshot", str(tmp_path / "r" / "results.json"), "--out",
                                 str(tmp_path / "r2"), "--jobs", "1"])
    assert result.exit_code == 0, result.output
    assert tree_bytes(tmp_path / "r2") == tree_bytes(tmp_path / "r")
    cfg.write_text("selekt: {}\n")
    result = runner.invoke(app, ["build", "-w", str(ws), "--config", str(cfg), "--out", str(tmp_path / "r3")])
    assert isinstance(result.exception, SpecError) and "selekt" in result.exception.message


def test_partial_and_failed_data_render(tmp_path: Path) -> None:
    """Missing medians, a failed leg and absent optional files render as em dashes, not errors."""
    from harness.report.render import render_report
    from harness.report.snapshot import ArchiveContent, freeze, snapshot_bytes

    run = {"campaign": "broken", "claim_class": "native-ar", "backend": "sglang", "created_wall": "2026-11-29",
           "labels": []}
    formal = ArchiveContent(
        archive_id="1" * 16, manifest={"status": "partial", "run": run | {"kind": "formal-matrix",
                                                                           "protocol_class": "formal"}},
        manifest_sha256="0" * 64,
        results={"cells": [{"cell_id": "decode-c01", "workload": "decode", "concurrency": 1, "status": "missing",
                            "round_tok_s": [], "round_status": [], "median_tok_s": float("nan"),
                            "observed_min_tok_s": float("nan"), "observed_max_tok_s": float("nan"),
                            "http_output_tok_s": float("nan")}], "rounds": []})
    screen = ArchiveContent(
        archive_id="2" * 16, manifest={"status": "failed", "run": run | {"kind": "abba",
                                                                          "protocol_class": "abba-screen"}},
        manifest_sha256="0" * 64,
        comparison={"result": {"boundary": "resident", "legs": [{"leg": "A1", "wave_rates": [100.0, 101.0],
                                                                 "http_rates": [80.0, 81.0]}],
                               "change_pct": float("nan"), "verdict": "inconclusive",
                               "reason": "legs without data: B1, B2, A2"},
                    "outputs": {}, "legs": {"A1": {"pid": 1, "fresh_start": True}}, "failed_leg": "B1"})
    data = snapshot_bytes(freeze([formal, screen], ReportConfig()))
    out = render_report(data, tmp_path / "r", build_time=BUILD_TIME)
    html = out.html.read_text()
    assert "inconclusive" in html and "(missing)" in html and "—" in html
    assert "SIMULATED" not in html.replace("Sections marked SIMULATED", "")  # measured data is not labelled
    assert set(out.figures) == {f"formal-{'1' * 16}", f"abba-{'2' * 16}"}
