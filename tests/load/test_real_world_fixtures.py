"""Real outputs posted in public threads and docs (tests/fixtures/real-world/README.md cites each
source): every parser either reads them or refuses with a clear error."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from harness.errors import DsvError
from harness.load.openai import OpenAIDecoder
from harness.load.prom import parse_gauges
from harness.load.sse import SGLangDecoder, SSEParser
from harness.service.devices.gpu import parse_amd_process_json
from harness.service.identity.identity import service_fingerprint

ROOT = Path(__file__).resolve().parents[1] / "fixtures" / "real-world"
INDEX: list[dict[str, Any]] = json.loads((ROOT / "index.json").read_text())


def by_kind(*kinds: str) -> list[dict[str, Any]]:
    return [e for e in INDEX if e["kind"] in kinds]


def payloads(path: Path) -> list[bytes]:
    parser = SSEParser()
    out = list(parser.feed(path.read_bytes()))
    return out + list(parser.feed(b"\n\n"))  # a capture may end without its last blank line


def test_every_fixture_is_indexed_with_a_source() -> None:
    files = {p.relative_to(ROOT).as_posix() for p in ROOT.rglob("*") if p.is_file()} - {"README.md", "index.json"}
    assert files == {e["file"] for e in INDEX}
    readme = (ROOT / "README.md").read_text()
    for e in INDEX:
        assert e["source"] and Path(e["file"]).name in readme


@pytest.mark.parametrize("entry", by_kind("openai-completions-stream", "openai-chat-stream"), ids=lambda e: e["file"])
def test_openai_streams_decode(entry: dict[str, Any]) -> None:
    kind = "openai-chat" if entry["kind"] == "openai-chat-stream" else "openai-completions"
    d = OpenAIDecoder(kind)  # type: ignore[arg-type]
    events = payloads(ROOT / entry["file"])
    assert events, "no SSE events parsed"
    for k, p in enumerate(events):
        d.on_event(p, 1000 + k)
    out = d.finish()
    assert out.error is None, out.error
    assert out.event_tokens, "no output token counted"
    assert out.event_tokens == sorted(out.event_tokens) and len(set(out.event_tokens)) == len(out.event_tokens)
    assert out.count_method in ("usage-per-chunk", "token-ids", "chunks-reconciled", "chunks")


@pytest.mark.parametrize("entry", by_kind("sglang-generate-stream"), ids=lambda e: e["file"])
def test_sglang_native_streams_decode(entry: dict[str, Any]) -> None:
    d = SGLangDecoder()
    for k, p in enumerate(payloads(ROOT / entry["file"])):
        d.on_event(p, 1000 + k)
    out = d.finish()
    # an old server (2024-02) sends cumulative counts and text, no finish_reason, no output ids
    assert out.event_tokens and out.count_method == "server-cumulative"
    assert out.prompt_tokens is not None and out.prompt_tokens > 0


@pytest.mark.parametrize("entry", by_kind("sglang-server-info"), ids=lambda e: e["file"])
def test_sglang_server_info_fingerprints(entry: dict[str, Any]) -> None:
    info = json.loads((ROOT / entry["file"]).read_text())
    fp = service_fingerprint({"backend": "sglang", "server_info": info | {"_source": "/get_server_info"}})
    assert fp, "empty fingerprint"
    for key in ("tp_size", "model_path", "chunked_prefill_size"):
        assert key in json.dumps(fp), key


@pytest.mark.parametrize("entry", by_kind("vllm-metrics"), ids=lambda e: e["file"])
def test_vllm_metrics_parse(entry: dict[str, Any]) -> None:
    text = (ROOT / entry["file"]).read_text()
    g = parse_gauges(text)
    samples = [ln for ln in text.splitlines() if ln.startswith("vllm:num_requests_running")]
    if samples:
        assert g.running is not None
    else:
        assert g.running is None  # not exported in that capture (empty page, HELP/TYPE only)


@pytest.mark.parametrize("entry", by_kind("amd-smi-process"), ids=lambda e: e["file"])
def test_amd_smi_process_parses_or_refuses_clearly(entry: dict[str, Any]) -> None:
    text = (ROOT / entry["file"]).read_text()
    if not entry.get("parseable", True):
        with pytest.raises(DsvError) as ei:
            parse_amd_process_json(text)
        assert ei.value.message
        return
    procs = parse_amd_process_json(text)
    assert procs and all(p.pid > 0 for p in procs)
