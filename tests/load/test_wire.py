"""What only the lean transport (``harness.load.wire``) does: keep-alive reuse, reading a response to
its end after ``[DONE]``, close-delimited bodies, broken HTTP, cancellation. A raw-socket server
scripts the exact bytes and read boundaries (127.0.0.1, port 0)."""

from __future__ import annotations

import asyncio
import socket
import threading
import time
from collections.abc import Callable
from types import TracebackType

import pytest
from load_helpers import sg_stream, sse

from harness.load import LoadClient, WaveRequest, run_sync, run_wave
from harness.load.driver import resolve_transport
from harness.records import RequestRecord

TOKENS = [101, 102, 103, 104]
Script = Callable[[socket.socket, int], bool]  # (connection, request number on it) -> keep the connection


def chunk(data: bytes) -> bytes:
    return f"{len(data):x}\r\n".encode() + data + b"\r\n"


CHUNKED_HEAD = b"HTTP/1.1 200 OK\r\nContent-Type: text/event-stream\r\nTransfer-Encoding: chunked\r\n\r\n"


class ScriptServer:
    """Reads each request (head and Content-Length body) and hands the socket to ``script``."""

    def __init__(self, script: Script) -> None:
        self.script = script
        self.sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        self.sock.bind(("127.0.0.1", 0))
        self.sock.listen(64)
        self.url = f"http://127.0.0.1:{self.sock.getsockname()[1]}"
        self.accepted = 0
        self.requests: list[bytes] = []
        self.closed_by_client = 0
        self._lock = threading.Lock()

    def __enter__(self) -> ScriptServer:
        threading.Thread(target=self._accept, daemon=True).start()
        return self

    def __exit__(self, et: type[BaseException] | None, ev: BaseException | None, tb: TracebackType | None) -> None:
        self.sock.close()

    def _accept(self) -> None:
        while True:
            try:
                conn, _ = self.sock.accept()
            except OSError:
                return
            with self._lock:
                self.accepted += 1
            threading.Thread(target=self._serve, args=(conn,), daemon=True).start()

    def _serve(self, conn: socket.socket) -> None:
        buf, n = b"", 0
        with conn:
            while True:
                while b"\r\n\r\n" not in buf:
                    more = conn.recv(65536)
                    if not more:
                        with self._lock:
                            self.closed_by_client += 1
                        return
                    buf += more
                head, _, buf = buf.partition(b"\r\n\r\n")
                length = next(int(line.split(b":")[1]) for line in head.split(b"\r\n")
                              if line.lower().startswith(b"content-length:"))
                while len(buf) < length:
                    buf += conn.recv(65536)
                with self._lock:
                    self.requests.append(head)
                buf = buf[length:]
                if not self.script(conn, n):
                    return
                n += 1


def wave(url: str, n: int = 1, *, waves: int = 1, timeout_s: float = 10.0,
         pause_s: float = 0.0) -> list[list[RequestRecord]]:
    async def main() -> list[list[RequestRecord]]:
        out = []
        async with LoadClient(url, concurrency=n, timeout_s=timeout_s, transport="wire") as client:
            for w in range(waves):
                reqs = [WaveRequest(input_ids=[1, 2], max_new_tokens=4, rid=f"w{w}-{i}") for i in range(n)]
                out.append(await run_wave(client, reqs))
                await asyncio.sleep(pause_s)
        return out

    return run_sync(main())


def good_stream(conn: socket.socket, _: int) -> bool:
    conn.sendall(CHUNKED_HEAD + chunk(sse(sg_stream(TOKENS, [1, 1, 2]))) + b"0\r\n\r\n")
    return True


def test_keep_alive_connections_are_reused_across_waves() -> None:
    with ScriptServer(good_stream) as srv:
        waves = wave(srv.url, 3, waves=3)
    assert [[r.error for r in w] for w in waves] == [[None] * 3] * 3
    assert all(r.event_tokens.tolist() == [1, 2, 4] for w in waves for r in w)
    assert srv.accepted == 3  # one connection per concurrent stream, reused by the later waves
    assert len(srv.requests) == 9
    head = srv.requests[0].decode()
    assert head.startswith("POST /generate HTTP/1.1\r\n")
    assert "X-Request-Id: w0-" in head and "Accept: text/event-stream" in head


def test_done_is_timed_at_its_read_and_the_response_end_is_drained_before_reuse() -> None:
    def late_terminator(conn: socket.socket, _: int) -> bool:
        conn.sendall(CHUNKED_HEAD + chunk(sse(sg_stream(TOKENS, [2, 2]))))
        time.sleep(0.3)
        conn.sendall(b"0\r\n\r\n")
        return True

    with ScriptServer(late_terminator) as srv:
        [[first], [second]] = wave(srv.url, waves=2, pause_s=0.6)
    for rec in (first, second):
        assert rec.error is None
        assert (rec.done_ns - rec.event_ns[-1]) / 1e9 < 0.2  # [DONE]'s read, not the terminator's
    assert srv.accepted == 1


