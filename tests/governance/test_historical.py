"""Historical evidence: the shipped report file is traceable, labelled and imported idempotently."""

from __future__ import annotations

import os
from pathlib import Path

import pytest
import yaml

from harness.errors import EvidenceError, SpecError
from harness.governance import record_claims as gv
from harness.governance.io import import_historical_file, load_historical, table_rows

REPO = Path(__file__).resolve().parents[2]
REPORT = REPO / "ledgers" / "historical-sources" / "report-2609.15627.yaml"
SEEDS = Path(os.environ.get("DSV4H_SEEDS", "/work/shared/seeds"))
SEPT18, SEPT14 = SEEDS / "000_ddeb1fb2f1b35ad1.txt", SEEDS / "001_9dca751e6085a9d9.txt"


@pytest.fixture(scope="module")
def entries() -> list[gv.HistoricalEntry]:
    return load_historical(REPORT)


def _renderings(v: float) -> set[str]:
    out = {f"{v:g}", f"{v:.1f}", f"{v:.2f}", f"{v:.3f}", str(v)}
    if abs(v) >= 1000:
        out.add(f"{v / 1000:g}k")
    return out


def test_every_value_is_in_its_quote(entries: list[gv.HistoricalEntry]) -> None:
    for e in entries:
        assert any(r in e.quote for r in _renderings(e.value)), (e.entry_id, e.value)
        if e.range_max is not None:
            assert any(r in e.quote for r in _renderings(e.range_max)), e.entry_id
        assert e.not_claims and e.label


@pytest.mark.skipif(not (SEPT18.is_file() and SEPT14.is_file()), reason="report texts not available (DSV4H_SEEDS)")
def test_every_quote_is_in_the_report_text(entries: list[gv.HistoricalEntry]) -> None:
    texts = {"2026-09-18": gv.normalize_text(SEPT18.read_text(encoding="utf-8")),
             "2026-09-14": gv.normalize_text(SEPT14.read_text(encoding="utf-8"))}
    for e in entries:
        assert gv.normalize_text(e.quote) in texts[e.published_date], e.entry_id


def test_report_coverage(entries: list[gv.HistoricalEntry]) -> None:
    by = {e.entry_id: e for e in entries}
    tiers = (1, 2, 4, 8, 16, 32, 64)
    for version in ("sep18", "sep14"):
        for metric in ("prefill", "resident", "http"):
            got = [by[f"{version}-table2-c{c}-{metric}"] for c in tiers]
            assert [e.concurrency for e in got] == list(tiers)
            assert {e.protocol_class for e in got} == {"formal"} and {e.tp for e in got} == {8}
    assert by["sep18-table2-c1-resident"].value == 88.63 and by["sep18-table2-c64-resident"].value == 1327.10
    assert by["sep18-table2-c64-http"].value == 829.65 and by["sep18-table2-c1-prefill"].value == 7035.83
    assert (by["sep14-table2-c1-resident"].value, by["sep14-table2-c32-resident"].value,
            by["sep14-table2-c64-resident"].value) == (87.60, 1044.32, 1334.24)
    assert "supplement" in by["sep14-table2-c1-resident"].label
    # ABBA screens (8.2-8.4): every leg and the ratio, labelled abba-screen
    for exp, legs, ratio in (("abba-empty-c4-tiles-c32-8k", (169.657, 611.103, 610.853, 169.843), 3.599),
                             ("abba-c1-wo-a-gemv", (79.558, 87.583, 87.504, 79.151), 10.32),
                             ("abba-c32-down-consumer", (1047.763, 1060.206, 1061.203, 1041.459), 1.541)):
        mine = [e for e in entries if e.experiment == exp]
        assert {e.protocol_class for e in mine} == {"abba-screen"}
        resident = {e.leg: e.value for e in mine if e.metric == "resident_decode"}
        assert tuple(resident[leg] for leg in ("A1", "B1", "B2", "A2")) == legs
        assert [e.value for e in mine if e.leg == "ratio"] == [ratio]
    # DSpark table: full-target speculative, never native
    dspark = [e for e in entries if e.experiment == "dspark-mhc-fusion-sep11"]
    assert len(dspark) == 8 and {e.claim_class for e in dspark} == {"speculative-full-target"}
    assert {e.value for e in dspark if e.metric == "resident_decode"} == {1073.16, 1127.48, 1142.26}
    assert all("not a current AR comparison" in e.label for e in dspark)
    # TP4 milestones say what they are not
    tp4 = [e for e in entries if e.tp == 4 and e.protocol_class == "historical-other"]
    values = {e.value for e in tp4}
    assert {14.2, 20.14, 25.54, 60.20, 74.5, 74.018, 74.655, 53} <= values
    assert by["sep18-tp4-ep4-mori-bs1-baseline"].range_max == 15.0
    assert all(any("not TP8" in n for n in e.not_claims) for e in tp4 if e.claim_class == "native-ar")
    assert any("short-probe" in n for n in by["sep18-tp4-august-short-probe"].not_claims)
    assert any("not a controlled series" in n for n in by["sep18-tp4-before-peer-read-allreduce"].not_claims)


