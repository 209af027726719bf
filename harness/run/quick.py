"""Quick screens against a running server (``dsv4h bench``; protocol class ``quick-bench``, never
formal; edge module: HTTP, files, clock).

The peers' one-command benchmark (``sglang.bench_serving --num-prompts --max-concurrency
--random-input-len``, ``vllm bench serve``) with dsv4h's evidence: the URL must be one the user gave
(default loopback :data:`DEFAULT_URL`); the server is detected (``/server_info`` or ``/get_server_info``
on every backend, ``/v1/models`` only when neither answers; SGLang-native -> ``/generate`` with input ids,
OpenAI-compatible -> ``/v1/completions`` with token-id prompts) and nothing else is contacted. N random
token-ID prompts (:mod:`harness.inputs.corpus.random_ids`) are frozen as a corpus inside the archive
(``prompts/``, hashed with every other file) before the first request is sent; they are sent closed-loop,
at most C in flight (each finished request starts the next), with ``max_new_tokens`` = the drawn output
length and ``ignore_eos``. A stopping signal (Ctrl-C, SIGTERM) stops sending and cancels the requests
in flight; the requests that had finished are kept: written, summarized and finalized as a ``partial``
archive (ingested like any), and the run ends with the interrupt's one-line error and exit status.
The archive (records, ``quick.json`` with throughput and latency at the chosen percentiles) is ingested
into the ledgers and checked by the evidence rules like every run; it is labelled ``simulated`` when the
server is the dsv4h simulator (``harness.service.identity.origin.server_is_simulator`` of what it
reported, whatever the protocol).

No service is started, stopped or identity-checked, no sentinel runs, and there are no rounds or
warmup: a quick screen says how a server behaves, not what it is worth; formal claims come from
``dsv4h campaign run``.
"""

from __future__ import annotations

import asyncio
import json
import secrets
from collections.abc import Mapping, Sequence
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any, Literal
from urllib.parse import urlsplit

from harness.aio import new_event_loop
from harness.errors import ArchiveError, DsvError, ServiceError, SpecError
from harness.evidence.rules_client import serves_simulator
from harness.ids import RequestIdentity, quick_request_id, wave_id
from harness.inputs.corpus import Corpus
from harness.inputs.corpus.random_ids import RandomPrompts, id_range, write_random_corpus
from harness.inputs.spec import ClaimClass
from harness.load.client import Protocol
from harness.load.driver import DEFAULT_TIMEOUT_S, LoadClient, OpenAIOptions, WaveRequest
from harness.measure import bench
from harness.measure import latency as lat
from harness.records import RequestRecord
from harness.run.events import QuickProgress, QuickStart, Reporter, silent
from harness.run.partial import RECOVERED_ERROR, read_events, read_json_or, run_start
from harness.run.skeleton import Finished, drive, finish, interrupted_error
from harness.service.identity.environment import capture_environment, clock_anchor
from harness.service.identity.origin import server_is_simulator
from harness.service.launch.manager import http_get
from harness.store.archive import ArchiveWriter
from harness.store.runblock import RunBlock

__all__ = ["BACKENDS", "DEFAULT_URL", "Backend", "BenchOptions", "QuickOutcome", "run_quick_bench"]

DEFAULT_URL = "http://127.0.0.1:30000"
PROTOCOL_CLASS = "quick-bench"
CELL_ID = "quick"
WAVE_ID = wave_id(CELL_ID, 0, 0)  # "quick.r0.w000": one measured round of one wave
Backend = Literal["auto", "sglang", "openai"]
BACKENDS: tuple[Backend, ...] = ("auto", "sglang", "openai")
NOTE = ("quick screen (protocol class quick-bench): one closed-loop pass of random prompts, no rounds, "
        "no warmup, no identity check; not a formal result")


def check_url(url: str) -> str:
    """The base URL (no trailing slash) of the server the user named: ``http`` or ``https``, a host, no
    query, fragment or credentials. SpecError naming ``--url`` otherwise (pure)."""
    parts = urlsplit(url.strip())
    if parts.scheme not in ("http", "https") or not parts.hostname:
        raise SpecError(f"--url {url!r}: not an http(s) URL with a host",
                        hint=f"give the server's base URL, e.g. {DEFAULT_URL}")
    if parts.query or parts.fragment or parts.username or parts.password:
        raise SpecError(f"--url {url!r}: a query, fragment or credentials are not part of a base URL",
                        hint=f"give the server's base URL only, e.g. {DEFAULT_URL}")
    return url.strip().rstrip("/")


