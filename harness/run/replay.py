"""Trace replays (protocol class ``trace-replay``; edge module: processes, HTTP, files, clock).

A replay sends the requests of a Mooncake-format trace (:mod:`harness.inputs.trace`) open loop: request
*i* is the corpus case imported from trace line *i* (``dsv4h corpus import-trace``), sent at the replay's
start + ``timestamp_i / speed`` whether or not earlier ones finished (the open-loop sender
the rate sweep shares, :func:`harness.run.open_loop.send_open_loop`), at most ``max_concurrency`` in flight, with
``max_new_tokens`` = the line's ``output_length`` and ``ignore_eos`` so every answer has the trace's
length. Every request carries the run's one cache salt, so the server's prefix cache works across the
replay's requests (and never across runs). The schedule and the prefix-cache hits the trace implies
(:func:`harness.inputs.trace.expected_cached`) are archived (``arrivals.json``) before the service starts.

Archive: the records (one wave), ``schedule.jsonl`` (scheduled and actual send, lateness, cap wait per
request), ``cache.jsonl`` (expected and reported cached tokens per request), ``replay.json`` and
``replay_runs.parquet`` (the ``replay_runs`` row, :mod:`harness.measure.replay`). A run on one service started once
(:class:`harness.run.base.OneServiceRunner`; no power sampled), it ends through the run skeleton
(:func:`harness.run.skeleton.drive`, ``finish``); :func:`recover_replay` finalizes a killed
replay's partial from its records and ``arrivals.json``. The replay is one measured unit: the client's
self-check and the simulator's late steps over it are one ``wave_checks.jsonl`` row under its wave id
(``ids.wave_id(CELL, 0, 0)``), judged by the evidence rules like a formal wave.
"""

from __future__ import annotations

import time
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from harness import ids
from harness.errors import DsvError, SpecError
from harness.hashing import sha256_json
from harness.ids import RequestIdentity
from harness.inputs.corpus import Corpus, cache_salt, load_corpus
from harness.inputs.corpus.trace_import import check_trace_matches, trace_params
from harness.inputs.spec import LoadedSpec, ReplaySpec, replay_definition
from harness.inputs.trace import expected_cached
from harness.interrupts import fault_point
from harness.load.driver import LoadClient, WaveRequest
from harness.measure import replay as rp
from harness.measure.rows import build, row_dict, rows_table
from harness.measure.saturation import saturation
from harness.records import RequestRecord
from harness.run import open_loop
from harness.run.base import OneServiceRunner, OpenedRun
from harness.run.events import Reporter, silent
from harness.run.open_loop import NS, connections, round_check, send_open_loop, unit_edges
from harness.run.options import RunOptions, check_options
from harness.run.partial import read_events, read_json_or, read_jsonl, recovered_run_block
from harness.run.prompts import load_client
from harness.run.session import ServiceSession
from harness.run.skeleton import Finished, finish
from harness.service.launch.manager import RunningService, check_port_free, port_field
from harness.store.archive import ArchiveWriter
from harness.store.runblock import RunBlock

__all__ = ["ReplayOutcome", "make_replay_plan"]

CELL = "replay"  # the one cell (and wave) of a replay: ids.wave_id(CELL, 0, 0)


