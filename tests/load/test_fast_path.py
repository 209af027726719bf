"""The streaming fast path agrees with a full parse (issue 13, point 5).

Hypothesis builds SGLang- and OpenAI-shaped events: nested objects, any key order, unknown keys,
error objects in any position and at any depth, names of interest as string values, whitespace
and indentation variants; streams mix counted events, events without a count and error events.
The SGLang decoder's fast path must give exactly what ``SGLangDecoder(fast=False)`` (every event
``json.loads``-ed) gives. Then every event stream is framed as SSE in every way the parser
promises to read (LF, CRLF, CR, comments, other fields, multi-line data, any chunking, a body
ended by close, with or without its last blank line) and must decode the same as the payloads
handed over directly.
"""

from __future__ import annotations

import itertools
import json
from dataclasses import asdict
from typing import Any

from hypothesis import given, settings
from hypothesis import strategies as st

from harness.load.decode import DONE, DecodedStream
from harness.load.sse import SGLangDecoder, SSEParser, VLLMDecoder

# ------------------------------------------------------------------------------ building events

NAMES = ["error", "meta_info", "output_ids", "completion_tokens", "sim_emit_ns", "text", "x", "usage", "choices",
         "token_ids"]
scalar = st.one_of(st.none(), st.booleans(), st.integers(-5, 10**12), st.floats(allow_nan=False, allow_infinity=False),
                   st.sampled_from(NAMES), st.text(max_size=8))
nested: st.SearchStrategy[Any] = st.recursive(
    scalar, lambda inner: st.one_of(st.lists(inner, max_size=3),
                                    st.dictionaries(st.sampled_from(NAMES), inner, max_size=3)), max_leaves=8)
error_obj = st.one_of(st.fixed_dictionaries({"message": st.text(max_size=10)}), st.text(max_size=10),
                      st.fixed_dictionaries({"code": st.integers(0, 600)}))


@st.composite
def shuffled(draw: st.DrawFn, d: dict[str, Any]) -> dict[str, Any]:
    """The same members in a drawn order (JSON objects keep insertion order when dumped)."""
    keys = draw(st.permutations(list(d)))
    return {k: d[k] for k in keys}


def dumps(draw: st.DrawFn, obj: Any) -> bytes:
    """JSON text with drawn separators, indentation and escaping (always valid JSON)."""
    style = draw(st.sampled_from(["compact", "spaced", "indent", "ascii"]))
    if style == "compact":
        return json.dumps(obj, separators=(",", ":"), ensure_ascii=False).encode()
    if style == "spaced":
        return json.dumps(obj, separators=(" , ", " : "), ensure_ascii=False).encode()
    if style == "indent":
        return json.dumps(obj, indent=draw(st.integers(0, 2))).encode()
    return json.dumps(obj).encode()


def sglang_meta(draw: st.DrawFn, kind: str, k: int, b: int, final: bool, emit: bool) -> dict[str, Any]:
    """One event's meta_info: a count (or a count that is not an integer, or none), maybe an emit
    time and unknown members, in a drawn order."""
    meta: dict[str, Any] = {"id": "r", "prompt_tokens": 4, "cached_tokens": 0,
                            "finish_reason": {"type": "length", "length": b} if final else None}
    counts: dict[str, Any] = {"normal": b, "string-count": str(b), "bool-count": True}
    if kind in counts:
        meta["completion_tokens"] = counts[kind]
    if emit and draw(st.integers(0, 9)) > 0:
        meta["sim_emit_ns"] = 1_000 + k
    if draw(st.booleans()):
        meta["unknown"] = draw(nested)
    return draw(shuffled(meta))


def sglang_event(draw: st.DrawFn, meta: dict[str, Any], ids: list[int] | None, b: int) -> bytes:
    """One SGLang event around ``meta``: text, ids, unknown members, maybe an error member or a
    nested decoy, in SGLang's order or any order, in a drawn JSON style."""
    ev: dict[str, Any] = {"text": "t" * b}
    if ids is not None:
        ev["output_ids"] = ids
    if draw(st.integers(0, 15)) == 0:
        ev["output_ids"] = draw(st.sampled_from([None, "ids", [1.5], [True], [[1]], {"a": 1}]))
    for _ in range(draw(st.integers(0, 2))):
        ev[draw(st.sampled_from(["x", "extra", "usage", "weights"]))] = draw(nested)
    if draw(st.integers(0, 11)) == 0:
        ev["error"] = draw(error_obj)  # an error member alongside a valid count
    if draw(st.integers(0, 11)) == 0:  # a second, nested meta_info / output_ids / error elsewhere
        ev["x"] = {draw(st.sampled_from(["meta_info", "output_ids", "error"])): draw(nested)}
    ev["meta_info"] = meta
    order = draw(st.integers(0, 5))
    if order == 0:
        ev = draw(shuffled(ev))
    else:  # SGLang's order (meta_info last), other members before the text or between ids and meta_info
        sg = [k2 for k2 in ["text", "output_ids"] if k2 in ev]
        rest = [k2 for k2 in ev if k2 not in ("text", "output_ids", "meta_info")]
        keys = (rest + sg if order < 4 else sg + rest) + ["meta_info"]
        ev = {k2: ev[k2] for k2 in keys}
    return dumps(draw, ev)


