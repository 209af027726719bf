"""Exports per cell with their data origin; imports with their server's identity (issue 24 item 3)."""

from __future__ import annotations

import csv
import json
from pathlib import Path

import numpy as np
import pytest
from testkit import run_block, run_cli

from harness.errors import ArchiveError
from harness.records import RequestRecord
from harness.store.archive import Archive, ArchiveWriter, open_archive
from harness.store.ledger import ingest_archive, read_table
from harness.store.peers import import_peer, parse_peer
from harness.store.peers.export import export_cells
from harness.store.peers.figures import import_figures
from harness.store.peers.parse import origin_of, server_identity

FIX = Path(__file__).resolve().parents[1] / "fixtures" / "peers"
SGLANG, VLLM = FIX / "sglang-bench-0.5.23.jsonl", FIX / "vllm-bench-0.32.0.json"
AIPERF = FIX / "aiperf-0.13.0"
MS = 1_000_000
CELLS = ("prefill-c01-x", "decode-c01-x", "decode-c04-x")


def _rec(rid: str, cell: str, send_ms: int, ttft_ms: int, n: int) -> RequestRecord:
    """A request of ``cell`` sent at ``send_ms``: first token after ``ttft_ms``, then one a ms."""
    wl, tier, _ = cell.split("-")
    c = int(tier[1:])
    times = (send_ms + ttft_ms + np.arange(n)) * MS
    return RequestRecord(rid=rid, send_ns=send_ms * MS, done_ns=int(times[-1]), event_ns=times,
                         event_tokens=np.arange(1, n + 1, dtype=np.int32),
                         prompt_tokens=8192 if wl == "prefill" else 100, completion_tokens=n,
                         cell_id=cell, workload=wl, concurrency=c)


def _matrix(ws: Path) -> Archive:
    """A simulated formal matrix: one 8K prefill request (1 token, 500 ms TTFT), 2 decode requests at
    C1 (sent at 1000 and 1100 ms, 10 ms TTFT, 41 tokens) and 4 at C4 (sent at 2000 ms, 20 ms TTFT, 11)."""
    w = ArchiveWriter(ws)
    w.write_wave([_rec("p0", CELLS[0], 0, 500, 1)])
    w.write_wave([_rec(f"a{i}", CELLS[1], 1000 + 100 * i, 10, 41) for i in range(2)])
    w.write_wave([_rec(f"b{i}", CELLS[2], 2000, 20, 11) for i in range(4)])
    return open_archive(w.finalize(status="complete", run=run_block(campaign="matrix")))


def test_matrix_exports_one_sglang_line_per_cell_with_its_origin(tmp_path: Path) -> None:
    arch = _matrix(tmp_path)
    done = export_cells(arch, "sglang-bench", tmp_path / "m.jsonl")
    lines = [json.loads(x) for x in (tmp_path / "m.jsonl").read_text().splitlines()]
    assert done.layout == "jsonl-lines" and [x["dsv4h_cell"] for x in lines] == list(CELLS)
    assert [(x["dsv4h_workload"], x["dsv4h_concurrency"], x["completed"]) for x in lines] == \
        [("prefill", 1, 1), ("decode", 1, 2), ("decode", 4, 4)]
    assert {x["dsv4h_data_origin"] for x in lines} == {"simulated"} and lines[0]["dsv4h_archive"] == arch.archive_id
    # each cell over its own span: C1 from 1000 ms to 1150 ms (10 ms TTFT + 40 gaps of 1 ms)
    assert lines[1]["duration"] == pytest.approx(0.150) and lines[1]["request_throughput"] == pytest.approx(2 / 0.150)
    assert lines[0]["mean_ttft_ms"] == pytest.approx(500.0) and lines[2]["mean_ttft_ms"] == pytest.approx(20.0)
    assert lines[2]["total_input_tokens"] == 400 and lines[0]["total_input_tokens"] == 8192
    # sglang's own layout: an import takes the last run (line), here the C4 cell
    assert [r["output_len"] for r in parse_peer(tmp_path / "m.jsonl", "sglang-bench")[1]] == [11] * 4