@dataclass(frozen=True)
class ReplayPlan:
    """What a replay sends: per request its case, its send offset (s), its answer length and the
    cached tokens the trace implies; the trace's hash and block size; the plan's id."""

    case_ids: tuple[str, ...]
    offsets_s: tuple[float, ...]
    output_tokens: tuple[int, ...]
    expected_cached: tuple[int, ...]
    trace_sha256: str
    block_size: int
    definition: dict[str, Any]

    @property
    def plan_id(self) -> str:
        """16 hex digits of the plan's hash."""
        return sha256_json(self.to_json(with_id=False))[:16]

    def to_json(self, *, with_id: bool = True) -> dict[str, Any]:
        """``arrivals.json`` (offsets rounded to the nanosecond)."""
        out: dict[str, Any] = {
            "definition": self.definition, "trace_sha256": self.trace_sha256, "block_size": self.block_size,
            "case_ids": list(self.case_ids), "offsets_ns": [round(x * NS) for x in self.offsets_s],
            "output_tokens": list(self.output_tokens), "expected_cached_tokens": list(self.expected_cached)}
        return ({"plan_id": self.plan_id} | out) if with_id else out

    @classmethod
    def from_json(cls, d: dict[str, Any]) -> ReplayPlan:
        """The plan of an ``arrivals.json``."""
        return cls(tuple(d["case_ids"]), tuple(int(x) / NS for x in d["offsets_ns"]), tuple(d["output_tokens"]),
                   tuple(d["expected_cached_tokens"]), str(d["trace_sha256"]), int(d["block_size"]),
                   dict(d["definition"]))


def make_replay_plan(spec: ReplaySpec, corpus: Corpus, trace_path: Path) -> ReplayPlan:
    """The replay's plan from its corpus and the trace it was imported from (``CorpusError`` when the trace
    is not that file)."""
    trace = check_trace_matches(corpus, trace_path)
    block = int(trace_params(corpus)["block_size"])
    definition = replay_definition(spec) | {"corpus_manifest_sha256": corpus.manifest_sha256}
    return ReplayPlan(tuple(c.case_id for c in corpus.cases),
                      tuple(rp.offsets_s([r.timestamp_ms for r in trace], spec.speed)),
                      tuple(r.output_length for r in trace), tuple(expected_cached(trace, block)),
                      corpus.manifest.source.revision, block, definition)


def header(spec: ReplaySpec, plan: ReplayPlan) -> dict[str, Any]:
    """The trace and replay columns of the ``replay_runs`` row."""
    return {"trace_sha256": plan.trace_sha256, "block_size_tokens": plan.block_size, "speed": spec.speed,
            "max_concurrency": spec.max_concurrency or 0,
            "trace_span_s": (plan.offsets_s[-1] * spec.speed) if plan.offsets_s else 0.0}


def schedule_rows(planned_ns: Sequence[int], records: Sequence[RequestRecord],
                  cap_wait_ns: Sequence[int]) -> list[dict[str, Any]]:
    """``schedule.jsonl`` rows: the open-loop schedule rows (:func:`harness.run.open_loop.schedule_rows`)
    with each request's trace ``index``."""
    return open_loop.schedule_rows(planned_ns, records, cap_wait_ns, lambda i: {"index": i})


def replay_row(spec: ReplaySpec, plan: ReplayPlan, records: Sequence[RequestRecord], start_ns: int,
               sched: Sequence[dict[str, Any]], status: str) -> dict[str, Any]:
    """The run's ``replay_runs`` row (:func:`harness.measure.replay.replay_row`); ``sched`` holds one row
    per record (its ``rid`` and trace ``index``)."""
    by_rid = {r.rid: r for r in records}
    recs = [by_rid[str(r["rid"])] for r in sched]
    expected = [plan.expected_cached[int(r["index"])] for r in sched]
    row = rp.replay_row(recs, start_ns=start_ns, sched=sched, expected=expected,
                        lateness_tolerance_s=spec.lateness_tolerance_ms / 1000,
                        cached_tolerance_pct=spec.cached_tolerance_pct, status=status, header=header(spec, plan))
    row |= saturation(recs).columns()  # docs/saturation.md: the same judgement as a sweep round's
    return row_dict(build("replay_runs", row))


@dataclass
class ReplayOutcome:
    """What a replay produced: the finished archive and its ``replay_runs`` row (None when nothing ran)."""

    finished: Finished
    row: dict[str, Any] | None
    error: DsvError | None = None

    @property
    def archive_id(self) -> str:
        """The finalized archive's id."""
        return self.finished.archive.archive_id


