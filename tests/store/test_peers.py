"""Peer formats in and out (harness.store.peers).

The sglang-bench file here is HAND-MADE from the tool's documented keys (tests/fixtures/peers/README.md
says why no real output is committed yet)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from harness.errors import ArchiveError
from harness.evidence.io import check_archive
from harness.store.archive import verify_archive
from harness.store.ledger import ingest_archive, read_table
from harness.store.peers import export_archive, import_peer, parse_peer

FIX = Path(__file__).resolve().parents[1] / "fixtures" / "peers"
HANDMADE = FIX / "HANDMADE-sglang-bench.jsonl"


def test_parse_sglang_bench_details() -> None:
    summary, rows = parse_peer(HANDMADE, "sglang-bench")
    assert summary["completed"] == 3 and summary["mean_ttft_ms"] == 200.0
    assert [r["ttft_s"] for r in rows] == [0.1, 0.2, 0.3, 0.0]
    assert rows[0]["e2e_s"] == pytest.approx(0.4) and rows[3]["error"] == "http 500"


def test_import_makes_an_external_archive_and_round_trips(tmp_path: Path) -> None:
    arch = import_peer(HANDMADE, "sglang-bench", tmp_path)
    assert verify_archive(arch.path) == []
    ext = arch.json("external.json")
    assert arch.run.claim_class == "external" and ext["tool"] == "sglang-bench"
    assert len(ext["source_sha256"]) == 64 and "itl" in ext["metric_definitions"]
    rows = ingest_archive(tmp_path, arch)
    assert rows == {"runs": 1}
    runs = read_table(tmp_path, "runs")
    assert runs is not None and runs.column("claim_class").to_pylist() == ["external"]
    findings = check_archive(arch)
    assert "external-claim" in [f.rule for f in findings] and not [f for f in findings if f.blocking]
    for fmt, name in (("sglang-bench", "out.jsonl"), ("vllm-bench", "out.json")):
        out = export_archive(arch, fmt, tmp_path / name)
        back = json.loads(out.read_text())
        assert back["ttfts"] == [0.1, 0.2, 0.3, 0.0] and back["output_lens"] == [4, 4, 4, 0]
        assert back["completed"] == 3 and back["mean_ttft_ms"] == pytest.approx(200.0)
        _, again = parse_peer(out, "vllm-bench")
        assert [r["itl_s"] for r in again] == [r["itl_s"] for r in parse_peer(HANDMADE, "sglang-bench")[1]]
    csv_text = export_archive(arch, "csv", tmp_path / "o.csv").read_text().splitlines()
    assert csv_text[0].startswith("index,input_len,output_len,ttft_s") and len(csv_text) == 5
    g = json.loads(export_archive(arch, "guidellm", tmp_path / "g.json").read_text())
    _, grows = parse_peer(tmp_path / "g.json", "guidellm")
    assert len(g["benchmarks"][0]["requests"]["successful"]) == 3
    assert [r["ttft_s"] for r in grows] == pytest.approx([0.1, 0.2, 0.3])


def test_wrong_file_is_refused(tmp_path: Path) -> None:
    p = tmp_path / "x.json"
    p.write_text('{"benchmarks": []}')
    with pytest.raises(ArchiveError, match="not a sglang-bench result"):
        parse_peer(p, "sglang-bench")
