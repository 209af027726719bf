"""Orchestration of a formal matrix campaign (edge module).

spec -> corpora (verified before any request) -> plan -> one fresh service -> cells in order
(warmups excluded, measured rounds) -> raw records streamed to a partial archive as waves finish
-> results -> finalized, hashed archive -> ledgers.

A failure never loses data: completed waves are already on disk; the archive is finalized with
status ``partial`` (Ctrl-C) or ``failed`` (dead server, failed requests), and
``run_campaign(..., resume=ARCHIVE)`` continues it in a new archive that carries the old records;
:func:`recover_matrix` (the formal-matrix recovery of harness.run.kinds) finalizes a killed run's
partial with the same :func:`finalize_matrix`. The archive is opened by
:func:`harness.run.base.open_run`. Progress goes to a ``Reporter``; this module never prints.
"""

from __future__ import annotations

import asyncio
import contextlib
import dataclasses
import secrets
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pyarrow as pa
from pydantic import ValidationError

from harness.aio import new_event_loop
from harness.errors import ArchiveError, DsvError, MeasurementError, SpecError
from harness.evidence.findings import Finding
from harness.evidence.verdict import Verdict
from harness.inputs.corpus import Corpus, load_corpus
from harness.inputs.plan import CellPlan, Plan, build_plan, sim_cell_estimate, wave_cases
from harness.inputs.spec import CampaignSpec, LoadedSpec, LoadSettings, load_spec
from harness.load.driver import LoadClient
from harness.load.workers import auto_workers
from harness.measure import coldness as cold
from harness.measure import metrics as m
from harness.measure.acceptance import acceptance_rows, cell_cycles
from harness.measure.claims import draft_length
from harness.measure.results import CampaignResults, compute_results, results_json, results_tables, run_count_methods
from harness.measure.rows import build, rows_table
from harness.oracle.model import Oracle
from harness.oracle.sentinels import load_sentinels
from harness.records import RequestRecord
from harness.run.base import open_run
from harness.run.energy import PowerLog, resident_windows
from harness.run.events import (
    CellSkipped,
    CellStart,
    PlanReady,
    Reporter,
    RoundDone,
    WarmupDone,
    WaveDone,
    WaveLive,
    silent,
)
from harness.run.options import RunOptions, resume_command
from harness.run.partial import RECOVERED_ERROR, read_events, read_json_or, recover_records_only, run_start
from harness.run.prompts import PromptText, load_client, openai_options, prompt_texts
from harness.run.session import (
    check_governance,
    run_labels,
    spec_counters,
    start_memory_sampler,
    write_memory,
)
from harness.run.skeleton import Finished, drive, finish
from harness.run.wave import WaveSpec, execute_wave
from harness.service.devices.memory import MemorySampler
from harness.service.identity.identity import identity_hash
from harness.service.launch.manager import RunningService, check_port_free, port_field
from harness.store.archive import (
    Archive,
    ArchiveWriter,
    already_resumed,
    find_archive,
    open_archive,
    open_verified,
    resumed_by,
)
from harness.store.runblock import RunBlock
from harness.store.view import ArchiveView

__all__ = ["RunOutcome", "load_corpora", "make_plan"]


@dataclass
class RunOutcome:
    """What a campaign run produced: the archive, its status, results, and the error that stopped
    it (None when complete)."""

    archive: Archive
    status: str
    plan: Plan
    results: CampaignResults
    error: DsvError | None = None
    ledger_rows: dict[str, int] = field(default_factory=dict)
    findings: list[Finding] = field(default_factory=list)
    verdict: Verdict | None = None

    @property
    def archive_id(self) -> str:
        """The finalized archive's id."""
        return self.archive.archive_id


def load_corpora(loaded: LoadedSpec) -> dict[str, Corpus]:
    """Load and verify the spec's corpora (raises CorpusError before anything is sent)."""
    return {workload: load_corpus(path) for workload, path in loaded.paths.corpora.items()
            if workload in ("decode", "prefill")}