def test_matrix_vllm_export_is_a_directory_never_one_file(tmp_path: Path) -> None:
    arch = _matrix(tmp_path)
    with pytest.raises(ArchiveError, match="3 cells") as exc:
        export_cells(arch, "vllm-bench", tmp_path / "flat.json")
    assert exc.value.hint is not None and "decode-c04-x" in exc.value.hint and not (tmp_path / "flat.json").exists()
    done = export_cells(arch, "vllm-bench", tmp_path / "out")
    index = json.loads((tmp_path / "out" / "index.json").read_text())
    assert done.layout == "directory" and index["data_origin"] == "simulated"
    assert [(c["cell_id"], c["workload"], c["concurrency"], c["data_origin"], c["file"], c["n_requests"])
            for c in index["cells"]] == [("prefill-c01-x", "prefill", 1, "simulated", "prefill-c01-x.json", 1),
                                         ("decode-c01-x", "decode", 1, "simulated", "decode-c01-x.json", 2),
                                         ("decode-c04-x", "decode", 4, "simulated", "decode-c04-x.json", 4)]
    c4 = json.loads((tmp_path / "out" / "decode-c04-x.json").read_text())
    assert (c4["completed"], c4["dsv4h_cell"], c4["dsv4h_data_origin"]) == (4, "decode-c04-x", "simulated")
    assert len(parse_peer(tmp_path / "out" / "decode-c01-x.json", "vllm-bench")[1]) == 2
    one = export_cells(arch, "vllm-bench", tmp_path / "c1.json", cell="decode-c01-x")
    assert one.layout == "file" and json.loads((tmp_path / "c1.json").read_text())["completed"] == 2
    with pytest.raises(ArchiveError, match="no cell 'nope'"):
        export_cells(arch, "vllm-bench", tmp_path / "n.json", cell="nope")


def test_matrix_csv_and_guidellm_keep_cells_apart(tmp_path: Path) -> None:
    arch = _matrix(tmp_path)
    export_cells(arch, "csv", tmp_path / "m.csv")
    rows = list(csv.DictReader((tmp_path / "m.csv").open()))
    assert [(r["cell_id"], r["workload"], r["concurrency"], r["data_origin"]) for r in rows] == \
        [("prefill-c01-x", "prefill", "1", "simulated")] + [("decode-c01-x", "decode", "1", "simulated")] * 2 \
        + [("decode-c04-x", "decode", "4", "simulated")] * 4
    g = json.loads(export_cells(arch, "guidellm", tmp_path / "g.json").path.read_text())
    assert [(b["dsv4h_cell"], len(b["requests"]["successful"])) for b in g["benchmarks"]] == \
        [("prefill-c01-x", 1), ("decode-c01-x", 2), ("decode-c04-x", 4)]
    assert len(parse_peer(tmp_path / "g.json", "guidellm")[1]) == 7
    split = export_cells(arch, "sglang-bench", tmp_path / "split", files_per_cell=True)
    assert split.layout == "directory" and sorted(p.name for p in split.path.iterdir()) == \
        ["decode-c01-x.jsonl", "decode-c04-x.jsonl", "index.json", "prefill-c01-x.jsonl"]


def test_server_identity_decides_an_imports_origin() -> None:
    assert origin_of(server_identity({"server_info": {"version": "sim-0.1.0"}})) == "simulated"
    assert origin_of(server_identity({"server_info": {"version": "0.5.23", "model_path": "x"}})) == "external"
    assert origin_of(server_identity({"model_id": "dsv4h-sim"})) == "unknown"  # the client's name, not the server's
    assert server_identity({"model_id": "m"})["requested_model"] == "m"


