"""``dsv4h bench`` end to end against a running simulator (a child process on port 0): the prompts
frozen in the archive, protocol class quick-bench, every request completed, the chosen percentiles
printed; the simulator known as such over the OpenAI path too (its /server_info), a plain OpenAI server
(no /server_info) measured; and its flags refused with errors that name them."""

from __future__ import annotations

import asyncio
import json
import re
import threading
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path

import aiohttp
import pyarrow.parquet as pq
import pytest
from aiohttp import web
from sim_helpers import spawned
from testkit import only_archive, ran, run_cli

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
    assert ran(code, out, err), out + err
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
    assert ran(code, out, err), out + err
    archive = only_archive(ws)
    spec = json.loads((archive / "spec.json").read_text())
    assert spec["protocol"] == "openai-completions" and spec["concurrency"] == 3  # default: all at once
    recs = pq.read_table(archive / "records" / "part-000000.parquet").to_pylist()
    assert len(recs) == 3 and all(r["error"] is None and r["completion_tokens"] == 4 for r in recs)
    assert " p90 " in out  # the default percentiles 50,90,99
    # the simulator also answers /server_info: read first on the OpenAI path too, so the data is simulated
    (svc,) = json.loads((archive / "service.json").read_text())["services"]
    assert svc["server_info"]["_source"] == "/server_info" and "dsv4h_simulator" in svc["server_info"]
    assert "SIMULATED" in out and "only /v1/models" not in out
    runs = read_table(ws, "runs")
    assert runs is not None and runs.column("data_origin").to_pylist() == ["simulated"]
    findings = read_table(ws, "findings")
    assert findings is None or not any("only /v1/models" in str(m) for m in findings.column("message").to_pylist())


@contextmanager
def openai_only(upstream: str) -> Iterator[str]:
    """A plain OpenAI-compatible server on 127.0.0.1:0 (no ``/server_info``): ``/v1/models`` and
    ``/v1/completions`` passed through to ``upstream``, every other path 404. Yields its URL."""
    ready = threading.Event()
    stop: list[Callable[[], object]] = []
    url: list[str] = []

    async def forward(request: web.Request) -> web.StreamResponse:
        async with aiohttp.ClientSession() as client, client.request(
                request.method, upstream + request.path, data=await request.read(),
                headers={"Content-Type": request.headers.get("Content-Type", "application/json")}) as up:
            resp = web.StreamResponse(status=up.status, headers={"Content-Type": up.headers["Content-Type"]})
            await resp.prepare(request)
            async for chunk in up.content.iter_any():
                await resp.write(chunk)
            await resp.write_eof()
            return resp

    async def main() -> None:
        app = web.Application()
        app.router.add_get("/v1/models", forward)
        app.router.add_post("/v1/completions", forward)
        runner = web.AppRunner(app, handle_signals=False, shutdown_timeout=0.5)
        await runner.setup()
        site = web.TCPSite(runner, "127.0.0.1", 0)
        await site.start()
        port = runner.addresses[0][1]
        url.append(f"http://127.0.0.1:{port}")
        done = asyncio.Event()
        loop = asyncio.get_running_loop()
        stop.append(lambda: loop.call_soon_threadsafe(done.set))
        ready.set()
        await done.wait()
        await runner.cleanup()

    thread = threading.Thread(target=asyncio.run, args=(main(),), daemon=True)
    thread.start()
    assert ready.wait(10), "the OpenAI-only server did not start"
    try:
        yield url[0]
    finally:
        stop[0]()
        thread.join(10)


def test_bench_of_a_plain_openai_server_is_measured(tmp_path: Path, sim_url: str) -> None:
    ws = tmp_path / "ws"
    with openai_only(sim_url) as url:
        code, out, err = run_cli("bench", "--url", url, "--backend", "openai", "--num-prompts", "2",
                                 "--random-input-len", "8", "--random-output-len", "4", "-w", str(ws))
    assert ran(code, out, err), out + err
    archive = only_archive(ws)
    (svc,) = json.loads((archive / "service.json").read_text())["services"]
    assert svc["server_info"]["_source"] == "/v1/models" and svc["server_info"]["models"]["data"]
    recs = pq.read_table(archive / "records" / "part-000000.parquet").to_pylist()
    assert len(recs) == 2 and all(r["error"] is None and r["completion_tokens"] == 4 for r in recs)
    assert "SIMULATED" not in out and "only /v1/models" in out  # nothing else to verify it by
    runs = read_table(ws, "runs")
    assert runs is not None and runs.column("data_origin").to_pylist() == ["measured"]
    assert "simulated" not in json.loads((archive / "manifest.json").read_text())["run"]["labels"]


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


def _generated_tokens(url: str) -> float:
    import urllib.request

    with urllib.request.urlopen(url + "/metrics", timeout=10) as resp:
        text = resp.read().decode()
    m = re.search(r"^sglang:generation_tokens_total\{[^}]*\} (\S+)$", text, re.M)
    assert m is not None, text
    return float(m.group(1))


def test_ctrl_c_keeps_the_finished_requests_in_a_partial_archive(tmp_path: Path, sim_url: str) -> None:
    import os
    import signal
    import subprocess
    import sys
    import time

    ws = tmp_path / "ws"
    before = _generated_tokens(sim_url)
    env = dict(os.environ, PYTHONUNBUFFERED="1")
    proc = subprocess.Popen([sys.executable, "-c", "from harness.cli import main; main()", "bench", "--url", sim_url,
                             "--num-prompts", "400", "--max-concurrency", "2", "--random-input-len", "16",
                             "--random-output-len", "64", "-w", str(ws)],
                            stdout=subprocess.PIPE, stderr=subprocess.STDOUT, env=env)
    deadline = time.monotonic() + 60
    # at least 6 x 64 tokens generated: with 2 in flight, at least 4 requests have finished
    while _generated_tokens(sim_url) - before < 6 * 64 and time.monotonic() < deadline:
        time.sleep(0.1)
    proc.send_signal(signal.SIGINT)
    out, _ = proc.communicate(timeout=60)
    text = out.decode()
    assert proc.returncode == 130, text
    assert "Traceback" not in text and "KeyboardInterrupt" not in text, text
    (line,) = [x for x in text.splitlines() if x.startswith("error: ")]
    m = re.fullmatch(r"error: interrupted \(SIGINT\); (\d+) of 400 requests had finished: they are kept in the "
                     r"partial archive \(the rest were cancelled or never sent\)", line)
    assert m is not None, line
    n = int(m.group(1))
    assert 4 <= n < 400
    archive = only_archive(ws)
    assert verify_archive(archive) == []
    manifest = json.loads((archive / "manifest.json").read_text())
    assert manifest["status"] == "partial"
    recs = pq.read_table(archive / "records" / "part-000000.parquet").to_pylist()
    assert len(recs) == n and all(r["error"] is None and r["completion_tokens"] == 64 for r in recs)
    assert json.loads((archive / "quick.json").read_text())["throughput"]["completed"] == n
    requests = read_table(ws, "requests")
    runs = read_table(ws, "runs")
    assert requests is not None and requests.num_rows == n
    assert runs is not None and runs.to_pylist()[0]["archive_status"] == "partial"