Estimator = Callable[[CellPlan], float | None]


def estimator_for(spec: CampaignSpec, corpora: dict[str, Corpus]) -> tuple[Estimator | None, str]:
    """A per-cell time estimator when the service's rate model is known (the simulator)."""
    if spec.service.backend != "sim":
        return None, ""
    from harness.sim import analytic_decode_rate, analytic_prefill_rate, profile_for

    prof = profile_for(spec.service.sim.profile, spec.service.sim.profile_file)
    sf = spec.service.sim.step_factor
    ts = spec.service.sim.time_scale

    def est(cell: CellPlan) -> float | None:
        corpus = corpora.get(cell.workload)
        if corpus is None:
            return None
        plen = max(c.n_tokens for c in corpus.cases)
        mean_answer = float(getattr(prof, "eos_min", 64) + getattr(prof, "eos_max", 64)) / 2
        return ts * sim_cell_estimate(
            cell, decode_rate=lambda b: analytic_decode_rate(prof, b, sf),
            prefill_rate=lambda n, p: analytic_prefill_rate(prof, n, p),
            prompt_len=plen, mean_answer_tokens=mean_answer,
        )

    return est, f"simulator profile '{prof.name}' analytic model"


def workers_for(spec: CampaignSpec, concurrency: int) -> int:
    """Load worker processes for a cell of ``concurrency`` streams: the spec's ``load.workers``, or for
    ``auto`` sized from the offered event rate (the simulator's analytic rate; elsewhere a 10 ms step
    is assumed) and the client's CPU per event on its transport (``harness.load.workers.auto_workers``)."""
    if spec.load.workers != "auto":
        return min(spec.load.workers, concurrency)
    if spec.service.backend == "sim":
        from harness.sim import analytic_decode_rate, profile_for

        s = spec.service.sim
        prof = profile_for(s.profile, s.profile_file)
        events = analytic_decode_rate(prof, concurrency, s.step_factor, time_scale=s.time_scale) / s.stream_interval
    else:
        events = concurrency / 0.010
    transport = "aiohttp" if spec.load.transport == "aiohttp" else "wire"
    return min(auto_workers(events, transport=transport), concurrency)


def make_plan(spec: CampaignSpec, corpora: dict[str, Corpus]) -> Plan:
    """The campaign's plan with a time estimate where one can be made."""
    hashes = {k: c.manifest_sha256 for k, c in corpora.items()}
    est, basis = estimator_for(spec, corpora)
    return build_plan(spec, hashes, estimator=est, estimate_basis=basis)


@dataclass
class _State:
    """Mutable run state: round statuses and per-cell wave counters (for case cycling)."""

    round_status: dict[str, str] = field(default_factory=dict)
    wave_counter: dict[str, int] = field(default_factory=dict)
    service_starts: int = 0
    services: list[dict[str, Any]] = field(default_factory=list)
    old_records: list[RequestRecord] = field(default_factory=list)


@dataclass(frozen=True)
class CampaignInputs:
    """Everything a campaign run reads before it starts, loaded and checked by ``prepare_campaign``."""

    loaded: LoadedSpec
    spec: CampaignSpec
    corpora: dict[str, Corpus]
    sentinels: list[Oracle]
    plan: Plan
    governance: dict[str, Any]
    resume: Archive | None
    state: _State
    texts: PromptText | None


