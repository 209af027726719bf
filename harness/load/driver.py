"""Wave driver: send a wave of requests together and collect one record per request.

``LoadClient`` owns one ``aiohttp.ClientSession`` whose connector holds ``concurrency``
connections and, with the ``wire`` transport (``harness.load.wire``; the default for ``http://``), a
pool of lean keep-alive connections that the streamed requests use instead; ``run_wave`` prepares
every body first, then starts every request at once (``asyncio.gather``) and returns the records
in request order with each request's campaign identity copied in. ``run_wave_sync`` does the same
from synchronous code on its own uvloop loop.

**Wave deadline.** Every wave is bounded as a whole, on both transports and in load workers
(``gather_wave``): besides its own limits (``harness.load.client.Budget``), each request of the wave is
followed by a ``WaveWatch`` that applies the same arithmetic to what its decoder has counted so far,
sampled every ``WATCH_INTERVAL_S`` (so never earlier than the request's own reads): a request may run
until its own time limit (send + silence before its first output; afterwards the smaller of last
progress + silence and first output + ``deadline_grace_s`` + ``deadline_factor`` x ``max_new_tokens`` x
its observed step), then one more silence (its idle timer). The wave's deadline is the latest of these
over its unfinished requests plus ``WAVE_MARGIN_S`` (startup and teardown). A request still running past
it (its own bounds failed it: e.g. bytes that never complete a header) is cancelled and recorded as
failed with ``wave deadline exceeded after X s``, its partial tokens kept; the wave's other records are
unchanged. A wave with a failed request is never counted (the campaign marks its round failed).

**Live tally.** At the same ticks, ``on_live`` (when given) hears the wave's progress so far
(``harness.load.live``), read from the decoders' live lists: no work is added per streamed event.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import contextlib
import gc
import time
from collections.abc import Awaitable, Callable, Coroutine, Iterator, Sequence
from dataclasses import dataclass
from types import TracebackType
from typing import Any, Literal, TypeVar

import aiohttp

from harness import aio
from harness.errors import ServerUnreachable, ServiceError
from harness.ids import ANONYMOUS, RequestIdentity
from harness.load.client import (
    ENDPOINTS,
    PROTOCOLS,
    REQUEST_HEADERS,
    Budget,
    Protocol,
    StopReading,
    StreamLimits,
    make_record,
    new_decoder,
    sglang_body,
    stream_request,
    vllm_body,
)
from harness.load.decode import StreamDecoder
from harness.load.live import LiveTally, LiveWave
from harness.load.openai import Tokenize, openai_body
from harness.load.wire import WirePool, wire_request
from harness.records import RequestRecord

__all__ = ["DEFAULT_TIMEOUT_S", "LiveSink", "OpenAIOptions", "Transport"]

T = TypeVar("T")
LiveSink = Callable[[LiveTally], None]
"""Hears a wave's live tally at each watch tick (``WATCH_INTERVAL_S``), on the wave's event loop."""
WaveRunner = Callable[[Sequence["WaveRequest"], LiveSink | None], Awaitable[list[RequestRecord]]]

DEFAULT_TIMEOUT_S = 600.0
DEFAULT_CONNECT_TIMEOUT_S = 10.0

WAVE_MARGIN_S = 5.0
"""Added to the latest request limit of a wave (module docstring): building records, closing streams,
scheduling jitter. Load workers get it twice in the parent (results are pickled and piped back)."""
WATCH_INTERVAL_S = 0.25
"""How often a wave's deadline is re-derived from its requests' progress."""

Transport = Literal["auto", "wire", "aiohttp"]
TRANSPORTS: tuple[Transport, ...] = ("auto", "wire", "aiohttp")
DEFAULT_TRANSPORT: Transport = "auto"
"""What ``LoadClient(transport=None)`` uses: ``auto`` is ``wire`` for ``http://`` URLs, ``aiohttp`` for
``https://`` (the lean transport is measured on plain loopback HTTP only)."""


def resolve_transport(transport: Transport | None, base_url: str) -> Literal["wire", "aiohttp"]:
    """The transport a client of ``base_url`` uses for ``transport`` (None: ``DEFAULT_TRANSPORT``)."""
    t = DEFAULT_TRANSPORT if transport is None else transport
    if t not in TRANSPORTS:
        raise ValueError(f"unknown transport {t!r}; expected one of {TRANSPORTS}")
    if t == "auto":
        return "wire" if base_url.lower().startswith("http://") else "aiohttp"
    return t


