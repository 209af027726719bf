"""Orchestration of a formal matrix campaign (edge module).

spec -> corpora (verified before any request) -> plan -> one fresh service -> cells in order
(warmups excluded, measured rounds) -> raw records streamed to a partial archive as waves finish
-> results -> finalized, hashed archive -> ledgers.

A failure never loses data: completed waves are already on disk; the archive is finalized with
status ``partial`` (Ctrl-C) or ``failed`` (dead server, failed requests), and
``run_campaign(..., resume=ARCHIVE)`` continues it in a new archive that carries the old records.
Progress goes to a ``Reporter``; this module never prints.
"""

from __future__ import annotations

import asyncio
import secrets
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from harness import metrics as m
from harness.archive import Archive, ArchiveWriter, open_archive
from harness.corpus import Corpus, load_corpus
from harness.environment import capture_environment, clock_anchor
from harness.errors import DsvError, MeasurementError, RunInterrupted, SpecError
from harness.evidence import Finding, check_archive
from harness.evidence_io import apply_findings
from harness.execution import MetricsWitness, WaveSpec, execute_wave
from harness.identity import identity_hash
from harness.ledger import ingest_archive
from harness.load.driver import LoadClient
from harness.plan import CellPlan, Plan, build_plan, sim_cell_estimate, wave_cases
from harness.records import RequestRecord
from harness.results import CampaignResults, compute_results, results_json, results_tables
from harness.run_support import (
    Reporter,
    check_governance,
    loop_factory,
    record_witness,
    silent,
    start_memory_sampler,
    write_memory,
)
from harness.sentinels import load_sentinels, run_sentinels
from harness.service.manager import RunningService, start_service, verify_identity
from harness.spec import CampaignSpec, load_campaign, resolve_path


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


def load_corpora(spec: CampaignSpec, spec_path: Path) -> dict[str, Corpus]:
    """Load and verify the spec's corpora (raises CorpusError before anything is sent)."""
    out: dict[str, Corpus] = {}
    for workload, ref in (("decode", spec.corpora.decode), ("prefill", spec.corpora.prefill)):
        needed = spec.decode if workload == "decode" else spec.prefill
        if ref and needed is not None:
            out[workload] = load_corpus(resolve_path(ref, spec_path.parent))
    return out


Estimator = Callable[[CellPlan], float | None]


def estimator_for(spec: CampaignSpec, corpora: dict[str, Corpus]) -> tuple[Estimator | None, str]:
    """A per-cell time estimator when the service's rate model is known (the simulator)."""
    if spec.service.backend != "sim":
        return None, ""
    from harness.sim import analytic_decode_rate, analytic_prefill_rate, get_profile

    prof = get_profile(spec.service.sim.profile)
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


