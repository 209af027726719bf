"""The streaming client and wave driver against tiny real HTTP servers (one per failure mode)."""

from __future__ import annotations

import asyncio
import gc
import json
import time
from collections.abc import Awaitable, Callable

import numpy as np
import pytest
from aiohttp import web
from load_helpers import (
    Server,
    closed_port,
    each_transport,  # noqa: F401 - the fixture, used by pytestmark
    serve,
    sg_event,
    sg_stream,
    sse,
    stream_events,
)

from harness.errors import ServerUnreachable
from harness.ids import RequestIdentity
from harness.load import LoadClient, WaveRequest, probe, run_sync, run_wave, run_wave_sync
from harness.records import RequestRecord

pytestmark = pytest.mark.usefixtures("each_transport")

TOKENS = [101, 102, 103, 104, 105, 106]
IDS = [1, 2, 3, 4]


def one(url: str, *, protocol: str = "sglang", timeout_s: float = 10.0, **kw: object) -> RequestRecord:
    req = WaveRequest(input_ids=IDS, max_new_tokens=6, rid="r0", **kw)  # type: ignore[arg-type]
    [rec] = run_wave_sync(url, [req], protocol=protocol, timeout_s=timeout_s)  # type: ignore[arg-type]
    return rec


Handler = Callable[[web.Request], Awaitable[web.StreamResponse]]


def body_handler(body: bytes, status: int = 200, content_type: str = "text/event-stream") -> Handler:
    async def handler(request: web.Request) -> web.StreamResponse:
        return web.Response(body=body, status=status, content_type=content_type)

    return handler


def chunks_handler(chunks: list[bytes], delays: list[float] | None = None) -> Handler:
    async def handler(request: web.Request) -> web.StreamResponse:
        return await stream_events(request, chunks, delays)

    return handler


# ---------------------------------------------------------------- success paths


def test_cumulative_stream_record_and_request_body() -> None:
    payloads = sg_stream(TOKENS, [1, 2, 3], cached=2)
    with serve(chunks_handler([sse([p]) for p in payloads])) as srv:
        rec = one(srv.url, ignore_eos=True, cache_salt="s1", identity=RequestIdentity(case_id="c7", wave_id="w"))
    assert rec.error is None, rec.error
    assert rec.http_status == 200
    assert rec.output_ids.tolist() == TOKENS
    assert rec.event_tokens.tolist() == [1, 3, 6]
    assert (rec.prompt_tokens, rec.cached_tokens, rec.completion_tokens) == (4, 2, 6)
    assert (rec.finish_reason, rec.output_mode) == ("length", "cumulative")
    assert rec.send_ns < rec.event_ns[0] <= rec.event_ns[-1] <= rec.done_ns
    assert np.all(np.diff(rec.event_ns) >= 0)
    assert rec.emit_ns.size == 0
    assert (rec.case_id, rec.wave_id, rec.cache_salt, rec.input_len, rec.concurrency) == (
        "c7",
        "w",
        "s1",
        4,
        1,
    )
    assert srv.bodies == [
        {
            "input_ids": IDS,
            "sampling_params": {"max_new_tokens": 6, "temperature": 0, "ignore_eos": True},
            "stream": True,
            "rid": "r0",
            "cache_salt": "s1",
        }
    ]


def test_optional_keys_omitted() -> None:
    with serve(body_handler(sse(sg_stream(TOKENS, [6])))) as srv:
        rec = one(srv.url)
    assert rec.error is None
    assert "cache_salt" not in srv.bodies[0]
    assert srv.bodies[0]["sampling_params"]["ignore_eos"] is False


def test_all_events_in_one_read_share_a_timestamp() -> None:
    with serve(body_handler(sse(sg_stream(TOKENS, [2, 2, 2])))) as srv:
        rec = one(srv.url)
    assert rec.error is None
    assert rec.event_tokens.tolist() == [2, 4, 6]
    assert len(set(rec.event_ns.tolist())) == 1


