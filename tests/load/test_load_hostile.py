"""Hostile servers cannot hang or exhaust the client: every wait is bounded, the SSE buffer is
bounded and linear, the client stops reading past ``max_new_tokens`` (issue 14, points 4 and 5)."""

from __future__ import annotations

import time
import tracemalloc

import pytest
from hostile_server import HostileServer
from load_helpers import each_transport  # noqa: F401 - the fixture, used by pytestmark

from harness.load import LoadClient, WaveRequest, run_sync
from harness.load.client import StreamLimits
from harness.load.sse import EventTooLong, SSEParser
from harness.records import RequestRecord

pytestmark = pytest.mark.usefixtures("each_transport")


def send_one(url: str, *, max_new_tokens: int = 64, timeout_s: float = 30.0,
             limits: StreamLimits | None = None) -> tuple[RequestRecord, float]:
    async def main() -> RequestRecord:
        async with LoadClient(url, concurrency=1, timeout_s=timeout_s, limits=limits) as client:
            return await client.send(WaveRequest(input_ids=[1, 2, 3], max_new_tokens=max_new_tokens, rid="h-1"))

    t = time.monotonic()
    rec = run_sync(main())
    return rec, time.monotonic() - t


def test_stalled_server_times_out_after_the_silence_bound() -> None:
    with HostileServer("stall") as srv:
        rec, took = send_one(srv.url, timeout_s=0.5)
    assert rec.error is not None and rec.error.startswith("timeout (read)"), rec.error
    assert 0.4 < took < 2.0


def test_stream_that_goes_silent_keeps_its_tokens() -> None:
    with HostileServer("stall-stream", tokens=3) as srv:
        rec, took = send_one(srv.url, timeout_s=0.5)
    assert rec.error is not None and rec.error.startswith("timeout (read)"), rec.error
    assert rec.completion_tokens == 3 and len(rec.event_ns) == 3
    assert took < 2.0


def test_endless_stream_is_cut_at_max_new_tokens() -> None:
    with HostileServer("endless", interval_s=0.001) as srv:
        rec, took = send_one(srv.url, max_new_tokens=40)
        deadline = time.monotonic() + 3
        while srv.client_closed == 0 and time.monotonic() < deadline:
            time.sleep(0.01)
        closed = srv.client_closed
    assert rec.error is not None and rec.error.startswith("token overrun"), rec.error
    assert "max_new_tokens=40" in rec.error
    assert rec.completion_tokens == 41  # the first count past the cap is where reading stopped
    assert took < 2.0
    assert closed == 1  # the client hung up: nothing keeps streaming into a closed request


def test_stream_without_progress_is_cut_after_the_silence_bound() -> None:
    with HostileServer("endless-flat", interval_s=0.01) as srv:
        rec, took = send_one(srv.url, timeout_s=0.5)
    assert rec.error is not None and rec.error.startswith("timeout (no progress)"), rec.error
    assert 0.4 < took < 2.0


def test_total_deadline_from_max_new_tokens_and_the_observed_step() -> None:
    # 5 tokens 20 ms apart, then events forever without a new token; the silence bound (30 s) would
    # wait long: the total deadline (0.2 s + 1 x 20 tokens x 20 ms = 0.6 s after the first token) ends it
    limits = StreamLimits(deadline_factor=1.0, deadline_grace_s=0.2)
    with HostileServer("rise-then-flat", tokens=5, interval_s=0.02) as srv:
        rec, took = send_one(srv.url, max_new_tokens=20, timeout_s=30.0, limits=limits)
    assert rec.error is not None and rec.error.startswith("deadline:"), rec.error
    assert "observed step" in rec.error
    assert rec.completion_tokens == 5
    assert 0.5 < took < 2.0


def test_over_long_event_fails_the_request_with_bounded_memory() -> None:
    with HostileServer("huge-event", event_mb=64) as srv:
        tracemalloc.start()
        try:
            rec, took = send_one(srv.url)
            _, peak = tracemalloc.get_traced_memory()
        finally:
            tracemalloc.stop()
        sent = srv.bytes_sent
    assert rec.error is not None and rec.error.startswith("event too long"), rec.error
    assert "4194304 bytes" in rec.error
    assert took < 5.0
    assert peak < 24 << 20, peak  # a 4 MiB limit: the 64 MB event is never held
    assert sent < 32 << 20  # the client stopped reading long before the server ran out


def test_event_limit_is_configurable_per_client() -> None:
    with HostileServer("huge-event", event_mb=4) as srv:
        rec, _ = send_one(srv.url, limits=StreamLimits(max_event_bytes=64 * 1024))
    assert rec.error is not None and "65536 bytes" in rec.error


def test_parser_limit_exact_boundary() -> None:
    p = SSEParser(max_event_bytes=1024)
    payload = b"data: " + b"y" * 1018  # exactly 1024 bytes held before the end arrives
    assert p.feed(payload) == []
    assert p.feed(b"\n\n") == [b"y" * 1018]
    with pytest.raises(EventTooLong, match="1024 bytes"):
        p.feed(payload + b"z")


def test_parser_is_linear_in_the_bytes_fed() -> None:
    # 16 MB without an event end in 4 KiB reads: a parser that re-scans its buffer on every read
    # would copy ~32 GB (minutes); a linear one takes well under a second
    p = SSEParser(max_event_bytes=1 << 30)
    chunk = b"a" * 4096
    t = time.perf_counter()
    for _ in range(4096):
        assert p.feed(chunk) == []
    assert p.feed(b"\n\n") == []  # a block without a data field yields nothing
    took = time.perf_counter() - t
    assert took < 2.0, took
    # and an event split into single bytes still parses
    q = SSEParser()
    out = [e for b in b"data: hello\r\n\r\ndata: [DONE]\r\r\n" for e in q.feed(bytes([b]))]
    assert out == [b"hello", b"[DONE]"]