@st.composite
def sglang_stream(draw: st.DrawFn) -> list[bytes]:
    """Payloads of one SGLang stream (cumulative, delta, id-less or mixed), with variations."""
    mode = draw(st.sampled_from(["cumulative", "delta", "none", "mixed"]))
    tokens = draw(st.lists(st.integers(0, 150_000), max_size=12))
    cuts = sorted(draw(st.lists(st.integers(0, len(tokens)), max_size=6)))
    bounds = [0, *cuts, len(tokens)]
    emit = draw(st.booleans())
    out: list[bytes] = []
    for k, (a, b) in enumerate(itertools.pairwise(bounds)):
        kind = draw(st.sampled_from(["normal"] * 12 + ["uncounted", "error-only", "string-count", "bool-count"]))
        if kind == "error-only":
            out.append(dumps(draw, {"error": draw(error_obj)}))
            continue
        m = mode if mode != "mixed" else draw(st.sampled_from(["cumulative", "delta"]))
        ids = tokens[:b] if m == "cumulative" else tokens[a:b] if m == "delta" else None
        out.append(sglang_event(draw, sglang_meta(draw, kind, k, b, b == len(tokens), emit), ids, b))
    if draw(st.booleans()):
        out.append(DONE)
    return out


def decode(decoder: SGLangDecoder | VLLMDecoder, payloads: list[bytes]) -> DecodedStream:
    for k, p in enumerate(payloads):
        decoder.on_event(p, 10 + k)
    return decoder.finish()


@given(sglang_stream())
@settings(max_examples=400, deadline=None)
def test_sglang_fast_path_equals_full_parse(payloads: list[bytes]) -> None:
    fast = decode(SGLangDecoder(), payloads)
    full = decode(SGLangDecoder(fast=False), payloads)
    assert asdict(fast) == asdict(full)


def test_full_parse_reads_the_simple_shapes() -> None:
    ev1 = b'{"text":"a","output_ids":[5],"meta_info":{"completion_tokens":1,"sim_emit_ns":7}}'
    ev2 = b'{"text":"ab","output_ids":[5,6],"meta_info":{"completion_tokens":2,"sim_emit_ns":8}}'
    for fast in (True, False):
        out = decode(SGLangDecoder(fast=fast), [ev1, ev2, DONE])
        assert (out.event_tokens, out.output_ids, out.emit_ns, out.error) == ([1, 2], [5, 6], [7, 8], None)


def test_fast_path_defers_when_it_cannot_be_sure() -> None:
    """Each event here looks like an ordinary event to a byte scanner, but is not what it seems."""
    tricky = [
        # an error member after the meta segment's start is found; one before it too
        b'{"error":{"message":"boom"},"output_ids":[1],"meta_info":{"completion_tokens":1}}',
        # completion_tokens outside meta_info (top level) or deeper inside it: not a count
        b'{"completion_tokens":1,"meta_info":{"x":{"completion_tokens":1}}}',
        # meta_info nested in another member, the top-level one has no count
        b'{"meta_info":{"id":"a"},"x":{"meta_info":{"completion_tokens":1}}}',
        # output_ids nested elsewhere, not top-level
        b'{"x":{"output_ids":[1,2,3]},"meta_info":{"completion_tokens":1}}',
    ]
    for ev in tricky:
        assert asdict(decode(SGLangDecoder(), [ev, DONE])) == asdict(decode(SGLangDecoder(fast=False), [ev, DONE]))
    err = decode(SGLangDecoder(), [tricky[0], DONE])
    assert err.error == "error event: boom" and err.event_tokens == []
    nested_ids = decode(SGLangDecoder(), [tricky[3], DONE])
    assert nested_ids.output_mode == "none" and nested_ids.event_tokens == [1]


# ------------------------------------------------------------------------------ OpenAI shapes