def _resume_state(prev: Archive, plan: Plan) -> _State:
    run = prev.run
    if run.plan_id != plan.plan_id:
        raise SpecError(
            f"cannot resume archive {prev.archive_id}: its plan {run.plan_id} differs from "
            f"this spec's plan {plan.plan_id} (cells, sampling or corpora changed)",
            hint="resume with the same spec file the archive was made from",
        )
    if prev.status == "complete":
        raise SpecError(f"archive {prev.archive_id} is complete; nothing to resume",
                        hint="start a new campaign instead")
    state = _State(old_records=prev.records())
    prev_files = ArchiveView(prev)
    results = prev_files.doc("results.json")
    if not isinstance(results, dict):
        raise ArchiveError(f"archive {prev.archive_id} has no results.json: its rounds are not known",
                           hint="start a new campaign instead")
    for r in results.get("rounds", []):
        state.round_status[r["round_id"]] = r["status"]
    waves_per_cell: dict[str, set[str]] = {}
    for rec in state.old_records:
        waves_per_cell.setdefault(rec.cell_id, set()).add(rec.wave_id)
    state.wave_counter = {k: len(v) for k, v in waves_per_cell.items()}
    state.service_starts = int(run.service_starts or 1)
    state.services = prev_files.services()
    return state


def prepare_campaign(loaded: LoadedSpec, workspace: Path, resume: Archive | None = None) -> CampaignInputs:
    """Load corpora and sentinels, build the plan, check governance and the archive to resume
    (all before any service starts; each problem raises with its fix)."""
    spec = loaded.spec
    if not isinstance(spec, CampaignSpec):
        raise SpecError(f"{loaded.source}: kind '{spec.kind}' is not a formal matrix",
                        hint="run ABBA specs with 'dsv4h campaign run' or 'dsv4h abba'")
    corpora = load_corpora(loaded)
    sentinels = load_sentinels(loaded.paths.oracles)
    plan = make_plan(spec, corpora)
    governance = check_governance(spec, workspace, f"campaign:{spec.name}", loaded.paths.analysis_plan)
    if resume is not None and (successor := resumed_by(workspace, resume.archive_id)) is not None:
        raise already_resumed(resume.archive_id, successor)
    state = _resume_state(resume, plan) if resume is not None else _State()
    texts = prompt_texts(spec.service)
    openai_options(spec.service)  # a missing tokenizer is refused before anything starts
    check_port_free(spec.service, port_field(loaded.source))  # a taken port: refused before the archive opens
    return CampaignInputs(loaded, spec, corpora, sentinels, plan, governance, resume, state, texts)


