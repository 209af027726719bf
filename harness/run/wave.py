"""Running one wave against a live service (edge module shared by campaigns and ABBA screens).

Builds the wave's requests from corpus cases, defeats the prefix cache as asked (fresh salt per
request, or ``/flush_cache`` while idle), sends them together and watches the owned service while
they run so a dead server is reported promptly, not at the next request.
"""

from __future__ import annotations

import asyncio
import contextlib
import time
from collections.abc import Awaitable, Callable, Mapping, Sequence
from dataclasses import dataclass

import aiohttp

from harness.errors import MeasurementError, ServerUnreachable
from harness.ids import RequestIdentity, fresh_salt, request_id
from harness.inputs.corpus import Case
from harness.inputs.spec import CacheDefeat
from harness.load.driver import LiveSink, LoadClient, WaveRequest, run_wave
from harness.load.prom import counter_delta, parse_gauges, parse_spec_counters
from harness.records import RequestRecord
from harness.run.selfcheck import WaveSelfCheck
from harness.service.launch.manager import RunningService, http_post

MAX_METRICS_BYTES = 16 << 20
"""Most of a ``/metrics`` answer read (bytes); a vLLM exposition is some 100 KiB."""


async def metrics_text(resp: aiohttp.ClientResponse, limit: int = MAX_METRICS_BYTES) -> str:
    """The body of a ``/metrics`` answer, at most ``limit`` bytes (the request's own total timeout
    bounds the time); ValueError when it is longer: a server that floods its metrics is read as one
    without them, not held in memory."""
    raw = bytearray()
    while chunk := await resp.content.read(min(64 << 10, limit + 1 - len(raw))):
        raw += chunk
        if len(raw) > limit:
            raise ValueError(f"/metrics answered more than {limit} bytes")
    return raw.decode("utf-8", "replace")


@dataclass(frozen=True)
class WaveSpec:
    """Everything that identifies one wave and how to send it (each request's identity is built
    from it by ``request_identity``)."""

    run_id: str
    cell_id: str
    wave_id: str
    round_index: int
    wave_index: int
    phase: str
    workload: str
    concurrency: int
    max_new_tokens: int
    ignore_eos: bool
    cache: CacheDefeat
    corpus_sha256: str = ""  # the manifest hash of the corpus the wave's cases come from

    def request_identity(self, case: Case, i: int) -> RequestIdentity:
        """The identity of this wave's request ``i`` (its place in the wave), for ``case``."""
        return RequestIdentity(run_id=self.run_id, cell_id=self.cell_id, round_index=self.round_index,
                               wave_id=self.wave_id, wave_index=self.wave_index, phase=self.phase,
                               workload=self.workload, case_id=case.case_id, input_hash=case.sha256,
                               request_index=i, corpus_sha256=self.corpus_sha256)


def build_requests(spec: WaveSpec, cases: Sequence[Case],
                   texts: Callable[[Case], str] | None = None) -> list[WaveRequest]:
    """One request per case (rid and salt unique per run), identity fields filled; ``texts`` gives
    each case's prompt text for servers that take text (pure given ``texts``)."""
    reqs = []
    for i, case in enumerate(cases):
        rid = request_id(spec.run_id, spec.wave_id, i)
        reqs.append(WaveRequest(
            input_ids=case.input_ids,  # type: ignore[arg-type]  # a read-only int32 array is a sequence
            max_new_tokens=spec.max_new_tokens, rid=rid,
            ignore_eos=spec.ignore_eos, prompt_text=texts(case) if texts is not None else None,
            cache_salt=fresh_salt(spec.run_id, rid) if spec.cache == "fresh-salt" else None,
            identity=spec.request_identity(case, i), input_len=case.n_tokens, concurrency=spec.concurrency,
        ))
    return reqs


async def flush_cache(svc: RunningService, attempts: int = 50, total_s: float = 30.0) -> None:
    """POST /flush_cache until the idle server accepts it (it refuses while requests run); at most
    ``attempts`` tries and ``total_s`` seconds in all, each try bounded (a stalled server cannot hold
    the run, nor a Ctrl-C waiting for the try's thread)."""
    status: int | str = 0
    deadline = time.monotonic() + total_s
    for _ in range(attempts):
        left = deadline - time.monotonic()
        if left <= 0:
            break
        try:
            status, _body = await asyncio.to_thread(http_post, svc.url + "/flush_cache", min(2.0, left))
        except ServerUnreachable as exc:
            status = f"no answer: {exc.message}"
        if status == 200:
            return
        await asyncio.sleep(0.1)
    raise MeasurementError(f"{svc.url}/flush_cache kept refusing ({status}; {total_s:g} s at most)",
                           hint="use cache: fresh-salt if the server supports cache salts")


