"""Both transports give the same records on the same hostile bytes (issue 23, "What to build" 3).

Every hostile response of the load tests is one named case below: the scripted raw responses of
``test_wire``, the modes of ``tests/hostile_server.py`` (``test_load_hostile``), and the strict-HTTP
cases (a pipelined extra response, garbage after a response, endless or too many headers, a trickled
head, a mismatched response id, a keep-alive connection answered with another request's body). Each
runs through the lean transport (``wire``) and through aiohttp against the same raw-socket server
(127.0.0.1, port 0), and the fields both must agree on are compared: status, error text, counts,
output ids, finish reason (never timestamps). Timeouts here only catch hangs.
"""

from __future__ import annotations

import json
import socket
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import pytest
from hostile_server import HostileServer
from load_helpers import sg_stream, sse
from test_wire import CHUNKED_HEAD, ScriptServer, chunk

from harness.load import LoadClient, WaveRequest, run_sync
from harness.load.client import MAX_HEADERS, MAX_LINE_BYTES, Protocol, StreamLimits
from harness.records import RequestRecord

TOK = [11, 12, 13, 14, 15, 16, 17, 18]
SSE_CT = b"Content-Type: text/event-stream\r\n"
Script = Callable[[socket.socket, int], bool]


def cl_response(body: bytes, *, head: bytes = b"HTTP/1.1 200 OK\r\n" + SSE_CT) -> bytes:
    return head + b"Content-Length: " + str(len(body)).encode() + b"\r\n\r\n" + body


def sg(rid: str | None, groups: list[int], *, done: bool = True) -> bytes:
    payloads = sg_stream(TOK[:sum(groups)], groups, rid=rid)
    return sse(payloads if done else payloads[:-1])


def oa_chunk(cid: str, text: str, finish: str | None = None) -> bytes:
    obj: dict[str, Any] = {"id": cid, "object": "text_completion", "model": "m",
                           "choices": [{"index": 0, "text": text, "finish_reason": finish}]}
    return json.dumps(obj, separators=(",", ":")).encode()


def send(data: bytes, *, keep: bool = False) -> Script:
    def script(conn: socket.socket, _: int) -> bool:
        conn.sendall(data)
        return keep

    return script


def flood(head: bytes, block: bytes, *, blocks: int = 4096) -> Script:
    """``head`` then ``block`` over and over (at most ``blocks`` times) until the client hangs up."""

    def script(conn: socket.socket, _: int) -> bool:
        try:
            conn.sendall(head)
            for _ in range(blocks):
                conn.sendall(block)
        except OSError:
            pass
        return False

    return script


def trickle(conn: socket.socket, _: int) -> bool:
    """A response head that never ends: one short header every 20 ms (each read resets no timer)."""
    try:
        conn.sendall(b"HTTP/1.1 200 OK\r\n")
        for i in range(500):
            conn.sendall(b"X-%d: a\r\n" % i)
            time.sleep(0.02)
    except OSError:
        pass
    return False


def replay(conn: socket.socket, n: int) -> bool:
    """Every request on the connection is answered with the first request's stream (rid r-0)."""
    conn.sendall(CHUNKED_HEAD + chunk(sg("r-0", [4, 4])) + b"0\r\n\r\n")
    return True


@dataclass(frozen=True)
class Case:
    name: str
    script: Script | None = None  # None: ``hostile`` names a HostileServer mode
    expect: str | None = None  # the start of the error every request ends with (None: the first succeeds)
    hostile: str = ""
    protocol: Protocol = "sglang"
    requests: int = 1  # sent one after the other on one client (keep-alive reuse)
    timeout_s: float = 30.0
    limits: StreamLimits | None = None
    max_new_tokens: int = 16


NO_DONE = "disconnected after 1 events (stream ended without [DONE])"
BAD = "bad HTTP response after 0 events: "

