"""Peer formats in and out (harness.store.peers, harness.store.peers.export).

Every fixture was written by the real tool against the dsv4h simulator
(benchmarks/peers/produce_peer_files.sh; tests/fixtures/peers/README.md has the commands). The literal
numbers below are read from those files."""

from __future__ import annotations

import hashlib
import json
import math
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from testkit import run_block, run_cli

from harness.errors import ArchiveError, EvidenceError
from harness.evidence.guard import LabeledRate, check_comparable
from harness.evidence.io import check_archive
from harness.records import RequestRecord
from harness.store.archive import Archive, ArchiveWriter, open_archive, verify_archive
from harness.store.ledger import ingest_archive, read_table
from harness.store.peers import DEFINITIONS, GUIDELLM_REQUEST_KEYS, ROW_SCHEMA, Tool, import_peer, parse_peer
from harness.store.peers.export import bench_dict, export_archive, guidellm_dict

FIX = Path(__file__).resolve().parents[1] / "fixtures" / "peers"
SGLANG = FIX / "sglang-bench-0.5.23.jsonl"
VLLM = FIX / "vllm-bench-0.32.0.json"
GUIDELLM = FIX / "guidellm-0.8.1.json"
AIPERF = FIX / "aiperf-0.13.0" / "profile_export.jsonl"
FILES: dict[Tool, Path] = {"sglang-bench": SGLANG, "vllm-bench": VLLM, "guidellm": GUIDELLM, "aiperf": AIPERF}


def _source(tool: Tool) -> dict[str, Any]:
    text = FILES[tool].read_text()
    return dict(json.loads(text.splitlines()[-1] if tool == "sglang-bench" else text))


def test_sglang_bench_file_imports_its_values() -> None:
    summary, rows, derived = parse_peer(SGLANG, "sglang-bench")
    assert summary["completed"] == 12 and summary["total_output_tokens"] == 102
    assert summary["mean_ttft_ms"] == 8.361615583339699 and summary["request_goodput"] == 6.911871505985939
    assert [r["input_len"] for r in rows][:4] == [309, 150, 63, 54]
    assert [r["output_len"] for r in rows] == [13, 8, 14, 13, 7, 10, 3, 5, 15, 6, 3, 5]
    assert rows[0]["ttft_s"] == 0.009945773000026747 and len(rows[0]["itl_s"]) == 12
    assert rows[0]["itl_s"][0] == 0.0045086239999818645
    # no per-request latency in the file: E2E is derived, and named so
    assert rows[0]["e2e_s"] == pytest.approx(rows[0]["ttft_s"] + sum(rows[0]["itl_s"]))
    assert "e2e_s" in derived and math.isnan(rows[0]["start_s"])
    # the derivation misses only the end-of-stream message: mean within 0.1 ms of the tool's 48.359 ms
    assert sum(r["e2e_s"] for r in rows) / 12 * 1e3 == pytest.approx(summary["mean_e2e_latency_ms"], abs=0.1)


def test_vllm_bench_file_imports_its_values() -> None:
    summary, rows, derived = parse_peer(VLLM, "vllm-bench")
    assert summary["completed"] == 12 and summary["failed"] == 0 and summary["mean_e2el_ms"] == 87.40513583332661
    assert rows[0]["input_len"] == 314 and rows[0]["output_len"] == 16 and len(rows[0]["itl_s"]) == 15
    assert rows[0]["ttft_s"] == 0.009633272999963083 and rows[0]["e2e_s"] == 0.08471379200000229
    assert rows[0]["start_s"] == 0.0 and json.loads(rows[0]["peer"])["start_time"] == 2046.164117027
    assert derived == {}
    # vLLM's latency ends at the last chunk with choices: TTFT + the sum of its per-chunk ITLs
    assert all(r["e2e_s"] == pytest.approx(r["ttft_s"] + sum(r["itl_s"]), abs=1e-9) for r in rows)
    assert sum(r["e2e_s"] for r in rows) / 12 * 1e3 == pytest.approx(87.40513583332661, rel=1e-12)
    assert sum(r["ttft_s"] for r in rows) / 12 * 1e3 == pytest.approx(summary["mean_ttft_ms"], rel=1e-12)


