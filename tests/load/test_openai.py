"""Generic OpenAI-compatible streams: bodies, and every token-count method with literal answers."""

from __future__ import annotations

import json
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from load_helpers import each_transport  # noqa: F401 - the fixture, used by pytestmark

from harness.load.openai import EXACT_COUNT_METHODS, OpenAIDecoder, count_exactness, openai_body

pytestmark = pytest.mark.usefixtures("each_transport")


def chunk(text: str | None = None, *, chat: bool = False, usage: dict[str, Any] | None = None,
          ids: list[int] | None = None, finish: str | None = None, choices: bool = True) -> bytes:
    c: dict[str, Any] = {"index": 0, "finish_reason": finish}
    if chat:
        c["delta"] = {} if text is None else {"content": text}
    else:
        c["text"] = text if text is not None else ""
    if ids is not None:
        c["token_ids"] = ids
    obj: dict[str, Any] = {"id": "x", "choices": [c] if choices else []}
    if usage is not None:
        obj["usage"] = usage
    return json.dumps(obj).encode()


def decode(payloads: list[bytes], kind: str = "openai-completions", **kw: Any) -> Any:
    d = OpenAIDecoder(kind, **kw)  # type: ignore[arg-type]
    for k, p in enumerate(payloads):
        d.on_event(p, 100 + 10 * k)
    d.on_event(b"[DONE]", 999)
    return d.finish()


def test_usage_on_every_chunk_is_exact_and_multi_token() -> None:
    out = decode([chunk("a", usage={"completion_tokens": 1, "prompt_tokens": 7}),
                  chunk("bc", usage={"completion_tokens": 3, "prompt_tokens": 7}),
                  chunk(None, usage={"completion_tokens": 3, "prompt_tokens": 7}, finish="stop"),
                  chunk(choices=False, usage={"completion_tokens": 3, "prompt_tokens": 7,
                                              "prompt_tokens_details": {"cached_tokens": 0}})])
    assert out.count_method == "usage-per-chunk" and out.error is None
    assert out.event_ns == [100, 110] and out.event_tokens == [1, 3]
    assert (out.completion_tokens, out.prompt_tokens, out.cached_tokens) == (3, 7, 0)
    assert out.finish_reason == "stop" and out.final_text == "abc" and out.done_ns == 999


def test_token_ids_per_chunk_are_exact() -> None:
    out = decode([chunk("a", ids=[5]), chunk("", ids=[6, 7]), chunk(choices=False, usage={"completion_tokens": 3})])
    assert out.count_method == "token-ids" and out.event_tokens == [1, 3] and out.output_ids == [5, 6, 7]


def test_chunks_reconciled_with_final_usage() -> None:
    out = decode([chunk("x"), chunk("y"), chunk("z", finish="length"),
                  chunk(choices=False, usage={"completion_tokens": 3, "prompt_tokens": 4})])
    assert out.count_method == "chunks-reconciled" and out.event_tokens == [1, 2, 3]
    assert out.completion_tokens == 3 and out.error is None


def test_chunk_count_disagreeing_with_usage_is_kept_and_visible() -> None:
    out = decode([chunk("x"), chunk("y"), chunk(choices=False, usage={"completion_tokens": 5})])
    assert out.count_method == "chunks" and out.event_tokens == [1, 2]
    assert out.completion_tokens == 5  # the server's total, so the mismatch stays visible


def test_retokenized_counts_cumulative_text() -> None:
    # a word split over two chunks is counted once: tokens = words of the text so far
    def words(text: str) -> int:
        return len(text.split())

    out = decode([chunk("hel", chat=True), chunk("lo wor", chat=True), chunk("ld ok", chat=True)],
                 kind="openai-chat", tokenize=words)
    assert out.count_method == "retokenized"
    assert out.event_ns == [100, 110, 120] and out.event_tokens == [1, 2, 3]


def test_role_only_and_empty_chunks_carry_no_token() -> None:
    out = decode([json.dumps({"choices": [{"index": 0, "delta": {"role": "assistant"}}]}).encode(),
                  chunk("hi", chat=True), chunk("", chat=True, finish="stop")], kind="openai-chat")
    assert out.event_tokens == [1] and out.finish_reason == "stop"


def test_pinned_method_that_the_stream_cannot_support_fails_clearly() -> None:
    out = decode([chunk("x")], force="usage-per-chunk")
    assert out.error is not None and "usage-per-chunk is not supported" in out.error


def test_exact_method_contradicting_usage_is_an_error() -> None:
    out = decode([chunk("a", ids=[1]), chunk(choices=False, usage={"completion_tokens": 2})])
    assert out.error == "inconsistent counts: 1 streamed (token-ids), usage says 2"


def test_error_event_and_malformed_event() -> None:
    assert decode([b'{"error": {"message": "boom"}}']).error == "error event: boom"
    assert decode([b"not json"]).error is not None