def test_import_records_its_server_and_origin(tmp_path: Path) -> None:
    arch = import_peer(SGLANG, "sglang-bench", tmp_path)
    ext = arch.json("external.json")
    assert ext["data_origin"] == "simulated" and ext["server"]["version"] == "sim-0.1.0"
    assert ext["server"]["dsv4h_simulator"] is True and arch.run.claim_class == "external" and arch.run.simulated
    v = import_peer(VLLM, "vllm-bench", tmp_path)
    assert v.json("external.json")["data_origin"] == "unknown" and not v.run.simulated
    assert v.json("external.json")["server"]["requested_model"] == "dsv4h-sim"
    ingest_archive(tmp_path, arch)
    ingest_archive(tmp_path, v)
    runs = read_table(tmp_path, "runs")
    assert runs is not None
    got = dict(zip(runs.column("archive_id").to_pylist(), runs.column("data_origin").to_pylist(), strict=True))
    assert got == {arch.archive_id: "simulated", v.archive_id: "unknown"}


def test_import_figures_are_the_tools_own() -> None:
    f = import_figures(json.loads('{"tool": "aiperf", "n_requests": 12, "summary": {"time_to_first_token.p50": 0.5,'
                                  ' "time_to_first_token.unit": "s", "request_throughput.avg": 8.0}}'))
    assert (f["ttft_p50_ms"], f["request_throughput"], f["itl_p50_ms"]) == (500.0, 8.0, None)
    assert f["data_origin"] == "unknown"
    s = import_figures({"tool": "sglang-bench", "summary": {"median_ttft_ms": 9.6, "p99_itl_ms": 8.8}})
    assert (s["ttft_p50_ms"], s["itl_p99_ms"], s["keys"]["ttft_p50_ms"]) == (9.6, 8.8, "median_ttft_ms")


def test_cli_import_adds_its_runs_row_and_show_prints_its_numbers(tmp_path: Path) -> None:
    ws = str(tmp_path)
    code, out, _ = run_cli("import", str(SGLANG), "--tool", "sglang-bench", "-w", ws)
    assert code == 0 and "data origin: simulated" in out and "runs +1" in out
    aid = out.split("external archive")[1].split()[0]
    runs = read_table(tmp_path, "runs")
    assert runs is not None and runs.column("archive_id").to_pylist() == [aid]
    assert runs.column("data_origin").to_pylist() == ["simulated"]
    code, out, _ = run_cli("archive", "show", aid, "-w", ws)
    assert code == 0 and "imported result" in out
    lines = {ln.split()[0]: ln.split()[1:] for ln in out.splitlines() if ln.split()}
    assert lines["request_throughput"][0] == "6.912" and lines["ttft_p50_ms"][0] == "9.603"
    assert lines["itl_p99_ms"][0] == "8.813" and lines["n_requests"] == ["12"] and lines["data_origin"] == ["simulated"]
    code, out, _ = run_cli("ledger", "ingest", "-w", ws)
    assert code == 0 and read_table(tmp_path, "runs").num_rows == 1  # type: ignore[union-attr]


def test_cli_exports_a_matrix_per_cell(tmp_path: Path) -> None:
    arch = _matrix(tmp_path)
    code, out, err = run_cli("export", arch.archive_id, "--format", "vllm-bench", "--out", str(tmp_path / "x.json"),
                             "-w", str(tmp_path))
    assert code != 0 and "3 cells" in out + err
    code, out, _ = run_cli("export", arch.archive_id, "--format", "vllm-bench", "--out", str(tmp_path / "d"),
                           "-w", str(tmp_path))
    assert code == 0 and "3 cells (directory), data origin simulated" in out
    assert (tmp_path / "d" / "index.json").exists()


def test_sglang_export_takes_itl_per_token_vllm_per_chunk() -> None:
    """Events of 1, 3 and 1 new tokens at 0, 30 and 40 ms after the first: sglang.bench_serving's native
    backend spreads the 30 ms chunk over its 3 tokens (10, 10, 10, then 10); vLLM keeps one gap per chunk."""
    from harness.store.peers.export import _itl, _measured_rows

    t = np.array([10, 40, 50], dtype=np.int64) * MS
    rec = RequestRecord(rid="x", send_ns=0, done_ns=int(t[-1]), event_ns=t,
                        event_tokens=np.array([1, 4, 5], dtype=np.int32), completion_tokens=5)
    (row,) = _measured_rows([rec])
    assert [round(v * 1e3, 9) for v in _itl(row, "sglang-bench")] == [10.0, 10.0, 10.0, 10.0]
    assert [round(v * 1e3, 9) for v in _itl(row, "vllm-bench")] == [30.0, 10.0]


