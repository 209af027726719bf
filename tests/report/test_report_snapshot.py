"""Pure snapshot logic: selection filters, freezing every value, stable bytes, config errors."""

from __future__ import annotations

import json
import math
from datetime import date
from pathlib import Path
from typing import Any

import pytest

from harness.errors import ArchiveError, SpecError
from harness.report.config import HistoricalFigure, ReportConfig, Selection, load_report_config
from harness.report.snapshot import (
    SNAPSHOT_FORMAT_VERSION,
    ArchiveContent,
    freeze,
    historical_figure_groups,
    json_value,
    load_snapshot,
    select_archives,
    snapshot_bytes,
)

REPO = Path(__file__).resolve().parents[2]


def _man(aid: str, campaign: str, kind: str, wall: str, labels: list[str], status: str = "complete") -> dict[str, Any]:
    return {"archive_id": aid, "status": status,
            "run": {"campaign": campaign, "kind": kind, "created_wall": wall, "labels": labels,
                    "claim_class": "native-ar", "protocol_class": "formal", "backend": "sim",
                    "service_name": "sim", "run_token": "t"}}


MANIFESTS = [
    _man("aaaa000000000001", "quick", "formal-matrix", "2026-11-01T10:00:00+0000", ["simulated"]),
    _man("aaaa000000000002", "abba-demo", "abba", "2026-11-15T10:00:00+0000", ["simulated", "x"]),
    _man("bbbb000000000003", "quick", "formal-matrix", "2026-12-01T10:00:00+0000", [], status="partial"),
]


@pytest.mark.parametrize(("sel", "expected"), [
    (Selection(), [1, 2, 3]),
    (Selection(campaigns=["quick"]), [1, 3]),
    (Selection(kinds=["abba"]), [2]),
    (Selection(labels=["simulated", "x"]), [2]),
    (Selection(since=date(2026, 11, 15)), [2, 3]),
    (Selection(until=date(2026, 11, 15)), [1, 2]),
    (Selection(since=date(2026, 11, 2), until=date(2026, 11, 30)), [2]),
    (Selection(archive_ids=["bbbb", "aaaa000000000001"]), [1, 3]),
    (Selection(statuses=["complete"], campaigns=["quick"]), [1]),
])
def test_select_archives_filters(sel: Selection, expected: list[int]) -> None:
    assert select_archives(MANIFESTS, sel) == [MANIFESTS[i - 1]["archive_id"] for i in expected]


def test_select_missing_or_ambiguous_id_names_it() -> None:
    with pytest.raises(ArchiveError, match=r"archive cccc.*missing"):
        select_archives(MANIFESTS, Selection(archive_ids=["cccc"]))
    with pytest.raises(ArchiveError, match=r"'aaaa'.*ambiguous"):
        select_archives(MANIFESTS, Selection(archive_ids=["aaaa"]))


def test_config_errors_name_file_and_field(tmp_path: Path) -> None:
    p = tmp_path / "report.yaml"
    p.write_text("title: t\nselect:\n  kinds: [formal]\n  campain: [x]\n")
    with pytest.raises(SpecError) as exc:
        load_report_config(p)
    msg = str(exc.value)
    assert str(p) in msg and "select.kinds.0" in msg and "select.campain" in msg
    assert "did you mean 'campaigns'" in msg
    p.write_text("select: {since: 2026-12-01, until: 2026-11-01}\n")
    with pytest.raises(SpecError, match=r"select\.since"):
        load_report_config(p)


def test_demo_config_loads() -> None:
    cfg = load_report_config(REPO / "reports" / "demo" / "report.yaml")
    assert cfg.title and cfg.select.kinds is None


