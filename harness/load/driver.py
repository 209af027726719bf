"""Wave driver: send a wave of requests together and collect one record per request.

``LoadClient`` owns one ``aiohttp.ClientSession`` whose connector holds ``concurrency``
connections and, with the ``wire`` transport (``harness.load.wire``; the default for ``http://``), a
pool of lean keep-alive connections that the streamed requests use instead; ``run_wave`` prepares
every body first, then starts every request at once (``asyncio.gather``) and returns the records
in request order with each request's campaign identity copied in. ``run_wave_sync`` does the same
from synchronous code on its own uvloop loop.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import contextlib
import gc
from collections.abc import Awaitable, Callable, Coroutine, Iterator, Sequence
from dataclasses import dataclass
from types import TracebackType
from typing import Any, Literal, TypeVar

import aiohttp

from harness import aio
from harness.errors import ServerUnreachable, ServiceError
from harness.load.client import (
    ENDPOINTS,
    PROTOCOLS,
    REQUEST_HEADERS,
    Protocol,
    StreamLimits,
    new_decoder,
    sglang_body,
    stream_request,
    vllm_body,
)
from harness.load.openai import Tokenize, openai_body
from harness.load.wire import WirePool, wire_request
from harness.records import RequestRecord

T = TypeVar("T")

DEFAULT_TIMEOUT_S = 600.0
DEFAULT_CONNECT_TIMEOUT_S = 10.0

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
    run_id: str = ""
    cell_id: str = ""
    round_index: int = -1
    wave_id: str = ""
    wave_index: int = -1
    phase: str = "measured"
    workload: str = "decode"
    case_id: str = ""
    input_hash: str = ""
    input_len: int | None = None
    concurrency: int | None = None

    def identity(self, wave_size: int) -> dict[str, Any]:
        """The ``RequestRecord`` identity fields of this request inside a wave of ``wave_size``."""
        return {
            "run_id": self.run_id,
            "cell_id": self.cell_id,
            "round_index": self.round_index,
            "wave_id": self.wave_id,
            "wave_index": self.wave_index,
            "phase": self.phase,
            "workload": self.workload,
            "case_id": self.case_id,
            "input_hash": self.input_hash,
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
        self.wave_runner: Callable[[Sequence[WaveRequest]], Awaitable[list[RequestRecord]]] | None = None

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

    async def send(self, req: WaveRequest, body: bytes | None = None, wave_size: int = 1) -> RequestRecord:
        """Stream one request (``body`` prepared by ``self.body``, built here when None)."""
        decoder = new_decoder(self.protocol, tokenize=self.openai.tokenize, count_method=self.openai.count_method)
        if self._pool is not None:
            return await wire_request(self._pool, self._path, self.body(req) if body is None else body, req.rid,
                                      decoder=decoder, headers={**REQUEST_HEADERS, "X-Request-Id": req.rid},
                                      fields=req.identity(wave_size), idle_timeout_s=self.timeout_s,
                                      limits=self.limits, max_new_tokens=req.max_new_tokens)
        return await stream_request(
            self.session,
            self.url,
            self.body(req) if body is None else body,
            req.rid,
            protocol=self.protocol,
            fields=req.identity(wave_size),
            idle_timeout_s=self.timeout_s,
            decoder=decoder,
            limits=self.limits,
            max_new_tokens=req.max_new_tokens,
        )


async def run_wave(client: LoadClient, requests: Sequence[WaveRequest]) -> list[RequestRecord]:
    """Send ``requests`` together and return their records in request order.

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
        return await client.wave_runner(requests)
    bodies = [client.body(r) for r in requests]
    n = len(requests)
    with _gc_paused(client.pause_gc):
        tasks = [asyncio.ensure_future(client.send(r, b, n)) for r, b in zip(requests, bodies, strict=True)]
        try:
            return list(await asyncio.gather(*tasks))
        except BaseException:  # cancellation (or a bug): leave no request of the wave running
            for t in tasks:
                t.cancel()
            await asyncio.gather(*tasks, return_exceptions=True)
            raise


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