class ReplayRunner(OneServiceRunner[ReplaySpec, ReplayOutcome]):
    """Runs one trace replay into an archive (module docstring); no power is sampled."""

    what = "replay"
    kept = "every finished request is kept"
    samples_power = False

    def __init__(self, spec: ReplaySpec, corpus: Corpus, plan: ReplayPlan, workspace: Path, *,
                 raw: bytes | None = None, source: str = "", reporter: Reporter = silent) -> None:
        self.corpus, self.plan = corpus, plan
        super().__init__(spec, workspace, raw=raw, source=source, reporter=reporter)
        self.cases = {c.case_id: c for c in corpus.cases}
        self.row: dict[str, Any] | None = None
        self.cache_rows: list[dict[str, Any]] = []

    def corpora(self) -> dict[str, Any]:
        """The replay's one corpus."""
        return {"replay": self.corpus.identity()}

    def extra_files(self) -> dict[str, Any]:
        """``arrivals.json``: the replay's plan."""
        return {"arrivals.json": self.plan.to_json()}

    def requests(self) -> list[WaveRequest]:
        """Every request in trace order (one salt for the run: the prefix cache is shared across them)."""
        salt = cache_salt(self.token, CELL)
        wave = ids.wave_id(CELL, 0, 0)
        out = []
        for i, (cid, n_out) in enumerate(zip(self.plan.case_ids, self.plan.output_tokens, strict=True)):
            case = self.cases[cid]
            out.append(WaveRequest(
                input_ids=case.ids_list(), rid=ids.sweep_request_id(self.token, CELL, 0, i), max_new_tokens=n_out,
                ignore_eos=True, prompt_text=self.texts(case) if self.texts else None, cache_salt=salt,
                identity=RequestIdentity(run_id=self.token, cell_id=CELL, round_index=0, wave_id=wave, wave_index=0,
                                         phase="measured", workload="replay", case_id=cid,
                                         input_hash=case.sha256[:16], request_index=i,
                                         corpus_sha256=self.corpus.manifest_sha256),
                concurrency=self.spec.max_concurrency or 0))
        return out

    async def measure(self, svc: RunningService, run: OpenedRun) -> None:
        """The replay, through one client."""
        reqs, s = self.requests(), self.spec
        async with load_client(svc.url, s.service, concurrency=connections(s.max_concurrency, len(reqs)),
                               timeout_s=s.request_timeout_s, limits=s.client) as client:
            await self._send(client, run.writer, reqs, svc, run.session)

    async def _send(self, client: LoadClient, writer: ArchiveWriter, reqs: list[WaveRequest], svc: RunningService,
                    session: ServiceSession) -> None:
        """Send the replay open loop, measured with the session's self-check (``WaveSelfCheck.around``;
        its row in ``wave_checks.jsonl`` under the replay's one wave id, ``round_check``), then archive
        its records, schedule and row."""
        cap = self.spec.max_concurrency
        sent = await session.selfcheck.around(
            svc, client, lambda: send_open_loop(client, reqs, self.plan.offsets_s, cap))
        writer.write_wave(sent.records)
        sched = schedule_rows(sent.planned_ns, sent.records, sent.cap_wait_ns)
        for row in sched:
            writer.append_jsonl("schedule.jsonl", row)
        wave, unit = round_check(CELL, 0, cap or 0, workload="replay", replay_id=rp.REPLAY_ID)
        session.record_check(wave, unit, unit_edges(sent.start_ns, sent.records))
        fault_point("replay:written")
        status = "ok" if all(r.ok for r in sent.records) else "failed"
        self.row = replay_row(self.spec, self.plan, sent.records, sent.start_ns, sched, status)
        self.cache_rows = rp.cache_rows(sent.records, self.plan.expected_cached)
        writer.append_event({"event": "round", "round_id": ids.round_id(CELL, 0), "status": status,
                             "start_ns": sent.start_ns, "t_ns": time.perf_counter_ns()})

    def finalize(self, run: OpenedRun, status: str, error: DsvError | None) -> ReplayOutcome:
        """``replay_runs.parquet``, ``replay.json`` and ``cache.jsonl``, then the archive finished."""
        block = self.run_block(run, error, plan_id=self.plan.plan_id)
        done = finalize_replay(run.writer, self.workspace, self.spec, self.plan, self.row, self.cache_rows, status,
                               block)
        return ReplayOutcome(done, self.row, error)


