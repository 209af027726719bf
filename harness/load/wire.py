"""Lean HTTP/1.1 streaming transport (edge module: sockets and the event loop; no aiohttp).

``stream_request`` in ``harness.load.client`` reads a response through aiohttp's stream reader: an
awaited coroutine, a future and a task switch per socket read, 20-40 us of CPU per streamed event.
At C1024+ that CPU is the receive lag (a step's burst of C events is stamped one after the other).
This module does the same exchange with an ``asyncio.Protocol`` per connection and llhttp's C parser
(``httptools``, also uvicorn's). The loop calls ``data_received`` with each read, which only takes
its ``time.perf_counter_ns()`` and queues the bytes; the pool parses queued reads (HTTP, SSE, the
stream decoder, the request's limits) in slices of at most ``PARSE_SLICE_S`` between two polls of
the loop, so the reads of a burst are stamped as the loop hands them over, not after the parse of
the reads before them. A response that arrives faster than it is parsed pauses its connection's
reading (backpressure) until the queue is parsed.

``wire_request`` returns the same ``RequestRecord`` as ``stream_request`` for the same bytes on the
wire (the client tests run on both transports): the same timestamps (one per read, given to every
event of that read), the same decoders, limits (``Budget``, ``StreamLimits``) and error texts, save
that transport errors name no aiohttp exception class. ``WirePool`` keeps at most ``limit``
keep-alive connections to one ``http://`` origin (a connection is reused only after its response
ended cleanly; a request stopped early closes its connection).

A strict HTTP/1.1 client, as aiohttp is on the same bytes: a byte after a complete response (a second,
pipelined response, or garbage) means the connection's state is unknown, so the connection is never
reused (the request keeps its own response's outcome, e.g. a body that ended without ``[DONE]``
fails); a read that breaks HTTP is dropped whole (aiohttp's parser drops it too: its status and
events count for nothing) and fails the request. The response head is bounded by aiohttp's client
defaults (``MAX_LINE_BYTES`` per status reason and per header name plus value, ``MAX_HEADERS``
headers), checked on the raw bytes before the parser holds them, and its time by the idle timeout
counted from the send: head bytes do not reset it (aiohttp's idle watch starts on the body too).
"""

from __future__ import annotations

import asyncio
import ssl as ssl_module
from collections import deque
from collections.abc import Mapping
from time import perf_counter_ns
from typing import Any, cast
from urllib.parse import urlsplit

import httptools

from harness.load.client import (
    BODY_LIMIT,
    ERR_CHARS,
    MAX_HEADERS,
    MAX_LINE_BYTES,
    Budget,
    StopReading,
    StreamLimits,
    body_ended,
    expect_response,
    head_too_long,
    make_record,
    too_many_headers,
)
from harness.load.decode import StreamDecoder
from harness.load.sse import EventTooLong, SSEParser
from harness.records import RequestRecord

_USER_AGENT = b"dsv4h-wire"
PARSE_SLICE_S = 200e-6
"""Longest stretch of parsing between two polls of the loop: a read is stamped when the loop hands it
over, so parsing in short slices keeps a burst's stamps from waiting on the parse of earlier reads."""
_SLICE_NS = int(PARSE_SLICE_S * 1e9)
_PAUSE_BYTES = 4 << 20  # unparsed bytes of one response above which its connection stops reading
_DRAIN_S = 5.0  # how long a finished stream may take to end its response before its connection is dropped