@dataclass(frozen=True)
class OpenAIOptions:
    """How to talk to a generic OpenAI-compatible server (ignored by the other protocols).

    ``prompt_format`` ``token-ids`` sends the corpus ids as the completions prompt, ``text`` the
    decoded text (chat always sends text). ``continuous_usage_stats`` asks for usage on every
    chunk; ``return_token_ids`` asks for vLLM's per-chunk ids; ``send_cache_salt`` sends vLLM's
    ``cache_salt``. ``tokenize`` (text -> token count) enables re-tokenized counting;
    ``count_method`` pins a method instead of choosing the best available (harness.load.openai).
    """

    prompt_format: str = "token-ids"
    continuous_usage_stats: bool = True
    return_token_ids: bool = False
    send_cache_salt: bool = False
    tokenize: Tokenize | None = None
    count_method: str | None = None


@dataclass(frozen=True, slots=True)
class WaveRequest:
    """One request of a wave and the identity its record carries.

    ``input_len`` defaults to ``len(input_ids)`` and ``concurrency`` to the wave's size.
    """

    input_ids: Sequence[int]
    max_new_tokens: int
    rid: str
    ignore_eos: bool = False
    prompt_text: str | None = None  # the prompt as text, for servers that take no token ids
    cache_salt: str | None = None
    identity: RequestIdentity = ANONYMOUS
    input_len: int | None = None
    concurrency: int | None = None

    def record_fields(self, wave_size: int) -> dict[str, Any]:
        """The ``RequestRecord`` fields this request fixes before it is sent (its identity, input
        length, concurrency and salt) inside a wave of ``wave_size``."""
        return self.identity.fields() | {
            "input_len": len(self.input_ids) if self.input_len is None else self.input_len,
            "concurrency": wave_size if self.concurrency is None else self.concurrency,
            "cache_salt": self.cache_salt,
        }


