"""The response's own id is checked in the decoders, so both transports fail the same requests
(issue 23): SGLang's ``meta_info.id`` must be the rid the request sent; an OpenAI-style stream keeps
its first chunk's id."""

from __future__ import annotations

import json
from collections.abc import Callable
from typing import Any

import pytest
from load_helpers import sg_stream

from harness.load.client import expect_response, sglang_body
from harness.load.decode import DONE
from harness.load.openai import OpenAIDecoder
from harness.load.sglang import SGLangDecoder
from harness.load.vllm import VLLMDecoder


def sg_decode(payloads: list[bytes], body: bytes | None, *, fast: bool = True) -> str | None:
    d = SGLangDecoder(fast=fast)
    if body is not None:
        expect_response(d, body)
    for k, p in enumerate(payloads):
        d.on_event(p, 1000 + k)
    return d.finish().error


@pytest.mark.parametrize("fast", [True, False])
def test_sglang_id_must_be_the_rid_sent(fast: bool) -> None:
    body = sglang_body([1, 2], 4, rid="req-7", cache_salt="s")
    assert sg_decode(sg_stream([5, 6, 7, 8], [2, 2], rid="req-7"), body, fast=fast) is None
    assert sg_decode(sg_stream([5, 6, 7, 8], [2, 2], rid="req-8"), body, fast=fast) == \
        'response id "req-8" does not match request rid "req-7"'
    # one foreign event in the middle of the stream is enough
    mixed = sg_stream([5, 6, 7, 8], [2, 2], rid="req-7")
    mixed[1] = sg_stream([5, 6, 7, 8], [2, 2], rid="other")[1]
    assert sg_decode(mixed, body, fast=fast) == 'response id "other" does not match request rid "req-7"'


def test_sglang_without_a_rid_sent_or_an_id_echoed_is_not_checked() -> None:
    no_rid = json.dumps({"input_ids": [1], "sampling_params": {}, "stream": True}).encode()
    assert sg_decode(sg_stream([5, 6], [1, 1], rid="whatever"), no_rid) is None
    assert sg_decode(sg_stream([5, 6], [1, 1], rid="whatever"), None) is None
    assert sg_decode(sg_stream([5, 6], [1, 1]), sglang_body([1], 2, rid="r")) is None  # no meta_info.id


def test_sglang_rid_is_read_as_json_with_spaces_and_escapes() -> None:
    body = b'{"input_ids": [1], "text": "\\"rid\\": \\"fake\\"", "rid" : "a\\"b"}'
    assert sg_decode(sg_stream([5], [1], rid='a"b'), body) is None
    assert sg_decode(sg_stream([5], [1], rid="fake"), body) == 'response id "fake" does not match request rid "a\\"b"'


def oa(cid: str | None, text: str, finish: str | None = None) -> bytes:
    obj: dict[str, Any] = {"choices": [{"index": 0, "text": text, "finish_reason": finish, "token_ids": [1]}]}
    if cid is not None:
        obj["id"] = cid
    return json.dumps(obj).encode()


@pytest.mark.parametrize("make", [lambda: OpenAIDecoder("openai-completions"), VLLMDecoder])
def test_openai_chunks_keep_the_first_chunks_id(make: Callable[[], OpenAIDecoder | VLLMDecoder]) -> None:
    def run(*payloads: bytes) -> str | None:
        d = make()
        for k, p in enumerate([*payloads, DONE]):
            d.on_event(p, k)
        error: str | None = d.finish().error
        return error

    assert run(oa("c1", "a"), oa("c1", "b", "length")) is None
    assert run(oa("", "a"), oa("", "b", "length")) is None  # TGI sends an empty id on every chunk
    assert run(oa("c1", "a"), oa(None, "b", "length")) is None  # a chunk without an id is not compared
    assert run(oa("c1", "a"), oa("c2", "b", "length")) == \
        'response id "c2" does not match the id "c1" of the stream\'s first chunk'