class WirePool:
    """Keep-alive connections to one origin (``base_url``'s scheme, host and port).

    ``limit`` bounds the idle connections kept (a wave opens as many as it needs; ``LoadClient``
    never sends more than its concurrency at once). ``connect_timeout_s`` bounds each connect.
    Use inside one event loop; ``close()`` closes every connection.
    """

    def __init__(self, base_url: str, *, limit: int, connect_timeout_s: float) -> None:
        parts = urlsplit(base_url)
        if parts.scheme not in ("http", "https"):
            raise ValueError(f"wire transport: unsupported URL scheme in {base_url!r} (http or https)")
        self.host = parts.hostname or "127.0.0.1"
        self.port = parts.port or (443 if parts.scheme == "https" else 80)
        https = parts.scheme == "https"
        self.ssl: ssl_module.SSLContext | None = ssl_module.create_default_context() if https else None
        default_port = (parts.scheme == "https" and self.port == 443) or (parts.scheme == "http" and self.port == 80)
        self.host_header = (self.host if default_port else f"{self.host}:{self.port}").encode("idna")
        self.limit = limit
        self.connect_timeout_s = connect_timeout_s
        self._idle: list[_Conn] = []
        self._all: set[_Conn] = set()
        self._dirty: deque[_Exchange] = deque()  # exchanges with reads not yet parsed, oldest first
        self._scheduled = False

    def _queue(self, ex: _Exchange) -> None:
        self._dirty.append(ex)
        if not self._scheduled:
            self._scheduled = True
            asyncio.get_running_loop().call_soon(self._work)

    def _work(self) -> None:
        """Parse queued reads for at most ``PARSE_SLICE_S``, then let the loop poll (and stamp) again."""
        self._scheduled = False
        dirty = self._dirty
        deadline = perf_counter_ns() + _SLICE_NS
        while dirty:
            dirty.popleft().process()
            if perf_counter_ns() > deadline:
                break
        if dirty:
            self._scheduled = True
            asyncio.get_running_loop().call_soon(self._work)

    async def acquire(self) -> _Conn:
        """An idle open connection, else a new one (``OSError``/``TimeoutError`` when that fails)."""
        while self._idle:
            conn = self._idle.pop()
            if conn.open:
                return conn
        loop = asyncio.get_running_loop()
        _, conn = await asyncio.wait_for(
            loop.create_connection(lambda: _Conn(self), self.host, self.port, ssl=self.ssl),
            self.connect_timeout_s)
        return conn

    def _idle_again(self, conn: _Conn) -> None:
        if conn.open and len(self._idle) < self.limit:
            self._idle.append(conn)
        else:
            conn.close()

    def close(self) -> None:
        """Close every connection (idle or busy)."""
        for conn in list(self._all):
            conn.close()
        self._idle.clear()


class _Conn(asyncio.Protocol):
    """One TCP connection; forwards reads (with their timestamp) to the exchange using it."""

    __slots__ = ("exchange", "open", "pool", "transport")

    def __init__(self, pool: WirePool) -> None:
        self.pool = pool
        self.exchange: _Exchange | None = None
        self.transport: asyncio.Transport | None = None
        self.open = False

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        self.transport = cast(asyncio.Transport, transport)  # uvloop's transports are not its subclasses
        self.open = True
        self.pool._all.add(self)

    def data_received(self, data: bytes) -> None:
        t_ns = perf_counter_ns()
        ex = self.exchange
        if ex is None:  # bytes outside any exchange: the connection's state is unknown
            self.close()
            return
        if ex._mode != "headers":  # the head's time is bounded from the send (module doc)
            ex.last_ns = t_ns
        ex.pending.append((data, t_ns))
        ex.pending_bytes += len(data)
        if ex.pending_bytes > _PAUSE_BYTES and self.transport is not None:
            self.transport.pause_reading()  # a server faster than the parse: hold the rest in the kernel
            ex.paused = True
        if not ex.queued:
            ex.queued = True
            self.pool._queue(ex)

    def eof_received(self) -> bool:
        return False  # close the transport; connection_lost follows

    def connection_lost(self, exc: Exception | None) -> None:
        self.open = False
        self.pool._all.discard(self)
        ex = self.exchange
        if ex is not None:
            ex.process()  # what was read before the close comes first
            self.exchange = None
            ex.lost(exc, perf_counter_ns())

    def close(self) -> None:
        self.open = False
        if self.transport is not None:
            self.transport.close()

    def released(self, keep_alive: bool) -> None:
        """The exchange's response ended (``keep_alive``: cleanly, and the server keeps the connection)."""
        self.exchange = None
        if keep_alive:
            self.pool._idle_again(self)
        else:
            self.close()


