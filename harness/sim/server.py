"""The simulator's HTTP server (aiohttp): SGLang's native endpoints over the step scheduler.

Endpoints: ``POST /generate``, ``POST /v1/completions`` and ``/v1/chat/completions`` (OpenAI-compatible,
``harness.sim.openai_api``), ``GET /server_info`` (and ``/get_server_info``), ``GET /health``
(and ``/health_generate``), ``GET|POST /flush_cache``, ``GET /v1/models``, ``GET /get_model_info``,
``GET /metrics``, ``GET /sim/power`` (the profile's power model, ``harness.sim.power``).  A client that
disconnects aborts its request.  Faults (``harness.sim.faults``) and death (``die_after_requests`` /
``die_after_s``) are injected here; a request body's ``sim_fault`` only when the server was started with
``request_faults`` (HTTP 400 otherwise).
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import socket
import time
import uuid
from typing import Any, Literal

import numpy as np
from aiohttp import web

from harness.sim.batching import grid_step_s
from harness.sim.board import ClusterBoard
from harness.sim.faults import Fault, parse_fault
from harness.sim.info import metrics_text, models_list, server_info
from harness.sim.openai_api import OpenAIEncoder, parse_openai
from harness.sim.options import SimOptions
from harness.sim.power import PowerMeter
from harness.sim.protocol import (
    DONE_EVENT,
    BadRequest,
    EventEncoder,
    GenerateParams,
    body_limit,
    error_body,
    error_event,
    parse_generate,
)
from harness.sim.scheduler import Chunk, DuplicateRid, Scheduler, SimRequest
from harness.sim.tokens import plan_output

_NO_EVENTS = 1 << 62


def _error(message: str, status: int) -> web.Response:
    return web.json_response(error_body(message, status), status=status)


class SimServer:
    """One simulated SGLang server bound to ``options.host:options.port`` (0 picks a free port).

    ``start()`` returns the base URL (also ``url``); ``stop()`` aborts what is in flight (each stream
    gets an abort event and ``[DONE]``) and closes everything.  ``died`` is set when the server
    simulated its own death; ``death_reason`` says why. In a cluster (``harness.sim.cluster``) the
    server owns row ``slot`` of ``board`` and its ``/server_info`` reports the whole cluster's counters
    in ``internal_states[0]`` and each process's after it.
    """

    def __init__(self, options: SimOptions, *, board: ClusterBoard | None = None, slot: int = 0) -> None:
        self.options = options
        self.profile = options.resolved_profile
        self.board = board
        self.slot = slot
        self.grid_step_s: float | None = None
        grid: tuple[float, float] | None = None
        if options.grid_t0_ns is not None:
            self.grid_step_s = grid_step_s(self.profile, step_factor=options.step_factor,
                                           time_scale=options.time_scale)
            if self.profile.speculative is not None:  # every decode step is a verify step
                self.grid_step_s *= self.profile.speculative.verify_cost
            grid = (options.grid_t0_ns / 1e9, self.grid_step_s)
        self.url = ""
        self.port = 0
        self.death_reason: str | None = None
        self.died = asyncio.Event()
        power = self.profile.power
        self.power = PowerMeter(power, time_scale=options.time_scale) if power is not None else None
        self.scheduler = Scheduler(
            self.profile, step_factor=options.step_factor, time_scale=options.time_scale,
            disable_radix_cache=options.disable_radix_cache, grid=grid,
            on_forward=self._publish if board is not None else None,
            on_resident=self.power.update if self.power is not None else None,
        )
        spec = self.profile.speculative
        self._spec_fields = spec.sglang_fields if spec is not None else None
        self._server_fault: Fault | None = parse_fault(options.fault) if options.fault else None
        self._generate_count = 0
        self._clients_gone = 0  # streams whose client went away before the end (``sim_clients_gone``)
        self._ready = False
        self._stopped = False
        self._created = int(time.time())
        self._task: asyncio.Task[None] | None = None
        self._runner: web.AppRunner | None = None
        self._site: web.SockSite | None = None
        self._timers: list[asyncio.TimerHandle] = []
        self._closing: asyncio.Task[None] | None = None
        self._body_limit = body_limit(self.profile)

    # ----- lifecycle ----------------------------------------------------------------------------
    async def start(self) -> str:
        """Bind and start serving; returns ``http://host:port``.  ``/health`` is 503 until ready."""
        loop = asyncio.get_running_loop()
        self._task = loop.create_task(self.scheduler.run(), name="dsv4h-sim-scheduler")
        app = web.Application(client_max_size=self._body_limit)
        app.router.add_post("/generate", self._generate)
        app.router.add_post("/v1/completions", self._openai_completions)
        app.router.add_post("/v1/chat/completions", self._openai_chat)
        for path in ("/server_info", "/get_server_info"):
            app.router.add_get(path, self._server_info)
        for path in ("/health", "/health_generate"):
            app.router.add_get(path, self._health)
        app.router.add_route("*", "/flush_cache", self._flush_cache)
        app.router.add_get("/v1/models", self._models)
        app.router.add_get("/get_model_info", self._model_info)
        app.router.add_get("/metrics", self._metrics)
        app.router.add_get("/sim/power", self._power)
        self._runner = web.AppRunner(app, handler_cancellation=True, access_log=None, shutdown_timeout=1.0)
        await self._runner.setup()
        family = socket.AF_INET6 if ":" in self.options.host else socket.AF_INET
        sock = socket.socket(family, socket.SOCK_STREAM)
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        if self.options.reuse_port:
            sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEPORT, 1)
        sock.bind((self.options.host, self.options.port))
        self.port = int(sock.getsockname()[1])
        self._site = web.SockSite(self._runner, sock)
        await self._site.start()
        self._publish()  # a cluster's row shows this process's pid once it listens
        host = f"[{self.options.host}]" if family == socket.AF_INET6 else self.options.host
        self.url = f"http://{host}:{self.port}"
        if self.options.startup_delay_s > 0:
            self._timers.append(loop.call_later(self.options.startup_delay_s, self._become_ready))
        else:
            self._become_ready()
        return self.url

    def _become_ready(self) -> None:
        self._ready = True
        if self.options.die_after_s is not None:
            loop = asyncio.get_running_loop()
            self._timers.append(
                loop.call_later(self.options.die_after_s, self._die, f"died {self.options.die_after_s} s after ready")
            )

    async def stop(self) -> None:
        """Abort in-flight requests, close the listener and connections, stop the scheduler."""
        if self._stopped:
            return
        self._stopped = True
        for timer in self._timers:
            timer.cancel()
        self.scheduler.abort_all("server shutting down")
        await asyncio.sleep(0)
        if self._closing is not None:
            await self._closing
        if self._runner is not None:
            await self._runner.cleanup()
        await self._stop_task()

    async def _stop_task(self) -> None:
        if self._task is not None:
            self._task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._task

    def _die(self, reason: str) -> None:
        """Simulated crash: stop listening, cut every connection, forget all requests."""
        if self.death_reason is not None:
            return
        self.death_reason = reason
        self._ready = False
        if self._site is not None:
            self._closing = asyncio.get_running_loop().create_task(self._site.stop())
        if self._runner is not None and self._runner.server is not None:
            for conn in self._runner.server.connections:
                if conn.transport is not None:
                    conn.transport.abort()
        self.scheduler.abort_all(reason)
        if self._task is not None:
            self._task.cancel()
        self.died.set()

    # ----- /generate ----------------------------------------------------------------------------
    def _fault_for(self, params_fault: str | None) -> Fault | None:
        if params_fault is not None:
            return parse_fault(params_fault)
        first = self.options.fault_first
        if first is not None and self._generate_count > first:
            return None
        if self._server_fault is not None and self._generate_count % self.options.fault_every == 0:
            return self._server_fault
        return None

    async def _generate(self, request: web.Request) -> web.StreamResponse:
        arrival = time.perf_counter()
        if not self._ready:
            return _error("the server is not ready", 503)
        self._generate_count += 1
        limit = self.options.die_after_requests
        if limit is not None and self._generate_count > limit:
            self._die(f"died after {limit} requests")
            return _error("the server died", 503)
        body = await self._json(request)
        if isinstance(body, web.Response):
            return body
        skip = self.options.stream_mode == "skip-tokenizer-init"
        try:
            params = parse_generate(body, self.profile, skip_tokenizer_init=skip,
                                    request_faults=self.options.request_faults)
        except BadRequest as exc:
            return _error(str(exc), 400)
        fault = self._fault_for(params.fault)
        if fault is not None and fault.kind == "http_500":
            return _error("simulated internal server error (fault http_500)", 500)
        if fault is not None and fault.kind == "slow_first_byte":
            await asyncio.sleep(fault.arg / 1000)
        req = self._request(params, arrival)
        if fault is not None and fault.kind == "retract":
            req.retract_steps = max(fault.arg, 1)
        if fault is not None and fault.kind == "ignore_salt":
            req.salt_key = (None, req.salt_key[1])
        try:
            self.scheduler.submit(req)
        except DuplicateRid:
            return _error(f"duplicate request id {req.rid!r}: a request with this rid is in flight", 400)
        try:
            if params.stream:
                return await self._stream(request, req, fault)
            return await self._unary(request, req, fault)
        finally:
            if not req.finished:
                self.scheduler.abort(req.rid)

    async def _json(self, request: web.Request) -> Any:
        """The request's JSON body, or the error response: 413 for a body over :func:`body_limit`,
        refused by its Content-Length before anything is read (a chunked one once the limit is read),
        400 for one that is not JSON."""
        limit = self._body_limit
        too_large = _error(f"the request body is larger than this server reads ({limit} bytes: its longest "
                           "prompt as JSON, plus 1 MiB)", 413)
        if request.content_length is not None and request.content_length > limit:
            return too_large
        try:
            return await request.json()
        except web.HTTPRequestEntityTooLarge:
            return too_large
        except ValueError:
            return _error("the body is not valid JSON", 400)

    def _client_gone(self) -> None:
        """Count a stream whose client closed the connection before its end: a normal end, never an
        error (no traceback in the log); ``/server_info`` reports the count as ``sim_clients_gone``."""
        self._clients_gone += 1

    def _request(self, params: GenerateParams, arrival: float) -> SimRequest:
        return SimRequest(
            rid=params.rid or uuid.uuid4().hex,
            input_ids=np.asarray(params.input_ids, dtype=np.int32),
            max_new_tokens=params.max_new_tokens,
            ignore_eos=params.ignore_eos,
            stop_ids=params.stop_ids,
            salt_key=(params.cache_salt, params.extra_key),
            stream=params.stream,
            interval=self.options.stream_interval if params.stream else _NO_EVENTS,
            plan=plan_output(params.input_ids, self.profile.eos_min, self.profile.eos_max),
            arrival=arrival,
        )

    async def _openai_completions(self, request: web.Request) -> web.StreamResponse:
        return await self._openai(request, "completions")

    async def _openai_chat(self, request: web.Request) -> web.StreamResponse:
        return await self._openai(request, "chat")

    async def _openai(self, request: web.Request, kind: Literal["completions", "chat"]) -> web.StreamResponse:
        """OpenAI-compatible streaming over the same scheduler (``harness.sim.openai_api``)."""
        arrival = time.perf_counter()
        if not self._ready:
            return _error("the server is not ready", 503)
        self._generate_count += 1
        body = await self._json(request)
        if isinstance(body, web.Response):
            return body
        try:
            params = parse_openai(body, kind, self.profile)
        except ValueError:
            return _error("the body is not valid JSON", 400)
        except BadRequest as exc:
            return _error(str(exc), 400)
        if not params.generate.stream:
            return _error("the simulator's OpenAI endpoints stream only (set stream: true)", 400)
        req = self._request(params.generate, arrival)
        self.scheduler.submit(req)
        resp = web.StreamResponse(headers={"Content-Type": "text/event-stream", "Cache-Control": "no-cache"})
        spec = self.profile.speculative
        enc = OpenAIEncoder(kind, params, self.options.openai_usage, req.rid, req.prompt_len,
                            spec.vllm_per_request if spec is not None else "none")
        try:
            await resp.prepare(request)
            while True:
                chunk = await req.queue.get()
                for payload in enc.encode(chunk, cached_tokens=req.cached_tokens):
                    await resp.write(b"data: " + payload + b"\n\n")
                if chunk.finish is not None:
                    break
            await resp.write(DONE_EVENT)
            await resp.write_eof()
        except ConnectionResetError:  # the client went away: a normal end of the request, counted
            self._client_gone()
        finally:
            if not req.finished:
                self.scheduler.abort(req.rid)
        return resp

    async def _stream(self, request: web.Request, req: SimRequest, fault: Fault | None) -> web.StreamResponse:
        resp = web.StreamResponse(headers={"Content-Type": "text/event-stream", "Cache-Control": "no-cache"})
        enc = EventEncoder(req.rid, self.options.stream_mode, req.prompt_len, self._spec_fields)
        events = 0
        try:
            await resp.prepare(request)  # the client may be gone already (aiohttp's ClientConnectionResetError)
            while True:
                chunk = await req.queue.get()
                if fault is None and events >= 1 and req.sink is None and chunk.finish is None and req.queue.empty():
                    # Headers went out with the first event: from now on the scheduler writes each
                    # non-final event straight to the socket in its step loop (no task switch per event).
                    req.sink = _direct_sink(request, resp, enc, req)
                if fault is not None and fault.kind in ("close_mid_stream", "error_event") and (
                    events >= fault.arg or chunk.finish is not None
                ):
                    self.scheduler.abort(req.rid)
                    if fault.kind == "close_mid_stream":
                        if request.transport is not None:
                            request.transport.abort()
                        return resp
                    await resp.write(error_event(f"simulated mid-stream error after {events} events"))
                    break
                if fault is not None and fault.kind == "stall" and (events >= fault.arg or chunk.finish is not None):
                    self.scheduler.abort(req.rid)
                    await asyncio.Event().wait()  # silent until the client disconnects (handler cancelled)
                final = chunk.finish is not None
                e2e = time.perf_counter() - req.arrival if final else None
                payload = enc.encode(chunk, cached_tokens=req.cached_tokens, e2e_latency=e2e)
                await resp.write(b"data: " + payload + b"\n\n")
                events += 1
                if fault is not None and fault.kind == "stall_loop" and events == 2:
                    time.sleep(fault.arg / 1000)  # the fault itself: block the loop so the model runs late
                if final:
                    break
            await resp.write(DONE_EVENT)
            await resp.write_eof()
        except ConnectionResetError:  # the client went away: a normal end of the request, counted
            self._client_gone()
            self.scheduler.abort(req.rid)
        return resp

    async def _unary(self, request: web.Request, req: SimRequest, fault: Fault | None) -> web.StreamResponse:
        if fault is not None and fault.kind == "error_event":
            self.scheduler.abort(req.rid)
            return _error("simulated internal error (fault error_event)", 500)
        if fault is not None and fault.kind == "close_mid_stream":
            self.scheduler.abort(req.rid)
            if request.transport is not None:
                request.transport.abort()
            return web.Response(status=500)
        tokens: list[int] = []
        while True:
            chunk = await req.queue.get()
            tokens += chunk.token_ids
            if chunk.finish is not None:
                break
        mode = "skip-tokenizer-init" if self.options.stream_mode == "skip-tokenizer-init" else "cumulative"
        enc = EventEncoder(req.rid, mode, req.prompt_len, self._spec_fields)
        body = enc.encode(
            Chunk(tokens, chunk.finish, chunk.spec), cached_tokens=req.cached_tokens,
            e2e_latency=time.perf_counter() - req.arrival,
        )
        return web.Response(body=body, content_type="application/json")

    # ----- the other endpoints -------------------------------------------------------------------
    async def _health(self, request: web.Request) -> web.Response:
        return web.Response(status=200) if self._ready else web.Response(status=503)

    async def _server_info(self, request: web.Request) -> web.Response:
        info = server_info(self.options, self.scheduler, self._generate_count, self.port)
        info["internal_states"][0]["sim_clients_gone"] = self._clients_gone  # this process's count
        if self.grid_step_s is not None:
            info["dsv4h_simulator"]["grid_step_s"] = self.grid_step_s
            info["internal_states"][0]["sim_grid_t0_ns"] = self.options.grid_t0_ns
        if self.board is not None:
            self._publish()
            info["dsv4h_simulator"]["processes"] = self.board.processes
            own = info["internal_states"][0]
            info["internal_states"] = [own | self.board.totals() | {"sim_answered_by": self.slot},
                                       *self.board.rows()]
        return web.json_response(info)

    def _publish(self) -> None:
        """Write this process's counters into its row of the cluster board."""
        if self.board is None:
            return
        st, sched = self.scheduler.stats, self.scheduler
        self.board.publish(self.slot, {
            "pid": os.getpid(), "sim_decode_steps": st.decode_steps, "sim_prefill_forwards": st.prefill_forwards,
            "sim_late_steps": st.late_steps, "sim_late_decode_steps": st.late_decode_steps,
            "sim_lateness_total_s": st.lateness_total_s, "sim_decode_lateness_total_s": st.decode_lateness_total_s,
            "sim_wake_lateness_max_s": st.wake_lateness_max_s, "sim_emit_lateness_max_s": st.emit_lateness_max_s,
            "sim_generation_tokens_total": st.generation_tokens_total, "num_running_reqs": sched.num_running,
            "num_queue_reqs": sched.num_waiting, "sim_generate_requests": self._generate_count,
            "sim_prompt_tokens_total": st.prompt_tokens_total, "sim_cached_tokens_total": st.cached_tokens_total})

    async def _flush_cache(self, request: web.Request) -> web.Response:
        if self.scheduler.flush_cache():
            return web.Response(
                text="Cache flushed.\nPlease check backend logs for more details. (When there are running "
                "or waiting requests, the operation will not be performed.)\n"
            )
        return web.Response(
            status=400,
            text=f"Cache not flushed because there are pending requests. "
            f"#queue-req: {self.scheduler.num_waiting}, #running-req: {self.scheduler.num_running}\n",
        )

    async def _models(self, request: web.Request) -> web.Response:
        return web.json_response(models_list(self.options, self._created))

    async def _model_info(self, request: web.Request) -> web.Response:
        path = self.options.resolved_model_path
        info: dict[str, Any] = {"model_path": path, "tokenizer_path": path, "is_generation": True}
        return web.json_response(info)

    async def _power(self, request: web.Request) -> web.Response:
        """The power model's reading now (``harness.sim.power``); 404 when the profile has none. In a
        cluster each process answers for its own scheduler."""
        if self.power is None:
            return _error(f"profile {self.profile.name!r} has no power model (profile key 'power')", 404)
        return web.json_response(self.power.snapshot())

    async def _metrics(self, request: web.Request) -> web.Response:
        """Prometheus text; in a cluster the request and token gauges/counters are the sums over every
        process (one server's view, which the concurrency witness compares with a wave's C)."""
        totals: dict[str, float] | None = None
        if self.board is not None:
            self._publish()
            t = self.board.totals()
            totals = {"num_running_reqs": t["num_running_reqs"], "num_queue_reqs": t["num_queue_reqs"],
                      "generation_tokens_total": t["sim_generation_tokens_total"],
                      "prompt_tokens_total": t["sim_prompt_tokens_total"],
                      "cached_tokens_total": t["sim_cached_tokens_total"]}
        return web.Response(text=metrics_text(self.options, self.scheduler, totals), content_type="text/plain")


def _direct_sink(request: web.Request, resp: web.StreamResponse, enc: EventEncoder, req: SimRequest) -> Any:
    """A chunk sink that encodes an event and writes it to the connection at once, framed as the
    response's HTTP/1.1 chunked body (aiohttp writes the final event, ``[DONE]`` and the end)."""
    transport = request.transport
    chunked = resp.headers.get("Transfer-Encoding", "").lower() == "chunked"

    def sink(chunk: Chunk) -> None:
        if transport is None or transport.is_closing():
            return
        data = b"data: " + enc.encode_progress(chunk, cached_tokens=req.cached_tokens) + b"\n\n"
        if chunked:
            transport.write(b"%x\r\n%b\r\n" % (len(data), data))
        else:
            transport.write(data)

    return sink