def test_import_is_idempotent_and_labelled(tmp_path: Path, entries: list[gv.HistoricalEntry]) -> None:
    first = import_historical_file(REPORT, tmp_path)
    assert len(first["added"]) == len(entries) and first["unchanged"] == []
    second = import_historical_file(REPORT, tmp_path)
    assert second["added"] == [] and len(second["unchanged"]) == len(entries)
    rows = table_rows(tmp_path, "historical")
    assert len(rows) == len(entries)
    assert all(r["historical"] is True and r["data_origin"] == "historical" for r in rows)
    assert {r["entry_id"] for r in rows} == {e.entry_id for e in entries}
    row = next(r for r in rows if r["entry_id"] == "sep18-table4-dspark-fp32")
    assert row["claim_class"] == "speculative-full-target" and row["concurrency"] == 32
    assert row["not_claims"] and row["quote"].startswith("| Fusion + FP32 mixing")


def test_changed_entry_is_refused_not_rewritten(tmp_path: Path) -> None:
    data = yaml.safe_load(REPORT.read_text(encoding="utf-8"))
    small = {"defaults": {}, "entries": data["entries"][:2]}
    p = tmp_path / "h.yaml"
    p.write_text(yaml.safe_dump(small), encoding="utf-8")
    assert len(import_historical_file(p, tmp_path)["added"]) == 2
    small["entries"][1] = dict(small["entries"][1]) | {"value": 1.0}
    small["entries"].append(dict(data["entries"][3]))
    p.write_text(yaml.safe_dump(small), encoding="utf-8")
    with pytest.raises(EvidenceError, match="already imported with different content"):
        import_historical_file(p, tmp_path)
    assert len(table_rows(tmp_path, "historical")) == 2  # nothing appended, not even the new entry


def test_bad_entry_names_file_entry_and_field(tmp_path: Path) -> None:
    p = tmp_path / "bad.yaml"
    p.write_text(yaml.safe_dump({"defaults": {"source": "s", "published_date": "2026-09-18"}, "entries": [
        {"entry_id": "ok-one", "protocol_label": "p", "claim_class": "native-ar", "protocol_class": "formal",
         "metric": "m", "value": 1.0, "unit": "u", "label": "l", "not_claims": ["n"], "quote": "1.0"},
        {"entry_id": "bad-one", "protocol_label": "p", "claim_class": "native", "protocol_class": "current",
         "metric": "m", "value": 1.0, "unit": "u", "label": "l", "not_claims": [], "quote": "1.0"}]}),
        encoding="utf-8")
    with pytest.raises(SpecError) as exc:
        load_historical(p)
    msg = exc.value.message
    assert "bad.yaml: entries[1] (bad-one)" in msg
    for field in ("claim_class", "protocol_class", "not_claims"):
        assert field in msg
    assert "entries[0]" not in msg