def test_exactness_classes() -> None:
    assert {"server-cumulative", "usage-per-chunk", "token-ids"} == EXACT_COUNT_METHODS
    assert [count_exactness(m) for m in ("token-ids", "chunks-reconciled", "retokenized", "unknown")] == [
        "exact", "approximate", "approximate", "unknown"]


def test_bodies() -> None:
    b = json.loads(openai_body("openai-completions", "m", [1, 2], 16, ignore_eos=True, cache_salt="s",
                               token_ids=True))
    assert b == {"model": "m", "max_tokens": 16, "temperature": 0, "stream": True, "prompt": [1, 2],
                 "stream_options": {"include_usage": True, "continuous_usage_stats": True},
                 "return_token_ids": True, "ignore_eos": True, "cache_salt": "s"}
    c = json.loads(openai_body("openai-chat", "m", "hello", 8, continuous_usage=False))
    assert c["messages"] == [{"role": "user", "content": "hello"}]
    assert "ignore_eos" not in c and "cache_salt" not in c and "return_token_ids" not in c
    with pytest.raises(ValueError, match="text prompt"):
        openai_body("openai-chat", "m", [1], 8)


@settings(max_examples=150, deadline=None)
@given(st.lists(st.integers(1, 4), min_size=1, max_size=30))
def test_usage_counts_are_taken_as_the_server_gives_them(steps: list[int]) -> None:
    total, payloads = 0, []
    for s in steps:
        total += s
        payloads.append(chunk("t" * s, usage={"completion_tokens": total}))
    out = decode(payloads)
    assert out.count_method == "usage-per-chunk"
    assert out.event_tokens[-1] == total and out.event_tokens == sorted(set(out.event_tokens))


def test_eos_on_an_empty_finish_chunk_reconciles() -> None:
    out = decode([chunk("a"), chunk("b"), chunk("", finish="stop"),
                  chunk(choices=False, usage={"completion_tokens": 3})])
    assert out.count_method == "chunks-reconciled"
    assert out.event_ns == [100, 110, 120] and out.event_tokens == [1, 2, 3]


def test_transformers_serve_shape_final_usage_on_the_finish_chunk() -> None:
    # seen on the H200 (transformers 5.17 serve --continuous-batching): text-only chunks, then a finish
    # chunk with empty text that carries the usage; stream_options is ignored
    tokens = [chunk(t) for t in ("ho", "ho", "[(", " internal")]
    fin = chunk("", finish="length", usage={"completion_tokens": 4, "prompt_tokens": 7, "total_tokens": 11})
    out = decode([*tokens, fin])
    assert out.count_method == "chunks-reconciled" and out.event_tokens == [1, 2, 3, 4]
    assert (out.completion_tokens, out.prompt_tokens, out.finish_reason) == (4, 7, "length")


def test_body_end_after_finish_is_a_complete_answer_without_done() -> None:
    d = OpenAIDecoder("openai-completions")
    for k, p in enumerate([chunk("a"), chunk("", finish="length", usage={"completion_tokens": 1})]):
        d.on_event(p, 10 + k)
    d.on_body_end(50)
    assert d.done_ns == 50 and d.finish().error is None
    cut = OpenAIDecoder("openai-completions")
    cut.on_event(chunk("a"), 10)
    cut.on_body_end(50)  # no finish reason: the stream was cut, not finished
    assert cut.done_ns is None


def test_client_accepts_a_server_that_closes_after_the_finish_chunk() -> None:
    from aiohttp import web
    from load_helpers import serve

    from harness.load import LoadClient, WaveRequest, run_sync, run_wave
    from harness.load.driver import OpenAIOptions

    body = b"".join(b"data: " + p + b"\n\n" for p in [
        chunk("x"), chunk("y"), chunk("", finish="length", usage={"completion_tokens": 2, "prompt_tokens": 3})])

    async def handler(request: web.Request) -> web.StreamResponse:
        return web.Response(body=body, content_type="text/event-stream")  # no [DONE], then EOF

    with serve(handler, "/v1/completions") as srv:
        async def go() -> list[Any]:
            async with LoadClient(srv.url, protocol="openai-completions", concurrency=1, model="m",
                                  openai=OpenAIOptions()) as c:
                return await run_wave(c, [WaveRequest(input_ids=[1, 2, 3], max_new_tokens=2, rid="r")])

        (rec,) = run_sync(go())
    assert rec.error is None and rec.count_method == "chunks-reconciled"
    assert list(rec.event_tokens) == [1, 2] and rec.completion_tokens == 2


def test_usage_disagreeing_with_chunks_is_kept_not_retokenized() -> None:
    # seen on the H200: a few answers streamed more text chunks than tokens; the server's total wins
    out = decode([chunk("a"), chunk("b"), chunk("c"), chunk("", finish="length", usage={"completion_tokens": 2})],
                 tokenize=len)
    assert out.count_method == "chunks" and out.event_tokens == [1, 2, 3] and out.completion_tokens == 2