def _formal_content(nan_round: bool = False) -> ArchiveContent:
    rates = [88.6, math.nan if nan_round else 88.7, 88.5]
    cells = [{"cell_id": "decode-c01", "workload": "decode", "concurrency": 1, "status": "complete",
              "rounds_required": 3, "round_tok_s": rates, "round_status": ["ok", "failed" if nan_round else "ok", "ok"],
              "median_tok_s": 88.6, "observed_min_tok_s": 88.5, "observed_max_tok_s": 88.7, "http_output_tok_s": 45.0,
              "round_http_output_tok_s": [45.1, 45.0, 44.9], "cache_violations": 0}]
    rounds = [{"round_id": f"decode-c01.r{k}", "cell_id": "decode-c01", "round_index": k, "workload": "decode",
               "concurrency": 1, "status": "ok", "rate_tok_s": r} for k, r in enumerate(rates)]
    manifest = {"archive_id": "f000000000000001", "status": "complete", "files": {"a": {}, "b": {}},
                "run": {"campaign": "q", "kind": "formal-matrix", "claim_class": "native-ar",
                        "protocol_class": "formal", "backend": "sim", "created_wall": "2026-11-29T10:00:00+0000",
                        "labels": ["simulated"]}}
    return ArchiveContent(
        archive_id="f000000000000001", manifest=manifest, manifest_sha256="ab" * 32,
        results={"cells": cells, "rounds": rounds}, service={"services": [{"backend": "sim", "server_info": {
            "version": "v1", "nested": {"k": [1, 2]}}}]},
        corpora={"decode": {"name": "c512", "manifest_sha256": "cd" * 32, "n_cases": 64}},
        oracles={"results": [{"oracle": "france", "service_url": "http://x", "passed": False, "got_hash16": "1" * 16,
                              "first_divergence": 3}]},
        memory=[{"t_monotonic_ns": 2_000, "wall_iso": "w", "device": 0, "used_bytes": 5, "total_bytes": 10},
                {"t_monotonic_ns": 1_000, "wall_iso": "w", "device": 0, "used_bytes": 7, "total_bytes": 10}],
        findings=[{"rule": "r2", "severity": "warning", "message": "m", "remedy": "x", "archive_id": "",
                   "rows": ("decode-c01.r1",)},
                  {"rule": "r1", "severity": "blocking", "message": "m", "remedy": "x", "archive_id": "",
                   "rows": ()}],
    )


def test_freeze_keeps_every_value_and_labels_simulation() -> None:
    snap = freeze([_formal_content(nan_round=True)], ReportConfig(limits=["extra limit"]),
                  historical=[{"entry_id": "h2", "measured_date": date(2026, 8, 1), "value": 74.5,
                               "not_claims": "not current"},
                              {"entry_id": "h1", "measured_date": date(2026, 6, 1), "value": 20.14,
                               "not_claims": None}])
    assert snap["snapshot_format_version"] == SNAPSHOT_FORMAT_VERSION
    assert snap["has_simulated"] is True and snap["archives"][0]["simulated"] is True
    assert snap["archives"][0]["files_count"] == 2 and snap["archives"][0]["manifest_sha256"] == "ab" * 32
    cell = snap["formal"][0]["cells"][0]
    assert cell["round_tok_s"] == [88.6, None, 88.5]  # NaN frozen as null, round kept
    assert cell["round_http_output_tok_s"] == [45.1, 45.0, 44.9]
    assert [r["rate_tok_s"] for r in snap["formal"][0]["rounds"]] == [88.6, None, 88.5]
    assert any("SIMULATED" in lim for lim in snap["formal"][0]["limits"])
    assert [f["rule"] for f in snap["findings"]] == ["r1", "r2"]  # blocking first
    assert snap["findings"][0]["archive_id"] == "f000000000000001" and snap["findings"][0]["id"] == "finding-1"
    assert [h["entry_id"] for h in snap["historical"]] == ["h2", "h1"]  # ledger order
    assert snap["historical"][1]["measured_date"] == "2026-06-01" and snap["historical"][1]["not_claims"] == []
    assert snap["historical"][0]["not_claims"] == ["not current"]
    dev = snap["memory"][0]["devices"][0]
    assert dev["t_ns"] == [0, 1000] and dev["used_bytes"] == [7, 5] and dev["peak_used_bytes"] == 7
    assert snap["oracles"][0]["output_hash16"] == "1" * 16 and snap["oracles"][0]["first_divergence"] == 3
    assert ["nested.k", "[1,2]"] in snap["services"][0]["server_info"]
    assert snap["corpora"][0]["name"] == "c512"
    assert snap["limits"]["config"] == ["extra limit"]