@st.composite
def openai_stream(draw: st.DrawFn) -> list[bytes]:
    """Payloads of one vLLM /v1/completions stream with token ids, usage and variations."""
    tokens = draw(st.lists(st.integers(0, 150_000), max_size=10))
    cuts = sorted(draw(st.lists(st.integers(0, len(tokens)), max_size=5)))
    bounds = [0, *cuts, len(tokens)]
    out: list[bytes] = []
    for k, (a, b) in enumerate(itertools.pairwise(bounds)):
        choice: dict[str, Any] = {"index": 0, "text": "", "token_ids": tokens[a:b],
                                  "finish_reason": "length" if b == len(tokens) else None}
        if k == 0:
            choice["prompt_token_ids"] = [1, 2, 3]
        if draw(st.booleans()):
            choice["logprobs"] = draw(nested)
        ev: dict[str, Any] = {"id": "cmpl", "object": "text_completion", "choices": [draw(shuffled(choice))],
                              "usage": None}
        if draw(st.integers(0, 7)) == 0:
            ev["error"] = draw(error_obj)
        if draw(st.booleans()):
            ev["x"] = draw(nested)
        out.append(dumps(draw, draw(shuffled(ev))))
    usage = {"prompt_tokens": 3, "completion_tokens": len(tokens), "prompt_tokens_details": {"cached_tokens": 0}}
    out.append(dumps(draw, {"id": "cmpl", "choices": [], "usage": draw(shuffled(usage))}))
    if draw(st.booleans()):
        out.append(DONE)
    return out


# ------------------------------------------------------------------------------ SSE framing


def reference_sse(body: bytes) -> list[bytes]:
    """The SSE event-stream interpretation (WHATWG HTML, server-sent events), written plainly:
    lines end at CRLF, LF or CR; a blank line dispatches the data buffer (when it is not empty,
    without its last LF); the end of the body discards an event without its blank line."""
    text = body.replace(b"\r\n", b"\n").replace(b"\r", b"\n")
    lines = text.split(b"\n")
    lines.pop()  # the bytes after the last line end are not a line: discarded at the end of the body
    out: list[bytes] = []
    data: list[bytes] | None = None
    for line in lines:
        if line == b"":
            if data is not None:
                out.append(b"\n".join(data))
            data = None
        elif line.startswith(b":"):
            continue
        else:
            name, colon, value = line.partition(b":")
            value = value[1:] if colon and value[:1] == b" " else value
            if name == b"data":
                data = [*(data or []), value]
    return out


def line_end(draw: st.DrawFn, eol: bytes | None, body: bytes = b"") -> bytes:
    """``eol``, or a drawn line end; never LF right after a CR that ended the previous line (the
    two would read as one CRLF)."""
    end = eol if eol is not None else draw(st.sampled_from([b"\n", b"\r\n", b"\r"]))
    return b"\r\n" if end == b"\n" and body.endswith(b"\r") else end


@st.composite
def framed(draw: st.DrawFn, payloads: list[bytes]) -> bytes:
    """``payloads`` as an SSE body in a drawn framing (every payload must come out again)."""
    body = b""
    for p in payloads:
        eol = draw(st.sampled_from([b"\n", b"\r\n", b"\r", None]))  # None: a different one per line
        if draw(st.booleans()):
            body += b": keep-alive" + line_end(draw, eol)
        if draw(st.booleans()):
            body += b"event: message" + line_end(draw, eol) + b"id: 7" + line_end(draw, eol)
        for line in p.split(b"\n"):
            sep = b" " if line[:1] == b" " or draw(st.booleans()) else b""
            body += b"data:" + sep + line + line_end(draw, eol)
        body += line_end(draw, eol, body)
    if draw(st.booleans()):
        body += b"data: an unfinished event" + draw(st.sampled_from([b"", b"\n", b"\r\n"]))
    return body


def parse_chunks(body: bytes, cuts: list[int]) -> list[bytes]:
    parser = SSEParser()
    edges = [0, *sorted({c for c in cuts if 0 < c < len(body)}), len(body)]
    out = [e for a, b in itertools.pairwise(edges) for e in parser.feed(body[a:b])]
    return out + parser.close()


@given(st.data(), st.booleans())
@settings(max_examples=250, deadline=None)
def test_sse_framing_then_decoding_equals_direct_decoding(data: st.DataObject, sglang: bool) -> None:
    payloads = data.draw(sglang_stream() if sglang else openai_stream())
    body = data.draw(framed(payloads))
    assert reference_sse(body) == payloads
    cuts = data.draw(st.lists(st.integers(0, len(body)), max_size=12))
    got = parse_chunks(body, cuts)
    assert got == payloads
    if sglang:
        assert asdict(decode(SGLangDecoder(), got)) == asdict(decode(SGLangDecoder(fast=False), payloads))
    else:
        assert asdict(decode(VLLMDecoder(), got)) == asdict(decode(VLLMDecoder(), payloads))


def test_body_ended_by_close() -> None:
    # a final CR is a line end: the event it completes is dispatched at close, not lost
    assert parse_chunks(b"data: a\r\rdata: [DONE]\r\r", []) == [b"a", b"[DONE]"]
    assert parse_chunks(b"data: a\r\rdata: [DONE]\r\r", [19]) == [b"a", b"[DONE]"]
    assert parse_chunks(b"data: a\r\n\r\ndata: b\r", [5]) == [b"a"]  # b has no blank line: dropped
    assert parse_chunks(b"data: a\n\ndata: b", []) == [b"a"]