@pytest.mark.parametrize("mode", ["cumulative", "delta"])
def test_multi_token_and_delta_events_without_text(mode: str) -> None:
    payloads = sg_stream(TOKENS, [3, 0, 2, 1], mode=mode, text=False)
    with serve(chunks_handler([sse([p]) for p in payloads])) as srv:
        rec = one(srv.url)
    assert rec.error is None
    assert rec.output_mode == mode
    assert rec.output_ids.tolist() == TOKENS
    assert rec.event_tokens.tolist() == [3, 3, 5, 6]
    assert rec.completion_tokens == 6


def test_crlf_stream_split_mid_event() -> None:
    body = sse(sg_stream(TOKENS, [2, 4])).replace(b"\n", b"\r\n")
    with serve(chunks_handler([body[:17], body[17:51], body[51:]])) as srv:
        rec = one(srv.url)
    assert rec.error is None
    assert rec.output_ids.tolist() == TOKENS


def test_scripted_times_known_answer() -> None:
    """Tokens emitted at scripted offsets arrive at those offsets (scheduling tolerance 40 ms)."""
    script = [(0.05, 1), (0.10, 3), (0.15, 4), (0.30, 6)]

    async def handler(request: web.Request) -> web.StreamResponse:
        resp = web.StreamResponse(headers={"Content-Type": "text/event-stream"})
        await resp.prepare(request)
        t0 = time.monotonic()
        for at, ct in script:
            await asyncio.sleep(max(0.0, at - (time.monotonic() - t0)))
            ev = sg_event(TOKENS[:ct], ct, emit_ns=time.perf_counter_ns())
            await resp.write(b"data: " + ev + b"\n\n")
        await resp.write(b"data: [DONE]\n\n")
        await resp.write_eof()
        return resp

    with serve(handler) as srv:
        rec = one(srv.url)
    assert rec.error is None
    assert rec.event_tokens.tolist() == [ct for _, ct in script]
    offsets_ms = (rec.event_ns - rec.send_ns) / 1e6
    for got, (at, _) in zip(offsets_ms.tolist(), script, strict=True):
        assert at * 1000 <= got <= at * 1000 + 40, (got, at)
    lag_ms = (rec.event_ns - rec.emit_ns) / 1e6
    assert rec.emit_ns.size == len(script)
    assert np.all(lag_ms >= 0), lag_ms
    assert np.all(lag_ms < 40), lag_ms
    assert rec.first_token_ns == rec.event_ns[0]
    assert rec.last_token_ns == rec.event_ns[-1]


# ---------------------------------------------------------------- failure modes


def test_http_500() -> None:
    with serve(body_handler(b"internal boom", status=500, content_type="text/plain")) as srv:
        rec = one(srv.url)
    assert (rec.http_status, rec.error) == (500, "http 500: internal boom")
    assert rec.event_tokens.size == 0
    assert rec.done_ns >= rec.send_ns


def test_http_429_body_truncated_to_200_chars() -> None:
    body = "too many requests " + "x" * 500
    with serve(body_handler(body.encode(), status=429, content_type="application/json")) as srv:
        rec = one(srv.url)
    assert rec.http_status == 429
    assert rec.error == "http 429: " + body[:200]


def test_error_event_then_done() -> None:
    payloads = [sg_event(TOKENS[:1], 1), b'{"error": {"message": "KV cache exhausted"}}', b"[DONE]"]
    with serve(body_handler(sse(payloads))) as srv:
        rec = one(srv.url)
    assert rec.error == "error event: KV cache exhausted"
    assert rec.http_status == 200
    assert rec.event_tokens.tolist() == [1]


def test_close_mid_stream() -> None:
    async def handler(request: web.Request) -> web.StreamResponse:
        resp = web.StreamResponse(headers={"Content-Type": "text/event-stream"})
        await resp.prepare(request)
        for p in sg_stream(TOKENS, [1, 1, 1, 3])[:3]:
            await resp.write(sse([p]))
        await asyncio.sleep(0.05)
        assert request.transport is not None
        request.transport.close()
        return resp

    with serve(handler) as srv:
        rec = one(srv.url)
    assert (rec.error or "").startswith("disconnected after 3 events"), rec.error
    assert rec.event_tokens.tolist() == [1, 2, 3]
    assert rec.output_ids.tolist() == TOKENS[:3]