def finalize_replay(writer: ArchiveWriter, workspace: Path, spec: ReplaySpec, plan: ReplayPlan,
                    row: dict[str, Any] | None, cache: Sequence[dict[str, Any]], status: str,
                    run: RunBlock) -> Finished:
    """Write ``replay_runs.parquet``, ``replay.json`` and ``cache.jsonl``, then finish the archive."""
    extra = {"campaign": spec.name, "claim_class": spec.claim_class, "protocol_class": spec.protocol_class}
    if row is not None:
        writer.write_table("replay_runs.parquet", rows_table("replay_runs", [row], extra))
    for r in cache:
        writer.append_jsonl("cache.jsonl", r)
    writer.write_json("replay.json", {"plan_id": plan.plan_id, "row": row, "schedule_definition": rp.__doc__,
                                      "expected_cached_definition": expected_cached.__doc__})
    return finish(writer, workspace, status, run)


def recover_replay(workspace: Path, writer: ArchiveWriter, spec_json: dict[str, Any]) -> Finished:
    """Finalize a killed replay's partial (the trace-replay recovery of ``harness.run.kinds``): status
    ``partial``, label ``recovered``; its row computed as the run computes it from the records it had
    written, ``incomplete`` without the run's ``round`` event."""
    spec = ReplaySpec.model_validate(spec_json)
    d = writer.dir
    events = read_events(d)
    plan = ReplayPlan.from_json(read_json_or(d, "arrivals.json", {}))
    ended = [e for e in events if e.get("event") == "round"]
    sched: list[dict[str, Any]] = read_jsonl(d, "schedule.jsonl")
    recs = [r for r in writer.streamed_records() if r.phase == "measured"]
    row, cache = None, []
    if recs and len(sched) == len(recs):
        start_ns = int(ended[0]["start_ns"]) if ended else min(r.send_ns for r in recs)
        status = str(ended[0].get("status", "incomplete")) if ended else "incomplete"
        row = replay_row(spec, plan, recs, start_ns, sched, status)
        by_rid = {r.rid: r for r in recs}
        cache = rp.cache_rows([by_rid[str(s["rid"])] for s in sched], plan.expected_cached)
    run = recovered_run_block(writer, spec, plan_id=plan.plan_id)
    return finalize_replay(writer, workspace, spec, plan, row, cache, "partial", run)


def run_replay_loaded(loaded: LoadedSpec, workspace: Path, *, reporter: Reporter = silent) -> ReplayOutcome:
    """Run the trace replay of a loaded spec (the ``trace-replay`` runner of harness.run.kinds)."""
    spec = loaded.spec
    if not isinstance(spec, ReplaySpec):
        raise SpecError(f"{loaded.source}: kind '{spec.kind}' is not a trace replay",
                        hint="give a spec of kind trace-replay")
    spec = spec.model_copy(update={"oracles": [str(p) for p in loaded.paths.oracles]})
    corpus = load_corpus(loaded.paths.corpora["replay"])
    plan = make_replay_plan(spec, corpus, loaded.paths.corpora["trace"])
    check_port_free(spec.service, port_field(loaded.source))
    return ReplayRunner(spec, corpus, plan, workspace, raw=loaded.raw, source=str(loaded.source or ""),
                        reporter=reporter).run()


def run_kind(loaded: LoadedSpec, workspace: Path, reporter: Reporter, options: RunOptions) -> Any:
    """This kind's runner (the kind descriptor's ``run``, harness.kinds): options it does not take refused."""
    check_options(loaded, options)
    return run_replay_loaded(loaded, workspace, reporter=reporter)