class LoadClient:
    """Async context manager owning the HTTP session for one server.

    ``async with LoadClient(base_url, protocol="sglang", concurrency=64) as c:``. ``timeout_s``
    is the longest silence (seconds) tolerated while reading a response (a prefill queue can be
    long); ``connect_timeout_s`` bounds connection setup. For ``protocol="vllm"`` without a
    ``model``, the first model of ``GET /v1/models`` is used. With ``pause_gc`` (default),
    ``run_wave`` suspends Python's cyclic garbage collector while the wave is in flight, so a
    collection pause never delays event timestamps (reference counting still frees memory).
    ``limits`` bound every request's total time, output and event size (``StreamLimits``).
    ``transport`` reads the streams through ``harness.load.wire`` (``wire``, 3-5x less CPU per
    event) or aiohttp (``aiohttp``); both give the same records (``resolve_transport``).
    """

    def __init__(
        self,
        base_url: str,
        *,
        protocol: Protocol = "sglang",
        concurrency: int = 64,
        model: str | None = None,
        timeout_s: float = DEFAULT_TIMEOUT_S,
        connect_timeout_s: float = DEFAULT_CONNECT_TIMEOUT_S,
        pause_gc: bool = True,
        openai: OpenAIOptions | None = None,
        limits: StreamLimits | None = None,
        transport: Transport | None = None,
    ) -> None:
        if protocol not in PROTOCOLS:
            raise ValueError(f"unknown protocol {protocol!r}; expected one of {PROTOCOLS}")
        if concurrency < 1:
            raise ValueError(f"concurrency must be >= 1, got {concurrency}")
        self.base_url = base_url.rstrip("/")
        self.protocol: Protocol = protocol
        self.concurrency = concurrency
        self.model = model
        self.url = self.base_url + ENDPOINTS[protocol]
        self.pause_gc = pause_gc
        self.timeout_s = timeout_s
        self.openai = openai or OpenAIOptions()
        self.limits = limits or StreamLimits()
        self._timeout = aiohttp.ClientTimeout(total=None, connect=connect_timeout_s)
        self._session: aiohttp.ClientSession | None = None
        self.transport = resolve_transport(transport, self.base_url)
        self.connect_timeout_s = connect_timeout_s
        self._pool: WirePool | None = None
        self._path = ENDPOINTS[protocol]
        # Set by subclasses that run waves elsewhere (harness.load.workers): run_wave delegates to it.
        self.wave_runner: WaveRunner | None = None

    def new_decoder(self) -> StreamDecoder:
        """A fresh decoder for one stream of this client's protocol."""
        return new_decoder(self.protocol, tokenize=self.openai.tokenize, count_method=self.openai.count_method)

    def take_check(self) -> dict[str, Any] | None:
        """Self-check figures of the last wave measured outside this process (load workers), once;
        None for an in-process client."""
        return None

    async def __aenter__(self) -> LoadClient:
        connector = aiohttp.TCPConnector(limit=self.concurrency, limit_per_host=0, keepalive_timeout=60)
        self._session = aiohttp.ClientSession(connector=connector, timeout=self._timeout, auto_decompress=False)
        if self.transport == "wire":
            self._pool = WirePool(self.base_url, limit=self.concurrency, connect_timeout_s=self.connect_timeout_s)
        if self.protocol != "sglang" and self.model is None:
            try:
                self.model = await self._first_model()
            except BaseException:
                await self.__aexit__(None, None, None)
                raise
        return self

    async def __aexit__(
        self, et: type[BaseException] | None, ev: BaseException | None, tb: TracebackType | None
    ) -> None:
        if self._pool is not None:
            self._pool.close()
            self._pool = None
        if self._session is not None:
            await self._session.close()
            self._session = None

    @property
    def session(self) -> aiohttp.ClientSession:
        """The open session (only inside ``async with``)."""
        if self._session is None:
            raise RuntimeError("LoadClient is not open; use `async with LoadClient(...) as c:`")
        return self._session

    async def _first_model(self) -> str:
        url = self.base_url + "/v1/models"
        try:
            async with self.session.get(url) as resp:
                data = await resp.json(content_type=None) if resp.status == 200 else None
        except (aiohttp.ClientError, TimeoutError, ValueError) as exc:
            raise ServerUnreachable(
                f"cannot list models at {url}: {exc}", hint="pass the model name explicitly"
            ) from exc
        models = data.get("data") if isinstance(data, dict) else None
        if not models or not isinstance(models[0], dict) or "id" not in models[0]:
            raise ServiceError(f"{url} lists no model", hint="pass the model name explicitly")
        return str(models[0]["id"])

    def body(self, req: WaveRequest) -> bytes:
        """The JSON request body for ``req`` under this client's protocol."""
        if self.protocol in ("openai-completions", "openai-chat"):
            assert self.model is not None, "model is resolved on __aenter__"
            o = self.openai
            prompt: Sequence[int] | str = req.input_ids
            if o.prompt_format == "text" or self.protocol == "openai-chat":
                if req.prompt_text is None:
                    raise ValueError(f"request {req.rid}: {self.protocol} with text prompts needs prompt_text "
                                     "(declare the tokenizer that decodes the corpus ids)")
                prompt = req.prompt_text
            return openai_body(self.protocol, self.model, prompt, req.max_new_tokens, ignore_eos=req.ignore_eos,
                               cache_salt=req.cache_salt if o.send_cache_salt else None,
                               token_ids=o.return_token_ids, continuous_usage=o.continuous_usage_stats)
        if self.protocol == "vllm":
            assert self.model is not None, "model is resolved on __aenter__"
            return vllm_body(
                self.model,
                req.input_ids,
                req.max_new_tokens,
                ignore_eos=req.ignore_eos,
                cache_salt=req.cache_salt,
            )
        return sglang_body(
            req.input_ids,
            req.max_new_tokens,
            rid=req.rid,
            ignore_eos=req.ignore_eos,
            cache_salt=req.cache_salt,
        )

    async def send(self, req: WaveRequest, body: bytes | None = None, wave_size: int = 1,
                   decoder: StreamDecoder | None = None) -> RequestRecord:
        """Stream one request (``body`` prepared by ``self.body``, built here when None; ``decoder`` a
        fresh ``self.new_decoder()`` the caller keeps watching, made here when None)."""
        decoder = self.new_decoder() if decoder is None else decoder
        if self._pool is not None:
            return await wire_request(self._pool, self._path, self.body(req) if body is None else body, req.rid,
                                      decoder=decoder, headers={**REQUEST_HEADERS, "X-Request-Id": req.rid},
                                      fields=req.record_fields(wave_size), idle_timeout_s=self.timeout_s,
                                      limits=self.limits, max_new_tokens=req.max_new_tokens)
        return await stream_request(
            self.session,
            self.url,
            self.body(req) if body is None else body,
            req.rid,
            protocol=self.protocol,
            fields=req.record_fields(wave_size),
            idle_timeout_s=self.timeout_s,
            decoder=decoder,
            limits=self.limits,
            max_new_tokens=req.max_new_tokens,
        )


