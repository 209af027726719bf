"""Every user string is escaped in every output format: Markdown, HTML and LaTeX (issue 14, point 7)."""

from __future__ import annotations

import json
import re
from pathlib import Path

from report_helpers import BUILD_TIME
from synthetic_archives import write_formal_archive

from harness.report.build import build_from_snapshot
from harness.report.collect import collect
from harness.report.config import ReportConfig
from harness.report.render import anchor, md_code, md_escape, tex_escape
from harness.report.snapshot import snapshot_bytes

XSS = '<img src=x onerror="alert(1)">'
LINK = "[click](javascript:alert(1))"
HOSTILE = f"{XSS} {LINK} `tick` a|b *em* _u_ \\ $x$ %c #h {{b}} ~t ^c &amp;\nline2"


def findings(archive: object) -> list[dict[str, object]]:
    return [{"rule": "hostile", "severity": "warning", "message": HOSTILE, "remedy": HOSTILE,
             "archive_id": archive.archive_id, "rows": ()}]  # type: ignore[attr-defined]


def test_hostile_strings_are_escaped_in_every_format(tmp_path: Path) -> None:
    ws = tmp_path / "ws"
    write_formal_archive(ws, campaign="matrix", tiers=(1,), oracles=True)
    # the frozen snapshot, edited to carry hostile names everywhere (the renderer must not trust it either)
    snap = json.loads(snapshot_bytes(collect(ws, ReportConfig(), findings_fn=findings)))
    snap["title"] = HOSTILE
    for section in ("archives", "formal"):
        for e in snap[section]:
            e["campaign"] = HOSTILE
    for s in snap["services"]:
        s["name"] = HOSTILE
        s["model_path"] = "/models/Deep_Seek`x`"
    for f in snap["findings"]:
        f["id"] = 'finding-1"><script>alert(1)</script>'
    edited = tmp_path / "edited.json"
    edited.write_text(json.dumps(snap))
    r = build_from_snapshot(edited, tmp_path / "r2", latex=True, build_time=BUILD_TIME, jobs=1)
    md = (r.out_dir / "report.md").read_text()
    html = (r.out_dir / "report.html").read_text()
    tex = (r.out_dir / "tables.tex").read_text()
    assert "<img src=x" not in html and "<script>alert" not in html, "raw markup from a user string"
    assert not re.search(r"(?<!\\)<(img|script)", md), "raw markup from a user string"
    assert "](javascript:" not in md  # no link built from a user string
    assert "\\<img src=x onerror=&quot;alert\\(1\\)&quot;\\>" in md
    assert "\\[click\\]\\(javascript:alert\\(1\\)\\)" in md
    assert "a\\|b" in md and "line2" in md and "\nline2" not in md  # table cells stay on one row
    assert "`` /models/Deep_Seek`x` ``" in md  # code spans hold values literally
    assert '<a id="finding-1scriptalert1script"></a>' in md  # anchors keep only safe characters
    # every Markdown table row keeps its column count
    for block in re.findall(r"((?:^\|.*\|\n)+)", md, flags=re.M):
        rows = block.strip().splitlines()
        cols = {len(re.split(r"(?<!\\)\|", row)) for row in rows}
        assert len(cols) == 1, rows[:3]
    assert "&lt;img" in html
    assert "\\textless{}img" in tex and "\\$x\\$" in tex and "\\%c" in tex and "\\#h" in tex


def test_escape_functions_known_answers() -> None:
    assert md_escape("a_b|c<d>") == "a\\_b\\|c\\<d\\>"
    assert md_escape('say "hi"') == "say &quot;hi&quot;"
    assert md_escape(12.5) == "12.5"
    assert md_code("x`y") == "``x`y``" and md_code("`a") == "`` `a ``"
    assert anchor('archive-1"><x') == "archive-1x"
    assert tex_escape("50% of $5 & _x_") == "50\\% of \\$5 \\& \\_x\\_"
    assert tex_escape("a\nb") == "a b"
