"""The rendered report: summary card first, generated description, rate sweeps, corpora, oracle
before/after labels, and a compact historical section (each protocol text once)."""

from __future__ import annotations

import json
import re
from pathlib import Path

from markupsafe import escape

from harness.report.render import md_escape


def test_summary_card_comes_first_with_claim_classes(built: tuple[Path, dict[str, str], Path]) -> None:
    _, ids, out = built
    html = (out / "report.html").read_text()
    md = (out / "report.md").read_text()
    assert html.index('id="summary"') < html.index('<h2>Contents</h2>') < html.index('id="formal"')
    assert md.index("## Summary") < md.index("## Formal matrices")
    card = html[html.index('id="summary"'):html.index("</section>", html.index('id="summary"'))]
    snap = json.loads((out / "results.json").read_text())
    # the best decode cell of matrix-a, C1 (which carries the stand-in blocking finding) left out
    f1 = next(f for f in snap["formal"] if f["archive_id"] == ids["f1"])
    best = max((c for c in f1["cells"] if c["workload"] == "decode" and c["concurrency"] != 1),
               key=lambda c: c["median_tok_s"])
    assert f">{best['median_tok_s']:.2f}</a>" in card and f"C{best['concurrency']}, median of" in card
    assert "1 cell with a blocking finding left out" in card
    assert "best prefill cell median" in card and "goodput at the knee" in card and "ABBA verdicts" in card
    assert card.count('<span class="badge claim">native-ar</span>') == 6  # 2x2 matrix numbers, 1 knee, 1 verdict
    assert "2 blocking, 0 warning, 4 info" in card and "2 of 2 passed</a> (1 before, 1 after measurement)" in card
    assert "synthetic-host (x86_64, 1 GPU)" in card
    assert "**What was measured:** 4 archives; 2 formal P/D matrices; 1 ABBA screen; 1 rate sweep." in md
    assert "| sweep-a **[SIMULATED]** | goodput at the knee |" in md
    assert "\\label{tab:summary}" in (out / "tables.tex").read_text()


def test_description_generated_from_content(built: tuple[Path, dict[str, str], Path]) -> None:
    _, _, out = built
    html = (out / "report.html").read_text()
    desc = re.search(r'<p class="description">(.*?)</p>', html, re.S)
    assert desc is not None
    assert desc.group(1).startswith("This report holds 4 archives: 2 formal P/D matrices (matrix-a, matrix-b), "
                                    "1 ABBA screen (screen-a) and 1 rate sweep (sweep-a).")
    md = (out / "report.md").read_text()
    assert "1 rate sweep \\(sweep-a\\)" in md


def test_rate_sweep_section(built: tuple[Path, dict[str, str], Path]) -> None:
    _, ids, out = built
    html = (out / "report.html").read_text()
    assert html.index('id="screens"') < html.index('id="sweeps"') < html.index('id="historical"')
    sect = html[html.index('id="sweeps"'):html.index('id="historical"')]
    assert f'data-figure="sweep-{ids["sweep"]}"' in sect and "TTFT &lt;= 1000 ms, TPOT &lt;= 50 ms" in sect
    assert "goodput knee: 4 req/s offered" in sect and sect.count("<td>kept</td>") == 3
    assert (out / "figures" / f"sweep-{ids['sweep']}.svg").is_file()
    md = (out / "report.md").read_text()
    assert "## Rate sweeps" in md and f"figures/sweep-{ids['sweep']}.png" in md


def test_corpora_show_tokenizer_and_ranges_or_not_recorded(built: tuple[Path, dict[str, str], Path]) -> None:
    _, ids, out = built
    html = (out / "report.html").read_text()
    table = html[html.index('<h2 id="corpora">'):html.index('<h2 id="archives">')]
    assert "dsv4h-sim-bpe-8k (vocab 8192, sha256 abababababababab)" in table
    assert "<td class=\"nowrap\">3–8189</td>" in table and "<td class=\"nowrap\">0–8191</td>" in table
    abba_row = next(r for r in table.split("<tr>") if ids["abba"] in r)
    assert abba_row.count("not recorded") == 3 and "511–512" in abba_row  # declared range only (older record)
    assert "—" not in table
    md = (out / "report.md").read_text()
    assert "| dsv4h-sim-bpe-8k \\(vocab 8192, sha256 abababababababab\\) | 511–512 | 511–512 | 3–8189 |" in md