class CampaignRunner:
    """Runs one campaign into one archive. Use ``run_campaign`` rather than this directly."""

    def __init__(self, inputs: CampaignInputs, workspace: Path, reporter: Reporter) -> None:
        self.inputs = inputs
        self.spec = inputs.spec
        self.plan = inputs.plan
        self.corpora = inputs.corpora
        self.workspace = workspace
        self.report = reporter
        self.resume = inputs.resume
        self.state = inputs.state
        self.token = f"{time.strftime('%Y%m%dT%H%M%S')}-{secrets.token_hex(3)}"
        self.service: RunningService | None = None
        self.texts = inputs.texts

    def _round_done(self, cell: CellPlan, k: int) -> bool:
        return any(
            st == "ok" for rid, st in self.state.round_status.items()
            if rid == cell.round_id(k) or rid.startswith(cell.round_id(k) + ".a")
        )

    def _next_attempt(self, cell: CellPlan, k: int) -> int:
        n = sum(1 for rid in self.state.round_status
                if rid == cell.round_id(k) or rid.startswith(cell.round_id(k) + ".a"))
        return n

    # --- running ---------------------------------------------------------------------------

    def run(self) -> RunOutcome:
        """Run every cell; always finalize an archive, whatever happens."""
        opened = open_run(
            self.workspace, self.token, self.spec, spec_bytes=self.inputs.loaded.raw,
            corpora={k: c.identity() for k, c in self.corpora.items()},
            governance=self.inputs.governance, claim_class=self.spec.claim_class,
            sentinels=self.inputs.sentinels, reporter=self.report, services=self.state.services,
            extra_files={"plan.json": {"plan_id": self.plan.plan_id, "estimate_s": self.plan.estimate_s,
                                       "cells": [c.definition | {"cell_id": c.cell_id} for c in self.plan.cells]}},
            resumed_from=self.resume.archive_id if self.resume else None)
        writer, anchor, self.session, power = opened.writer, opened.anchor, opened.session, opened.power
        if self.state.old_records:
            writer.write_wave(self.state.old_records)
        self.report(PlanReady(self.plan))
        sampler: list[MemorySampler] = []

        def body() -> None:
            self.state.service_starts += 1
            self.service = self.session.start(self.spec.service, self.spec.service.name,
                                              {"start_index": self.state.service_starts})
            started = start_memory_sampler(self.spec.service)
            sampler.extend([started] if started is not None else [])
            power.start(self.service)
            with asyncio.Runner(loop_factory=new_event_loop) as runner:
                runner.run(self._run_cells(writer))

        def after() -> None:  # sentinels after measurement; a Ctrl-C skips them
            if self.service is not None:
                self.session.after_checks(self.service)

        return drive(writer, body, kept="every finished wave is kept", what="run", after=after,
                     clean_up=lambda: self._clean_up(writer, sampler[0] if sampler else None, power),
                     finalize=lambda status, error: self._finalize(writer, status, error, anchor))

    def _clean_up(self, writer: ArchiveWriter, sampler: MemorySampler | None,
                  power: PowerLog | None = None) -> None:
        """Store the memory and power samples (and each measured wave's energy) and stop every service
        this run started (however it ended)."""
        try:
            if sampler is not None:
                write_memory(writer, sampler)
            if power is not None:
                power.write(resident_windows(writer.streamed_records()))
        finally:
            svc, self.service = self.service, None
            if svc is not None:
                self.session.stop(svc, sentinels=False)
            self.session.stop_all()

    async def _run_cells(self, writer: ArchiveWriter) -> None:
        for cell in self.plan.cells:
            todo = [k for k in range(cell.rounds) if not self._round_done(cell, k)]
            if not todo:
                self.report(CellSkipped(cell))
                continue
            corpus = self.corpora[cell.workload]
            await asyncio.to_thread(self._svc.check_owners, f"before cell {cell.cell_id}")
            self.report(CellStart(cell, tuple(todo)))
            async with load_client(self._svc.url, self.spec.service, concurrency=cell.concurrency,
                                   timeout_s=self.spec.request_timeout_s, limits=self.spec.client,
                                   workers=workers_for(self.spec, cell.concurrency),
                                   pin_cpus=self.spec.load.pin_cpus, transport=self.spec.load.transport) as client:
                clean = 0
                for j in range(cell.warmup_waves):
                    wid = cell.wave_id(-1, j, service_start=self.state.service_starts)
                    recs = await self._wave(client, writer, cell, corpus, -1, j, wid, "warmup")
                    clean += all(r.ok for r in recs)
                    self.report(WarmupDone(cell, j, recs))
                if cell.warmup_waves and not clean:
                    self._svc.check_alive()
                    raise MeasurementError(
                        f"{cell.label}: every warmup wave had failed requests; the cell was not measured",
                        hint="find the cause in the service log (the failed warmups are kept in the archive), "
                        "then resume the campaign")
                for k in todo:
                    await self._round(client, writer, cell, corpus, k)

    @property
    def _svc(self) -> RunningService:
        assert self.service is not None
        return self.service

    async def _round(self, client: LoadClient, writer: ArchiveWriter, cell: CellPlan, corpus: Corpus,
                     k: int) -> None:
        attempt = self._next_attempt(cell, k)
        rid = cell.round_id(k, attempt)
        self._set_round(writer, rid, "incomplete")
        waves: list[list[RequestRecord]] = []
        resident_s = 0.0
        j = 0
        target_waves = cell.waves_per_round if cell.workload == "prefill" else None
        while True:
            wid = cell.wave_id(k, j, attempt)
            recs = await self._wave(client, writer, cell, corpus, k, j, wid, "measured")
            waves.append(recs)
            failed = [r for r in recs if not r.ok]
            res = m.resident_window(recs)
            if res.contributes:
                resident_s += res.seconds
            rate = (m.prefill_rate(waves) if cell.workload == "prefill" else m.resident_decode_rate(waves)).rate
            self.report(WaveDone(cell, round=k, attempt=attempt, wave=j, records=recs, resident_s=resident_s,
                                 round_rate=rate, http_rate=m.http_output_rate(waves).rate))
            if failed:
                self._set_round(writer, rid, "failed")
                self.report(RoundDone(cell, k, "failed", rate,
                                      error=f"{len(failed)} of {len(recs)} requests failed in wave {j}"))
                self._svc.check_alive()
                raise MeasurementError(
                    f"{cell.label} round {k}: {len(failed)} of {len(recs)} requests failed in wave {j} "
                    f"(first: {failed[0].error})",
                    hint="the round is kept and marked failed; fix the cause and resume the campaign",
                )
            j += 1
            if target_waves is not None:
                if j >= target_waves:
                    break
            elif resident_s >= (cell.min_resident_seconds or 0.0):
                break
            elif j >= cell.max_waves_per_round:
                self._set_round(writer, rid, "short")
                self.report(RoundDone(cell, k, "short", rate))
                return
        self._set_round(writer, rid, "ok")
        self.report(RoundDone(cell, k, "ok", rate, resident_s=resident_s))

    def _set_round(self, writer: ArchiveWriter, rid: str, status: str) -> None:
        """Record a round's status in the run state and in ``events.jsonl`` (what recovery reads)."""
        self.state.round_status[rid] = status
        writer.append_event({"event": "round", "round_id": rid, "status": status, "t_ns": time.perf_counter_ns()})

    async def _wave(self, client: LoadClient, writer: ArchiveWriter, cell: CellPlan, corpus: Corpus,
                    k: int, j: int, wave_id: str, phase: str) -> list[RequestRecord]:
        counter = self.state.wave_counter.get(cell.cell_id, 0)
        self.state.wave_counter[cell.cell_id] = counter + 1
        cases = [corpus.cases[i] for i in wave_cases(len(corpus.cases), cell.concurrency, counter)]
        spec = WaveSpec(run_id=self.token, cell_id=cell.cell_id, wave_id=wave_id, round_index=k,
                        wave_index=j, phase=phase, workload=cell.workload, concurrency=cell.concurrency,
                        max_new_tokens=cell.max_new_tokens, ignore_eos=cell.ignore_eos, cache=cell.cache,
                        corpus_sha256=corpus.manifest_sha256)
        recs = await execute_wave(self._svc, client, spec, cases, self.session.witness, self.texts,
                                  selfcheck=self.session.selfcheck,
                                  on_live=lambda t: self.report(WaveLive(cell, k, j, phase, t)))
        writer.write_wave(recs)
        self.session.record_witness(recs, wave_id, cell.concurrency)
        return recs

    # --- finishing -------------------------------------------------------------------------

    def _finalize(self, writer: ArchiveWriter, status: str, error: DsvError | None,
                  anchor: dict[str, Any]) -> RunOutcome:
        if not self.session.services:
            self.session.write_service_json()
        cells = [(c.cell_id, c.workload, c.concurrency, c.rounds) for c in self.plan.cells]
        # inside drive()'s critical section
        done, results = finalize_matrix(
            writer, self.workspace, self.spec, MatrixState(
                plan_id=self.plan.plan_id, cells=cells, round_status=self.state.round_status,
                services=self.session.services, governance=self.inputs.governance, created_wall=anchor["wall_iso"],
                service_starts=self.state.service_starts, oracles_failed=self.session.oracles_failed,
                resumed_from=self.resume.archive_id if self.resume else None),
            status, error.message if error else None)
        archive, path = done.archive, done.archive.path
        if error is not None and status != "complete":
            error.hint = (error.hint + "; " if error.hint else "") + (
                f"data so far is in archive {archive.archive_id} ({path}); continue with "
                f"'{resume_command(self.inputs.loaded.source, archive.archive_id, self.workspace)}'")
        return RunOutcome(archive, status, self.plan, results, error, done.ledger_rows, done.findings, done.verdict)


