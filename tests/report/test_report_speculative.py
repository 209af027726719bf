"""The report's speculative-decoding section: matched AR/SD runs and acceptance counts, frozen and rendered."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from synthetic_archives import write_formal_archive, write_matched_archive

from harness.report.collect import collect
from harness.report.config import ReportConfig
from harness.report.render import render_report
from harness.report.snapshot import load_snapshot, snapshot_bytes

BUILD = "2026-12-02T00:00:00Z"
RULE = "SD is faster than native AR only if T_SD/T_AR &lt; a"

# Two measured waves of the C1 decode cell by per-request counts, and one by vLLM's counter delta:
# the sources are summed apart (the same steps would otherwise count twice).
ACCEPTANCE = [
    {"wave_id": "w0", "cell_id": "decode-c01-syn0001", "concurrency": 1, "source": "sglang-meta-info",
     "verify_steps": 100, "drafts_proposed": 300, "drafts_accepted": 150, "completion_tokens": 352},
    {"wave_id": "w1", "cell_id": "decode-c01-syn0001", "concurrency": 1, "source": "sglang-meta-info",
     "verify_steps": 60, "drafts_proposed": 180, "drafts_accepted": 30, "completion_tokens": 91},
    {"wave_id": "w1", "cell_id": "decode-c01-syn0001", "concurrency": 1, "source": "vllm-metrics-delta",
     "verify_steps": 50, "drafts_proposed": 100, "drafts_accepted": 40, "completion_tokens": 0},
]


def _section(html: str) -> str:
    start = html.index('<h2 id="speculative">')
    return html[start:html.index('<h2 id="historical">', start)]


@pytest.fixture(scope="module")
def spec_report(tmp_path_factory: pytest.TempPathFactory) -> tuple[dict[str, Any], dict[str, str], str, str]:
    """(snapshot, {name: archive id}, report.html, report.md) of a workspace with a valid matched run, a
    matched run whose SD2 leg failed, and a formal matrix carrying acceptance rows."""
    ws = tmp_path_factory.mktemp("ws-spec")
    good = write_matched_archive(ws, campaign="eagle-c4", differing=2)
    bad = write_matched_archive(ws, campaign="broken-c4", status="failed", failed_leg="SD2", sd_rates=(333.0, 333.0),
                                algorithm="NGRAM", created_wall="2026-11-29T16:00:00+0000")
    formal = write_formal_archive(ws, campaign="sd-matrix", seed=1, tiers=(1,), claim_class="speculative-full-target",
                                  acceptance=ACCEPTANCE)
    snap = collect(ws, ReportConfig(), findings_fn=False)
    out = render_report(snapshot_bytes(snap), ws / "report", build_time=BUILD)
    ids = {"good": good.archive_id, "bad": bad.archive_id, "formal": formal.archive_id}
    return snap, ids, out.html.read_text(), (out.out_dir / "report.md").read_text()


def test_matched_entry_holds_the_run_figures(spec_report: tuple[dict[str, Any], dict[str, str], str, str]) -> None:
    snap, ids, _, _ = spec_report
    assert snap["snapshot_format_version"] >= 6  # the speculative section arrived in format 6
    entries = {e["archive_id"]: e for e in snap["speculative"]["matched"]}
    e = entries[ids["good"]]
    assert (e["name"], e["family"], e["algorithm"], e["claim"]) == ("eagle-c4", "EAGLE", "EAGLE",
                                                                      "speculative-full-target")
    assert e["simulated"] is True and e["valid"] is True and e["superseded_by"] is None and e["invalid_reason"] is None
    assert (e["ar_rate_tok_s"], e["sd_rate_tok_s"], e["change_pct"]) == (100.0, 200.0, 100.0)
    assert (e["tokens_per_step"], e["acceptance_rate"]) == (2.5, 0.5)
    assert e["t_ar_ms"] == pytest.approx(40.0) and e["t_sd_ms"] == pytest.approx(50.0)
    assert e["t_sd_over_t_ar"] == pytest.approx(1.25) and e["speedup"] == pytest.approx(2.0)
    assert e["verdict"] == "sd-faster" and "ratio below a" in e["reason"]
    assert e["counts"] == {"steps": 400, "proposed": 1200, "accepted": 600, "completion_tokens": 1016,
                           "source": "sglang-meta-info"}
    assert [x["leg"] for x in e["legs"]] == ["AR1", "SD1", "SD2", "AR2"]
    sd1 = e["legs"][1]
    assert (sd1["arm"], sd1["median_tok_s"], sd1["step_ms"], sd1["tokens_per_step"], sd1["service_pid"]) == (
        "SD", 200.0, 50.0, 2.5, 501)
    assert e["legs"][0]["tokens_per_step"] is None
    assert e["outputs"] == {"reference_leg": "AR1", "compared": 24, "identical": 22, "differing": 2,
                            "first_differences": [
                                {"leg": "SD1", "wave_index": 0, "case_id": "case-000", "position": 7},
                                {"leg": "SD1", "wave_index": 0, "case_id": "case-001", "position": 7}]}
    bad = entries[ids["bad"]]
    assert bad["valid"] is False and bad["invalid_reason"] == "leg SD2 failed" and bad["family"] == "NGRAM"


def test_acceptance_entry_sums_each_cell_per_source(
        spec_report: tuple[dict[str, Any], dict[str, str], str, str]) -> None:
    snap, ids, _, _ = spec_report
    acc = {e["archive_id"]: e for e in snap["speculative"]["acceptance"]}
    assert set(acc) == set(ids.values())  # every archive with acceptance rows, matched runs too
    f = acc[ids["formal"]]
    assert (f["kind"], f["claim_class"], f["valid"]) == ("formal-matrix", "speculative-full-target", True)
    cells = {c["source"]: c for c in f["cells"]}
    sg = cells["sglang-meta-info"]
    assert (sg["cell_id"], sg["concurrency"], sg["waves"]) == ("decode-c01-syn0001", 1, 2)
    assert (sg["verify_steps"], sg["drafts_proposed"], sg["drafts_accepted"], sg["completion_tokens"]) == (
        160, 480, 180, 443)
    assert sg["tokens_per_step"] == pytest.approx(1 + 180 / 160) and sg["acceptance_rate"] == pytest.approx(0.375)
    assert sg["sglang_accept_length"] == pytest.approx(443 / 160)
    vl = cells["vllm-metrics-delta"]
    assert (vl["verify_steps"], vl["tokens_per_step"], vl["acceptance_rate"], vl["sglang_accept_length"]) == (
        50, 1.8, 0.4, None)
    m = acc[ids["good"]]
    assert [(c["cell_id"], c["verify_steps"], c["tokens_per_step"]) for c in m["cells"]] == [
        ("SD1", 200, 2.5), ("SD2", 200, 2.5)]


def test_html_section_shows_table_4_rows_and_the_rule(
        spec_report: tuple[dict[str, Any], dict[str, str], str, str]) -> None:
    _, ids, html, _ = spec_report
    assert '<li><a href="#speculative">Speculative decoding</a></li>' in html
    assert "1 formal P/D matrix (sd-matrix) and 2 matched AR/SD runs (eagle-c4, broken-c4)." in html
    sec = _section(html)
    assert RULE in sec and "acceptance alone is not a speed metric" in sec
    row = sec[sec.index(f'<tr id="spec-{ids["good"]}">'):]
    row = row[:row.index("</tr>")]
    for text in ("EAGLE", "eagle-c4", "SIMULATED", "speculative-full-target", ">200.00<", ">100.00<", ">+100.000%<",
                 ">2.500<", ">50.0%<", ">40.000<", ">50.000<", ">1.250<", "sd-faster", ">22<", ">24<"):
        assert text in row, text
    assert "case-001" in sec  # the first output differences are listed
    acc = sec[sec.index('<table class="spec-acceptance">'):]
    assert "decode-c01-syn0001" in acc and ">1.800<" in acc and ">37.5%<" in acc and ">1.125<" not in acc
    assert ">2.125<" in acc  # 1 + 180/160, the summed waves
    assert "<code>SD1</code>" not in acc  # a matched run's counts are in its own row, not the acceptance table


def test_invalid_matched_entry_is_withheld(spec_report: tuple[dict[str, Any], dict[str, str], str, str]) -> None:
    _, ids, html, md = spec_report
    sec = _section(html)
    row = sec[sec.index(f'<tr id="spec-{ids["bad"]}">'):]
    row = row[:row.index("</tr>")]
    assert "withheld (invalid: leg SD2 failed)" in row and "NGRAM" in row
    assert "333" not in sec  # none of its figures is shown anywhere in the section
    detail = sec[sec.index(f'id="spec-detail-{ids["bad"]}"'):]
    assert "withheld (invalid: leg SD2 failed)" in detail[:detail.index("</section>")]
    assert r"withheld \(invalid: leg SD2 failed\)" in md and "| EAGLE **[SIMULATED]** |" in md


def test_superseded_matched_entry_is_withheld(tmp_path: Path) -> None:
    """A matched archive a later run superseded (freeze's ``superseded`` map) is frozen invalid and its
    figures are withheld."""
    from harness.report.collect import load_content
    from harness.report.snapshot import freeze
    from harness.store.archive import open_archive

    ws = tmp_path / "ws"
    m = write_matched_archive(ws, campaign="old-run", sd_rates=(444.0, 444.0))
    content = load_content(open_archive(m.path), findings_fn=None)
    assert content.matched is not None and len(content.matched_legs or []) == 4 and len(content.acceptance or []) == 4
    snap = freeze([content], ReportConfig(), superseded={m.archive_id: "ffff000000000000"})
    e = snap["speculative"]["matched"][0]
    assert (e["valid"], e["superseded_by"], e["invalid_reason"]) == (False, "ffff000000000000",
                                                                     "superseded by ffff000000000000")
    assert snap["speculative"]["acceptance"][0]["valid"] is False
    html = render_report(snapshot_bytes(snap), tmp_path / "r", build_time=BUILD).html.read_text()
    sec = _section(html)
    assert "withheld (invalid: superseded by ffff000000000000)" in sec and "444" not in sec
    assert "withheld (invalid: superseded)" not in sec  # the matched run's own counts are not in the acceptance table


def test_version_5_snapshot_loads_with_an_empty_section(tmp_path: Path) -> None:
    ws = tmp_path / "ws"
    write_formal_archive(ws, campaign="q", tiers=(1,))
    snap = json.loads(snapshot_bytes(collect(ws, ReportConfig(), findings_fn=False)))
    assert snap["speculative"] == {"matched": [], "acceptance": []}
    old = dict(snap, snapshot_format_version=5)
    del old["speculative"]
    loaded = load_snapshot(json.dumps(old).encode(), "old")
    assert loaded["speculative"] == {"matched": [], "acceptance": []}
    html = render_report(json.dumps(old).encode(), tmp_path / "r", build_time=BUILD).html.read_text()
    assert 'id="speculative"' not in html and "Speculative decoding" not in html


def test_algorithm_text_is_escaped(tmp_path: Path) -> None:
    ws = tmp_path / "ws"
    write_matched_archive(ws, algorithm="<script>x</script>&")
    html = render_report(snapshot_bytes(collect(ws, ReportConfig(), findings_fn=False)), tmp_path / "r",
                         build_time=BUILD).html.read_text()
    sec = _section(html)
    assert "&lt;script&gt;x&lt;/script&gt;&amp;" in sec and "<script>x" not in html