@dataclass(frozen=True)
class Detected:
    """What the server said it is: the wire protocol used, its own report, and its vocabulary size when
    it reported one."""

    protocol: Protocol
    server_info: dict[str, Any]
    vocab_size: int | None

    @property
    def simulated(self) -> bool:
        """Whether the server identified itself as the dsv4h simulator."""
        return server_is_simulator(self.server_info)


def _get_json(url: str) -> Any:
    status, body = http_get(url)
    if status != 200:
        return None
    try:
        return json.loads(body)
    except ValueError:
        return None


def detect(base_url: str, backend: Backend) -> Detected:
    """Ask the server what it is: ``/server_info`` (then ``/get_server_info``) on every backend, since
    SGLang and the dsv4h simulator serve it beside the OpenAI API; ``/v1/models`` only when neither
    answers. The recorded ``server_info`` is the first that answered (``_source`` names it), so whether
    the server is the simulator is decided from its own report on every protocol. ``auto``:
    SGLang-native when ``/server_info`` answers, else OpenAI-compatible; ``openai`` always speaks
    ``/v1/completions``. ServerUnreachable when nothing answers; ServiceError when an ``auto`` or
    ``openai`` server answers neither."""
    info: dict[str, Any] = {}
    for path in ("/server_info", "/get_server_info"):
        data = _get_json(base_url + path)
        if isinstance(data, dict):
            info = data | {"_source": path}
            break
    protocol: Protocol = "sglang"
    if backend == "openai" or (backend == "auto" and not info):
        if not info:
            models = _get_json(base_url + "/v1/models")
            if not isinstance(models, dict):
                raise ServiceError(f"{base_url} answers neither /server_info nor /v1/models",
                                   hint="check the URL, or name the protocol with --backend sglang|openai")
            info = {"_source": "/v1/models", "models": models}
        protocol = "openai-completions"
    vocab = info.get("vocab_size")
    return Detected(protocol, info, int(vocab) if isinstance(vocab, int) and vocab > 1 else None)


@dataclass(frozen=True)
class BenchOptions:
    """One quick screen (module docstring); lengths in tokens, ``max_concurrency`` None = every prompt
    at once (the peers' default), ``percentiles`` of the latency table."""

    url: str = DEFAULT_URL
    backend: Backend = "auto"
    num_prompts: int = 8
    max_concurrency: int | None = None
    random_input_len: int = 1024
    random_output_len: int = 128
    random_range_ratio: float = 0.0
    seed: int = 0
    vocab_size: int | None = None
    model: str | None = None
    claim_class: ClaimClass = "native-ar"
    percentiles: tuple[float, ...] = lat.DEFAULT_PERCENTILES
    request_timeout_s: float = DEFAULT_TIMEOUT_S
    name: str = "quick-bench"

    @property
    def concurrency(self) -> int:
        """Requests in flight at most."""
        return min(self.max_concurrency or self.num_prompts, self.num_prompts)

    def check(self) -> None:
        """SpecError naming the flag of a value out of range."""
        if self.max_concurrency is not None and self.max_concurrency < 1:
            raise SpecError(f"--max-concurrency {self.max_concurrency}: must be at least 1",
                            hint="leave it out to send every prompt at once")
        if not self.request_timeout_s > 0:
            raise SpecError(f"--request-timeout {self.request_timeout_s:g}: must be positive",
                            hint="give the longest silence a request may have, in seconds")


@dataclass
class QuickOutcome:
    """A finished quick screen: the archive (ledger rows, findings), its summary and records."""

    finished: Finished
    summary: dict[str, Any]
    records: list[RequestRecord] = field(default_factory=list)
    simulated: bool = False
    error: DsvError | None = None

    @property
    def archive_id(self) -> str:
        """The finalized archive's id."""
        return self.finished.archive.archive_id


