"""The report's "Imported results (external claims)" section (harness.report.snapshot.imports)."""

from __future__ import annotations

import json
from pathlib import Path

from report_helpers import BUILD_TIME
from synthetic_archives import write_formal_archive

from harness.report.build import build_report
from harness.store.peers import import_peer

FIX = Path(__file__).resolve().parents[1] / "fixtures" / "peers"


def test_imports_have_their_own_section_with_their_figures(tmp_path: Path) -> None:
    ws = tmp_path / "ws"
    sg = import_peer(FIX / "sglang-bench-0.5.23.jsonl", "sglang-bench", ws)
    ai = import_peer(FIX / "aiperf-0.13.0", "aiperf", ws)
    f = write_formal_archive(ws, campaign="m", tiers=(1,), rounds=1)
    build_report(ws, tmp_path / "out", build_time=BUILD_TIME, findings_fn=False, jobs=1)
    snap = json.loads((tmp_path / "out" / "results.json").read_text())
    got = {e["archive_id"]: e for e in snap["imports"]}
    assert set(got) == {sg.archive_id, ai.archive_id}
    s = got[sg.archive_id]
    assert (s["tool"], s["source_file"], s["n_requests"], s["data_origin"]) == \
        ("sglang-bench", "sglang-bench-0.5.23.jsonl", 12, "simulated")
    assert s["request_throughput"] == 6.911871505985939 and s["ttft_p99_ms"] == 10.399470080014908
    assert got[ai.archive_id]["data_origin"] == "unknown" and got[ai.archive_id]["ttft_p50_ms"] == 8.620135
    assert [x["archive_id"] for x in snap["formal"]] == [f.archive_id]  # never in a measured table
    md = (tmp_path / "out" / "report.md").read_text()
    section = md.split("## Imported results (external claims)")[1].split("\n## ")[0]
    assert f"`{sg.archive_id}`" in section and "6.912" in section and "10.40" in section
    assert "2 imported peer results \\(external claims" in md and "other archive" not in md
    assert "1 is an import of another tool" in md and "0 are measured" in md
    html = (tmp_path / "out" / "report.html").read_text()
    assert 'id="imports"' in html and "sglang-bench-0.5.23.jsonl" in html