@dataclass(frozen=True)
class MatrixState:
    """What a formal matrix run knows when it is finalized (also rebuilt from a partial archive by
    ``harness.run.recover``)."""

    plan_id: str
    cells: Sequence[tuple[str, str, int, int]]  # (cell_id, workload, concurrency, rounds) in plan order
    round_status: dict[str, str]
    services: list[dict[str, Any]]
    governance: Mapping[str, Any]
    created_wall: str
    service_starts: int
    oracles_failed: int = 0
    resumed_from: str | None = None
    extra_labels: tuple[str, ...] = ()


def finalize_matrix(writer: ArchiveWriter, workspace: Path, spec: CampaignSpec, st: MatrixState, status: str,
                    error: str | None) -> tuple[Finished, CampaignResults]:
    """Compute the results from the streamed records, write the result tables, and finish the
    archive (finalize, ledgers, evidence); inside the caller's critical section (the runner's
    :func:`~harness.run.skeleton.drive`, or the recovery's)."""
    records = writer.streamed_records()
    events = read_events(writer.dir)
    starts = cold.archive_starts(records, st.services, events, writer.token)
    key = cold.ShapeKey(tuple(spec.ttft_shapes.input_len_edges), tuple(spec.ttft_shapes.batch_tiers))
    classes = cold.classify(records, starts, key)
    writer.write_json(cold.COLDNESS_FILE, cold.coldness_doc(records, starts, key, classes))
    results = compute_results(records, st.round_status, st.cells, classes)
    extra = {"campaign": spec.name, "claim_class": spec.claim_class, "protocol_class": spec.protocol_class}
    for name, table in results_tables(results, extra).items():
        writer.write_table(f"{name}.parquet", table)
    # a speculative server's counts per measured wave
    k = draft_length(st.services)  # counts are claims checked against it (harness.measure.claims)
    acceptance = acceptance_rows(records, extra, spec_counters(writer), k)
    if acceptance:
        writer.write_table("acceptance.parquet", pa.Table.from_pylist(acceptance))
        cycles = cell_cycles(records, {c.cell_id: float(c.median_tok_s) for c in results.cells}, k)
        if cycles:
            writer.write_json("cycles.json", {"cells": cycles, "definition": "docs/speculative.md, Cycle time"})
            writer.write_table("cycles.parquet", rows_table("cycles", [build("cycles", c) for c in cycles], extra))
    writer.write_json("results.json", results_json(results))
    analysis_plan = st.governance.get("analysis_plan")
    labels = run_labels(spec.labels, [spec.service.backend], st.services)
    if analysis_plan and analysis_plan.get("label"):
        labels.append(analysis_plan["label"])
    if st.oracles_failed:
        labels.append("oracle-failed")
    labels += [lb for lb in st.extra_labels if lb not in labels]
    count_methods, count_labels = run_count_methods(records)
    labels += [lb for lb in count_labels if lb not in labels]
    run = RunBlock(count_methods=count_methods,
        campaign=spec.name, kind=spec.kind, claim_class=spec.claim_class,
        protocol_class=spec.protocol_class, backend=spec.service.backend,
        service_name=spec.service.name, plan_id=st.plan_id,
        created_wall=st.created_wall, run_token=writer.token, service_starts=st.service_starts,
        resumed_from=st.resumed_from, labels=tuple(labels), error=error, oracles_failed=st.oracles_failed,
        identity_hash=identity_hash(st.services), direction=spec.direction, analysis_plan=analysis_plan)
    return finish(writer, workspace, status, run), results


