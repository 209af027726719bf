"""``dsv4h bench`` end to end against a running simulator (a child process on port 0): the prompts
frozen in the archive, protocol class quick-bench, every request completed, the chosen percentiles
printed; and its flags refused with errors that name them."""

from __future__ import annotations

import json
from pathlib import Path

import pyarrow.parquet as pq
import pytest
from sim_helpers import spawned
from testkit import only_archive, run_cli

from harness.inputs.corpus import load_corpus
from harness.store.archive import verify_archive
from harness.store.ledger import read_table


@pytest.fixture(scope="module")
def sim_url() -> object:
    with spawned("--profile", "fast") as (_proc, url):
        yield url


def test_bench_measures_a_running_simulator(tmp_path: Path, sim_url: str) -> None:
    ws = tmp_path / "ws"
    code, out, err = run_cli("bench", "--url", sim_url, "--num-prompts", "8", "--max-concurrency", "4",
                             "--random-input-len", "32", "--random-output-len", "16", "--percentiles", "50,95",
                             "-w", str(ws))
    assert code == 0, out + err
    archive = only_archive(ws)
    assert verify_archive(archive) == []
    manifest = json.loads((archive / "manifest.json").read_text())
    run = manifest["run"]
    assert (run["kind"], run["protocol_class"], run["backend"]) == ("quick-bench", "quick-bench", "attach")
    assert "simulated" in run["labels"] and manifest["status"] == "complete"
    # the prompts are frozen inside the archive, hashed like every file
    assert {"prompts/manifest.json", "prompts/cases.jsonl"} <= set(manifest["files"])
    corpus = load_corpus(archive / "prompts")
    assert len(corpus.cases) == 8 and {c.n_tokens for c in corpus.cases} == {32}
    assert {c.output_tokens for c in corpus.cases} == {16}
    recs = pq.read_table(archive / "records" / "part-000000.parquet").to_pylist()
    assert len(recs) == 8 and all(r["error"] is None for r in recs)
    assert sorted(r["input_hash"] for r in recs) == sorted(c.sha256[:16] for c in corpus.cases)
    assert {r["completion_tokens"] for r in recs} == {16} and {r["concurrency"] for r in recs} == {4}
    quick = json.loads((archive / "quick.json").read_text())
    t = quick["throughput"]
    assert (t["completed"], t["failed"], t["total_input_tokens"], t["total_output_tokens"]) == (8, 0, 256, 128)
    assert quick["percentiles"] == [50.0, 95.0] and quick["latency"]["ttft_n"] == 8
    assert quick["latency"]["ttft_p95_s"] >= quick["latency"]["ttft_p50_s"] > 0
    # the console: the chosen percentiles, the throughput block in the peers' words, the class
    assert " p95 " in out and " p50 " in out and " p99 " not in out
    for needle in ("Successful requests", "Request throughput (req/s)", "Output token throughput (tok/s)",
                   "Total token throughput (tok/s)", "quick-bench", "not a formal result", "SIMULATED"):
        assert needle in out, needle
    runs = read_table(ws, "runs")
    assert runs is not None
    row = runs.to_pylist()[0]
    assert (row["protocol_class"], row["data_origin"], row["kind"]) == ("quick-bench", "simulated", "quick-bench")
    requests = read_table(ws, "requests")
    assert requests is not None and requests.num_rows == 8


def test_bench_speaks_openai_completions(tmp_path: Path, sim_url: str) -> None:
    ws = tmp_path / "ws"
    code, out, err = run_cli("bench", "--url", sim_url, "--backend", "openai", "--num-prompts", "3",
                             "--random-input-len", "8", "--random-output-len", "4", "-w", str(ws))
    assert code == 0, out + err
    archive = only_archive(ws)
    spec = json.loads((archive / "spec.json").read_text())
    assert spec["protocol"] == "openai-completions" and spec["concurrency"] == 3  # default: all at once
    recs = pq.read_table(archive / "records" / "part-000000.parquet").to_pylist()
    assert len(recs) == 3 and all(r["error"] is None and r["completion_tokens"] == 4 for r in recs)
    assert " p90 " in out  # the default percentiles 50,90,99


@pytest.mark.parametrize(("args", "needle"), [
    (("--percentiles", "50,abc"), "--percentiles '50,abc': 'abc' is not a number"),
    (("--percentiles", "0,50"), "--percentiles '0,50': 0 is outside (0, 100]"),
    (("--url", "localhost:30000"), "--url 'localhost:30000'"),
    (("--num-prompts", "0"), "--num-prompts 0"),
    (("--max-concurrency", "0"), "--max-concurrency 0"),
])
def test_bad_flags_are_refused_by_name_before_any_request(tmp_path: Path, args: tuple[str, ...], needle: str) -> None:
    ws = tmp_path / "ws"
    code, out, err = run_cli("bench", "--url", "http://127.0.0.1:9", *args, "-w", str(ws))
    assert code == 2, out + err
    assert needle in err
    assert not (ws / "archives").exists()


def test_bad_backend_is_a_usage_error(tmp_path: Path) -> None:
    from typer.testing import CliRunner

    from harness.cli import _register, app

    _register()
    result = CliRunner().invoke(app, ["bench", "--backend", "tgi", "-w", str(tmp_path)])
    assert result.exit_code == 2
    assert "--backend" in result.output and "'tgi' is not one of auto, sglang, openai" in result.output
