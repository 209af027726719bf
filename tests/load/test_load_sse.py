"""SSE parser and stream decoders: known inputs, every split, malformed input, properties."""

from __future__ import annotations

import itertools
import json

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from load_helpers import sg_event, sg_stream, sse

from harness.load.decode import DecodedStream
from harness.load.sse import DONE, SGLangDecoder, SSEParser, VLLMDecoder


def feed_all(chunks: list[bytes]) -> list[bytes]:
    p = SSEParser()
    return [e for c in chunks for e in p.feed(c)]


def split_at(data: bytes, cuts: list[int]) -> list[bytes]:
    cuts = sorted(set(c for c in cuts if 0 < c < len(data)))
    bounds = [0, *cuts, len(data)]
    return [data[a:b] for a, b in itertools.pairwise(bounds)]


# ---------------------------------------------------------------- parser: known inputs

STREAM = b'data: {"a":1}\n\ndata: {"a":2}\n\n: keep-alive comment\n\ndata: [DONE]\n\n'
EXPECTED = [b'{"a":1}', b'{"a":2}', b"[DONE]"]


def test_whole_stream() -> None:
    assert feed_all([STREAM]) == EXPECTED


@pytest.mark.parametrize("cut", range(1, len(STREAM)))
def test_every_two_way_split(cut: int) -> None:
    assert feed_all([STREAM[:cut], STREAM[cut:]]) == EXPECTED


def test_byte_by_byte() -> None:
    assert feed_all([bytes([b]) for b in STREAM]) == EXPECTED


def test_crlf_and_bare_cr() -> None:
    crlf = STREAM.replace(b"\n", b"\r\n")
    assert feed_all([crlf]) == EXPECTED
    assert feed_all([bytes([b]) for b in crlf]) == EXPECTED
    assert feed_all([b"data: x\r\rdata: y\r\r", b"data: z\n\n"]) == [b"x", b"y", b"z"]


def test_multiline_data_fields_and_comments() -> None:
    body = b": hello\nevent: msg\nid: 7\ndata: line1\ndata:line2\ndata\nretry: 10\n\n"
    assert feed_all([body]) == [b"line1\nline2\n"]


def test_blocks_without_data_and_extra_blank_lines() -> None:
    assert feed_all([b"\n\n\n: c\n\nevent: x\n\n\ndata: a\n\n\n\n"]) == [b"a"]


def test_single_event_fast_path_edges() -> None:
    assert feed_all([b"data: ab\nd", b"ata: c\n\n"]) == [b"ab\nc"]
    assert feed_all([b"data: ab\n\n"]) == [b"ab"]
    assert feed_all([b"data: a\rdata: b\n\n"]) == [b"a\nb"]
    assert feed_all([b"data: a", b"b\n\n"]) == [b"ab"]


def test_unterminated_tail_is_held() -> None:
    p = SSEParser()
    assert p.feed(b"data: a\n\ndata: b") == [b"a"]
    assert p.feed(b"\n") == []
    assert p.feed(b"\n") == [b"b"]


# ---------------------------------------------------------------- parser: property

line_text = st.binary(max_size=20).filter(lambda b: b"\n" not in b and b"\r" not in b)
events = st.lists(st.lists(line_text, min_size=1, max_size=3), max_size=8)


@st.composite
def encoded_stream(draw: st.DrawFn) -> tuple[bytes, list[bytes]]:
    evs = draw(events)
    out = b""
    for lines in evs:
        eol = draw(st.sampled_from([b"\n", b"\r\n"]))
        if draw(st.booleans()):
            out += b": comment" + eol
        for ln in lines:
            sep = b" " if ln[:1] == b" " else draw(st.sampled_from([b" ", b""]))
            out += b"data:" + sep + ln + eol
        if draw(st.booleans()):
            out += b"id: 3" + eol
        out += eol
    expected = [b"\n".join(lines) for lines in evs]
    return out, expected


@given(encoded_stream(), st.lists(st.integers(0, 2000), max_size=30))
@settings(max_examples=300, deadline=None)
def test_any_split_yields_the_same_events(stream: tuple[bytes, list[bytes]], cuts: list[int]) -> None:
    data, expected = stream
    assert feed_all([data]) == expected
    assert feed_all(split_at(data, cuts)) == expected


# ---------------------------------------------------------------- SGLang decoder


def decode_sg(payloads: list[bytes], t0: int = 1000) -> DecodedStream:
    d = SGLangDecoder()
    for k, p in enumerate(payloads):
        d.on_event(p, t0 + k)
    return d.finish()


TOKENS = [11, 12, 13, 14, 15, 16, 17]