def test_freeze_respects_switches_and_absent_inputs() -> None:
    snap = freeze([_formal_content()], ReportConfig(memory=False, findings=False, historical=False),
                  historical=[{"entry_id": "h"}])
    assert snap["memory"] == [] and snap["findings"] == [] and snap["historical"] == []
    assert snap["findings_source"] == "disabled" and snap["historical_present"] is False
    snap = freeze([_formal_content()], ReportConfig(), historical=None)
    assert snap["historical_present"] is False


def test_snapshot_bytes_are_stable_and_round_trip() -> None:
    snap = freeze([_formal_content()], ReportConfig())
    a = snapshot_bytes(snap)
    assert a == snapshot_bytes(json.loads(a))
    assert load_snapshot(a, "x") == json.loads(a)
    assert b"NaN" not in snapshot_bytes(freeze([_formal_content(nan_round=True)], ReportConfig()))


def test_load_snapshot_rejects_other_files() -> None:
    with pytest.raises(SpecError, match="not a report snapshot"):
        load_snapshot(b'{"cells": []}', "archive/results.json")
    with pytest.raises(SpecError, match="snapshot_format_version 99"):
        load_snapshot(json.dumps({"format": "dsv4h-report-snapshot", "snapshot_format_version": 99}).encode(), "f")
    with pytest.raises(SpecError, match="invalid JSON"):
        load_snapshot(b"{", "f")


def test_json_value_refuses_unknown_types() -> None:
    with pytest.raises(TypeError):
        json_value(object())
    assert json_value({1: (float("inf"), date(2026, 1, 2))}) == {"1": [None, "2026-01-02"]}


def _h(eid: str, metric: str, pclass: str = "historical-other", claim: str = "native-ar",
       value: float | None = 1.0) -> dict[str, Any]:
    return {"entry_id": eid, "metric": metric, "protocol_class": pclass, "claim_class": claim, "value": value,
            "unit": "tok/s"}


def test_historical_figure_groups() -> None:
    rows = [_h("a1", "single"), _h("f1", "resident", "formal"), _h("f2", "resident", "formal"),
            _h("a2", "single"), _h("s1", "resident", claim="speculative-full-target"),
            _h("s2", "resident", claim="speculative-full-target"), _h("a3", "single"), _h("x", "single", value=None),
            _h("l1", "lonely"), _h("b1", "resident", "abba-screen"), _h("b2", "resident", "abba-screen")]
    groups = historical_figure_groups(rows, HistoricalFigure())
    assert [(g["claim_class"], g["metric"], g["entry_ids"]) for g in groups] == [
        ("native-ar", "single", ["a1", "a2", "a3"]), ("speculative-full-target", "resident", ["s1", "s2"])]
    assert [g["metric"] for g in historical_figure_groups(rows, HistoricalFigure(max_panels=1))] == ["single"]
    only = historical_figure_groups(rows, HistoricalFigure(protocol_classes=["formal"], min_entries=1))
    assert [g["entry_ids"] for g in only] == [["f1", "f2"]]
    assert historical_figure_groups(rows, HistoricalFigure(metrics=["lonely"])) == []
    assert [g["entry_ids"] for g in historical_figure_groups(rows, HistoricalFigure(metrics=["lonely"],
                                                                                   min_entries=1))] == [["l1"]]