async def closed_loop(client: LoadClient, requests: Sequence[WaveRequest], concurrency: int,
                      reporter: Reporter = silent, out: list[RequestRecord | None] | None = None
                      ) -> list[RequestRecord]:
    """Send ``requests`` with at most ``concurrency`` in flight, each finished request starting the next
    in order; records in request order. Cancelling cancels every request in flight; ``out`` (one slot
    per request) receives each record as its request finishes, so what finished before a cancel is
    kept there."""
    out = [None] * len(requests) if out is None else out
    nxt = iter(range(len(requests)))
    done = 0

    async def worker() -> None:
        nonlocal done
        for i in nxt:
            out[i] = await client.send(requests[i], wave_size=concurrency)
            done += 1
            reporter(QuickProgress(done, len(requests)))

    tasks = [asyncio.ensure_future(worker()) for _ in range(min(concurrency, len(requests)))]
    try:
        await asyncio.gather(*tasks)
    except BaseException:
        for t in tasks:
            t.cancel()
        await asyncio.gather(*tasks, return_exceptions=True)
        raise
    return [r for r in out if r is not None]


def _requests(token: str, corpus: Corpus, concurrency: int) -> list[WaveRequest]:
    return [WaveRequest(input_ids=c.ids_list(), max_new_tokens=int(c.output_tokens or 1),
                        rid=quick_request_id(token, i), ignore_eos=True,
                        identity=RequestIdentity(run_id=token, cell_id=CELL_ID, round_index=0, wave_id=WAVE_ID,
                                                 wave_index=0, phase="measured", workload="quick",
                                                 case_id=c.case_id, input_hash=c.sha256[:16], request_index=i,
                                                 corpus_sha256=corpus.manifest_sha256),
                        input_len=c.n_tokens, concurrency=concurrency)
            for i, c in enumerate(corpus.cases)]


def summarize(records: Sequence[RequestRecord], percentiles: Sequence[float]) -> dict[str, Any]:
    """``quick.json``'s figures: throughput (harness.measure.bench) and latency columns at
    ``percentiles`` (harness.measure.latency.columns_at), seconds."""
    return {"throughput": bench.throughput(records), "percentiles": list(percentiles),
            "latency": lat.columns_at(records, percentiles), "latency_definitions": "harness.measure.latency",
            "note": NOTE}