async def watched(svc: RunningService, coro: Awaitable[list[RequestRecord]]) -> list[RequestRecord]:
    """Await a wave while polling the owned process every 0.25 s; if it exits, give in-flight
    requests 2 s to fail on their own, then raise ServiceDied with exit code and log tail."""
    task = asyncio.ensure_future(coro)
    while not task.done():
        done, _ = await asyncio.wait({task}, timeout=0.25)
        if done:
            break
        if svc.process is not None and svc.process.exit_code() is not None:
            try:
                await asyncio.wait_for(asyncio.shield(task), timeout=2.0)
            except TimeoutError:
                task.cancel()
            svc.check_alive()
    return list(task.result())


async def execute_wave(svc: RunningService, client: LoadClient, spec: WaveSpec,
                       cases: Sequence[Case], witness: MetricsWitness | None = None,
                       texts: Callable[[Case], str] | None = None, *,
                       selfcheck: WaveSelfCheck | None = None, on_live: LiveSink | None = None
                       ) -> list[RequestRecord]:
    """Send one wave of ``cases`` and return its records (request order). With ``witness``, the
    server's ``/metrics`` gauges are sampled while the wave runs; with ``selfcheck``, the client's
    own event-loop delay, CPU share and (simulator) late steps are measured around it; ``on_live``
    hears the wave's live tally (provisional, ``harness.load.live``) about 4 times a second."""
    svc.check_alive()
    if spec.cache == "flush":
        await flush_cache(svc)
    if selfcheck is None:
        return await _send_wave(svc, client, spec, cases, witness, texts, on_live)
    return await selfcheck.around(svc, client, lambda: _send_wave(svc, client, spec, cases, witness, texts, on_live))


async def _send_wave(svc: RunningService, client: LoadClient, spec: WaveSpec, cases: Sequence[Case],
                     witness: MetricsWitness | None, texts: Callable[[Case], str] | None,
                     on_live: LiveSink | None = None) -> list[RequestRecord]:
    if witness is None or not witness.available:
        return await watched(svc, run_wave(client, build_requests(spec, cases, texts), on_live))
    witness.counters = None  # a wave without readings never shows an earlier wave's
    before = await witness.read_counters(svc.url)  # answered before the wave's first send
    stop = asyncio.Event()
    sampler = asyncio.ensure_future(witness.sample(svc.url, stop))
    try:
        recs = await watched(svc, run_wave(client, build_requests(spec, cases, texts), on_live))
    finally:
        stop.set()
        await sampler
    if before is not None:  # sent after the wave's last request ended
        witness.note_counters(before, await witness.read_counters(svc.url))
    return recs


CounterReading = tuple[int, int, dict[str, float]]
"""(sent ns, answered ns, counters): one ``/metrics`` reading of vLLM's speculative counters
(``harness.load.prom.parse_spec_counters``), taken between the two client monotonic times."""


class MetricsWitness:
    """Samples ``/metrics`` (running and queued requests) every ``interval_s`` during waves, on its
    own connection so it never competes with the wave's connection pool. Disables itself for the
    service when the server exports no metrics.

    Around each wave it also reads vLLM's speculative-decoding counters once before the first request
    is sent and once after the last one ended, so their difference covers the whole wave, not only
    its resident window (``take_counters``). The difference counts every request the server served
    meanwhile (the harness sends no other) and assumes the server has counted a step by the time it
    answers a ``/metrics`` request sent after the step's tokens arrived (vLLM 0.32's
    ``AsyncLLM.output_handler`` records a step's stats, speculative ones included, right after
    queueing its outputs, in the event loop that also answers ``/metrics``)."""

    def __init__(self, interval_s: float = 0.1) -> None:
        self.interval_s = interval_s
        self.available = True
        self.samples: list[tuple[int, int, float | None, float | None]] = []
        self.counters: tuple[CounterReading, CounterReading | None] | None = None

    async def read_counters(self, url: str) -> CounterReading | None:
        """One reading of the speculative counters; None when the server exports none (no
        speculative decoding, or not vLLM) or did not answer with exposition text in 2 s."""
        t = time.perf_counter_ns()
        try:
            async with aiohttp.ClientSession(timeout=aiohttp.ClientTimeout(total=2.0)) as session, \
                    session.get(url + "/metrics") as resp:
                if resp.status != 200:
                    return None
                values = parse_spec_counters(await metrics_text(resp))
        except (aiohttp.ClientError, TimeoutError, ValueError):
            return None
        return (t, time.perf_counter_ns(), values) if values else None

    def note_counters(self, before: CounterReading, after: CounterReading | None) -> None:
        """Keep one wave's readings (``after`` None: the second reading failed) for ``take_counters``."""
        self.counters = (before, after)

    def take_counters(self) -> dict[str, object] | None:
        """The last wave's counter readings and their delta (``counters_summary``), then forget them."""
        got, self.counters = self.counters, None
        return counters_summary(*got) if got is not None else None

    async def sample(self, url: str, stop: asyncio.Event) -> None:
        """Poll until ``stop`` is set; samples are (sent ns, answered ns, running, queued): the server
        read its gauges somewhere between the two client monotonic times."""
        timeout = aiohttp.ClientTimeout(total=2.0)
        async with aiohttp.ClientSession(timeout=timeout) as session:
            while not stop.is_set():
                t = time.perf_counter_ns()
                try:
                    async with session.get(url + "/metrics") as resp:
                        if resp.status != 200:
                            self.available = False
                            return
                        g = parse_gauges(await metrics_text(resp))
                except (aiohttp.ClientError, TimeoutError, ValueError):
                    g = None
                if g is not None:
                    if g.running is None:
                        self.available = False
                        return
                    self.samples.append((t, time.perf_counter_ns(), g.running, g.queued))
                with contextlib.suppress(TimeoutError):
                    await asyncio.wait_for(stop.wait(), timeout=self.interval_s)

    def take(self) -> list[tuple[int, int, float | None, float | None]]:
        """The samples since the last call."""
        out, self.samples = self.samples, []
        return out