def _round_status(workspace: Path, events: list[dict[str, Any]], resumed_from: str | None) -> dict[str, str]:
    """Each round's last status: those a resumed run inherited (its predecessor's ``results.json``),
    then the partial's ``round`` events."""
    status: dict[str, str] = {}
    if resumed_from:  # the rounds the resumed run inherited
        with contextlib.suppress(DsvError, OSError):
            prev = open_archive(find_archive(resumed_from, workspace))
            for r in ArchiveView(prev).doc("results.json", {}).get("rounds", []):
                status[str(r["round_id"])] = str(r["status"])
    for ev in events:
        if ev.get("event") == "round" and ev.get("round_id"):
            status[str(ev["round_id"])] = str(ev.get("status", "incomplete"))
    return status


def _recovered_matrix(workspace: Path, writer: ArchiveWriter, spec_json: dict[str, Any]) -> Finished:
    spec = CampaignSpec.model_validate(spec_json)
    d = writer.dir
    plan = read_json_or(d, "plan.json", {})
    events = read_events(d)
    start = run_start(events)
    services = list(read_json_or(d, "service.json", {}).get("services", []))
    oracles = read_json_or(d, "oracles.json", {}).get("results", [])
    cells = [(str(c["cell_id"]), str(c["workload"]), int(c["concurrency"]), int(c["rounds"]))
             for c in plan.get("cells", [])]
    if not (d / "service.json").exists():
        writer.write_json("service.json", {"services": services})
    st = MatrixState(
        plan_id=str(plan.get("plan_id", "")), cells=cells,
        round_status=_round_status(workspace, events, start.get("resumed_from")),
        services=services, governance=read_json_or(d, "governance.json", {}),
        created_wall=str(start.get("wall_iso", "")),
        service_starts=max([int(s.get("start_index") or 0) for s in services] + [len(services)]),
        oracles_failed=sum(1 for r in oracles if not r.get("passed")),
        resumed_from=start.get("resumed_from"), extra_labels=("recovered",))
    done, _ = finalize_matrix(writer, workspace, spec, st, "partial", RECOVERED_ERROR)
    return done


