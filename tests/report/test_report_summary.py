"""The summary card, the generated description and the context views (pure), on literal snapshots."""

from __future__ import annotations

from typing import Any

import pytest

from harness.report.snapshot import ArchiveContent
from harness.report.snapshot.sections import corpus_entries, oracle_entries
from harness.report.summary import describe, slo_text, summary_card
from harness.report.views import corpus_ranges, historical_table, oracle_when


def _archive(aid: str, kind: str, proto: str, *, simulated: bool = False, status: str = "complete",
             campaign: str = "c", host: dict[str, Any] | None = None) -> dict[str, Any]:
    return {"archive_id": aid, "campaign": campaign, "kind": kind, "protocol_class": proto, "claim_class": "native-ar",
            "backend": "sim" if simulated else "sglang", "status": status, "simulated": simulated, "host": host}


def _cell(cid: str, wl: str, c: int, median: float) -> dict[str, Any]:
    return {"cell_id": cid, "workload": wl, "concurrency": c, "median_tok_s": median,
            "round_status": ["ok", "ok", "ok"]}


FORMAL = {"archive_id": "f" * 16, "campaign": "matrix", "claim_class": "native-ar", "protocol_class": "formal",
          "simulated": False, "cells": [
              _cell("decode-c01", "decode", 1, 88.63), _cell("decode-c32", "decode", 32, 1041.78),
              _cell("decode-c64", "decode", 64, 1327.10), _cell("prefill-c08", "prefill", 8, 10362.67),
              _cell("prefill-c16", "prefill", 16, 10413.87), _cell("prefill-c64", "prefill", 64, float("nan"))]}
SCREEN = {"archive_id": "a" * 16, "screen": "guard", "claim_class": "native-ar", "protocol_class": "abba-screen",
          "simulated": False, "verdict": "faster", "change_pct": 10.769, "drift_pct": -0.25, "spread_pct": 0.4,
          "separated": True, "boundary": "resident", "concurrency": 32}
SWEEP = {"archive_id": "5" * 16, "campaign": "rates", "claim_class": "native-ar", "protocol_class": "rate-sweep",
         "simulated": True, "slo": {"ttft_s": 1.0, "tpot_s": 0.05, "e2e_s": None},
         "knee": {"arrival_rate_req_s": 4.0, "goodput_median_req_s": 3.96}, "cells": []}


SERVICE = {"backend": "sglang", "name": "ctl", "version": "0.5.23", "model_path": "/m/v4", "simulated": False}


def _snapshot(**over: Any) -> dict[str, Any]:
    base: dict[str, Any] = {
        "archives": [_archive("f" * 16, "formal-matrix", "formal", campaign="matrix",
                              host={"hostname": "gpu-node", "machine": "x86_64", "gpu_count": 8}),
                     _archive("a" * 16, "abba", "abba-screen", campaign="guard"),
                     _archive("5" * 16, "rate-sweep", "rate-sweep", simulated=True, status="partial",
                              campaign="rates")],
        "formal": [FORMAL], "screens": [SCREEN], "sweeps": [SWEEP],
        "findings": [
            {"archive_id": "f" * 16, "severity": "blocking", "rule": "r", "rows": ["decode-c64.r1"]},
            {"archive_id": "f" * 16, "severity": "warning", "rule": "w", "rows": []},
            {"archive_id": "a" * 16, "severity": "info", "rule": "i", "rows": []},
            {"archive_id": "a" * 16, "severity": "info", "rule": "i2", "rows": []}],
        "findings_source": "harness.evidence.rules",
        "oracles": [{"passed": True, "phase": "before"}, {"passed": False, "phase": "after"}],
        "services": [SERVICE, dict(SERVICE)],  # one service, reported twice (e.g. two legs)
        "historical": [{"entry_id": "h1"}] * 3, "historical_present": True,
    }
    return base | over


