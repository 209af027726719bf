"""A real engine measured only through its OpenAI API (no token ids): vLLM's CPU build on the tiny
local Llama, attached as a generic ``openai-completions`` server. Counting from usage on every chunk
(exact), then with neither usage per chunk nor token ids (re-tokenized with the model's tokenizer,
approximate). Needs ``DSV4H_VLLM_PYTHON`` like tests/engine/test_vllm_cpu.py."""

from __future__ import annotations

import json
import os
from collections.abc import Iterator
from pathlib import Path

import pytest

from harness.engines.tiny_model import VLLM_CPU_ENV, make_tiny_llama, vllm_cpu_args
from harness.inputs.spec import ServiceProfile
from harness.run.campaign import run_campaign
from harness.service.launch.manager import RunningService, start_service

REPO = Path(__file__).resolve().parents[2]
PY = os.environ.get("DSV4H_VLLM_PYTHON")

pytestmark = [pytest.mark.engine, pytest.mark.slow]

if not PY or not Path(PY).exists():
    if os.environ.get("CI"):
        pytest.fail("CI must provide the vLLM CPU engine: DSV4H_VLLM_PYTHON is unset or missing", pytrace=False)
    pytest.skip("vLLM CPU engine not installed here (set DSV4H_VLLM_PYTHON; .ci/run installs it)",
                allow_module_level=True)


@pytest.fixture(scope="module")
def vllm(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[RunningService, Path]]:
    model = make_tiny_llama(tmp_path_factory.mktemp("tiny-llama-openai"))
    prof = ServiceProfile(name="vllm-openai", backend="vllm",
                          identity={"model_path": str(model), "served_model_name": "tiny-llama"},
                          launch={"python": PY, "extra_args": vllm_cpu_args(), "env": dict(VLLM_CPU_ENV),
                                  "startup_timeout_s": 300},
                          devices={"gpu_owners_source": "none", "check_gpu_owners": False})
    svc = start_service(prof, tmp_path_factory.mktemp("svc"))
    try:
        yield svc, model
    finally:
        svc.stop()


def spec(tmp_path: Path, url: str, openai: dict[str, object], tokenizer: Path | None) -> Path:
    p = tmp_path / "openai.yaml"
    tok = f"\n  tokenizer: {tokenizer}" if tokenizer else ""
    p.write_text(f"""
name: vllm-openai-only
claim_class: native-ar
service:
  name: vllm-attached
  backend: attach
  url: {url}
  protocol: openai-completions
  served_model_name: tiny-llama
  check_gpu_owners: false
  gpu_owners_source: none
  openai: {json.dumps(openai)}{tok}
corpora: {{decode: {REPO / 'corpora' / 'tiny-code-128'}}}
decode: {{tiers: [1, 4], rounds: 3, min_resident_seconds: 0.2, warmup_waves: 1, max_new_tokens: 96,
         ignore_eos: true, max_waves_per_round: 150}}
""")
    return p


def test_openai_only_server_with_continuous_usage_is_exact(tmp_path: Path, vllm: tuple[RunningService, Path]) -> None:
    svc, _ = vllm
    out = run_campaign(spec(tmp_path, svc.url, {"continuous_usage_stats": True}, None), tmp_path / "ws")
    assert out.status == "complete", out.error
    recs = [r for r in out.archive.records() if r.phase == "measured"]
    assert recs and all(r.ok for r in recs)
    assert {r.count_method for r in recs} == {"usage-per-chunk"}
    assert all(int(r.event_tokens[-1]) == r.completion_tokens == 96 for r in recs)
    assert all(len(r.output_ids) == 0 for r in recs)  # no token ids were asked for or sent
    for cell in out.results.cells:
        assert cell.status == "complete" and cell.median_tok_s > 0


def test_openai_only_server_without_usage_is_retokenized(tmp_path: Path, vllm: tuple[RunningService, Path]) -> None:
    svc, model = vllm
    out = run_campaign(spec(tmp_path, svc.url, {"continuous_usage_stats": False, "count_method": "retokenized"},
                            model / "tokenizer.json"), tmp_path / "ws")
    assert out.status == "complete", out.error
    recs = [r for r in out.archive.records() if r.phase == "measured"]
    assert recs and {r.count_method for r in recs} == {"retokenized"}
    for r in recs:
        assert r.ok and r.completion_tokens == 96  # the server's final usage is kept beside the estimate
        assert list(r.event_tokens) == sorted(set(r.event_tokens.tolist()))
        assert int(r.event_tokens[-1]) > 0  # an estimate: re-tokenized text need not give back 96