def _invalid_matrix(ws: Path) -> Archive:
    """The matrix, ingested, with one blocking finding naming its C1 decode cell."""
    from harness.evidence.findings import Finding
    from harness.evidence.io import apply_findings

    arch = _matrix(ws)
    ingest_archive(ws, arch)
    apply_findings(ws, arch.archive_id, [Finding("rule-x", "blocking", "bad C1", "re-run", arch.archive_id,
                                                 (CELLS[1],))])
    return arch


def _export_cli(ws: Path, arch: Archive, fmt: str, out: Path, *extra: str) -> str:
    code, text, err = run_cli("export", arch.archive_id, "--format", fmt, "--out", str(out), "-w", str(ws), *extra)
    assert code == 0, err
    return text


VALIDITY = [(CELLS[0], True, []), (CELLS[1], False, ["rule-x"]), (CELLS[2], True, [])]


@pytest.fixture(scope="module")
def invalid_ws(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Archive]:
    ws = tmp_path_factory.mktemp("ws")
    return ws, _invalid_matrix(ws)


def test_export_marks_the_invalid_cell_in_sglang_lines(invalid_ws: tuple[Path, Archive], tmp_path: Path) -> None:
    ws, arch = invalid_ws
    out = _export_cli(ws, arch, "sglang-bench", tmp_path / "m.jsonl")
    lines = [json.loads(x) for x in (tmp_path / "m.jsonl").read_text().splitlines()]
    assert [(x["dsv4h_cell"], x["dsv4h_valid"], x["dsv4h_invalid_rules"]) for x in lines] == VALIDITY
    assert {x["dsv4h_data_origin"] for x in lines} == {"simulated"}
    assert "warning:" in out and f"{CELLS[1]} INVALID (rule-x)" in out and CELLS[0] not in out.split("warning:")[1]
    # an export still reads back as the peer's file (the extra keys are the summary's)
    assert len(parse_peer(tmp_path / "m.jsonl", "sglang-bench")[1]) == 4


def test_export_marks_the_invalid_cell_in_vllm_files_and_the_index(invalid_ws: tuple[Path, Archive],
                                                                   tmp_path: Path) -> None:
    ws, arch = invalid_ws
    _export_cli(ws, arch, "vllm-bench", tmp_path / "d")
    index = json.loads((tmp_path / "d" / "index.json").read_text())
    assert [(c["cell_id"], c["valid"], c["invalid_rules"]) for c in index["cells"]] == VALIDITY
    v = index["verdict"]
    assert (v["archive_id"], v["valid"], v["blocking"], v["data_origin"], v["source"], v["whole"]) == \
        (arch.archive_id, False, ["rule-x"], "simulated", "ledger", False)
    assert CELLS[1] in v["invalid_rows"] and index["dsv4h_export_version"] == 3
    got = [json.loads((tmp_path / "d" / f"{c}.json").read_text()) for c in CELLS]
    assert [(c, g["dsv4h_valid"], g["dsv4h_invalid_rules"]) for c, g in zip(CELLS, got, strict=True)] == VALIDITY
    assert len(parse_peer(tmp_path / "d" / f"{CELLS[1]}.json", "vllm-bench")[1]) == 2


def test_export_marks_the_invalid_cell_in_guidellm_and_csv(invalid_ws: tuple[Path, Archive], tmp_path: Path) -> None:
    ws, arch = invalid_ws
    _export_cli(ws, arch, "guidellm", tmp_path / "g.json")
    g = json.loads((tmp_path / "g.json").read_text())
    assert [(b["dsv4h_cell"], b["dsv4h_valid"], b["dsv4h_invalid_rules"]) for b in g["benchmarks"]] == VALIDITY
    assert (g["dsv4h_valid"], g["dsv4h_invalid_rules"]) == (False, ["rule-x"])  # the file: not every run valid
    assert len(parse_peer(tmp_path / "g.json", "guidellm")[1]) == 7
    _export_cli(ws, arch, "csv", tmp_path / "m.csv")
    rows = list(csv.DictReader((tmp_path / "m.csv").open()))
    assert [(r["cell_id"], r["valid"], r["invalid_rules"], r["data_origin"]) for r in rows] == \
        [(CELLS[0], "true", "", "simulated")] + [(CELLS[1], "false", "rule-x", "simulated")] * 2 \
        + [(CELLS[2], "true", "", "simulated")] * 4