def counters_summary(before: CounterReading, after: CounterReading | None) -> dict[str, object]:
    """One wave's speculative-counter readings as stored (pure): both readings with their client
    times and ``delta`` (``harness.load.prom.counter_delta``: after - before for each counter read
    both times; None when the second reading failed or a counter went down)."""
    return {"before_sent_ns": before[0], "before_answered_ns": before[1], "before": dict(before[2]),
            "after_sent_ns": after[0] if after else None, "after_answered_ns": after[1] if after else None,
            "after": dict(after[2]) if after else None,
            "delta": counter_delta(before[2], after[2]) if after else None}


def witness_summary(wave_id: str, concurrency: int, start_ns: int, end_ns: int,
                    samples: Sequence[tuple[int, int, float | None, float | None]],
                    spec_counters: Mapping[str, object] | None = None) -> dict[str, object]:
    """What the server reported while a wave's resident window was open (pure): how many samples
    were taken wholly inside it (request sent after the window opened, answer received before it
    closed) and the fewest running requests among them (C means all were resident). With
    ``spec_counters`` (``MetricsWitness.take_counters``: whole-wave readings, not only the window's)
    they are stored under ``spec_counters``."""
    inside = [s for s in samples if start_ns <= s[0] and s[1] <= end_ns and s[2] is not None]
    running = [float(s[2]) for s in inside if s[2] is not None]
    return {"wave_id": wave_id, "concurrency": concurrency, "window_start_ns": start_ns, "window_end_ns": end_ns,
            "samples": [list(s) for s in samples], "samples_in_window": len(inside),
            "running_min_in_window": min(running) if running else None,
            "running_max_in_window": max(running) if running else None} \
        | ({"spec_counters": dict(spec_counters)} if spec_counters is not None else {})


async def leg_waves(svc: RunningService, wave: Callable[[int, str], Awaitable[list[RequestRecord]]], *,
                    warmup_waves: int, waves_per_leg: int,
                    measured: Callable[[int, list[RequestRecord]], None], kept: str) -> None:
    """One leg of a screen (ABBA, matched AR/SD) on ``svc``: ``warmup_waves`` unmeasured waves, then
    ``waves_per_leg`` measured ones, each through ``wave(j, phase)``; ``measured(j, records)`` gets each
    measured wave. The leg fails (``MeasurementError``; first a dead server is named through
    ``check_alive``) when every warmup wave had failed requests, or when a measured wave has any;
    ``kept`` says in the hint where the finished legs are."""
    clean = 0
    for j in range(warmup_waves):
        clean += all(r.ok for r in await wave(j, "warmup"))
    if warmup_waves and not clean:
        svc.check_alive()
        raise MeasurementError("every warmup wave had failed requests; the leg was not measured",
                               hint=f"{kept}; fix the cause (see the service log) and run again")
    for j in range(waves_per_leg):
        recs = await wave(j, "measured")
        failed = [r for r in recs if not r.ok]
        if failed:
            svc.check_alive()
            raise MeasurementError(f"{len(failed)} of {len(recs)} requests failed in wave {j} "
                                   f"(first: {failed[0].error})", hint=f"{kept}; fix the cause and run again")
        measured(j, recs)