def test_close_delimited_body_ends_at_the_close() -> None:
    def http10(conn: socket.socket, _: int) -> bool:
        conn.sendall(b"HTTP/1.0 200 OK\r\nContent-Type: text/event-stream\r\n\r\n" + sse(sg_stream(TOKENS, [4])))
        return False

    def http10_no_done(conn: socket.socket, _: int) -> bool:
        conn.sendall(b"HTTP/1.0 200 OK\r\nContent-Type: text/event-stream\r\n\r\n" + sse(sg_stream(TOKENS, [4])[:-1]))
        return False

    with ScriptServer(http10) as srv:
        [[rec]] = wave(srv.url)
    assert (rec.error, rec.event_tokens.tolist()) == (None, [4])
    with ScriptServer(http10_no_done) as srv:
        [[rec]] = wave(srv.url)
    assert rec.error == "disconnected after 1 events (stream ended without [DONE])"


@pytest.mark.parametrize(("reply", "expected"), [
    (b"HELLO WORLD\r\n\r\n", "bad HTTP response after 0 events: "),
    (b"", "disconnected after 0 events (server closed the connection before answering)"),
    (CHUNKED_HEAD + chunk(sse(sg_stream(TOKENS, [1, 1, 2])[:2])), "disconnected after 2 events (connection closed "
                                                                  "mid-body)"),
])
def test_broken_responses_become_records(reply: bytes, expected: str) -> None:
    def script(conn: socket.socket, _: int) -> bool:
        conn.sendall(reply)
        return False

    with ScriptServer(script) as srv:
        [[rec]] = wave(srv.url)
    assert (rec.error or "").startswith(expected), rec.error


def test_cancelled_request_closes_its_connection() -> None:
    seen: list[bytes] = []

    def slow(conn: socket.socket, _: int) -> bool:
        conn.sendall(CHUNKED_HEAD + chunk(sse(sg_stream(TOKENS, [1, 1, 2])[:1])))
        conn.settimeout(5.0)
        seen.append(conn.recv(1))  # b"" once the client has closed its end
        return False

    async def main(url: str) -> float:
        async with LoadClient(url, concurrency=1, transport="wire") as client:
            task = asyncio.ensure_future(client.send(WaveRequest(input_ids=[1], max_new_tokens=4, rid="c")))
            await asyncio.sleep(0.2)
            t0 = time.monotonic()
            task.cancel()
            with pytest.raises(asyncio.CancelledError):
                await task
            while not seen and time.monotonic() - t0 < 4.0:
                await asyncio.sleep(0.01)
            return time.monotonic() - t0

    with ScriptServer(slow) as srv:
        waited = run_sync(main(srv.url))
    assert seen == [b""]
    assert waited < 1.0


def test_transport_choice() -> None:
    assert resolve_transport("auto", "http://127.0.0.1:1") == "wire"
    assert resolve_transport("auto", "https://example.invalid") == "aiohttp"
    assert resolve_transport("aiohttp", "http://127.0.0.1:1") == "aiohttp"
    with pytest.raises(ValueError, match="unknown transport 'h2'"):
        resolve_transport("h2", "http://127.0.0.1:1")  # type: ignore[arg-type]


def test_a_server_faster_than_the_parse_is_held_back_and_nothing_is_lost(monkeypatch: pytest.MonkeyPatch) -> None:
    from harness.load import wire

    monkeypatch.setattr(wire, "_PAUSE_BYTES", 16 << 10)
    paused: list[int] = []
    real = wire._Conn.data_received

    def spy(self: wire._Conn, data: bytes) -> None:
        real(self, data)
        if self.exchange is not None and self.exchange.paused:
            paused.append(len(data))

    monkeypatch.setattr(wire._Conn, "data_received", spy)
    n = 20_000
    body = sse(sg_stream(list(range(n)), [1] * n, mode="delta"))

    def flood(conn: socket.socket, _: int) -> bool:
        conn.sendall(CHUNKED_HEAD + chunk(body) + b"0\r\n\r\n")
        return True

    async def main(url: str) -> RequestRecord:
        async with LoadClient(url, concurrency=1, transport="wire") as client:
            return await client.send(WaveRequest(input_ids=[1], max_new_tokens=n, rid="f"))

    with ScriptServer(flood) as srv:
        rec = run_sync(main(srv.url))
    assert rec.error is None
    assert rec.event_tokens.size == n and int(rec.event_tokens[-1]) == n
    assert rec.output_ids.tolist() == list(range(n))
    assert paused  # reading was paused at least once, and resumed (the stream completed)