def test_export_of_one_valid_cell_prints_no_warning(invalid_ws: tuple[Path, Archive], tmp_path: Path) -> None:
    ws, arch = invalid_ws
    out = _export_cli(ws, arch, "vllm-bench", tmp_path / "c4.json", "--cell", CELLS[2])
    one = json.loads((tmp_path / "c4.json").read_text())
    assert (one["dsv4h_valid"], one["dsv4h_invalid_rules"]) == (True, []) and "warning" not in out


def test_export_takes_validity_and_origin_from_the_verdict_given(tmp_path: Path) -> None:
    """The store-level export takes the verdict as plain data: origin and per-row validity as given;
    a request of an invalid wave makes its CSV row and its cell's run invalid, the other rows valid."""
    from harness.store.peers.export import ExportVerdict

    w = ArchiveWriter(tmp_path)
    w.write_wave([replace_wave(_rec(f"a{i}", CELLS[1], 1000 + 100 * i, 10, 5), f"{CELLS[1]}.r0.w00{i}")
                  for i in range(2)])
    arch = open_archive(w.finalize(status="complete", run=run_block(campaign="matrix")))
    bad = {f"{CELLS[1]}.r0.w001"}

    def validity(*ids: str | None) -> tuple[bool, tuple[str, ...]]:
        hit = bool(bad & {i for i in ids if i})
        return not hit, ("rule-w",) if hit else ()

    verdict = ExportVerdict("measured", validity, {"archive_id": arch.archive_id, "valid": False})
    export_cells(arch, "csv", tmp_path / "w.csv", verdict=verdict)
    rows = list(csv.DictReader((tmp_path / "w.csv").open()))
    assert [(r["valid"], r["invalid_rules"], r["data_origin"]) for r in rows] == \
        [("true", "", "measured"), ("false", "rule-w", "measured")]
    one = json.loads(export_cells(arch, "vllm-bench", tmp_path / "w.json", verdict=verdict).path.read_text())
    assert (one["dsv4h_valid"], one["dsv4h_invalid_rules"], one["dsv4h_data_origin"]) == (False, ["rule-w"], "measured")


def replace_wave(rec: RequestRecord, wave_id: str) -> RequestRecord:
    """``rec`` as a request of the wave ``wave_id``."""
    from dataclasses import replace

    return replace(rec, wave_id=wave_id)


def test_sglang_lines_carry_bench_servings_load_fields(tmp_path: Path) -> None:
    arch = _matrix(tmp_path)
    export_cells(arch, "sglang-bench", tmp_path / "m.jsonl")
    text = (tmp_path / "m.jsonl").read_text()
    lines = [json.loads(x) for x in text.splitlines()]
    # closed loop: every request at once, as bench_serving writes its default rate (json.dumps: Infinity)
    assert [x["request_rate"] for x in lines] == [float("inf")] * 3 and '"request_rate": Infinity' in text
    assert [x["max_concurrency"] for x in lines] == [1, 1, 4]
    # bench_serving's concurrency: sum of e2e over the duration. C1: (50 + 50) ms over 150 ms; C4: 4 x 30 ms / 30 ms
    assert [x["concurrency"] for x in lines] == pytest.approx([1.0, 100 / 150, 4.0])


def test_an_sglang_import_exports_its_own_load_fields(tmp_path: Path) -> None:
    arch = import_peer(SGLANG, "sglang-bench", tmp_path)
    export_cells(arch, "sglang-bench", tmp_path / "back.jsonl")
    (line,) = [json.loads(x) for x in (tmp_path / "back.jsonl").read_text().splitlines()]
    assert (line["request_rate"], line["max_concurrency"]) == (8.0, None)
