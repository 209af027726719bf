"""A real engine with speculative decoding: vLLM's CPU build with n-gram speculation (k = 3) on the tiny
local Llama (docs/hosts.md#speculative-decoding-on-the-cpu-build). Acceptance measured per request
(``metrics.speculative_decoding`` on the final usage chunk) must equal acceptance from the
``vllm:spec_decode_*`` counter deltas on ``/metrics``, since this module's requests are the server's
only traffic. Parsing is plain code here on purpose (the client-side parser lives in harness/load).
Needs ``DSV4H_VLLM_PYTHON`` like tests/engine/test_vllm_cpu.py.
"""

from __future__ import annotations

import json
import os
import time
import urllib.request
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from harness.engines.tiny_model import VLLM_CPU_ENV, make_tiny_llama, vllm_cpu_args
from harness.inputs.spec import ServiceProfile
from harness.service.launch.manager import RunningService, start_service

PY = os.environ.get("DSV4H_VLLM_PYTHON")
K = 3
SPEC_ARGS = ["--speculative-config",
             json.dumps({"method": "ngram", "num_speculative_tokens": K, "prompt_lookup_max": 3,
                         "prompt_lookup_min": 1}),
             "--per-request-spec-decode-metrics", "summary"]
# Repetitive token-ID prompts; the tiny model's greedy output also cycles, so n-gram drafts get accepted.
PROMPTS = [[10, 11, 12, 13, 14, 15] * 12, [40, 41, 42, 43] * 16, [7, 8, 9] * 20]
MAX_TOKENS = 48
COUNTERS = ("vllm:spec_decode_num_drafts_total", "vllm:spec_decode_num_draft_tokens_total",
            "vllm:spec_decode_num_accepted_tokens_total")
PER_POS = "vllm:spec_decode_num_accepted_tokens_per_pos_total"

pytestmark = [pytest.mark.engine, pytest.mark.slow]

if not PY or not Path(PY).exists():
    if os.environ.get("CI"):
        pytest.fail("CI must provide the vLLM CPU engine: DSV4H_VLLM_PYTHON is unset or missing", pytrace=False)
    pytest.skip("vLLM CPU engine not installed here (set DSV4H_VLLM_PYTHON; .ci/run installs it)",
                allow_module_level=True)


@pytest.fixture(scope="module")
def vllm(tmp_path_factory: pytest.TempPathFactory) -> Iterator[RunningService]:
    model = make_tiny_llama(tmp_path_factory.mktemp("tiny-llama-ngram"))
    prof = ServiceProfile(name="vllm-ngram", backend="vllm",
                          identity={"model_path": str(model), "served_model_name": "tiny-llama"},
                          launch={"python": PY, "extra_args": [*vllm_cpu_args(), *SPEC_ARGS], "env": dict(VLLM_CPU_ENV),
                                  "startup_timeout_s": 300},
                          devices={"gpu_owners_source": "none", "check_gpu_owners": False})
    svc = start_service(prof, tmp_path_factory.mktemp("svc"))
    try:
        yield svc
    finally:
        svc.stop()


def counters(text: str) -> dict[str, float]:
    """Prometheus text -> {name or name{position}: value}, every other label set summed."""
    out: dict[str, float] = {}
    for line in text.splitlines():
        if line.startswith("#") or not line.startswith("vllm:spec_decode_"):
            continue
        head, value = line.rsplit(" ", 1)
        name, _, labels = head.partition("{")
        if name in COUNTERS:
            out[name] = out.get(name, 0.0) + float(value)
        elif name == PER_POS:
            pos = next(lab.split("=", 1)[1].strip('"') for lab in labels.rstrip("}").split(",")
                       if lab.startswith("position="))
            out[f"{PER_POS}{{{pos}}}"] = out.get(f"{PER_POS}{{{pos}}}", 0.0) + float(value)
    return out


def metrics(url: str) -> dict[str, float]:
    with urllib.request.urlopen(url + "/metrics", timeout=30) as r:
        return counters(r.read().decode())


def stream(url: str, prompt: list[int]) -> list[dict[str, Any]]:
    """One streamed greedy completion; returns the parsed ``data:`` events before ``[DONE]``."""
    body = {"model": "tiny-llama", "prompt": prompt, "max_tokens": MAX_TOKENS, "temperature": 0,
            "ignore_eos": True, "stream": True, "stream_options": {"include_usage": True}}
    req = urllib.request.Request(url + "/v1/completions", data=json.dumps(body).encode(),
                                 headers={"Content-Type": "application/json"})
    with urllib.request.urlopen(req, timeout=300) as r:
        lines = r.read().decode().splitlines()
    data = [ln[len("data: "):] for ln in lines if ln.startswith("data: ")]
    assert data[-1] == "[DONE]"
    return [json.loads(d) for d in data[:-1]]


def test_per_request_acceptance_equals_counter_deltas(vllm: RunningService) -> None:
    before = metrics(vllm.url)
    finals = []
    for prompt in PROMPTS:
        events = stream(vllm.url, prompt)
        final = events[-1]
        assert final["choices"] == [] and final["usage"]["completion_tokens"] == MAX_TOKENS
        assert all("metrics" not in e for e in events[:-1])  # only the final usage chunk carries them
        sd = final["metrics"]["speculative_decoding"]
        assert sd["num_spec_tokens"] == K and len(sd["acceptance_histogram"]) == K + 1
        assert sd["num_spec_steps"] == sum(sd["acceptance_histogram"])
        assert sd["num_accepted_draft_tokens"] == sum(j * n for j, n in enumerate(sd["acceptance_histogram"]))
        assert sd["num_accepted_draft_tokens"] <= sd["num_draft_tokens"] <= K * sd["num_spec_steps"]
        finals.append(sd)
    steps = sum(sd["num_spec_steps"] for sd in finals)
    proposed = sum(sd["num_draft_tokens"] for sd in finals)
    accepted = sum(sd["num_accepted_draft_tokens"] for sd in finals)
    assert accepted > 0 and steps > 0

    # The counters are updated from the engine's stats, which may land just after the last chunk.
    deadline = time.monotonic() + 30
    after = metrics(vllm.url)
    while after[COUNTERS[0]] - before[COUNTERS[0]] < steps and time.monotonic() < deadline:
        time.sleep(0.5)
        after = metrics(vllm.url)
    delta = {name: after[name] - before.get(name, 0.0) for name in after}
    assert (delta[COUNTERS[0]], delta[COUNTERS[1]], delta[COUNTERS[2]]) == (steps, proposed, accepted), delta
    per_pos = [delta[f"{PER_POS}{{{i}}}"] for i in range(K)]
    assert sum(per_pos) == accepted
    assert per_pos == sorted(per_pos, reverse=True)  # position i is accepted only after 0..i-1 were
    # Acceptance rate and tokens per step agree between the two sources, to the last bit.
    assert accepted / proposed == delta[COUNTERS[2]] / delta[COUNTERS[1]]
    assert 1 + accepted / steps == 1 + delta[COUNTERS[2]] / delta[COUNTERS[0]]