def test_version_1_snapshot_still_renders(tmp_path: Path) -> None:
    """A snapshot frozen before format 2 (no sweeps, no host, no oracle ``when``, short corpus records)
    renders; what it does not hold reads as not recorded."""
    from synthetic_archives import write_formal_archive

    from harness.report.collect import collect
    from harness.report.render import render_report

    write_formal_archive(tmp_path / "ws", campaign="q", tiers=(1,), oracles=True)
    snap = collect(tmp_path / "ws", ReportConfig(), findings_fn=False)
    snap["snapshot_format_version"] = 1
    del snap["sweeps"]
    for a in snap["archives"]:
        del a["host"]
    for o in snap["oracles"]:
        del o["when"], o["phase"]
    for c in snap["corpora"]:
        for key in ("tokenizer_sha256", "vocab_size", "input_tokens", "token_ids", "recorded"):
            del c[key]
    out = render_report(snapshot_bytes(snap), tmp_path / "r", build_time="2026-12-01T00:00:00Z")
    html = out.html.read_text()
    assert "This report holds 1 archive: 1 formal P/D matrix (q)." in html
    oracle_row = html[html.index('<h2 id="oracles">'):html.index('<h2 id="findings">')]
    assert oracle_row.count("<td>not recorded</td>") == 2  # before and after, not told apart by a version 1 file
    corpora = html[html.index('<h2 id="corpora">'):html.index('<h2 id="archives">')]
    assert corpora.count("not recorded") >= 4 and "—" not in corpora.split("</p>", 1)[1]


def test_version_4_snapshot_with_the_first_names_renders_the_same_values(tmp_path: Path) -> None:
    """A snapshot frozen before format 5 holds the first result names (``median``, ``round_rates``, a
    sweep's ``rate``); it loads under the row models' names, so its values render."""
    from synthetic_archives import write_formal_archive, write_sweep_archive

    from harness.report.collect import collect
    from harness.report.render import render_report
    from harness.report.snapshot.io import load_snapshot
    from harness.store.archive_legacy import legacy_names

    write_formal_archive(tmp_path / "ws", campaign="q", tiers=(1,))
    write_sweep_archive(tmp_path / "ws")
    snap = collect(tmp_path / "ws", ReportConfig(), findings_fn=False)
    new = json.loads(snapshot_bytes(snap))
    old = json.loads(snapshot_bytes(snap))
    old["snapshot_format_version"] = 4
    first = {v: k for k, v in legacy_names("cells", "formal").items()}
    sweep_first = {v: k for k, v in legacy_names("cells", "rate-sweep").items()}
    for e in old["formal"]:
        e["cells"] = [{first.get(k, k): v for k, v in c.items()} for c in e["cells"]]
    for e in old["sweeps"]:
        e["cells"] = [{sweep_first.get(k, k): v for k, v in c.items()} for c in e["cells"]]
        e["knee"] = {"rate": e["knee"]["arrival_rate_req_s"], "goodput": e["knee"]["goodput_median_req_s"]}
    assert "median" in old["formal"][0]["cells"][0] and "rate" in old["sweeps"][0]["cells"][0]
    loaded = load_snapshot(json.dumps(old).encode(), "old")
    assert loaded["formal"][0]["cells"] == new["formal"][0]["cells"]
    assert loaded["sweeps"][0]["cells"] == new["sweeps"][0]["cells"]
    assert loaded["sweeps"][0]["knee"]["arrival_rate_req_s"] == new["sweeps"][0]["knee"]["arrival_rate_req_s"]
    a = render_report(json.dumps(old).encode(), tmp_path / "a", build_time="2026-12-01T00:00:00Z").out_dir
    b = render_report(snapshot_bytes(snap), tmp_path / "b", build_time="2026-12-01T00:00:00Z").out_dir
    rows_a, rows_b = ([line for line in (d / "report.md").read_text().splitlines() if line.startswith("| ")]
                      for d in (a, b))
    assert rows_a == rows_b and any(f"{new['formal'][0]['cells'][0]['median_tok_s']:.2f}" in r for r in rows_b)
