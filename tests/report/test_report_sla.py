"""The report's SLA-search section (harness.report.snapshot.sla) from a hand-built sla-search archive:
frozen with its bracket and every probe, rendered in HTML and Markdown as a bracket (never one number)."""

from __future__ import annotations

import math
from pathlib import Path

import pyarrow as pa

from harness.measure import sla, sla_load
from harness.report.collect import collect
from harness.report.config import ReportConfig
from harness.report.render import render_report
from harness.report.snapshot import SNAPSHOT_FORMAT_VERSION, load_snapshot, snapshot_bytes
from harness.store.archive import ArchiveWriter, open_archive
from harness.store.runblock import RunBlock

BUILD = "2026-12-02T00:00:00Z"
VERDICTS = [(3.0, True, 0.021), (6.0, True, 0.024), (12.0, False, 0.405), (9.0, True, 0.030),
            (10.5, False, 0.110), (9.75, True, 0.041)]
LIMITS = {"ttft": 0.06, "tpot": None, "e2e": None}


def _archive(ws: Path, late_first: bool = False) -> str:
    """The search of VERDICTS; ``late_first``: its first probe measured once invalid for load, then again."""
    rows = []
    measured = [(3.0, True, 0.0695)] * late_first + VERDICTS
    for i, (rate, _, ttft) in enumerate(measured):
        rnd = {"status": "ok", "ttft_p99_s": ttft, "tpot_bench_p99_s": 0.011, "e2e_p99_s": ttft + 0.1,
               "client_schedule_kept": True}
        cell = {"cell_id": f"sweep-{rate:g}rps", "request_throughput_median_req_s": rate, "goodput_median_req_s": rate}
        late = ["the simulator lost 0.100 s of model time (12 late step(s); window 6.800 s)"] if late_first and i == 0 \
            else []
        rows.append(sla_load.probe_row(i, rate, 0, cell, [rnd], late, LIMITS, 1))
    probes = sla_load.mark_bracket(rows)
    result = sla_load.summary(probes, sla.SearchSettings(start_req_s=3, precision=1, max_probes=10), 2)
    w = ArchiveWriter(ws)
    w.write_json("spec.json", {"name": "syn-sla", "kind": "sla-search", "schedule_tolerance_ms": 50.0})
    w.write_json("sla.json", result | {"probes": probes, "limits_ms": {"ttft_ms": 60.0, "tpot_ms": None,
                                                                       "e2e_ms": None}})
    w.write_table("sla_probes.parquet", pa.Table.from_pylist(
        [p | {"campaign": "syn-sla", "claim_class": "native-ar", "protocol_class": "sla-search"} for p in probes]))
    run = RunBlock.model_validate({"run_token": "synthetic", "campaign": "syn-sla", "kind": "sla-search",
                                   "claim_class": "native-ar", "protocol_class": "sla-search", "backend": "sim",
                                   "created_wall": "2026-12-02T10:00:00+0000", "labels": ["simulated", "synthetic"],
                                   "service_name": "synthetic", "error": None})
    return open_archive(w.finalize(status="complete", run=run)).archive_id


def test_sla_section_frozen_and_rendered(tmp_path: Path) -> None:
    ws = tmp_path / "ws"
    aid = _archive(ws)
    snap = collect(ws, ReportConfig(), findings_fn=False)
    assert snap["snapshot_format_version"] == SNAPSHOT_FORMAT_VERSION == 11
    (e,) = snap["sla"]
    assert (e["archive_id"], e["kind"], e["valid"]) == (aid, "sla-search", True)
    assert (e["highest_passing_req_s"], e["lowest_failing_req_s"], e["end"], e["converged"]) == (9.75, 10.5,
                                                                                             "converged", True)
    assert math.isclose(e["width"], 0.75) and e["precision"] == 1.0 and e["monotone"]
    assert [p["arrival_rate_req_s"] for p in e["probes"]] == [r for r, _, _ in VERDICTS]
    assert [p["passed"] for p in e["probes"]] == [v for _, v, _ in VERDICTS]
    assert [p["bracket_end"] for p in e["probes"]][-2:] == ["lowest-failing", "highest-passing"]
    out = render_report(snapshot_bytes(snap), ws / "report", build_time=BUILD)
    html, md = out.html.read_text(), (out.out_dir / "report.md").read_text()
    sec = html[html.index('<h2 id="sla">'):]
    sec = sec[:sec.index("</section>")]
    assert "Bracket: highest passing 9.75 req/s, lowest failing 10.5 req/s" in sec and "FAIL ttft" in sec
    assert "highest-passing" in sec and "405.0" in sec
    part = md[md.index("## SLA searches"):]
    assert "**Bracket: highest passing 9.75 req/s, lowest failing 10.5 req/s**; converged" in part
    assert part.count("| FAIL ttft |") == 2


def test_a_probe_invalid_for_load_is_shown_and_not_counted(tmp_path: Path) -> None:
    ws = tmp_path / "ws"
    _archive(ws, late_first=True)
    snap = collect(ws, ReportConfig(), findings_fn=False)
    (e,) = snap["sla"]
    assert (e["highest_passing_req_s"], e["lowest_failing_req_s"], e["converged"]) == (9.75, 10.5, True)
    assert [p["passed"] for p in e["probes"]][:2] == [None, True]
    out = render_report(snapshot_bytes(snap), ws / "report", build_time=BUILD)
    md = (out.out_dir / "report.md").read_text()
    assert "| 0 | 3 | INVALID invalid-load: the simulator lost 0.100 s of model time \\(12 late step\\(s\\); " in md
    assert "INVALID invalid-load: the simulator lost" in out.html.read_text()


def test_older_snapshot_loads_without_sla(tmp_path: Path) -> None:
    ws = tmp_path / "ws"
    _archive(ws)
    snap = collect(ws, ReportConfig(), findings_fn=False)
    snap["snapshot_format_version"] = 7
    del snap["sla"]
    assert load_snapshot(snapshot_bytes(snap), "old.json")["sla"] == []


def test_sla_probe_invalid_and_bracket_withheld(tmp_path: Path) -> None:
    """A blocking finding naming one probe's cell marks that probe INVALID and withholds the bracket (a
    conclusion over every probe)."""
    ws = tmp_path / "ws"
    _archive(ws)

    def late(a: object) -> list[dict[str, object]]:
        return [{"rule": "sim-lateness", "severity": "blocking", "message": "late", "remedy": "re-run",
                 "archive_id": "", "rows": ("sweep-12rps",)}]

    snap = collect(ws, ReportConfig(), findings_fn=late)
    (e,) = snap["sla"]
    assert (e["valid"], e["invalid_rules"]) == (False, ["sim-lateness"])
    marks = [(p["cell_id"], p["valid"], p["invalid_rules"]) for p in e["probes"]]
    assert [m for m in marks if not m[1]] == [("sweep-12rps", False, ["sim-lateness"])] and len(marks) == 6
    out = render_report(snapshot_bytes(snap), ws / "report", build_time=BUILD)
    html = out.html.read_text()
    sec = html[html.index('<h2 id="sla">'):]
    sec = sec[:sec.index("</section>")]
    assert "Bracket withheld (sim-lateness)" in sec and "Bracket: highest passing" not in sec
    assert sec.count("INVALID (sim-lateness)") == 3  # the status, the bracket line and the one probe
    assert "**Bracket withheld**" in (out.out_dir / "report.md").read_text()