class _Exchange:
    """One request on one connection: the parser callbacks (``httptools``) and the request's end."""

    def __init__(self, conn: _Conn, decoder: StreamDecoder, limits: StreamLimits, budget: Budget,
                 idle_timeout_s: float) -> None:
        self.conn = conn
        self.decoder = decoder
        self.budget = budget
        self.parser = httptools.HttpResponseParser(self)
        self.sse = SSEParser(limits.max_event_bytes)
        self.status: int | None = None
        self.error: str | None = None
        self.result: asyncio.Future[None] = asyncio.get_running_loop().create_future()
        self.t_ns = 0
        self.last_ns = perf_counter_ns()
        self.idle_timeout_s = idle_timeout_s
        self._idle_ns = int(idle_timeout_s * 1e9)
        # "headers", then "sse" or "text" (an error or non-SSE body being kept); "after": the request
        # ended, its response is read to its end; "closed": the connection is no longer this exchange's
        self._mode = "headers"
        self._ctype = b""
        self._framed = False  # Content-Length or chunked: the body's end is in the bytes, not the close
        self._text = bytearray()
        self._stop: str | None = None
        self._complete = False
        self._keep_alive = False
        self._extra = False  # bytes followed the complete response: the connection is not reused
        self._bodies: list[bytes] = []  # body bytes of the read being parsed (taken once it parsed)
        self._head_lines = 0  # lines of the response head seen (status line included)
        self._head_tail = b""  # the head's unfinished last line
        self.pending: list[tuple[bytes, int]] = []  # reads stamped but not parsed yet
        self.pending_bytes = 0
        self.paused = False
        self.queued = False
        loop = asyncio.get_running_loop()
        self._timer = loop.call_later(idle_timeout_s, self._check_idle)

    # ---- httptools callbacks (must not raise: the parser would wrap the exception)

    def on_message_begin(self) -> None:
        if self._complete:  # a second response on a connection with no request outstanding
            self._extra = True

    def on_header(self, name: bytes, value: bytes) -> None:
        if self._extra:
            return
        low = name.lower()
        if low == b"content-type":
            self._ctype = value
        elif low == b"content-length" or (low == b"transfer-encoding" and b"chunked" in value.lower()):
            self._framed = True

    def on_headers_complete(self) -> None:
        if self._extra:
            return
        self.status = self.parser.get_status_code()
        self._mode = "text" if self.status >= 400 or self.content_type != "text/event-stream" else "sse"

    def on_body(self, body: bytes) -> None:
        if not self._extra:
            self._bodies.append(body)

    def _take_bodies(self) -> None:
        """Take the body bytes of the read just parsed (only once it parsed: see ``feed``)."""
        bodies, self._bodies = self._bodies, []
        for body in bodies:
            if self._mode not in ("sse", "text"):
                break
            self._take_body(body)

    def _take_body(self, body: bytes) -> None:
        if self._mode == "sse":
            try:
                payloads = self.sse.feed(body)
            except EventTooLong as exc:
                self._stop = f"event too long: {exc}; reading stopped after {self.decoder.n_events} events"
                self._mode = "stopped"
                return
            on_event, t_ns = self.decoder.on_event, self.t_ns
            for p in payloads:
                on_event(p, t_ns)
        elif self._mode == "text" and len(self._text) < 4 * ERR_CHARS:
            self._text += body[:BODY_LIMIT]

    def on_message_complete(self) -> None:
        if self._extra:
            return
        self._complete = True
        self._keep_alive = self.parser.should_keep_alive()  # llhttp forgets it once the next message starts

    # ---- reads, close, timers

    @property
    def content_type(self) -> str:
        """The response's media type as aiohttp reports it (no parameters, lower case)."""
        ctype = self._ctype.decode("latin-1").split(";", 1)[0].strip().lower()
        return ctype or "application/octet-stream"

    def process(self) -> None:
        """Parse the reads queued since the last call, in order, each with its own timestamp."""
        self.queued = False
        pending, self.pending = self.pending, []
        self.pending_bytes = 0
        for data, t_ns in pending:
            self.feed(data, t_ns)
        if self.paused:
            self.paused = False
            if self.conn.open and self.conn.transport is not None:
                self.conn.transport.resume_reading()

    def feed(self, data: bytes, t_ns: int) -> None:
        """One socket read taken at ``t_ns``."""
        self.t_ns = t_ns
        mode = self._mode
        if mode == "closed" or not self._parse(data, mode):
            return
        if mode == "headers" and self._mode != "headers":
            self.last_ns = t_ns  # the body's reads reset the idle timer from here on
        self._take_bodies()
        if mode == "after":
            if self._complete:
                self._release(True)
            return
        if self._mode == "text":
            if self._complete or len(self._text) >= 4 * ERR_CHARS:
                self._end_text()
            return
        if self._stop is not None:
            self._end(self._stop, keep=False)
            return
        if self._mode != "sse":
            return
        d = self.decoder
        if self._complete:
            body_ended(self.sse, self.decoder, t_ns)
            self._end(None if d.done_ns is not None else self._no_done(), keep=True)
            return
        if d.done_ns is not None:
            self._end(None, keep=None)  # the chunk terminator may follow in a later read
            return
        try:
            self.budget.after_read(t_ns)
        except StopReading as exc:
            self._end(str(exc), keep=False)

    def _parse(self, data: bytes, mode: str) -> bool:
        """Parse one read (False: it broke HTTP or the head's bounds, and ended the exchange)."""
        if mode == "headers":
            bad = self._check_head(data)
            if bad is not None:
                self._end(f"bad HTTP response after {self.decoder.n_events} events: {bad}", keep=False)
                return False
        status, complete = self.status, self._complete
        try:
            self.parser.feed_data(data)
        except httptools.HttpParserError as exc:
            # the whole read is dropped, as aiohttp's parser drops it: what it began counts for nothing
            self._bodies = []
            self.status, self._complete = status, complete
            if mode == "after":
                self._release(False)
            else:
                self._end(f"bad HTTP response after {self.decoder.n_events} events: {exc}", keep=False)
            return False
        return True

    def _check_head(self, data: bytes) -> str | None:
        """Bound the response head on the raw bytes of one read (module doc): the reason it is too
        large, else None. Lines are checked as they grow, so an endless line fails at the limit."""
        buf = self._head_tail + data if self._head_tail else data
        start = 0
        while True:
            nl = buf.find(b"\n", start)
            line = buf[start:] if nl < 0 else buf[start:nl].removesuffix(b"\r")
            if nl >= 0 and not line and self._head_lines:
                self._head_tail = b""
                return None  # the blank line: the head ends here (the rest is the body's)
            if self._head_lines == 0:  # the status line: aiohttp bounds its reason phrase
                parts = line.split(b" ", 2)
                too_long = len(parts[2] if len(parts) == 3 else line) > MAX_LINE_BYTES
            else:
                name, _, value = line.partition(b":")
                too_long = len(name) + len(value.lstrip(b" \t")) > MAX_LINE_BYTES
            if too_long:
                return head_too_long()
            if nl < 0:
                self._head_tail = bytes(line)
                return None
            self._head_lines += 1
            if self._head_lines > MAX_HEADERS + 1:
                return too_many_headers()
            start = nl + 1

    def lost(self, exc: Exception | None, t_ns: int) -> None:
        """The connection closed (``exc`` None: an orderly close by the server)."""
        self.t_ns = t_ns
        if self._mode in ("after", "closed"):
            self._mode = "closed"
            self._timer.cancel()
            return
        n = self.decoder.n_events
        if self._mode == "headers":
            why = type(exc).__name__ if exc is not None else "server closed the connection before answering"
            self._end(f"disconnected after {n} events ({why})", keep=False)
        elif self._mode == "text":
            self._end_text()
        elif not self._framed and exc is None:  # the body runs to the close: this is its end
            body_ended(self.sse, self.decoder, t_ns)
            self._end(None if self.decoder.done_ns is not None else self._no_done(), keep=False)
        else:
            why = type(exc).__name__ if exc is not None else "connection closed mid-body"
            self._end(f"disconnected after {n} events ({why})", keep=False)

    def _no_done(self) -> str:
        return f"disconnected after {self.decoder.n_events} events (stream ended without [DONE])"

    def _end_text(self) -> None:
        text = bytes(self._text).decode("utf-8", "replace")[:ERR_CHARS]
        status = self.status or 0
        if status >= 400:
            self._end(f"http {status}: {text}", keep=self._complete)
        else:
            self._end(f"non-SSE body ({self.content_type}): {text}", keep=self._complete)

    def _check_idle(self) -> None:
        if self._mode == "closed":
            return
        if self._mode == "after":  # the response's end never came: the connection cannot be reused
            self._release(False)
            return
        left_ns = self.last_ns + self._idle_ns - perf_counter_ns()
        if left_ns > 0:
            self._timer = asyncio.get_running_loop().call_later(left_ns / 1e9, self._check_idle)
            return
        self.t_ns = perf_counter_ns()
        self._end(f"timeout (read) after {self.decoder.n_events} events (no data for {self.idle_timeout_s:g} s)",
                  keep=False)

    def _end(self, error: str | None, *, keep: bool | None) -> None:
        """Finish the request: ``keep`` True returns the connection to the pool (the response ended
        and the server keeps it), False closes it, None lets it read on to its response's end first."""
        if self._mode in ("after", "closed"):
            return
        self.error = error
        self._timer.cancel()
        if keep is None and not self._complete:
            self._mode = "after"
            self._timer = asyncio.get_running_loop().call_later(_DRAIN_S, self._check_idle)
        else:
            self._release(bool(keep))
        if not self.result.done():
            self.result.set_result(None)

    def _release(self, keep: bool) -> None:
        self._mode = "closed"
        self._timer.cancel()
        self.conn.released(keep and self._complete and self._keep_alive and not self._extra)

    def abort(self) -> None:
        """The awaiting task was cancelled: close the connection, end nothing else."""
        self.pending = []
        self._mode = "closed"
        self._timer.cancel()
        self.conn.exchange = None
        self.conn.close()