CASES = [
    # strict HTTP/1.1: a byte after a complete response
    Case("pipelined extra response", send(cl_response(sg("r-0", [3], done=False)) + cl_response(sg("r-0", [4, 4]))),
         expect=NO_DONE),
    Case("pipelined after a complete response", send(cl_response(sg("r-0", [4, 4])) * 2, keep=True), requests=2),
    Case("garbage after a complete response", send(cl_response(sg("r-0", [4, 4])) + b"GARBAGE\r\n\r\n"),
         expect=BAD + "Expected HTTP/"),
    Case("data after Connection: close", send(cl_response(sg("r-0", [4, 4]), head=b"HTTP/1.1 200 OK\r\n" + SSE_CT
                                                          + b"Connection: close\r\n") + b"HTTP/1.1 200 OK\r\n\r\n"),
         expect=BAD),
    # the response head: size, count, time
    Case("endless header value", flood(b"HTTP/1.1 200 OK\r\n" + SSE_CT + b"X-Endless: ", b"a" * 65536),
         expect=BAD + f"a status reason or header longer than {MAX_LINE_BYTES} bytes"),
    Case("endless header name", flood(b"HTTP/1.1 200 OK\r\n", b"X" * 65536),
         expect=BAD + "a status reason or header longer than"),
    Case("endless status reason", flood(b"HTTP/1.1 200 ", b"O" * 65536),
         expect=BAD + "a status reason or header longer than"),
    Case("endless headers", flood(b"HTTP/1.1 200 OK\r\n", b"".join(b"X-%d: a\r\n" % i for i in range(2000))),
         expect=BAD + f"more than {MAX_HEADERS} headers"),
    Case("too many headers", send(b"HTTP/1.1 200 OK\r\n" + b"".join(b"X-%d: a\r\n" % i for i in range(MAX_HEADERS))
                                  + SSE_CT + b"\r\n" + sg("r-0", [4, 4])),
         expect=BAD + f"more than {MAX_HEADERS} headers"),
    Case("as many headers as allowed", send(b"HTTP/1.1 200 OK\r\n" + b"".join(
        b"X-%d: a\r\n" % i for i in range(MAX_HEADERS - 1)) + SSE_CT + b"\r\n" + sg("r-0", [4, 4]))),
    Case("header of the largest size allowed", send(b"HTTP/1.1 200 OK\r\nX-A: " + b"a" * (MAX_LINE_BYTES - 3)
                                                    + b"\r\n" + SSE_CT + b"\r\n" + sg("r-0", [4, 4]))),
    Case("header one byte too large", send(b"HTTP/1.1 200 OK\r\nX-A: " + b"a" * (MAX_LINE_BYTES - 2) + b"\r\n"
                                           + SSE_CT + b"\r\n" + sg("r-0", [4, 4])),
         expect=BAD + "a status reason or header longer than"),
    Case("trickled head", trickle, expect="timeout (read) after 0 events (no data for 1 s)", timeout_s=1.0),
    # response ids
    Case("mismatched id", send(CHUNKED_HEAD + chunk(sg("someone-else", [4, 4])) + b"0\r\n\r\n"),
         expect='response id "someone-else" does not match request rid "r-0"'),
    Case("keep-alive connection answered with another request's body", replay, requests=2),
    Case("openai id changes mid-stream", send(CHUNKED_HEAD + chunk(sse([oa_chunk("cmpl-a", "x"), oa_chunk(
        "cmpl-b", "y", "length"), b"[DONE]"])) + b"0\r\n\r\n"), protocol="openai-completions",
         expect='response id "cmpl-b" does not match the id "cmpl-a" of the stream\'s first chunk'),
    Case("openai one id", send(CHUNKED_HEAD + chunk(sse([oa_chunk("cmpl-a", "x"), oa_chunk("cmpl-a", "y", "length"),
                                                         b"[DONE]"])) + b"0\r\n\r\n"), protocol="openai-completions"),
    # bodies that end badly (test_wire's scripted responses)
    Case("content-length body without [DONE]", send(cl_response(sg("r-0", [3], done=False))), expect=NO_DONE),
    Case("close-delimited body", send(b"HTTP/1.0 200 OK\r\n" + SSE_CT + b"\r\n" + sg("r-0", [4]))),
    Case("close-delimited body without [DONE]",
         send(b"HTTP/1.0 200 OK\r\n" + SSE_CT + b"\r\n" + sg("r-0", [4], done=False)), expect=NO_DONE),
    Case("close mid-body (chunked)", send(CHUNKED_HEAD + chunk(sse(sg_stream(TOK, [1, 1, 2])[:2]))),
         expect="disconnected after 2 events (connection closed mid-body)"),
    Case("close mid-body (content-length)", send(b"HTTP/1.1 200 OK\r\n" + SSE_CT + b"Content-Length: 5000\r\n\r\n"
                                                 + sse(sg_stream(TOK, [1, 1, 2])[:2])),
         expect="disconnected after 2 events (connection closed mid-body)"),
    Case("garbage HTTP", send(b"HELLO WORLD\r\n\r\n"), expect=BAD + "Expected HTTP/, RTSP/ or ICE/"),
    Case("invalid status", send(b"HTTP/1.1 abc\r\n\r\n"), expect=BAD + "Invalid status code"),
    Case("closed before answering", send(b""),
         expect="disconnected after 0 events (server closed the connection before answering)"),
    Case("error status", send(cl_response(b"no such model", head=b"HTTP/1.1 404 Not Found\r\n")),
         expect="http 404: no such model"),
    Case("non-SSE body", send(cl_response(b'{"a":1}', head=b"HTTP/1.1 200 OK\r\nContent-Type: application/json\r\n")),
         expect='non-SSE body (application/json): {"a":1}'),
    # tests/hostile_server.py's modes (test_load_hostile)
    Case("stalled stream", hostile="stall-stream", timeout_s=0.5, expect="timeout (read) after 3 events"),
    Case("endless stream", hostile="endless", max_new_tokens=40, expect="token overrun"),
    Case("huge event", hostile="huge-event", limits=StreamLimits(max_event_bytes=64 * 1024),
         expect="event too long"),
]