def test_guidellm_report_imports_its_values() -> None:
    summary, rows, derived = parse_peer(GUIDELLM, "guidellm")
    assert summary["duration"] == 1.4581398963928223
    assert summary["time_to_first_token_ms.mean"] == 9.429713090260824
    assert summary["inter_token_latency_ms.mean"] == 4.990172386169434
    r = rows[0]
    assert (r["input_len"], r["output_len"], r["e2e_s"]) == (216, 16, 0.08628153800964355)
    assert r["ttft_s"] == pytest.approx(10.391712188720703e-3, rel=1e-15) and r["itl_s"] == []
    peer = json.loads(r["peer"])
    assert peer["inter_token_latency_ms"] == 5.011288324991862
    assert peer["time_per_output_token_ms"] == 5.3475648164749146
    assert "itl_s" in derived and len(rows) == 12 and not any(x["error"] for x in rows)
    assert sum(x["ttft_s"] for x in rows) / 12 * 1e3 == pytest.approx(9.429713090260824, rel=1e-12)
    assert sum(x["e2e_s"] for x in rows) / 12 == pytest.approx(summary["request_latency.mean"], rel=1e-12)


def test_aiperf_export_imports_its_values() -> None:
    summary, rows, _ = parse_peer(AIPERF, "aiperf")
    assert summary["aiperf_version"] == "0.13.0" and summary["benchmark_duration.avg"] == 1.285942272
    assert summary["time_to_first_token.avg"] == 8.0532405 and summary["time_to_first_token.unit"] == "ms"
    r = rows[0]
    assert (r["input_len"], r["output_len"], len(r["itl_s"])) == (64, 16, 15)
    assert r["ttft_s"] == pytest.approx(12.053692e-3, rel=1e-15)
    assert r["e2e_s"] == pytest.approx(86.40193699999999e-3, rel=1e-15)
    assert json.loads(r["peer"])["inter_token_latency"] == 4.956549666666667
    assert sum(x["ttft_s"] for x in rows) / 12 * 1e3 == pytest.approx(8.0532405, rel=1e-12)
    assert sum(x["e2e_s"] for x in rows) / 12 * 1e3 == pytest.approx(85.80918491666667, rel=1e-12)
    # the artifact directory imports the same rows
    assert parse_peer(AIPERF.parent, "aiperf")[1] == rows


@pytest.mark.parametrize("tool", list(FILES))
def test_import_is_an_external_archive_kept_apart(tool: Tool, tmp_path: Path) -> None:
    arch = import_peer(FILES[tool], tool, tmp_path)
    assert verify_archive(arch.path) == []
    ext = arch.json("external.json")
    assert arch.run.claim_class == "external" and arch.run.protocol_class == "external" and ext["tool"] == tool
    assert ext["source_sha256"] == hashlib.sha256(FILES[tool].read_bytes()).hexdigest()
    assert ext["metric_definitions"] == DEFINITIONS[tool] and ext["n_requests"] == 12
    assert arch.path.joinpath(f"source-{FILES[tool].name}").read_bytes() == FILES[tool].read_bytes()
    assert arch.table("external.parquet").schema.equals(ROW_SCHEMA)
    if tool == "aiperf":
        assert [f["name"] for f in ext["source_files"]] == ["profile_export.jsonl", "profile_export_aiperf.json"]
    assert ingest_archive(tmp_path, arch) == {"runs": 1}
    runs = read_table(tmp_path, "runs")
    assert runs is not None and runs.column("claim_class").to_pylist() == ["external"]
    findings = check_archive(arch)
    assert "external-claim" in [f.rule for f in findings] and not [f for f in findings if f.blocking]
    with pytest.raises(EvidenceError, match="rule 1"):
        check_comparable(LabeledRate(1.0, arch.run.claim_class, arch.run.protocol_class),
                         LabeledRate(1.0, "native-ar", "external"))