class CampaignRunner:
    """Runs one campaign into one archive. Use ``run_campaign`` rather than this directly."""

    def __init__(self, spec: CampaignSpec, spec_path: Path, workspace: Path, reporter: Reporter,
                 resume: Archive | None) -> None:
        self.spec = spec
        self.spec_path = spec_path
        self.workspace = workspace
        self.report = reporter
        self.resume = resume
        self.corpora = load_corpora(spec, spec_path)
        self.sentinels = load_sentinels(spec.oracles, spec_path.parent)
        self.oracle_results: list[dict[str, Any]] = []
        self.witness = MetricsWitness()
        self.governance: dict[str, Any] = {}
        self.plan = make_plan(spec, self.corpora)
        self.token = f"{time.strftime('%Y%m%dT%H%M%S')}-{secrets.token_hex(3)}"
        self.state = _State()
        self.old_records: list[RequestRecord] = []
        self.service: RunningService | None = None
        self.services: list[dict[str, Any]] = []
        if resume is not None:
            self._load_resume(resume)

    # --- resume ----------------------------------------------------------------------------

    def _load_resume(self, prev: Archive) -> None:
        run = prev.manifest.get("run", {})
        if run.get("plan_id") != self.plan.plan_id:
            raise SpecError(
                f"cannot resume archive {prev.archive_id}: its plan {run.get('plan_id')} differs from "
                f"this spec's plan {self.plan.plan_id} (cells, sampling or corpora changed)",
                hint="resume with the same spec file the archive was made from",
            )
        if prev.status == "complete":
            raise SpecError(f"archive {prev.archive_id} is complete; nothing to resume",
                            hint="start a new campaign instead")
        self.old_records = prev.records()
        rounds = prev.json("results.json").get("rounds", [])
        for r in rounds:
            self.state.round_status[r["round_id"]] = r["status"]
        waves_per_cell: dict[str, set[str]] = {}
        for rec in self.old_records:
            waves_per_cell.setdefault(rec.cell_id, set()).add(rec.wave_id)
        self.state.wave_counter = {k: len(v) for k, v in waves_per_cell.items()}
        self.state.service_starts = int(run.get("service_starts", 1))
        self.services = list(prev.json("service.json").get("services", []))

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
        writer = ArchiveWriter(self.workspace, token=self.token)
        writer.write_json("spec.json", self.spec.model_dump(mode="json"))
        writer.write_bytes("spec.yaml", self.spec_path.read_bytes())
        writer.write_json("corpora.json", {
            k: {"name": c.name, "path": str(c.path), "manifest_sha256": c.manifest_sha256,
                "n_cases": len(c.cases)} for k, c in self.corpora.items()})
        writer.write_json("environment.json", capture_environment())
        writer.write_json("plan.json", {
            "plan_id": self.plan.plan_id, "estimate_s": self.plan.estimate_s,
            "cells": [c.definition | {"cell_id": c.cell_id} for c in self.plan.cells]})
        if self.old_records:
            writer.write_wave(self.old_records)
        anchor = clock_anchor()
        if self.spec.analysis_plan is not None:
            from harness.governance_io import analysis_plan_status

            self.governance["analysis_plan"] = analysis_plan_status(
                self.workspace, resolve_path(self.spec.analysis_plan, self.spec_path.parent),
                run_started=anchor["wall_iso"])
        if self.governance:
            writer.write_json("governance.json", self.governance)
        writer.append_event({"event": "run-start", **anchor, "resumed_from":
                             self.resume.archive_id if self.resume else None})
        self.report("plan", plan=self.plan)
        status: str = "complete"
        error: DsvError | None = None
        sampler = None
        try:
            self.service = self._start_service(writer)
            sampler = start_memory_sampler(self.spec.service)
            with asyncio.Runner(loop_factory=loop_factory()) as runner:
                runner.run(self._run_cells(writer))
        except KeyboardInterrupt:
            status = "partial"
            error = RunInterrupted("interrupted by the user; every finished wave is kept")
            writer.append_event({"event": "interrupted", "t_ns": time.perf_counter_ns()})
        except DsvError as exc:
            status, error = "failed", exc
            writer.append_event({"event": "failed", "error": exc.message, "t_ns": time.perf_counter_ns()})
        finally:
            if sampler is not None:
                sampler.stop()
                write_memory(writer, sampler)
            if self.service is not None:
                self._stop_service(writer)
        return self._finalize(writer, status, error, anchor)

    def _start_service(self, writer: ArchiveWriter) -> RunningService:
        self.report("service-starting", profile=self.spec.service)
        svc = start_service(self.spec.service, self.workspace, label=self.spec.service.name)
        self.state.service_starts += 1
        self.witness = MetricsWitness()
        try:
            verify_identity(svc, self.spec.claim_class)
        except DsvError:
            svc.stop()
            raise
        self.services.append(svc.identity() | {"start_index": self.state.service_starts})
        writer.write_json("service.json", {"services": self.services})
        self._sentinels(writer, svc, "before")
        writer.append_event({"event": "service-ready", "url": svc.url, "t_ns": time.perf_counter_ns(),
                             "pid": svc.process.pid if svc.process else None})
        self.report("service-ready", service=svc)
        return svc

    def _sentinels(self, writer: ArchiveWriter, svc: RunningService, when: str) -> None:
        if not self.sentinels:
            return
        rows = run_sentinels(svc, self.sentinels, when, f"service#{self.state.service_starts}")
        self.oracle_results.extend(rows)
        writer.write_json("oracles.json", {"results": self.oracle_results})
        self.report("oracles", when=when, results=rows)

    def _stop_service(self, writer: ArchiveWriter) -> None:
        assert self.service is not None
        if self.service.process is None or self.service.process.exit_code() is None:
            try:
                self._sentinels(writer, self.service, "after")
            except DsvError as exc:
                writer.append_event({"event": "sentinel-error", "error": exc.message})
            self.service.read_final_info()
        self.services[-1] = self.service.identity() | {"start_index": self.state.service_starts}
        writer.write_json("service.json", {"services": self.services})
        self.service.stop()
        writer.append_event({"event": "service-stopped", "t_ns": time.perf_counter_ns()})
        self.report("service-stopped", service=self.service)
        self.service = None

    async def _run_cells(self, writer: ArchiveWriter) -> None:
        for cell in self.plan.cells:
            todo = [k for k in range(cell.rounds) if not self._round_done(cell, k)]
            if not todo:
                self.report("cell-skipped", cell=cell)
                continue
            corpus = self.corpora[cell.workload]
            await asyncio.to_thread(self._svc.check_owners, f"before cell {cell.cell_id}")
            self.report("cell-start", cell=cell, rounds=todo)
            async with LoadClient(self._svc.url, protocol=self.spec.service.wire_protocol,
                                  concurrency=cell.concurrency,
                                  model=self.spec.service.served_model_name,
                                  timeout_s=self.spec.request_timeout_s) as client:
                for j in range(cell.warmup_waves):
                    wid = cell.wave_id(-1, j, service_start=self.state.service_starts)
                    recs = await self._wave(client, writer, cell, corpus, -1, j, wid, "warmup")
                    self.report("warmup-done", cell=cell, wave=j, wave_result=recs)
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
        self.state.round_status[rid] = "incomplete"
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
            self.report("wave-done", cell=cell, round=k, attempt=attempt, wave=j, records=recs,
                        resident_s=resident_s, round_rate=rate,
                        http_rate=m.http_output_rate(waves).rate)
            if failed:
                self.state.round_status[rid] = "failed"
                self._svc.check_alive()
                raise MeasurementError(
                    f"{cell.label} round {k}: {len(failed)} of {len(recs)} requests failed in wave {j} "
                    f"(first: {failed[0].error})",
                    hint="the round is kept and marked failed; fix the cause and resume with "
                    "'dsv4h campaign run SPEC --resume ARCHIVE'",
                )
            j += 1
            if target_waves is not None:
                if j >= target_waves:
                    break
            elif resident_s >= (cell.min_resident_seconds or 0.0):
                break
            elif j >= cell.max_waves_per_round:
                self.state.round_status[rid] = "short"
                self.report("round-done", cell=cell, round=k, status="short", rate=rate)
                return
        self.state.round_status[rid] = "ok"
        self.report("round-done", cell=cell, round=k, status="ok", rate=rate, resident_s=resident_s)

    async def _wave(self, client: LoadClient, writer: ArchiveWriter, cell: CellPlan, corpus: Corpus,
                    k: int, j: int, wave_id: str, phase: str) -> list[RequestRecord]:
        counter = self.state.wave_counter.get(cell.cell_id, 0)
        self.state.wave_counter[cell.cell_id] = counter + 1
        cases = [corpus.cases[i] for i in wave_cases(len(corpus.cases), cell.concurrency, counter)]
        spec = WaveSpec(run_id=self.token, cell_id=cell.cell_id, wave_id=wave_id, round_index=k,
                        wave_index=j, phase=phase, workload=cell.workload, concurrency=cell.concurrency,
                        max_new_tokens=cell.max_new_tokens, ignore_eos=cell.ignore_eos, cache=cell.cache)
        recs = await execute_wave(self._svc, client, spec, cases, self.witness)
        writer.write_wave(recs)
        record_witness(writer, self.witness, recs, wave_id, cell.concurrency)
        return recs

    # --- finishing -------------------------------------------------------------------------

    def _finalize(self, writer: ArchiveWriter, status: str, error: DsvError | None,
                  anchor: dict[str, Any]) -> RunOutcome:
        records = writer.streamed_records()
        cells = [(c.cell_id, c.workload, c.concurrency, c.rounds) for c in self.plan.cells]
        results = compute_results(records, self.state.round_status, cells)
        extra = {"campaign": self.spec.name, "claim_class": self.spec.claim_class,
                 "protocol_class": self.spec.protocol_class}
        for name, table in results_tables(results, extra).items():
            writer.write_table(f"{name}.parquet", table)
        writer.write_json("results.json", results_json(results))
        if not self.services:
            writer.write_json("service.json", {"services": []})
        run = {
            "campaign": self.spec.name, "kind": self.spec.kind, "claim_class": self.spec.claim_class,
            "protocol_class": self.spec.protocol_class, "backend": self.spec.service.backend,
            "service_name": self.spec.service.name, "plan_id": self.plan.plan_id,
            "created_wall": anchor["wall_iso"], "run_token": self.token,
            "service_starts": self.state.service_starts,
            "resumed_from": self.resume.archive_id if self.resume else None,
            "labels": list(self.spec.labels) + (["simulated"] if self.spec.service.backend == "sim" else []),
            "error": error.message if error else None,
            "oracles_failed": sum(1 for r in self.oracle_results if not r["passed"]),
            "identity_hash": identity_hash(self.services),
            "direction": self.spec.direction,
            "analysis_plan": self.governance.get("analysis_plan"),
        }
        plan_label = (self.governance.get("analysis_plan") or {}).get("label")
        if plan_label:
            run["labels"].append(plan_label)
        if run["oracles_failed"]:
            run["labels"].append("oracle-failed")
        path = writer.finalize(status=status, run=run)
        archive = open_archive(path)
        rows = ingest_archive(self.workspace, archive)
        findings = check_archive(archive)
        apply_findings(self.workspace, archive.archive_id, findings)
        if error is not None and status != "complete":
            error.hint = (error.hint + "; " if error.hint else "") + (
                f"data so far is in archive {archive.archive_id} ({path}); continue with "
                f"'dsv4h campaign run {self.spec_path} --resume {archive.archive_id}'")
        return RunOutcome(archive, status, self.plan, results, error, rows, findings)


def run_campaign(spec_path: Path, workspace: Path, *, reporter: Reporter = silent,
                 resume: Path | None = None) -> RunOutcome:
    """Run the formal matrix in ``spec_path`` into ``<workspace>/archives`` and the ledgers."""
    spec = load_campaign(spec_path)
    prev = open_archive(resume) if resume is not None else None
    governance = check_governance(spec, workspace, f"campaign:{spec.name}")
    runner = CampaignRunner(spec, spec_path, workspace, reporter, prev)
    runner.governance = governance
    return runner.run()