class QuickBench:
    """Runs one quick screen into an archive (module docstring)."""

    def __init__(self, opts: BenchOptions, workspace: Path, *, reporter: Reporter = silent) -> None:
        opts.check()
        self.opts, self.workspace, self.report = opts, workspace, reporter
        self.url = check_url(opts.url)
        self.token = secrets.token_hex(8)
        self._prompts(None)  # every flag is checked before the server is contacted

    def _prompts(self, detected: Detected | None) -> RandomPrompts:
        o = self.opts
        low, high = id_range(o.vocab_size if o.vocab_size is not None or detected is None else detected.vocab_size)
        p = RandomPrompts(o.num_prompts, o.random_input_len, o.random_output_len, o.random_range_ratio, o.seed,
                          low, high)
        p.check()
        return p

    async def _send(self, detected: Detected, corpus: Corpus, out: list[RequestRecord | None]) -> None:
        o = self.opts
        c = o.concurrency
        async with LoadClient(self.url, protocol=detected.protocol, concurrency=c, model=o.model,
                              timeout_s=o.request_timeout_s,
                              openai=OpenAIOptions(prompt_format="token-ids")) as client:
            await closed_loop(client, _requests(self.token, corpus, c), c, self.report, out)

    def run(self) -> QuickOutcome:
        """Detect the server, freeze the prompts, send them, and always finalize the archive once it
        is open."""
        o = self.opts
        try:
            detected = detect(self.url, o.backend)
        except KeyboardInterrupt:
            raise interrupted_error("nothing was sent: the server was still being asked what it is") from None
        prompts = self._prompts(detected)
        self.report(QuickStart(url=self.url, protocol=detected.protocol, simulated=detected.simulated,
                               num_prompts=o.num_prompts, concurrency=o.concurrency))
        writer = ArchiveWriter(self.workspace, token=self.token)
        spec = {"kind": "quick-bench", "protocol_class": PROTOCOL_CLASS, "name": o.name} | asdict(o) | {
            "url": self.url, "protocol": detected.protocol, "concurrency": o.concurrency,
            "prompts": prompts.to_json()}
        records: list[RequestRecord] = []
        finished: list[RequestRecord | None] = [None] * o.num_prompts  # filled as requests finish
        written: list[bool] = []
        anchor: dict[str, Any] = {}

        def keep_finished() -> None:
            """Write the records of the requests that finished (request order), once: after the pass, or
            when a signal or an error ended it early."""
            if written:
                return
            records.extend(r for r in finished if r is not None)
            writer.write_wave(records)
            written.append(True)

        def kept() -> str:
            n = sum(r is not None for r in finished)
            return (f"{n} of {o.num_prompts} requests had finished: they are kept in the partial archive "
                    "(the rest were cancelled or never sent)")

        def body() -> None:
            writer.write_json("spec.json", spec)
            writer.write_json("environment.json", capture_environment())
            writer.write_json("service.json", {"services": [{
                "url": self.url, "backend": "attach", "protocol": detected.protocol, "attached": True,
                "server_info": detected.server_info, "start_index": 1}]})
            corpus = write_random_corpus(writer.dir / "prompts", prompts)
            writer.write_json("corpora.json", {"quick": corpus.identity() | {"path": "prompts"}})
            anchor.update(clock_anchor())
            writer.append_event({"event": "run-start", **anchor, "resumed_from": None})
            with asyncio.Runner(loop_factory=new_event_loop) as runner:
                runner.run(self._send(detected, corpus, finished))
            keep_finished()
            if records and not any(r.ok for r in records):
                raise ServiceError(f"all {len(records)} requests failed (first: {records[0].error})",
                                   hint="check the server's log and that it accepts token-id prompts")

        def finalize(status: str, error: DsvError | None) -> QuickOutcome:
            # the pass started: what finished is kept however it ended (but a write that failed, a full
            # disk, is not tried again: the storage error names where the data is)
            if anchor and not isinstance(error, ArchiveError):
                keep_finished()
            summary = summarize(records, o.percentiles)
            writer.write_json("quick.json", summary)
            run = quick_run_block(spec, self.token, str(anchor.get("wall_iso", "")), simulated=detected.simulated,
                                  error=error.message if error else None,
                                  count_methods=tuple(sorted({r.count_method for r in records if r.ok})))
            done = finish(writer, self.workspace, status, run)
            return QuickOutcome(done, summary, records, detected.simulated, error)

        # an attached server: nothing this run started needs stopping
        return drive(writer, body, kept=kept, what="screen", clean_up=lambda: None, finalize=finalize)


def quick_run_block(spec: Mapping[str, Any], token: str, created_wall: str, *, simulated: bool,
                    error: str | None, count_methods: tuple[str, ...] = (), extra_labels: Sequence[str] = ()
                    ) -> RunBlock:
    """The run block of a quick screen from its ``spec.json`` (also for a partial rolled forward by
    harness.run.recover: a quick screen is never recovered as a formal matrix)."""
    labels = (["simulated"] if simulated else []) + list(extra_labels)
    return RunBlock(campaign=str(spec.get("name") or "quick-bench"), kind="quick-bench",
                    claim_class=str(spec.get("claim_class") or "native-ar"), protocol_class=PROTOCOL_CLASS,
                    backend="attach", service_name=str(spec.get("url") or ""), created_wall=created_wall,
                    run_token=token, labels=tuple(labels), error=error, count_methods=count_methods)


def recover_quick(workspace: Path, writer: ArchiveWriter, spec: dict[str, Any]) -> Finished:
    """Finalize a killed quick screen's partial (the quick-bench recovery of harness.run.kinds): status
    ``partial``, label ``recovered``, still protocol class quick-bench (``simulated`` when a server in
    its ``service.json`` identified itself as the simulator)."""
    d = writer.dir
    start = run_start(read_events(d))
    services = list(read_json_or(d, "service.json", {}).get("services", []))
    sim = any(serves_simulator(dict(s)) for s in services if isinstance(s, dict))
    return finish(writer, workspace, "partial", quick_run_block(
        spec, writer.token, str(start.get("wall_iso", "")), simulated=sim, error=RECOVERED_ERROR,
        extra_labels=("recovered",)))


def run_quick_bench(opts: BenchOptions, workspace: Path, *, reporter: Reporter = silent) -> QuickOutcome:
    """Run a quick screen against ``opts.url`` into ``<workspace>/archives`` and the ledgers."""
    return QuickBench(opts, workspace, reporter=reporter).run()