def test_clean_end_without_done() -> None:
    with serve(body_handler(sse(sg_stream(TOKENS, [2, 4])[:-1]))) as srv:
        rec = one(srv.url)
    assert rec.error == "disconnected after 2 events (stream ended without [DONE])"
    assert rec.n_tokens == 6


def test_malformed_json_event() -> None:
    payloads = [sg_event(TOKENS[:1], 1), b'{"meta_info": {"completion_tokens": 2', b"[DONE]"]
    with serve(body_handler(sse(payloads))) as srv:
        rec = one(srv.url)
    assert rec.error is not None
    assert rec.error.startswith("malformed event: ")
    assert rec.event_tokens.tolist() == [1]


def test_non_sse_body() -> None:
    html = b"<html><body>Welcome to nginx!</body></html>"
    with serve(body_handler(html, content_type="text/html")) as srv:
        rec = one(srv.url)
    assert rec.http_status == 200
    assert rec.error == "non-SSE body (text/html): " + html.decode()


def test_abort_finish_reason() -> None:
    abort = {"type": "abort", "message": "Abort before prefill"}
    with serve(body_handler(sse([sg_event([], 0, finish=abort), b"[DONE]"]))) as srv:
        rec = one(srv.url)
    assert rec.error == "aborted: Abort before prefill"
    assert rec.finish_reason == "abort"


def test_connection_refused() -> None:
    rec = one(f"http://127.0.0.1:{closed_port()}")
    assert (rec.error or "").startswith("connection refused: "), rec.error
    assert rec.http_status is None


def test_read_timeout() -> None:
    payloads = sg_stream(TOKENS, [1, 5])
    with serve(chunks_handler([sse(payloads[:1]), sse(payloads[1:])], delays=[0.0, 3.0])) as srv:
        rec = one(srv.url, timeout_s=0.3)  # the server would send the rest after 3 s: the timeout fires first
    assert rec.error == "timeout (read) after 1 events (no data for 0.3 s)"
    assert rec.http_status == 200
    assert rec.event_tokens.tolist() == [1]


# ---------------------------------------------------------------- vLLM


def v_chunks() -> list[bytes]:
    def chunk(ids: list[int], **extra: object) -> bytes:
        choice = {"index": 0, "text": "", "logprobs": None, "finish_reason": None, "token_ids": ids}
        choice.update(extra)
        return json.dumps({"id": "cmpl-x", "object": "text_completion", "choices": [choice]}).encode()

    usage = {
        "prompt_tokens": 4,
        "completion_tokens": 3,
        "total_tokens": 7,
        "prompt_tokens_details": {"cached_tokens": 0},
    }
    return [
        chunk([7], prompt_token_ids=IDS),
        chunk([8, 9]),
        chunk([], finish_reason="length", stop_reason=None),
        json.dumps({"id": "cmpl-x", "choices": [], "usage": usage}).encode(),
        b"[DONE]",
    ]


def test_vllm_stream_and_model_discovery() -> None:
    async def models(request: web.Request) -> web.StreamResponse:
        return web.json_response({"object": "list", "data": [{"id": "tiny-llama", "object": "model"}]})

    handler = chunks_handler([sse([p]) for p in v_chunks()])
    with serve(handler, "/v1/completions", {"/v1/models": models}) as srv:
        rec = one(srv.url, protocol="vllm", cache_salt="salt")
    assert rec.error is None, rec.error
    assert rec.output_ids.tolist() == [7, 8, 9]
    assert rec.output_mode == "delta"
    assert rec.event_tokens.tolist() == [1, 3, 3]
    assert (rec.prompt_tokens, rec.cached_tokens, rec.completion_tokens) == (4, 0, 3)
    assert rec.finish_reason == "length"
    assert srv.bodies == [
        {
            "model": "tiny-llama",
            "prompt": IDS,
            "max_tokens": 6,
            "temperature": 0,
            "stream": True,
            "stream_options": {"include_usage": True},
            "return_token_ids": True,
            "ignore_eos": False,
            "cache_salt": "salt",
        }
    ]
    assert srv.headers[0]["x-request-id"] == "r0"
    assert srv.headers[0]["accept-encoding"] == "identity"