def _request_head(pool: WirePool, path: str, body: bytes, headers: Mapping[str, str]) -> bytes:
    lines = [b"POST " + path.encode() + b" HTTP/1.1", b"Host: " + pool.host_header, b"User-Agent: " + _USER_AGENT,
             b"Content-Length: " + str(len(body)).encode(), b"Connection: keep-alive"]
    lines += [k.encode("latin-1") + b": " + v.encode("latin-1") for k, v in headers.items()]
    return b"\r\n".join(lines) + b"\r\n\r\n"


async def wire_request(
    pool: WirePool,
    path: str,
    body: bytes,
    rid: str,
    *,
    decoder: StreamDecoder,
    headers: Mapping[str, str],
    fields: Mapping[str, Any] | None = None,
    idle_timeout_s: float = 600.0,
    limits: StreamLimits | None = None,
    max_new_tokens: int | None = None,
) -> RequestRecord:
    """Send one streamed POST to ``path`` on ``pool``'s origin and return its record; never raises for
    request failures (``stream_request``'s contract, on this module's transport)."""
    limits = limits if limits is not None else StreamLimits()
    expect_response(decoder, body)
    send_ns = perf_counter_ns()
    budget = Budget(limits, max_new_tokens, idle_timeout_s, send_ns, decoder)
    status: int | None = None
    error: str | None
    try:
        conn = await pool.acquire()
    except TimeoutError:
        error = f"timeout (connect) after 0 events: no connection in {pool.connect_timeout_s:g} s"
    except ConnectionRefusedError as exc:
        error = f"connection refused: cannot connect to {pool.host}:{pool.port} ({exc.strerror or exc})"
    except OSError as exc:
        error = f"connect failed: cannot connect to {pool.host}:{pool.port} ({exc.strerror or exc})"
    else:
        ex = _Exchange(conn, decoder, limits, budget, idle_timeout_s)
        conn.exchange = ex
        assert conn.transport is not None
        conn.transport.write(_request_head(pool, path, body, headers) + body)
        try:
            await ex.result
        except asyncio.CancelledError:
            ex.abort()
            raise
        status, error = ex.status, ex.error
    return make_record(decoder, rid, send_ns, perf_counter_ns(), status, error, fields)