def facts(rec: RequestRecord) -> dict[str, Any]:
    """What both transports must agree on (no timestamps)."""
    return {"status": rec.http_status, "error": rec.error, "tokens": rec.event_tokens.tolist(),
            "events": int(rec.event_ns.size), "output_ids": rec.output_ids.tolist(),
            "finish_reason": rec.finish_reason, "completion_tokens": rec.completion_tokens,
            "prompt_tokens": rec.prompt_tokens, "cached_tokens": rec.cached_tokens, "mode": rec.output_mode,
            "text": rec.final_text, "count_method": rec.count_method}


def run_case(case: Case, transport: str) -> list[dict[str, Any]]:
    """The facts of the case's records on ``transport``, then the connections the server accepted
    (a connection that saw a byte after its response is never reused)."""
    async def main(url: str) -> list[RequestRecord]:
        async with LoadClient(url, concurrency=1, timeout_s=case.timeout_s, limits=case.limits,
                              protocol=case.protocol, model=None if case.protocol == "sglang" else "m",
                              transport=transport) as client:  # type: ignore[arg-type]
            return [await client.send(WaveRequest(input_ids=[1, 2, 3], max_new_tokens=case.max_new_tokens,
                                                  rid=f"r-{i}")) for i in range(case.requests)]

    if case.script is None:
        with HostileServer(case.hostile, interval_s=0.001) as hsrv:
            return [facts(r) for r in run_sync(main(hsrv.url))]
    with ScriptServer(case.script) as srv:
        out = [facts(r) for r in run_sync(main(srv.url))]
        return [*out, {"connections": srv.accepted}]


def _upto_cap(rec: dict[str, Any]) -> dict[str, Any]:
    """A record without what depends on where a read of an endless stream ended (module: endless stream)."""
    out = {k: v for k, v in rec.items() if k not in ("tokens", "events", "output_ids", "completion_tokens",
                                                      "event_ns", "emit_ns")}
    if "error" in out:
        out["error"] = str(out["error"]).split(":", 1)[0]  # "token overrun" (its count is where the read ended)
    return out


@pytest.mark.parametrize("case", CASES, ids=lambda c: c.name)
def test_both_transports_give_the_same_records(case: Case) -> None:
    wire = run_case(case, "wire")
    aio = run_case(case, "aiohttp")
    if case.hostile == "endless":
        # the overrun is judged after each read, and how many events one read holds is the kernel's
        # and the loop's timing, not the transport's: the two agree up to the first read past the cap
        n = (case.max_new_tokens or 0) + 1
        for rec in (wire[0], aio[0]):
            assert rec["completion_tokens"] >= n and (rec["error"] or "").startswith("token overrun"), rec
        assert wire[0]["tokens"][:n] == aio[0]["tokens"][:n]
        assert wire[0]["output_ids"][:n - 1] == aio[0]["output_ids"][:n - 1]
        wire, aio = [_upto_cap(r) for r in wire], [_upto_cap(r) for r in aio]
    assert wire == aio
    first = wire[0]
    if case.name == "pipelined after a complete response":
        assert wire[-1] == {"connections": 2}  # the first connection was not reused
    if case.name.startswith("keep-alive connection"):
        assert wire[-1] == {"connections": 1}  # it was reused (cleanly ended), and the id check caught it
    if case.expect is None:
        assert first["error"] is None, first["error"]
    else:
        assert (first["error"] or "").startswith(case.expect), first["error"]


def test_pipelined_response_never_credits_its_tokens() -> None:
    """The reproduction of issue 23 item 5: a Content-Length response of 3 tokens without [DONE], then
    in the same write a second response of 8 tokens with [DONE] (wire used to record 8 and success)."""
    case = CASES[0]
    for transport in ("wire", "aiohttp"):
        rec, _ = run_case(case, transport)
        assert rec["error"] == NO_DONE
        assert rec["tokens"] == [3] and rec["completion_tokens"] == 3


def test_reused_connection_answered_with_another_requests_body_fails_that_request() -> None:
    case = next(c for c in CASES if c.name.startswith("keep-alive connection"))
    for transport in ("wire", "aiohttp"):
        first, second, _ = run_case(case, transport)
        assert first["error"] is None
        assert second["error"] == 'response id "r-0" does not match request rid "r-1"'
        assert second["tokens"] == [4, 8]  # kept for the record, as every failure keeps its partial tokens