async def run_wave(client: LoadClient, requests: Sequence[WaveRequest], on_live: LiveSink | None = None
                   ) -> list[RequestRecord]:
    """Send ``requests`` together and return their records in request order (``on_live``: hears the
    wave's live tally at each watch tick, module docstring).

    Bodies are built first, then every request task is created before any is awaited. Request
    failures come back as records with ``error`` set; if the wave itself is cancelled, every
    request of it is cancelled too. Raises ``ValueError`` when the wave is larger than the
    client's concurrency (requests would queue for a connection and the wave would no longer be
    sent together) or rids repeat.
    """
    if len(requests) > client.concurrency:
        raise ValueError(f"wave of {len(requests)} requests exceeds the client's concurrency {client.concurrency}")
    if len({r.rid for r in requests}) != len(requests):
        raise ValueError("rids within a wave must be unique (servers reject duplicates)")
    if client.wave_runner is not None:
        return await client.wave_runner(requests, on_live)
    bodies = [client.body(r) for r in requests]
    with _gc_paused(client.pause_gc):
        return await gather_wave(client, requests, bodies, len(requests), on_live=on_live)


class WaveWatch:
    """The deadline of one wave in flight (module docstring): one shadow ``Budget`` per request, fed
    from its decoder's live counts at each ``tick``; ``deadline_ns`` is the latest limit of the
    requests not done yet plus one silence and ``margin_s`` (pure arithmetic on monotonic ns)."""

    def __init__(self, client: LoadClient, requests: Sequence[WaveRequest], decoders: Sequence[StreamDecoder],
                 send_ns: int, margin_s: float | None = None) -> None:
        self.silence_ns = int(client.timeout_s * 1e9)
        self.margin_ns = int((WAVE_MARGIN_S if margin_s is None else margin_s) * 1e9)
        self.send_ns = send_ns
        self.decoders = decoders
        self.budgets = [Budget(client.limits, r.max_new_tokens, client.timeout_s, send_ns, d)
                        for r, d in zip(requests, decoders, strict=True)]

    def tick(self, now_ns: int, pending: Sequence[int]) -> int:
        """Fold the progress of the ``pending`` requests (indices) seen by ``now_ns``; the wave's deadline
        (monotonic ns)."""
        latest = self.send_ns + self.silence_ns
        for i in pending:
            b = self.budgets[i]
            c = (b.counts[-1] if b.counts else 0) if b.counts is not None else self.decoders[i].n_events
            if c != b.last_c:
                with contextlib.suppress(StopReading):  # an overrun: the request stops itself
                    b.progress(c, now_ns)
            latest = max(latest, b.limit_ns)
        return latest + self.silence_ns + self.margin_ns