def test_oracle_rows_labelled_before_and_after(built: tuple[Path, dict[str, str], Path]) -> None:
    _, _, out = built
    html = (out / "report.html").read_text()
    table = html[html.index('<h2 id="oracles">'):html.index('<h2 id="findings">')]
    assert table.count("<td>before measurement</td>") == 1 and table.count("<td>after measurement</td>") == 1
    md = (out / "report.md").read_text()
    assert "| france | before measurement |" in md and "| france | after measurement |" in md


def test_historical_ledger_of_95_rows_states_each_protocol_once(built_historical: tuple[Path, Path]) -> None:
    _, out = built_historical
    snap = json.loads((out / "results.json").read_text())
    rows = snap["historical"]
    assert len(rows) == 95
    protocols = list(dict.fromkeys(r["protocol_label"] for r in rows))
    html = (out / "report.html").read_text()
    md = (out / "report.md").read_text()
    for text in protocols:
        assert html.count(str(escape(text))) == 1, text
        assert md.count(str(md_escape(text))) == 1, text
    assert len(re.findall(r'<tr id="historical-', html)) == 95
    assert html.count('<dt id="hproto-') == len(protocols) == 26
    for r in rows:
        for note in r["not_claims"]:
            assert html.count(f"<dd>{escape(note)}</dd>") == 1, note  # keyed, listed once


def test_older_gpu_archives_say_not_recorded(tmp_path: Path) -> None:
    """The real H200 archives (tests/fixtures/gpu-archives) predate corpus record format 2: the matrix
    recorded no tokenizer or range, the screen only the tokenizer name and declared range."""
    import shutil

    from harness.report.build import build_report

    fixtures = Path(__file__).resolve().parents[1] / "fixtures" / "gpu-archives"
    for d in fixtures.iterdir():
        if d.is_dir():
            shutil.copytree(d, tmp_path / "ws" / "archives" / d.name)
    out = build_report(tmp_path / "ws", tmp_path / "r", build_time="2026-12-01T00:00:00Z", findings_fn=False, jobs=1)
    html = out.html.read_text()
    table = html[html.index('<h2 id="corpora">'):html.index('<h2 id="archives">')]
    matrix = next(r for r in table.split("<tr>") if "2502f414f4f65bd1" in r)
    screen = next(r for r in table.split("<tr>") if "e2c3efe4b4f4e37e" in r)
    assert matrix.count("not recorded") == 4
    assert "<td>dsv4h-sim-bpe-8k</td>" in screen and "511–512" in screen and screen.count("not recorded") == 2
    assert "Every archive was measured on a live service (backends command)." in html
    assert "Host(s): vm (x86_64, 1 GPU)." in html
    assert "best resident decode cell median" in html and "<strong>inconclusive</strong>" in html


def test_config_description_is_a_note_after_the_generated_one(built: tuple[Path, dict[str, str], Path],
                                                              tmp_path: Path) -> None:
    from harness.report.render import render_report
    from harness.report.snapshot import snapshot_bytes

    _, _, out = built
    snap = json.loads((out / "results.json").read_text())
    snap["description"] = "An ABBA screen only."  # a stale hand-written text cannot replace the generated one
    html = render_report(snapshot_bytes(snap), tmp_path / "r", build_time="2026-12-01T00:00:00Z", jobs=1).html
    text = html.read_text()
    assert text.index('<p class="description">This report holds 4 archives: 2 formal P/D matrices') < text.index(
        "<strong>Note from the report config:</strong> An ABBA screen only.")


def test_markdown_figures_stand_in_their_own_paragraph(built: tuple[Path, dict[str, str], Path]) -> None:
    # an image right under a text line would render inline in that paragraph
    lines = (built[2] / "report.md").read_text().splitlines()
    images = [i for i, line in enumerate(lines) if line.startswith("![")]
    assert images and all(lines[i - 1] == "" for i in images), [lines[i - 1] for i in images if lines[i - 1]]