def test_summary_card_key_numbers_verdicts_and_counts() -> None:
    card = summary_card(_snapshot())
    assert card["what"] == {"archives": 3, "formal": 1, "screens": 1, "sweeps": 1, "other": 0, "imports": 0,
                            "matched": 0, "external": 0, "simulated": 1,
                            "measured": 2, "campaigns": ["guard", "matrix", "rates"], "claim_classes": ["native-ar"],
                            "protocol_classes": ["abba-screen", "formal", "rate-sweep"], "historical_entries": 3}
    decode, prefill, knee = card["key_numbers"]
    # C64 decode (1327.10) carries a blocking finding on one of its rounds: the best usable cell is C32
    assert (decode["quantity"], decode["value"], decode["unit"]) == ("best resident decode cell median", 1041.78,
                                                                     "output tok/s")
    assert decode["detail"] == ("archive ffffffffffffffff; C32, median of 3 ok rounds; 1 cell with a blocking finding "
                                "left out")
    assert (decode["claim_class"], decode["protocol_class"], decode["archive_id"]) == ("native-ar", "formal", "f" * 16)
    assert prefill["value"] == 10413.87  # NaN C64 ignored
    assert prefill["detail"] == "archive ffffffffffffffff; C16, median of 3 ok rounds"
    assert (knee["value"], knee["unit"], knee["protocol_class"], knee["simulated"]) == (3.96, "req/s", "rate-sweep",
                                                                                         True)
    assert knee["detail"] == ("archive 5555555555555555; offered 4 req/s; "
                              "SLO TTFT <= 1000 ms, TPOT <= 50 ms")
    (verdict,) = card["verdicts"]
    assert (verdict["verdict"], verdict["change_pct"], verdict["drift_pct"], verdict["spread_pct"]) == (
        "faster", 10.769, -0.25, 0.4)
    assert card["statuses"] == {"complete": 2, "partial": 1}
    assert card["findings"] == {"blocking": 1, "warning": 1, "info": 2, "total": 4, "source": "harness.evidence.rules"}
    assert card["oracles"] == {"checks": 2, "failed": 1, "before": 1, "after": 1}
    assert card["where"]["backends"] == ["sglang", "sim"] and len(card["where"]["services"]) == 1
    assert card["where"]["hosts"] == ["gpu-node (x86_64, 8 GPUs)"] and card["where"]["hosts_recorded"] == 1


def test_slo_text() -> None:
    assert slo_text({"ttft_s": 0.5, "tpot_s": None, "e2e_s": 12.0}) == "TTFT <= 500 ms, E2E <= 12000 ms"
    assert slo_text({"ttft_s": None}) == "none" and slo_text(None) == "none"


def test_description_names_only_what_the_snapshot_holds() -> None:
    formal_only = _snapshot(archives=[_archive("f" * 16, "formal-matrix", "formal", campaign="matrix")],
                            screens=[], sweeps=[], historical=[], historical_present=False)
    text = " ".join(describe(formal_only))
    assert text.startswith("This report holds 1 archive: 1 formal P/D matrix (matrix).")
    assert "ABBA" not in text and "sweep" not in text and "historical" not in text
    assert "Every archive was measured on a live service (backends sglang)." in text
    everything = " ".join(describe(_snapshot()))
    assert everything.startswith("This report holds 3 archives: 1 formal P/D matrix (matrix), 1 ABBA screen (guard) "
                                 "and 1 rate sweep (rates).")
    assert "1 archive is SIMULATED and 2 are measured" in everything
    assert "The historical ledger adds 3 entries" in everything
    sweeps_only = _snapshot(archives=[_archive("5" * 16, "rate-sweep", "rate-sweep", simulated=True)], formal=[],
                            screens=[], historical_present=False)
    text = " ".join(describe(sweeps_only))
    assert "1 rate sweep (rates)" in text and "ABBA" not in text and "formal P/D" not in text
    assert "Every archive is SIMULATED (backend sim)" in text