async def gather_wave(client: LoadClient, requests: Sequence[WaveRequest], bodies: Sequence[bytes], wave_size: int,
                      *, margin_s: float | None = None, on_tick: Callable[[int], None] | None = None,
                      on_live: LiveSink | None = None) -> list[RequestRecord]:
    """Start every request of a wave at once and return their records in request order, the whole
    wave bounded by its deadline (``WaveWatch``, module docstring): requests still running past it are
    cancelled and recorded as failed. ``on_tick`` hears each re-derived deadline (monotonic ns; the
    load workers publish it to their parent), ``on_live`` the wave's live tally (``LiveWave``). If the
    wave itself is cancelled, so is every request."""
    decoders = [client.new_decoder() for _ in requests]
    send_ns = time.perf_counter_ns()
    tasks = [asyncio.ensure_future(client.send(r, b, wave_size, d))
             for r, b, d in zip(requests, bodies, decoders, strict=True)]
    watch = WaveWatch(client, requests, decoders, send_ns, margin_s)
    live = LiveWave(decoders) if on_live is not None else None
    try:
        while True:
            pending = [i for i, t in enumerate(tasks) if not t.done()]
            if not pending:
                break
            now = time.perf_counter_ns()
            deadline = watch.tick(now, pending)
            if on_tick is not None:
                on_tick(deadline)
            if on_live is not None and live is not None:
                on_live(live.update([t.done() for t in tasks]))
            if now >= deadline:
                return await _past_deadline(tasks, requests, decoders, send_ns, wave_size, now)
            await asyncio.wait([tasks[i] for i in pending], timeout=min(WATCH_INTERVAL_S, (deadline - now) / 1e9),
                               return_when=asyncio.ALL_COMPLETED)
        return [t.result() for t in tasks]
    except BaseException:  # cancellation (or a bug): leave no request of the wave running
        for t in tasks:
            t.cancel()
        await asyncio.gather(*tasks, return_exceptions=True)
        raise


async def _past_deadline(tasks: Sequence[asyncio.Future[RequestRecord]], requests: Sequence[WaveRequest],
                         decoders: Sequence[StreamDecoder], send_ns: int, wave_size: int, now_ns: int
                         ) -> list[RequestRecord]:
    """Cancel the requests still running at the wave deadline; their records say so (partial tokens kept)."""
    late = [i for i, t in enumerate(tasks) if not t.done()]
    for i in late:
        tasks[i].cancel()
    await asyncio.gather(*(tasks[i] for i in late), return_exceptions=True)
    why = (f"wave deadline exceeded after {(now_ns - send_ns) / 1e9:.1f} s (the latest limit of the wave's "
           f"requests plus margins); {len(late)} of {len(tasks)} requests were still running and were cancelled")
    out = []
    for i, t in enumerate(tasks):
        if i in late and (t.cancelled() or t.exception() is not None):
            r = requests[i]
            out.append(make_record(decoders[i], r.rid, send_ns, time.perf_counter_ns(), None, why,
                                   r.record_fields(wave_size)))
        else:
            out.append(t.result())  # finished in time (a request's own failure is in its record)
    return out


_gc_state = {"depth": 0, "was_enabled": False}


@contextlib.contextmanager
def _gc_paused(enabled: bool) -> Iterator[None]:
    """Disable automatic cyclic GC inside the block.

    Overlapping blocks (concurrent waves) share one pause; the state found by the first is
    restored when the last ends.
    """
    if not enabled:
        yield
        return
    if _gc_state["depth"] == 0:
        _gc_state["was_enabled"] = gc.isenabled()
        gc.disable()
    _gc_state["depth"] += 1
    try:
        yield
    finally:
        _gc_state["depth"] -= 1
        if _gc_state["depth"] == 0 and _gc_state["was_enabled"]:
            gc.enable()


def run_sync(coro: Coroutine[Any, Any, T]) -> T:
    """Run ``coro`` to completion on a fresh uvloop loop (asyncio's if uvloop is absent).

    Works from plain code and from inside a running loop (e.g. a notebook): then it runs in a
    worker thread.
    """
    try:
        asyncio.get_running_loop()
    except RuntimeError:
        return _run_on_new_loop(coro)
    with concurrent.futures.ThreadPoolExecutor(max_workers=1) as pool:
        return pool.submit(_run_on_new_loop, coro).result()


def _run_on_new_loop(coro: Coroutine[Any, Any, T]) -> T:
    return aio.run(coro)


def run_wave_sync(
    base_url: str,
    requests: Sequence[WaveRequest],
    *,
    protocol: Protocol = "sglang",
    model: str | None = None,
    timeout_s: float = DEFAULT_TIMEOUT_S,
    connect_timeout_s: float = DEFAULT_CONNECT_TIMEOUT_S,
) -> list[RequestRecord]:
    """Synchronous ``run_wave`` with its own session (concurrency = wave size) and loop."""

    async def main() -> list[RequestRecord]:
        async with LoadClient(
            base_url,
            protocol=protocol,
            concurrency=max(1, len(requests)),
            model=model,
            timeout_s=timeout_s,
            connect_timeout_s=connect_timeout_s,
        ) as client:
            return await run_wave(client, requests)

    return run_sync(main())