@pytest.mark.parametrize("mode", ["cumulative", "delta"])
def test_sglang_modes(mode: str) -> None:
    out = decode_sg(sg_stream(TOKENS, [1, 2, 0, 3, 1], mode=mode, emit_ns=5))
    assert out.error is None
    assert out.output_ids == TOKENS
    assert out.output_mode == mode
    assert out.event_tokens == [1, 3, 3, 6, 7]
    assert out.event_ns == [1000, 1001, 1002, 1003, 1004]
    assert out.emit_ns == [5] * 5
    assert out.done_ns == 1005
    assert (out.completion_tokens, out.prompt_tokens, out.cached_tokens) == (7, 4, 0)
    assert out.finish_reason == "length"
    assert out.n_events == 5


def test_sglang_single_event_stream_is_cumulative() -> None:
    out = decode_sg(sg_stream(TOKENS, [7]))
    assert (out.output_ids, out.output_mode, out.error) == (TOKENS, "cumulative", None)


def test_sglang_no_text_unknown_keys_and_no_emit() -> None:
    payloads = sg_stream(TOKENS, [3, 4], text=False, extra={"new_key": {"completion_tokens": 99}})
    out = decode_sg(payloads)
    assert out.error is None
    assert out.output_ids == TOKENS
    assert out.emit_ns == []
    assert out.event_tokens == [3, 7]


def test_sglang_emit_dropped_when_some_events_lack_it() -> None:
    payloads = [sg_event([1], 1, emit_ns=9), sg_event([1, 2], 2), DONE]
    assert decode_sg(payloads).emit_ns == []


def test_sglang_pretty_json_takes_slow_path() -> None:
    payloads = [json.dumps(json.loads(p), indent=1).encode() for p in sg_stream(TOKENS, [2, 5])[:-1]]
    out = decode_sg([*payloads, DONE])
    assert out.error is None
    assert out.event_tokens == [2, 7]
    assert out.output_ids == TOKENS


def test_sglang_no_output_ids_is_mode_none() -> None:
    payloads = [b'{"text":"a","meta_info":{"completion_tokens":1}}', b'{"meta_info":{"completion_tokens":2}}']
    out = decode_sg([*payloads, DONE])
    assert (out.output_mode, out.output_ids, out.error, out.event_tokens) == ("none", [], None, [1, 2])


def test_sglang_error_event() -> None:
    out = decode_sg([sg_event([1], 1), b'{"error": {"message": "out of memory"}}', DONE])
    assert out.error == "error event: out of memory"
    assert out.event_tokens == [1]
    assert out.done_ns is not None


@pytest.mark.parametrize(
    "bad",
    [b"not json", b'{"meta_info":{"completion_tokens":2', b"[1,2]", b'{"meta_info":{"completion_tokens":x}}'],
)
def test_sglang_malformed_event(bad: bytes) -> None:
    out = decode_sg([sg_event([1], 1), bad, DONE])
    assert out.error is not None
    assert out.error.startswith("malformed event: ")
    assert out.event_tokens == [1]


def test_sglang_malformed_last_event_detected_by_finish() -> None:
    # Shape looks fine, count readable, but the JSON is broken inside: caught by the final parse.
    out = decode_sg([b'{"output_ids":[1],"meta_info":{"completion_tokens":1,}}', DONE])
    assert out.error is not None
    assert out.error.startswith("malformed event: ")


def test_sglang_abort_is_an_error() -> None:
    abort = {"type": "abort", "message": "client gone"}
    out = decode_sg([sg_event([1], 1), sg_event([1], 1, finish=abort), DONE])
    assert out.finish_reason == "abort"
    assert out.error == "aborted: client gone"


def test_sglang_inconsistent_ids() -> None:
    out = decode_sg([sg_event([1], 1), sg_event([1, 2, 3, 4], 2), DONE])
    assert out.error is not None
    assert out.error.startswith("inconsistent output_ids")


def test_sglang_count_going_down_is_malformed() -> None:
    out = decode_sg([sg_event([1, 2], 2), sg_event([1], 1), DONE])
    assert out.error is not None
    assert "went from 2 to 1" in out.error


def test_sglang_events_after_done_ignored_and_empty_payload_skipped() -> None:
    out = decode_sg([b"", sg_event([1], 1), DONE, sg_event([1, 2], 2)])
    assert out.event_tokens == [1]
    assert out.n_events == 1


def test_sglang_event_without_count_is_tolerated() -> None:
    out = decode_sg([b'{"meta_info":{"id":"x"}}', sg_event([1], 1), DONE])
    assert out.error is None
    assert out.event_tokens == [1]
    assert out.n_events == 2


