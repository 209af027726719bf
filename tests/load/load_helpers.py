"""Tiny real HTTP servers for the load-client tests (127.0.0.1, port 0, background thread)."""

from __future__ import annotations

import asyncio
import json
import socket
import threading
from collections.abc import Awaitable, Callable, Iterator
from contextlib import contextmanager
from typing import Any

import pytest
from aiohttp import web
from multidict import CIMultiDict

from harness.load import driver

Handler = Callable[[web.Request], Awaitable[web.StreamResponse]]


class Server:
    """An aiohttp app on its own loop in a daemon thread; ``url`` is its base URL.

    ``bodies`` collects the JSON bodies of POST requests, in arrival order.
    """

    def __init__(self, routes: dict[str, Handler]) -> None:
        self.routes = routes
        self.bodies: list[dict[str, Any]] = []
        self.headers: list[CIMultiDict[str]] = []
        self.loop = asyncio.new_event_loop()
        self.sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        self.sock.bind(("127.0.0.1", 0))
        self.url = f"http://127.0.0.1:{self.sock.getsockname()[1]}"
        self._ready = threading.Event()
        self._stop: asyncio.Event | None = None
        self._thread = threading.Thread(target=self._run, daemon=True)

    def _wrap(self, handler: Handler) -> Handler:
        async def wrapped(request: web.Request) -> web.StreamResponse:
            if request.method == "POST":
                self.bodies.append(json.loads(await request.read()))
                self.headers.append(CIMultiDict(request.headers))
            return await handler(request)

        return wrapped

    def _run(self) -> None:
        asyncio.set_event_loop(self.loop)
        self.loop.run_until_complete(self._main())

    async def _main(self) -> None:
        app = web.Application()
        for path, handler in self.routes.items():
            app.router.add_route("*", path, self._wrap(handler))
        runner = web.AppRunner(app, handle_signals=False, shutdown_timeout=0.5)
        await runner.setup()
        await web.SockSite(runner, self.sock).start()
        self._stop = asyncio.Event()
        self._ready.set()
        await self._stop.wait()
        await runner.cleanup()
        rest = [t for t in asyncio.all_tasks() if t is not asyncio.current_task()]
        for t in rest:
            t.cancel()
        await asyncio.gather(*rest, return_exceptions=True)

    def __enter__(self) -> Server:
        self._thread.start()
        assert self._ready.wait(10), "test server did not start"
        return self

    def __exit__(self, *exc: object) -> None:
        assert self._stop is not None
        self.loop.call_soon_threadsafe(self._stop.set)
        self._thread.join(10)


@contextmanager
def serve(handler: Handler, path: str = "/generate", extra: dict[str, Handler] | None = None) -> Iterator[Server]:
    """Run ``handler`` at ``path`` (and ``extra`` routes) on a fresh loopback server."""
    with Server({path: handler, **(extra or {})}) as server:
        yield server


def sg_event(
    ids: list[int],
    ct: int,
    *,
    prompt: int = 4,
    cached: int = 0,
    finish: Any = None,
    text: bool = True,
    emit_ns: int | None = None,
    extra: dict[str, Any] | None = None,
    rid: str | None = None,
) -> bytes:
    """One SGLang ``/generate`` event payload (compact JSON, meta_info last); ``meta_info.id`` is
    ``rid`` (SGLang echoes the request's rid there), left out when None (nothing to compare)."""
    meta: dict[str, Any] = {
        "finish_reason": finish,
        "prompt_tokens": prompt,
        "weight_version": "default",
        "completion_tokens": ct,
        "cached_tokens": cached,
    }
    if rid is not None:
        meta = {"id": rid, **meta}
    if emit_ns is not None:
        meta["sim_emit_ns"] = emit_ns
    obj: dict[str, Any] = {}
    if text:
        obj["text"] = "".join(f"t{i} " for i in ids)
    obj["output_ids"] = ids
    obj.update(extra or {})
    obj["meta_info"] = meta
    return json.dumps(obj, separators=(",", ":")).encode()


def sg_stream(tokens: list[int], groups: list[int], *, mode: str = "cumulative", **kw: Any) -> list[bytes]:
    """Payloads of a stream emitting ``tokens`` in events of ``groups`` sizes, then ``[DONE]``."""
    out: list[bytes] = []
    pos = 0
    for k, g in enumerate(groups):
        new = tokens[pos : pos + g]
        pos += g
        ids = tokens[:pos] if mode == "cumulative" else new
        last = k == len(groups) - 1
        finish = {"type": "length", "length": pos} if last else None
        out.append(sg_event(ids, pos, finish=finish, **kw))
    out.append(b"[DONE]")
    return out


def sse(payloads: list[bytes]) -> bytes:
    """Serialise payloads as an SSE body."""
    return b"".join(b"data: " + p + b"\n\n" for p in payloads)


async def stream_events(
    request: web.Request, chunks: list[bytes], delays: list[float] | None = None
) -> web.StreamResponse:
    """Send ``chunks`` (raw bytes) as a text/event-stream body, sleeping ``delays[k]`` before each."""
    resp = web.StreamResponse(headers={"Content-Type": "text/event-stream"})
    await resp.prepare(request)
    for k, chunk in enumerate(chunks):
        if delays:
            await asyncio.sleep(delays[k])
        await resp.write(chunk)
    await resp.write_eof()
    return resp


def closed_port() -> int:
    """A loopback port that nothing listens on (bound, then closed)."""
    s = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    s.bind(("127.0.0.1", 0))
    port = int(s.getsockname()[1])
    s.close()
    return port


@pytest.fixture(params=["wire", "aiohttp"])
def each_transport(request: pytest.FixtureRequest, monkeypatch: pytest.MonkeyPatch) -> str:
    """Makes ``request.param`` the transport of every ``LoadClient`` built without one: the load tests
    that talk HTTP run on both transports, which must give the same records for the same bytes."""
    monkeypatch.setattr(driver, "DEFAULT_TRANSPORT", request.param)
    return str(request.param)
