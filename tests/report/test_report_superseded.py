"""A workspace holding a resumed run beside the partial it superseded (issue 24, item 2): the report's key
numbers come from valid archives only, each names its archive, and the superseded archive is labelled."""

from __future__ import annotations

import re
from pathlib import Path

import pytest
from ledger_helpers import ledger_table
from report_helpers import BUILD_TIME
from synthetic_archives import write_formal_archive

from harness.report.build import build_report
from harness.report.config import ReportConfig, Selection
from harness.report.render import view_model
from harness.report.snapshot import load_snapshot
from harness.report.summary import describe, summary_card
from harness.store.archive import open_archive
from harness.store.ledger import ingest_archive


@pytest.fixture(scope="module")
def resumed(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, str, str, str, Path]:
    """(workspace, partial id, resumed id, another matrix id, report dir): an interrupted matrix whose decode
    rates are a third of the real ones, the run that resumed it and an unrelated matrix, all ingested."""
    ws = tmp_path_factory.mktemp("ws-resumed")
    old = write_formal_archive(ws, campaign="my-decode", seed=5, tiers=(1, 64), rate_scale=1 / 3,
                               archive_status="partial", created_wall="2026-11-20T10:00:00+0000")
    new = write_formal_archive(ws, campaign="my-decode", seed=6, tiers=(1, 64), resumed_from=old.archive_id,
                               created_wall="2026-11-20T11:00:00+0000")
    other = write_formal_archive(ws, campaign="my-decode", seed=7, tiers=(1, 64),
                                 created_wall="2026-11-21T10:00:00+0000")
    for a in (new, old, other):  # the successor first: the marker reaches the older archive either way
        ingest_archive(ws, open_archive(a.path))
    out = ws / "report"
    build_report(ws, out, build_time=BUILD_TIME, findings_fn=False)
    return ws, old.archive_id, new.archive_id, other.archive_id, out


def _best_decode(ws: Path, aid: str) -> float:
    cells = open_archive(ws / "archives" / aid).json("results.json")["cells"]
    return max(float(c["median_tok_s"]) for c in cells if c["workload"] == "decode")


def test_ledger_marks_the_partial_superseded(resumed: tuple[Path, str, str, str, Path]) -> None:
    ws, old, new, _, _ = resumed
    rows = {r["archive_id"]: r for r in ledger_table(ws, "runs").to_pylist()}
    assert (rows[old]["valid"], rows[old]["superseded_by"]) == (False, new)
    assert rows[new]["valid"] and rows[new]["superseded_by"] is None


def test_key_numbers_are_valid_and_name_their_archive(resumed: tuple[Path, str, str, str, Path]) -> None:
    _, old, new, other, out = resumed
    snap = load_snapshot((out / "results.json").read_bytes(), "results.json")
    entry = {a["archive_id"]: a for a in snap["archives"]}
    assert (entry[old]["valid"], entry[old]["superseded_by"]) == (False, new)
    assert entry[new]["valid"] and entry[other]["valid"] and entry[new]["superseded_by"] is None
    card = summary_card(snap)
    decode = [n for n in card["key_numbers"] if n["quantity"] == "best resident decode cell median"]
    assert sorted(n["archive_id"] for n in decode) == sorted([new, other])  # none from the superseded partial
    for n in card["key_numbers"]:
        assert re.fullmatch(r"[0-9a-f]{16}", n["archive_id"])
        assert n["detail"].startswith(f"archive {n['archive_id']}; ")
    assert [x["archive_id"] for x in card["superseded"]] == [old]
    assert card["superseded"][0]["superseded_by"] == new
    text = " ".join(describe(snap))
    assert f"superseded by {new}" in text and "not a result" in text
    vm = view_model(snap)
    (shown,) = [e for e in vm["formal"] if e["archive_id"] == old]
    assert shown["status"] == f"partial; SUPERSEDED by {new}, not a result"


@pytest.mark.parametrize("name", ["report.html", "report.md"])
def test_rendered_key_numbers(resumed: tuple[Path, str, str, str, Path], name: str) -> None:
    ws, old, new, other, out = resumed
    page = (out / name).read_text()
    key = page[page.index("Key numbers") if "Key numbers" in page else 0:]
    key = key[:key.index("</table>")] if name.endswith(".html") else key[:key.index("\n\n", key.index("| run |"))]
    stale = f"{_best_decode(ws, old):.2f}"
    assert stale not in key  # the superseded value is never a key number
    for aid in (new, other):
        assert f"archive {aid}" in key and f"{_best_decode(ws, aid):.2f}" in key
    assert f"archive {old}" not in key
    # the superseded archive is still listed (its tables too), labelled as such
    assert f"SUPERSEDED by {new}, not a result" in page
    assert page.count("superseded") >= 1


def test_superseded_outside_the_selection_still_counts(resumed: tuple[Path, str, str, str, Path],
                                                       tmp_path: Path) -> None:
    """A report of the partial alone still knows that a resumed run in the workspace superseded it."""
    ws, old, new, _, _ = resumed
    out = tmp_path / "only-old"
    build_report(ws, out, config=ReportConfig(select=Selection(archive_ids=[old])), build_time=BUILD_TIME,
                 findings_fn=False)
    snap = load_snapshot((out / "results.json").read_bytes(), "results.json")
    assert [a["archive_id"] for a in snap["archives"]] == [old]
    assert snap["archives"][0]["superseded_by"] == new
    assert summary_card(snap)["key_numbers"] == []
    assert f"SUPERSEDED by {new}" in (out / "report.html").read_text()
