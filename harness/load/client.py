"""Streaming HTTP client: one request in, one ``RequestRecord`` out, failures included.

``stream_request`` posts a prepared body on a shared ``aiohttp.ClientSession`` and reads the
response with one ``time.perf_counter_ns()`` per socket read, applied to every event parsed from
that read. Token counts come from the decoder (the server's cumulative counts). Every failure
(HTTP status, error event, malformed event, non-SSE body, abort, disconnect, refused
connection, timeout) becomes a record with ``error`` set and its partial tokens kept; nothing
is raised and nothing is dropped. Request bodies (``sglang_body``, ``vllm_body``) are pure.

Every wait is bounded (``StreamLimits``): silence longer than the idle timeout; no new output
token for that long while the server keeps sending; a total time past ``deadline_grace_s`` +
``deadline_factor`` x ``max_new_tokens`` x the step observed on the stream itself; more output
tokens than ``max_new_tokens`` (the client stops reading: the record's error starts with
``token overrun``); one SSE event longer than ``max_event_bytes``. Each ends the request with the
reason in its record.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from time import perf_counter_ns
from typing import Any, Literal
from urllib.parse import urlsplit

import aiohttp
import numpy as np

from harness.errors import ServerUnreachable
from harness.load.openai import OpenAIDecoder, Tokenize
from harness.load.spec import spec_fields
from harness.load.sse import DEFAULT_MAX_EVENT_BYTES, EventTooLong, SGLangDecoder, SSEParser, StreamDecoder, VLLMDecoder
from harness.records import RequestRecord

__all__ = ["StreamLimits"]

Protocol = Literal["sglang", "vllm", "openai-completions", "openai-chat"]
PROTOCOLS: tuple[Protocol, ...] = ("sglang", "vllm", "openai-completions", "openai-chat")

ENDPOINTS: dict[Protocol, str] = {"sglang": "/generate", "vllm": "/v1/completions",
                                  "openai-completions": "/v1/completions", "openai-chat": "/v1/chat/completions"}
REQUEST_HEADERS = {"Content-Type": "application/json", "Accept": "text/event-stream", "Accept-Encoding": "identity"}
BODY_LIMIT = 64 * 1024
ERR_CHARS = 200
MAX_LINE_BYTES = 8190  # aiohttp's client defaults (max_line_size, max_field_size); the wire transport's too
MAX_HEADERS = 128  # aiohttp's client default (max_headers)


def head_too_long() -> str:
    """The reason a response head with a status reason or header longer than ``MAX_LINE_BYTES`` fails."""
    return f"a status reason or header longer than {MAX_LINE_BYTES} bytes"


def too_many_headers() -> str:
    """The reason a response head with more than ``MAX_HEADERS`` headers fails."""
    return f"more than {MAX_HEADERS} headers"


def http_error_reason(message: str) -> str:
    """The reason in an aiohttp HTTP-parser error as the wire transport words it (both parsers are
    llhttp: its reason is the message's first line, after aiohttp's ``Bad status line:`` prefix)."""
    if message.startswith("Got more than "):
        return head_too_long()
    if message == "Too many headers received":
        return too_many_headers()
    text = message.removeprefix("Bad status line:").strip()
    return text.split("\n", 1)[0].rstrip(":").strip()


def expect_response(decoder: StreamDecoder, body: bytes) -> None:
    """Tell ``decoder`` the request's body, from which it learns the id its response must carry
    (both transports call this before sending; decoders without an ``expect_request`` ignore it)."""
    expect = getattr(decoder, "expect_request", None)
    if expect is not None:
        expect(body)


def _ids_list(input_ids: Sequence[int]) -> list[int]:
    tolist = getattr(input_ids, "tolist", None)
    return list(tolist()) if tolist is not None else [int(i) for i in input_ids]


def _dumps(obj: Mapping[str, Any]) -> bytes:
    return json.dumps(obj, separators=(",", ":")).encode()


def sglang_body(
    input_ids: Sequence[int],
    max_new_tokens: int,
    *,
    rid: str,
    ignore_eos: bool = False,
    cache_salt: str | None = None,
) -> bytes:
    """JSON body of a streamed, greedy SGLang ``/generate`` request (``cache_salt`` omitted if None)."""
    body: dict[str, Any] = {
        "input_ids": _ids_list(input_ids),
        "sampling_params": {"max_new_tokens": max_new_tokens, "temperature": 0, "ignore_eos": ignore_eos},
        "stream": True,
        "rid": rid,
    }
    if cache_salt is not None:
        body["cache_salt"] = cache_salt
    return _dumps(body)


def vllm_body(
    model: str,
    input_ids: Sequence[int],
    max_new_tokens: int,
    *,
    ignore_eos: bool = False,
    cache_salt: str | None = None,
) -> bytes:
    """JSON body of a streamed, greedy vLLM ``/v1/completions`` request with token ids and usage."""
    body: dict[str, Any] = {
        "model": model,
        "prompt": _ids_list(input_ids),
        "max_tokens": max_new_tokens,
        "temperature": 0,
        "stream": True,
        "stream_options": {"include_usage": True},
        "return_token_ids": True,
        "ignore_eos": ignore_eos,
    }
    if cache_salt is not None:
        body["cache_salt"] = cache_salt
    return _dumps(body)


def new_decoder(protocol: Protocol, *, tokenize: Tokenize | None = None, count_method: str | None = None
                ) -> StreamDecoder:
    """A fresh decoder for one stream of ``protocol``; ``tokenize`` and ``count_method`` apply to the
    generic OpenAI protocols (``harness.load.openai``)."""
    if protocol == "sglang":
        return SGLangDecoder()
    if protocol == "vllm":
        return VLLMDecoder()
    if protocol in ("openai-completions", "openai-chat"):
        return OpenAIDecoder(protocol, tokenize=tokenize, force=count_method)
    raise ValueError(f"unknown protocol {protocol!r}; expected one of {PROTOCOLS}")


async def _read_text(resp: aiohttp.ClientResponse) -> str:
    """The first ``ERR_CHARS`` characters of a (non-SSE or error) body; "" if unreadable."""
    raw = b""
    try:
        while len(raw) < 4 * ERR_CHARS:
            more = await resp.content.read(BODY_LIMIT)
            if not more:
                break
            raw += more
    except (aiohttp.ClientError, TimeoutError):
        pass
    return raw.decode("utf-8", "replace")[:ERR_CHARS]


class _IdleWatch:
    """Cancels the current task once nothing was read for ``timeout_s`` seconds.

    The reader only stores ``last_ns`` per socket read; the timer re-arms itself lazily
    (no per-read timer churn, unlike aiohttp's ``sock_read``).
    """

    __slots__ = ("_handle", "_loop", "_task", "_timeout_ns", "fired", "last_ns", "status")

    def __init__(self, timeout_s: float) -> None:
        self._loop = asyncio.get_running_loop()
        task = asyncio.current_task()
        assert task is not None
        self._task = task
        self._timeout_ns = int(timeout_s * 1e9)
        self.last_ns = perf_counter_ns()
        self.fired = False
        self.status: int | None = None  # HTTP status once headers arrived
        self._handle = self._loop.call_later(timeout_s, self._check)

    def _check(self) -> None:
        left_ns = self.last_ns + self._timeout_ns - perf_counter_ns()
        if left_ns > 0:
            self._handle = self._loop.call_later(left_ns / 1e9, self._check)
        else:
            self.fired = True
            self._task.cancel()

    def stop(self) -> None:
        self._handle.cancel()


@dataclass(frozen=True)
class StreamLimits:
    """Bounds on one streamed request (module docstring; ``harness.inputs.spec.ClientLimits``)."""

    deadline_factor: float = 4.0
    deadline_grace_s: float = 60.0
    max_event_bytes: int = DEFAULT_MAX_EVENT_BYTES


class StopReading(Exception):
    """Reading stopped on purpose (``Budget``); the message becomes the record's error."""


_EVENT_SLACK = 16  # events that carry no token (role, usage, finish) when progress is counted in events


class Budget:
    """When a stream must stop (pure arithmetic on monotonic ns): see the module docstring."""

    __slots__ = ("c1", "cap", "counts", "decoder", "last_c", "last_t", "limit_ns", "limits", "max_new", "send_ns",
                 "silence_ns", "t1")

    def __init__(self, limits: StreamLimits, max_new_tokens: int | None, silence_s: float, send_ns: int,
                 decoder: StreamDecoder) -> None:
        self.decoder = decoder
        self.counts: list[int] | None = getattr(decoder, "event_tokens", None)  # live cumulative counts, if kept
        in_events = self.counts is None
        self.limits = limits
        self.max_new = max_new_tokens
        self.cap = None if max_new_tokens is None else max_new_tokens + (_EVENT_SLACK if in_events else 0)
        self.silence_ns = int(silence_s * 1e9)
        self.send_ns = send_ns
        self.limit_ns = send_ns + self.silence_ns
        self.c1: int | None = None
        self.t1 = self.last_t = send_ns
        self.last_c = 0

    def after_read(self, t_ns: int) -> None:
        """Judge the stream after a read at ``t_ns`` (both transports): its output count (the decoder's
        cumulative counts, else its events) and the time limit; raises ``StopReading`` with the reason."""
        counts, d = self.counts, self.decoder
        c = (counts[-1] if counts else 0) if counts is not None else d.n_events
        if c != self.last_c:
            self.progress(c, t_ns)
        if t_ns > self.limit_ns:
            raise StopReading(self.reason(t_ns, d.n_events))

    def progress(self, c: int, t_ns: int) -> None:
        """The stream's cumulative output count reached ``c`` at ``t_ns``."""
        if self.cap is not None and c > self.cap:
            raise StopReading(f"token overrun: the server streamed {c} output tokens, more than max_new_tokens="
                        f"{self.max_new}; reading stopped")
        if self.c1 is None:
            self.c1, self.t1 = c, t_ns
        self.last_c, self.last_t = c, t_ns
        limit = t_ns + self.silence_ns
        if self.max_new is not None and c > self.c1:
            step_ns = (t_ns - self.t1) / (c - self.c1)
            total = self.t1 + self.limits.deadline_grace_s * 1e9 + self.limits.deadline_factor * self.max_new * step_ns
            limit = min(limit, int(total))
        self.limit_ns = limit

    def reason(self, t_ns: int, n_events: int) -> str:
        if self.c1 is not None and self.last_c > self.c1 and self.max_new is not None and \
                self.limit_ns < self.last_t + self.silence_ns:
            step = (self.last_t - self.t1) / (self.last_c - self.c1) / 1e9
            return (f"deadline: no end of stream after {(t_ns - self.send_ns) / 1e9:.1f} s (limit: "
                    f"{self.limits.deadline_grace_s:g} s + {self.limits.deadline_factor:g} x {self.max_new} tokens "
                    f"x observed step {step * 1e3:.3f} ms); reading stopped")
        return (f"timeout (no progress): no new output for {self.silence_ns / 1e9:g} s while the server kept "
                f"sending ({n_events} events); reading stopped")


async def _read_stream(resp: aiohttp.ClientResponse, decoder: StreamDecoder, watch: _IdleWatch,
                       limits: StreamLimits, budget: Budget) -> None:
    parser = SSEParser(limits.max_event_bytes)
    feed = parser.feed
    on_event = decoder.on_event
    read = resp.content.readany
    while True:
        chunk = await read()
        watch.last_ns = t_ns = perf_counter_ns()
        if not chunk:
            body_ended(parser, decoder, t_ns)
            return
        for payload in feed(chunk):
            on_event(payload, t_ns)
        if decoder.done_ns is not None:
            return
        budget.after_read(t_ns)


def body_ended(parser: SSEParser, decoder: StreamDecoder, t_ns: int) -> None:
    """The response body ended at ``t_ns`` (both transports): an event completed by a final CR is
    still taken, then the decoder hears of the end (servers that close without ``[DONE]``)."""
    for payload in parser.close():
        decoder.on_event(payload, t_ns)
    body_end = getattr(decoder, "on_body_end", None)
    if body_end is not None:
        body_end(t_ns)


async def _exchange(
    session: aiohttp.ClientSession,
    url: str,
    body: bytes,
    headers: Mapping[str, str],
    decoder: StreamDecoder,
    idle_timeout_s: float,
    limits: StreamLimits,
    budget: Budget,
) -> tuple[int | None, str | None]:
    """POST and read the response into ``decoder``; returns (http status, transport error)."""
    watch = _IdleWatch(idle_timeout_s)
    try:
        return await _exchange_inner(session, url, body, headers, decoder, watch, limits, budget)
    except asyncio.CancelledError:
        if not watch.fired:
            raise
        task = asyncio.current_task()
        assert task is not None
        task.uncancel()
        return watch.status, f"timeout (read) after {decoder.n_events} events (no data for {idle_timeout_s:g} s)"
    finally:
        watch.stop()


def _client_error(exc: aiohttp.ClientError, n: int) -> str:
    """The record's error for an aiohttp failure after ``n`` events, in the wire transport's words
    where both transports see the same thing (the differential test holds them to it)."""
    if isinstance(exc, aiohttp.ServerDisconnectedError):  # before any response
        return f"disconnected after {n} events (server closed the connection before answering)"
    if isinstance(exc, aiohttp.ClientPayloadError):
        mid_body = str(exc).startswith("Response payload is not completed")
        return f"disconnected after {n} events ({'connection closed mid-body' if mid_body else type(exc).__name__})"
    if isinstance(exc, aiohttp.ClientOSError):
        return f"disconnected after {n} events ({type(exc).__name__})"
    if isinstance(exc, aiohttp.ClientResponseError):  # the parser refused the response (head limits included)
        return f"bad HTTP response after {n} events: {http_error_reason(exc.message)}"
    return f"client error after {n} events: {type(exc).__name__}: {exc}"


async def _exchange_inner(
    session: aiohttp.ClientSession,
    url: str,
    body: bytes,
    headers: Mapping[str, str],
    decoder: StreamDecoder,
    watch: _IdleWatch,
    limits: StreamLimits,
    budget: Budget,
) -> tuple[int | None, str | None]:
    status: int | None = None
    try:
        async with session.post(url, data=body, headers=headers) as resp:
            status = watch.status = resp.status
            if status >= 400:
                return status, f"http {status}: {await _read_text(resp)}"
            if resp.content_type != "text/event-stream":
                return status, f"non-SSE body ({resp.content_type}): {await _read_text(resp)}"
            await _read_stream(resp, decoder, watch, limits, budget)
    except StopReading as exc:
        return status, str(exc)
    except EventTooLong as exc:
        return status, f"event too long: {exc}; reading stopped after {decoder.n_events} events"
    except aiohttp.ClientConnectorError as exc:
        kind = "connection refused" if isinstance(exc.os_error, ConnectionRefusedError) else "connect failed"
        return status, f"{kind}: {exc}"
    except TimeoutError as exc:
        what = "connect" if isinstance(exc, aiohttp.ConnectionTimeoutError) else "read"
        return status, f"timeout ({what}) after {decoder.n_events} events: {exc}"
    except aiohttp.ClientError as exc:
        return status, _client_error(exc, decoder.n_events)
    if decoder.done_ns is None:
        return status, f"disconnected after {decoder.n_events} events (stream ended without [DONE])"
    return status, None


async def stream_request(
    session: aiohttp.ClientSession,
    url: str,
    body: bytes,
    rid: str,
    *,
    protocol: Protocol = "sglang",
    fields: Mapping[str, Any] | None = None,
    idle_timeout_s: float = 600.0,
    decoder: StreamDecoder | None = None,
    limits: StreamLimits | None = None,
    max_new_tokens: int | None = None,
) -> RequestRecord:
    """Send one streamed request and return its record; never raises for request failures.

    ``url`` is the full endpoint URL and ``body`` a prepared JSON body (``sglang_body`` /
    ``vllm_body``). ``send_ns`` is taken just before the POST, ``done_ns`` at ``[DONE]`` (or
    when the body ended or failed). The request fails with a timeout once nothing was read
    for ``idle_timeout_s`` seconds (connect timeouts are the session's). ``fields`` are extra
    ``RequestRecord`` fields (the campaign identity), copied as given. A protocol-level error
    seen on the stream wins over the transport error that followed it. ``decoder`` replaces the
    protocol's default decoder (e.g. an ``OpenAIDecoder`` with a tokenizer). ``limits`` and
    ``max_new_tokens`` bound the request's total time and output (module docstring); without
    ``max_new_tokens`` only silence and lack of progress are bounded.
    """
    decoder = decoder if decoder is not None else new_decoder(protocol)
    limits = limits if limits is not None else StreamLimits()
    headers = {**REQUEST_HEADERS, "X-Request-Id": rid}
    expect_response(decoder, body)
    send_ns = perf_counter_ns()
    budget = Budget(limits, max_new_tokens, idle_timeout_s, send_ns, decoder)
    status, transport_error = await _exchange(session, url, body, headers, decoder, idle_timeout_s, limits, budget)
    return make_record(decoder, rid, send_ns, perf_counter_ns(), status, transport_error, fields)


def make_record(decoder: StreamDecoder, rid: str, send_ns: int, end_ns: int, status: int | None,
                transport_error: str | None, fields: Mapping[str, Any] | None) -> RequestRecord:
    """The record of one finished exchange (both transports): ``end_ns`` stands in for ``done_ns``
    when the stream never ended; a protocol-level error seen on the stream wins over the transport's."""
    d = decoder.finish()
    return RequestRecord(
        rid=rid,
        send_ns=send_ns,
        done_ns=d.done_ns if d.done_ns is not None else end_ns,
        event_ns=np.array(d.event_ns, dtype=np.int64),
        event_tokens=np.array(d.event_tokens, dtype=np.int32),
        emit_ns=np.array(d.emit_ns, dtype=np.int64),
        output_ids=np.array(d.output_ids, dtype=np.int32),
        prompt_tokens=d.prompt_tokens,
        cached_tokens=d.cached_tokens,
        completion_tokens=d.completion_tokens,
        finish_reason=d.finish_reason,
        http_status=status,
        error=d.error or transport_error,
        output_mode=d.output_mode,
        final_text=d.final_text,
        count_method=d.count_method,
        **spec_fields(d.spec),
        **(fields or {}),
    )


async def probe(url: str, timeout_s: float = 5.0) -> None:
    """Return if something accepts TCP connections at ``url``'s host and port.

    Raises ``ServerUnreachable`` (with a hint) when the connection is refused, fails or
    does not complete within ``timeout_s`` seconds. Sends no HTTP request.
    """
    parts = urlsplit(url)
    host = parts.hostname or "127.0.0.1"
    port = parts.port or (443 if parts.scheme == "https" else 80)
    try:
        _, writer = await asyncio.wait_for(asyncio.open_connection(host, port), timeout_s)
    except (OSError, TimeoutError) as exc:
        reason = "timed out" if isinstance(exc, TimeoutError) else (exc.strerror or str(exc))
        raise ServerUnreachable(
            f"nothing answers at {url} ({reason})",
            hint="start the server first (e.g. `dsv4h sim serve`), or check the host and port in the URL",
        ) from exc
    writer.close()
    with contextlib.suppress(OSError):
        await writer.wait_closed()