# ---------------------------------------------------------------- driver and probe


def test_wave_order_identity_and_togetherness() -> None:
    arrivals: list[float] = []

    async def handler(request: web.Request) -> web.StreamResponse:
        arrivals.append(time.monotonic())
        body = json.loads(await request.read())
        n = int(body["rid"][1:])  # r<n>: answer n+1 tokens, later requests finish first
        await asyncio.sleep(0.2 - 0.02 * n)
        return web.Response(body=sse(sg_stream(TOKENS[: n + 1], [n + 1])), content_type="text/event-stream")

    reqs = [
        WaveRequest(input_ids=IDS, max_new_tokens=6, rid=f"r{i}",
                    identity=RequestIdentity(case_id=f"case{i}", wave_index=3, run_id="R"))
        for i in range(5)
    ]
    with serve(handler) as srv:
        recs = run_wave_sync(srv.url, reqs)
    assert [r.rid for r in recs] == [f"r{i}" for i in range(5)]
    assert [r.case_id for r in recs] == [f"case{i}" for i in range(5)]
    assert all(r.error is None and r.wave_index == 3 and r.run_id == "R" and r.concurrency == 5 for r in recs)
    assert [r.n_tokens for r in recs] == [1, 2, 3, 4, 5]
    assert max(arrivals) - min(arrivals) < 0.1
    assert max(r.send_ns for r in recs) - min(r.send_ns for r in recs) < 50_000_000


def test_wave_larger_than_concurrency_or_duplicate_rids() -> None:
    async def main() -> None:
        async with LoadClient("http://127.0.0.1:1", concurrency=2) as c:
            reqs = [WaveRequest(IDS, 1, rid=f"r{i}") for i in range(3)]
            with pytest.raises(ValueError, match="exceeds"):
                await run_wave(c, reqs)
            with pytest.raises(ValueError, match="unique"):
                await run_wave(c, [reqs[0], reqs[0]])

    run_sync(main())


def test_run_sync_inside_running_loop() -> None:
    async def inner() -> int:
        return 7

    async def outer() -> int:
        return run_sync(inner())

    assert asyncio.run(outer()) == 7


def test_probe() -> None:
    with Server({}) as srv:
        run_sync(probe(srv.url))
    with pytest.raises(ServerUnreachable) as info:
        run_sync(probe(f"http://127.0.0.1:{closed_port()}"))
    assert info.value.hint
    assert "nothing answers" in info.value.message


@pytest.mark.parametrize("pause_gc", [True, False])
def test_gc_paused_only_during_wave(pause_gc: bool) -> None:
    seen: list[bool] = []

    async def handler(request: web.Request) -> web.StreamResponse:
        seen.append(gc.isenabled())
        return web.Response(body=sse(sg_stream(TOKENS, [6])), content_type="text/event-stream")

    async def main(url: str) -> None:
        async with LoadClient(url, concurrency=2, pause_gc=pause_gc) as c:
            a = run_wave(c, [WaveRequest(IDS, 6, rid="a")])
            b = run_wave(c, [WaveRequest(IDS, 6, rid="b")])
            await asyncio.gather(a, b)

    assert gc.isenabled()
    with serve(handler) as srv:
        run_sync(main(srv.url))
    assert seen == [not pause_gc] * 2
    assert gc.isenabled()


def test_outside_cancellation_propagates() -> None:
    payloads = sg_stream(TOKENS, [1, 5])
    handler = chunks_handler([sse(payloads[:1]), sse(payloads[1:])], delays=[0.0, 3.0])

    async def main(url: str) -> None:
        async with LoadClient(url, concurrency=1, timeout_s=0.05) as c:
            task = asyncio.ensure_future(run_wave(c, [WaveRequest(IDS, 6, rid="a")]))
            await asyncio.sleep(0.02)
            task.cancel()
            with pytest.raises(asyncio.CancelledError):
                await task

    with serve(handler) as srv:
        run_sync(main(srv.url))