def _hist_rows(n: int) -> list[dict[str, Any]]:
    protocols = ["formal matrix protocol, median of 3 rounds", "ABBA screen A1 -> B1 -> B2 -> A2",
                 "single-request probe"]
    return [{"entry_id": f"e{k:03d}", "source": "paper v2" if k % 2 else "paper v1",
             "protocol_label": protocols[k % 3], "protocol_class": ["formal", "abba-screen", "historical-other"][k % 3],
             "measured_date": None if k % 5 == 0 else "2026-09-18", "published_date": "2026-09-20",
             "metric": "m", "concurrency": 1, "value": float(k), "unit": "tok/s", "claim_class": "native-ar",
             "not_claims": ["not current"] + (["not a scaling factor"] if k % 3 == 0 else [])
             + (["rounded"] if k == 3 else [])} for k in range(n)]


def test_historical_table_lists_each_text_once() -> None:
    t = historical_table(_hist_rows(95))
    assert len(t["rows"]) == 95
    assert [p["key"] for p in t["protocols"]] == ["P1", "P2", "P3"]
    assert [p["entries"] for p in t["protocols"]] == [32, 32, 31]
    assert [(s["key"], s["text"]) for s in t["sources"]] == [("S1", "paper v1"), ("S2", "paper v2")]
    assert [(n["key"], n["text"]) for n in t["notes"]] == [("N1", "not current"), ("N2", "not a scaling factor"),
                                                           ("N3", "rounded")]
    # notes every entry of a protocol carries are listed once with it; a row keeps only its own
    assert [p["note_keys"] for p in t["protocols"]] == [["N1", "N2"], ["N1"], ["N1"]]
    by = {r["entry_id"]: r for r in t["rows"]}
    assert by["e003"]["note_keys"] == ["N3"] and by["e006"]["note_keys"] == [] and by["e001"]["protocol_key"] == "P2"
    assert (by["e000"]["date"], by["e000"]["date_kind"]) == ("2026-09-20", "published")
    assert (by["e001"]["date"], by["e001"]["date_kind"]) == ("2026-09-18", "measured")


def test_oracle_rows_say_before_or_after_measurement() -> None:
    c = ArchiveContent("b" * 16, {}, "0" * 64, oracles={"results": [
        {"oracle": "france", "when": "before", "passed": True}, {"oracle": "france", "when": "after", "passed": True},
        {"oracle": "france", "when": "before A1", "passed": True}, {"oracle": "france", "passed": False}]})
    rows = oracle_entries(c)
    assert [r["phase"] for r in rows] == ["before", "after", "before", None]
    assert [oracle_when(r) for r in rows] == ["before measurement", "after measurement",
                                              "before measurement (leg A1)", "not recorded"]


def test_corpus_record_or_not_recorded() -> None:
    new = {"record_format": 2, "name": "c512", "manifest_sha256": "cd" * 32, "n_cases": 64, "token_range": [511, 512],
           "tokenizer": "dsv4h-sim-bpe-8k", "tokenizer_sha256": "ab" * 32, "vocab_size": 8192,
           "input_tokens": [511, 512], "token_ids": [3, 8189]}
    old = {"name": "c512", "manifest_sha256": "cd" * 32, "n_cases": 64, "path": "/x"}
    (a, b) = corpus_entries(ArchiveContent("c" * 16, {}, "0" * 64, corpora={"decode": new, "prefill": old}))
    assert a["recorded"] and not b["recorded"]
    assert corpus_ranges(a) == {"tokenizer": "dsv4h-sim-bpe-8k (vocab 8192, sha256 abababababababab)",
                                "declared": "511–512", "input_tokens": "511–512", "token_ids": "3–8189"}
    assert corpus_ranges(b) == {"tokenizer": "not recorded", "declared": "not recorded",
                                "input_tokens": "not recorded", "token_ids": "not recorded"}


@pytest.mark.parametrize("when", ["", None])
def test_oracle_when_missing(when: Any) -> None:
    assert oracle_when({"when": when, "phase": None}) == "not recorded"


def test_counted_nouns_in_the_summary() -> None:
    from harness.report.summary import count_noun

    assert count_noun(1, "archive") == "1 archive"
    assert count_noun(3, "archive") == "3 archives"
    assert count_noun(2, "formal P/D matrix", "formal P/D matrices") == "2 formal P/D matrices"