def recover_matrix(workspace: Path, writer: ArchiveWriter, spec: dict[str, Any]) -> Finished:
    """Finalize a killed formal matrix's partial (the formal-matrix recovery of harness.run.kinds):
    results computed from its streamed records (each round's status from ``events.jsonl``; a round that
    never reported an end is ``incomplete``), status ``partial``, label ``recovered``; one not readable
    as a matrix of this version keeps its records without results (still kind formal-matrix, protocol
    class formal)."""
    if (writer.dir / "plan.json").is_file():
        try:
            return _recovered_matrix(workspace, writer, spec)
        except (ValidationError, KeyError, TypeError, ValueError):
            pass  # not readable as a matrix of this version: keep its records at least
    return recover_records_only(workspace, writer, spec, "formal-matrix")


def run_campaign(spec_path: Path, workspace: Path, *, reporter: Reporter = silent,
                 resume: Path | None = None, workers: int | str | None = None) -> RunOutcome:
    """Run the formal matrix in ``spec_path`` into ``<workspace>/archives`` and the ledgers
    (``workers``, when given, replaces the spec's ``load.workers``)."""
    return run_matrix(load_spec(spec_path), workspace, reporter=reporter, resume=resume, workers=workers)


def run_matrix(loaded: LoadedSpec, workspace: Path, *, reporter: Reporter = silent,
               resume: Path | None = None, workers: int | str | None = None) -> RunOutcome:
    """Run the formal matrix of a loaded spec (the ``formal-matrix`` runner of harness.run.kinds)."""
    if workers is not None and isinstance(loaded.spec, CampaignSpec):
        load = LoadSettings.model_validate(loaded.spec.load.model_dump() | {"workers": workers})
        loaded = dataclasses.replace(loaded, spec=loaded.spec.model_copy(update={"load": load}))
    prev = open_verified(resume) if resume is not None else None
    return CampaignRunner(prepare_campaign(loaded, workspace, prev), workspace, reporter).run()


def run_kind(loaded: LoadedSpec, workspace: Path, reporter: Reporter, options: RunOptions) -> Any:
    """This kind's runner (the kind descriptor's ``run``, harness.kinds): options it does not take refused."""
    return run_matrix(loaded, workspace, reporter=reporter, resume=options.resume, workers=options.workers)