def test_sglang_nothing_received() -> None:
    out = decode_sg([])
    assert out.error is None
    assert out.completion_tokens is None
    assert out.done_ns is None


@given(
    st.lists(st.integers(0, 200_000), max_size=60),
    st.lists(st.integers(0, 5), min_size=1, max_size=40),
)
@settings(max_examples=300, deadline=None)
def test_cumulative_and_delta_agree(tokens: list[int], sizes: list[int]) -> None:
    groups: list[int] = []
    left = len(tokens)
    for s in sizes:
        g = min(s, left)
        groups.append(g)
        left -= g
    groups.append(left)
    cum = decode_sg(sg_stream(tokens, groups, mode="cumulative"))
    delta = decode_sg(sg_stream(tokens, groups, mode="delta"))
    assert cum.error is None
    assert delta.error is None
    assert cum.output_ids == delta.output_ids == tokens
    assert cum.event_tokens == delta.event_tokens
    assert cum.completion_tokens == delta.completion_tokens == len(tokens)


# ---------------------------------------------------------------- vLLM decoder


def v_chunk(ids: list[int], *, prompt_ids: list[int] | None = None, finish: str | None = None) -> bytes:
    choice: dict[str, object] = {"index": 0, "text": "", "finish_reason": finish, "token_ids": ids}
    if prompt_ids is not None:
        choice["prompt_token_ids"] = prompt_ids
    return json.dumps({"id": "cmpl-1", "object": "text_completion", "choices": [choice], "usage": None}).encode()


def v_usage(ct: int, pt: int, cached: int | None = None) -> bytes:
    usage: dict[str, object] = {"prompt_tokens": pt, "completion_tokens": ct, "total_tokens": pt + ct}
    if cached is not None:
        usage["prompt_tokens_details"] = {"cached_tokens": cached}
    return json.dumps({"id": "cmpl-1", "choices": [], "usage": usage}).encode()


def decode_v(payloads: list[bytes]) -> DecodedStream:
    d = VLLMDecoder()
    for k, p in enumerate(payloads):
        d.on_event(p, 10 + k)
    return d.finish()


def test_vllm_stream() -> None:
    payloads = [
        v_chunk([5], prompt_ids=[1, 2, 3]),
        v_chunk([6, 7]),
        v_chunk([], finish="length"),
        v_usage(3, 3, cached=2),
        DONE,
    ]
    out = decode_v(payloads)
    assert out.error is None
    assert out.output_ids == [5, 6, 7]
    assert out.output_mode == "delta"
    assert out.event_tokens == [1, 3, 3]
    assert out.event_ns == [10, 11, 12]
    assert (out.prompt_tokens, out.cached_tokens, out.completion_tokens) == (3, 2, 3)
    assert out.finish_reason == "length"
    assert out.done_ns == 14


def test_vllm_without_usage_details() -> None:
    out = decode_v([v_chunk([5], prompt_ids=[1, 2]), v_usage(1, 2), DONE])
    assert (out.prompt_tokens, out.cached_tokens, out.completion_tokens, out.error) == (2, None, 1, None)


def test_vllm_usage_mismatch() -> None:
    out = decode_v([v_chunk([5]), v_usage(4, 2), DONE])
    assert out.error is not None
    assert out.error.startswith("inconsistent token_ids")


@pytest.mark.parametrize(
    "err",
    [
        b'{"error": {"object": "error", "message": "bad prompt", "code": 400}}',
        b'{"object": "error", "message": "bad prompt", "code": 400}',
    ],
)
def test_vllm_error_event(err: bytes) -> None:
    out = decode_v([v_chunk([5]), err, DONE])
    assert out.error == "error event: bad prompt"


def test_vllm_malformed_and_missing_token_ids() -> None:
    assert (decode_v([b"{oops", DONE]).error or "").startswith("malformed event: ")
    no_ids = json.dumps({"choices": [{"index": 0, "text": "hi", "finish_reason": None}]}).encode()
    assert "no token_ids" in (decode_v([no_ids, DONE]).error or "")


def test_vllm_abort() -> None:
    assert decode_v([v_chunk([5], finish="abort"), DONE]).error == "aborted: no message"


def test_sse_then_decode_roundtrip() -> None:
    body = sse(sg_stream(TOKENS, [2, 2, 3]))
    d = SGLangDecoder()
    parser = SSEParser()
    for k, c in enumerate(split_at(body, list(range(7, len(body), 13)))):
        for p in parser.feed(c):
            d.on_event(p, k)
    out = d.finish()
    assert out.output_ids == TOKENS
    assert out.done_ns is not None