def _plain(rows: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Rows with NaN as None, so that equal rows compare equal."""
    return [{k: None if isinstance(v, float) and math.isnan(v) else v for k, v in r.items()} for r in rows]


def _export(arch: Archive, fmt: str, path: Path) -> dict[str, Any]:
    return dict(json.loads(export_archive(arch, fmt, path).read_text()))


@pytest.mark.parametrize("tool", ["sglang-bench", "vllm-bench"])
def test_bench_round_trip_gives_back_the_file(tool: Tool, tmp_path: Path) -> None:
    src = _source(tool)
    back = _export(import_peer(FILES[tool], tool, tmp_path), tool, tmp_path / "out.json")
    lists = ["input_lens", "output_lens", "ttfts", "itls", "errors"] + (["latencies", "start_times"]
                                                                        if tool == "vllm-bench" else [])
    for key in lists:
        assert back[key] == src[key], key
    scalars = [k for k, v in src.items() if not isinstance(v, (list, dict))]
    assert len(scalars) > 40 and {k: back[k] for k in scalars} == {k: src[k] for k in scalars}
    assert back["dsv4h_summary"] == "verbatim" and back["dsv4h_claim_class"] == "external"
    assert _plain(parse_peer(tmp_path / "out.json", tool)[1]) == _plain(parse_peer(FILES[tool], tool)[1])


def test_guidellm_round_trip_gives_back_the_report(tmp_path: Path) -> None:
    src = _source("guidellm")["benchmarks"][0]
    back = _export(import_peer(GUIDELLM, "guidellm", tmp_path), "guidellm", tmp_path / "g.json")["benchmarks"][0]
    for a, b in zip(back["requests"]["successful"], src["requests"]["successful"], strict=True):
        assert {k: a[k] for k in GUIDELLM_REQUEST_KEYS} == {k: b[k] for k in GUIDELLM_REQUEST_KEYS}
        assert a["info"]["timings"]["request_start"] == b["info"]["timings"]["request_start"]
        assert a["info"]["timings"]["first_token_iteration"] == pytest.approx(
            b["info"]["timings"]["first_token_iteration"], abs=1e-6)
    for name in ("time_to_first_token_ms", "inter_token_latency_ms", "request_latency"):
        for stat in ("mean", "median", "min", "max", "count"):
            assert back["metrics"][name]["successful"][stat] == src["metrics"][name]["successful"][stat]
    assert back["duration"] == src["duration"]
    again = parse_peer(tmp_path / "g.json", "guidellm")[1]
    assert [(r["ttft_s"], r["e2e_s"], r["output_len"]) for r in again] == \
        [(r["ttft_s"], r["e2e_s"], r["output_len"]) for r in parse_peer(GUIDELLM, "guidellm")[1]]


@pytest.mark.parametrize("tool", list(FILES))
def test_cross_format_export_recomputes_in_the_target_definitions(tool: Tool, tmp_path: Path) -> None:
    arch = import_peer(FILES[tool], tool, tmp_path)
    _, rows, _ = parse_peer(FILES[tool], tool)
    target = "vllm-bench" if tool != "vllm-bench" else "sglang-bench"
    back = _export(arch, target, tmp_path / "x.json")
    assert back["dsv4h_summary"] == "recomputed" and back["completed"] == 12
    assert back["ttfts"] == [r["ttft_s"] for r in rows]
    mean_ttft_ms = {"sglang-bench": 8.361615583339699, "vllm-bench": 9.349188416668616,
                    "guidellm": 9.429713090260824, "aiperf": 8.0532405}[tool]
    assert back["mean_ttft_ms"] == pytest.approx(mean_ttft_ms, rel=1e-12)
    csv_lines = export_archive(arch, "csv", tmp_path / "x.csv").read_text().splitlines()
    assert csv_lines[0] == ("cell_id,workload,concurrency,data_origin,valid,invalid_rules,index,input_len,output_len,"
                            "ttft_s,e2e_s,tpot_s,n_itl,start_s,error") and len(csv_lines) == 13
    origin = "simulated" if tool == "sglang-bench" else "unknown"  # only sglang saves the server's identity
    # no verdict given to the library call: validity unknown (the CLI always gives one)
    assert csv_lines[1].startswith(f",,,{origin},,,0,") and back["dsv4h_data_origin"] == origin
    assert back["dsv4h_valid"] is None and back["dsv4h_invalid_rules"] == []
    g = _export(arch, "guidellm", tmp_path / "g.json")
    assert len(g["benchmarks"][0]["requests"]["successful"]) == 12
    assert [r["ttft_s"] for r in parse_peer(tmp_path / "g.json", "guidellm")[1]] == pytest.approx(
        [r["ttft_s"] for r in rows], rel=1e-12)


def test_measured_archive_exports_with_the_peers_definitions(tmp_path: Path) -> None:
    ms = 1_000_000
    # sent at 0 and 5 ms; chunks (cumulative tokens) at 10/20/40 ms -> 1/3/4 tokens; the second failed
    recs = [RequestRecord(rid="a", send_ns=0, done_ns=50 * ms, event_ns=np.array([10, 20, 40]) * ms,
                          event_tokens=np.array([1, 3, 4]), prompt_tokens=7, completion_tokens=4),
            RequestRecord(rid="b", send_ns=5 * ms, done_ns=9 * ms, error="http 500", input_len=3)]
    w = ArchiveWriter(tmp_path)
    w.write_wave(recs)
    arch = open_archive(w.finalize(status="complete", run=run_block(campaign="m")))
    d = _export(arch, "vllm-bench", tmp_path / "m.json")
    assert d["ttfts"] == [0.01, None] and d["input_lens"] == [7, 3] and d["output_lens"] == [4, 0]
    assert d["itls"][0] == pytest.approx([0.01, 0.02]) and d["latencies"][0] == 0.05
    assert d["start_times"] == [0.0, 0.005] and d["errors"] == ["", "http 500"]
    assert (d["completed"], d["failed"], d["duration"]) == (1, 1, 0.05)
    assert d["mean_tpot_ms"] == pytest.approx(40 / 3) and d["mean_itl_ms"] == pytest.approx(15.0)
    assert d["dsv4h_summary"] == "recomputed" and d["dsv4h_source_tool"] is None


def test_cli_imports_and_exports(tmp_path: Path) -> None:
    code, out, _ = run_cli("import", str(AIPERF.parent), "--tool", "aiperf", "-w", str(tmp_path))
    assert code == 0 and "external archive" in out
    arch_id = out.split("external archive")[1].split()[0]
    code, _, _ = run_cli("export", arch_id, "--format", "csv", "--out", str(tmp_path / "a.csv"), "-w", str(tmp_path))
    assert code == 0 and len((tmp_path / "a.csv").read_text().splitlines()) == 13
    code, _, _ = run_cli("export", arch_id, "--format", "aiperf", "--out", str(tmp_path / "b"), "-w", str(tmp_path))
    assert code != 0 and not (tmp_path / "b").exists()


def test_wrong_files_are_refused(tmp_path: Path) -> None:
    p = tmp_path / "x.json"
    p.write_text('{"benchmarks": []}')
    with pytest.raises(ArchiveError, match="not a sglang-bench result"):
        parse_peer(p, "sglang-bench")
    with pytest.raises(ArchiveError, match="not a GuideLLM report"):
        parse_peer(VLLM, "guidellm")
    with pytest.raises(ArchiveError, match="no profile_export"):
        parse_peer(tmp_path, "aiperf")


_row = st.builds(
    lambda n, ttft, itl, err: {"index": 0, "input_len": n + 1, "output_len": n, "ttft_s": ttft,
                               "e2e_s": ttft + sum(itl) + 0.001, "itl_s": itl, "error": err,
                               "start_s": 0.0, "peer": "{}"},
    st.integers(2, 40), st.floats(1e-4, 2.0), st.lists(st.floats(1e-5, 0.5), max_size=8),
    st.sampled_from([None, None, "http 500"]))


@settings(max_examples=40, deadline=None)
@given(rows=st.lists(_row, min_size=1, max_size=6))
def test_exported_rows_parse_back(rows: list[dict[str, Any]], tmp_path_factory: pytest.TempPathFactory) -> None:
    rows = [r | {"index": i} for i, r in enumerate(rows)]
    d = tmp_path_factory.mktemp("rt")
    (d / "v.json").write_text(json.dumps(bench_dict(rows, 3.0, "vllm-bench")))
    back = parse_peer(d / "v.json", "vllm-bench")[1]
    assert [(r["ttft_s"], r["e2e_s"], r["itl_s"], r["output_len"], r["error"]) for r in back] == \
        [(r["ttft_s"], r["e2e_s"], r["itl_s"], r["output_len"], r["error"]) for r in rows]
    (d / "g.json").write_text(json.dumps(guidellm_dict(rows, 3.0, None)))
    gback = parse_peer(d / "g.json", "guidellm")[1]
    assert [(r["output_len"], r["error"] is None) for r in gback] == \
        [(r["output_len"], r["error"] is None) for r in sorted(rows, key=lambda r: r["error"] is not None)]
    assert sorted(r["e2e_s"] for r in gback) == pytest.approx(sorted(r["e2e_s"] for r in rows), rel=1e-12)


def test_the_same_source_twice_is_refused_naming_its_archive(tmp_path: Path) -> None:
    ws = tmp_path / "ws"
    src = FIX / "sglang-bench-0.5.23.jsonl"
    first = import_peer(src, "sglang-bench", ws)
    assert first.json("external.json")["again_of"] is None
    copy = tmp_path / "renamed.jsonl"  # the same bytes under another name are the same source
    copy.write_bytes(src.read_bytes())
    with pytest.raises(ArchiveError, match=f"imported already: archive {first.archive_id}") as exc:
        import_peer(copy, "sglang-bench", ws)
    assert exc.value.hint is not None and "--again" in exc.value.hint
    assert f"dsv4h archive show {first.archive_id} -w {ws}" in exc.value.hint
    assert [d.name for d in (ws / "archives").iterdir()] == [first.archive_id]  # nothing written
    code, _out, err = run_cli("import", str(src), "--tool", "sglang-bench", "-w", str(ws))
    assert code == 6 and first.archive_id in err, err
    # deliberately again: a second archive that says which one it repeats
    code, out, err = run_cli("import", str(src), "--tool", "sglang-bench", "-w", str(ws), "--again")
    assert code == 0, out + err
    (second,) = [open_archive(d) for d in (ws / "archives").iterdir() if d.name != first.archive_id]
    assert second.json("external.json")["again_of"] == first.archive_id
    assert "imported-again" in second.run.labels
    # another file is another source
    assert import_peer(FIX / "vllm-bench-0.32.0.json", "vllm-bench", ws).json("external.json")["again_of"] is None
