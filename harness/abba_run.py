"""Orchestration of an ABBA screen (edge module): A1 -> B1 -> B2 -> A2.

A1 and A2 are independently started control services (new processes; PIDs and start times
recorded). B1 and B2 share one candidate service unless ``fresh_candidate`` starts B2 anew.
Every leg is preceded by warmup waves on its service (kept, excluded) and then runs the same fixed
waves. The comparison is archived like a campaign and appended to the ``comparisons`` ledger with
protocol class ``abba-screen``; it never produces formal cells.
"""

from __future__ import annotations

import asyncio
import math
import secrets
import time
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

import pyarrow as pa

from harness import metrics as m
from harness.abba import (
    LEGS,
    AbbaResult,
    LegSummary,
    OutputMatch,
    legs_from_rates,
    match_outputs,
    profile_differences,
    summarize,
)
from harness.archive import Archive, ArchiveWriter, open_archive
from harness.corpus import Corpus, load_corpus
from harness.environment import capture_environment, clock_anchor
from harness.errors import DsvError, MeasurementError, RunInterrupted, SpecError
from harness.evidence import Finding, check_archive
from harness.evidence_io import apply_findings
from harness.execution import MetricsWitness, WaveSpec, execute_wave
from harness.hashing import ids_hash16
from harness.identity import identity_hash
from harness.ledger import ingest_archive
from harness.load.driver import LoadClient
from harness.records import RequestRecord
from harness.results import wave_result
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
from harness.spec import AbbaSpec, ServiceProfile, resolve_path


@dataclass
class AbbaOutcome:
    """What a screen produced: archive, status, per-leg wave rates, the result and output match."""

    archive: Archive
    status: str
    spec: AbbaSpec
    result: AbbaResult
    outputs: OutputMatch
    leg_services: dict[str, dict[str, Any]]
    declared_differences: list[str]
    undeclared_differences: list[str]
    error: DsvError | None = None
    ledger_rows: dict[str, int] = field(default_factory=dict)
    findings: list[Finding] = field(default_factory=list)


def check_profiles(spec: AbbaSpec) -> tuple[list[str], list[str]]:
    """Declared and undeclared profile differences; undeclared ones refuse the screen unless
    ``allow_identity_change`` is set."""
    declared, undeclared = profile_differences(
        spec.control.model_dump(mode="json"), spec.candidate.model_dump(mode="json"),
        spec.workload.declared_change)
    if undeclared and not spec.allow_identity_change:
        raise SpecError(
            "control and candidate differ in more than the declared change:\n  " + "\n  ".join(undeclared),
            hint="declare the keys in the workload's declared_change, align the profiles, or pass "
            "--allow-identity-change (it is recorded)",
        )
    return declared, undeclared


class AbbaRunner:
    """Runs one screen into one archive. Use ``run_abba``."""

    def __init__(self, spec: AbbaSpec, base: Path, workspace: Path, reporter: Reporter,
                 spec_bytes: bytes | None) -> None:
        self.spec = spec
        self.workspace = workspace
        self.report = reporter
        self.spec_bytes = spec_bytes
        self.declared, self.undeclared = check_profiles(spec)
        self.corpus: Corpus = load_corpus(resolve_path(spec.workload.corpus, base))
        wl = spec.workload
        if wl.cases is not None:
            self.cases = [self.corpus.case(cid) for cid in wl.cases]
        else:
            if len(self.corpus.cases) < wl.concurrency:
                raise SpecError(f"corpus {self.corpus.name} has {len(self.corpus.cases)} cases; the workload "
                                f"needs {wl.concurrency}", hint="list case ids explicitly or lower concurrency")
            self.cases = list(self.corpus.cases[: wl.concurrency])
        self.token = f"{time.strftime('%Y%m%dT%H%M%S')}-{secrets.token_hex(3)}"
        self.leg_records: dict[str, list[list[RequestRecord]]] = {leg: [] for leg in LEGS}
        self.services: list[dict[str, Any]] = []
        self.leg_services: dict[str, dict[str, Any]] = {}
        self.failed_leg: str | None = None
        self.sentinels = load_sentinels(spec.oracles, base)
        self.oracle_results: list[dict[str, Any]] = []
        self.witness = MetricsWitness()
        self.governance: dict[str, Any] = {}

    def run(self) -> AbbaOutcome:
        """Run the four legs; always finalize an archive with whatever finished."""
        writer = ArchiveWriter(self.workspace, token=self.token)
        writer.write_json("spec.json", self.spec.model_dump(mode="json"))
        if self.spec_bytes is not None:
            writer.write_bytes("spec.yaml", self.spec_bytes)
        writer.write_json("corpora.json", {"workload": self.corpus.identity()})
        writer.write_json("environment.json", capture_environment())
        writer.write_json("identity_check.json", {
            "declared_change": self.spec.workload.declared_change, "declared_differences": self.declared,
            "undeclared_differences": self.undeclared,
            "allow_identity_change": self.spec.allow_identity_change})
        anchor = clock_anchor()
        if self.governance:
            writer.write_json("governance.json", self.governance)
        writer.append_event({"event": "run-start", **anchor})
        self.report("abba-start", spec=self.spec, declared=self.declared, undeclared=self.undeclared)
        status: str = "complete"
        error: DsvError | None = None
        sampler = start_memory_sampler(self.spec.control)
        try:
            with asyncio.Runner(loop_factory=loop_factory()) as runner:
                runner.run(self._legs(writer))
        except KeyboardInterrupt:
            status, error = "partial", RunInterrupted(f"interrupted during leg {self.failed_leg}; finished legs kept")
        except DsvError as exc:
            status, error = "failed", exc
            exc.message = f"leg {self.failed_leg} failed: {exc.message}"
        if sampler is not None:
            sampler.stop()
            write_memory(writer, sampler)
        writer.append_event({"event": "run-end", "status": status, "t_ns": time.perf_counter_ns(),
                             "error": error.message if error else None})
        return self._finalize(writer, status, error, anchor)

    async def _legs(self, writer: ArchiveWriter) -> None:
        spec = self.spec
        plan: list[tuple[str, ServiceProfile, bool]] = [
            ("A1", spec.control, True), ("B1", spec.candidate, True),
            ("B2", spec.candidate, spec.fresh_candidate), ("A2", spec.control, True),
        ]
        svc: RunningService | None = None
        try:
            for leg, profile, fresh in plan:
                self.failed_leg = leg
                if fresh or svc is None:
                    if svc is not None:
                        await asyncio.to_thread(self._stop, svc, writer)
                        svc = None
                    svc = await asyncio.to_thread(self._start, leg, profile, writer)
                await asyncio.to_thread(svc.check_owners, f"before leg {leg}")
                self.leg_services[leg] = {"pid": svc.process.pid if svc.process else None,
                                          "create_time": svc.process.create_time if svc.process else None,
                                          "service_index": len(self.services), "fresh_start": fresh}
                await self._leg(writer, svc, leg)
            self.failed_leg = None
        finally:
            if svc is not None:
                await asyncio.to_thread(self._stop, svc, writer)

    def _start(self, leg: str, profile: ServiceProfile, writer: ArchiveWriter) -> RunningService:
        self.report("service-starting", profile=profile, leg=leg)
        svc = start_service(profile, self.workspace, label=f"abba-{leg}-{profile.name}")
        self.witness = MetricsWitness()
        try:
            verify_identity(svc, self.spec.claim_class)
        except DsvError:
            svc.stop()
            raise
        ident = svc.identity() | {"start_index": len(self.services) + 1, "first_leg": leg}
        self.services.append(ident)
        writer.write_json("service.json", {"services": self.services, "legs": self.leg_services,
                                           "b2_shares_b1_service": not self.spec.fresh_candidate})
        writer.append_event({"event": "service-ready", "leg": leg, "url": svc.url, "t_ns": time.perf_counter_ns(),
                             "pid": svc.process.pid if svc.process else None})
        self.report("service-ready", service=svc, leg=leg)
        self._sentinels(writer, svc, f"before {leg}")
        return svc

    def _sentinels(self, writer: ArchiveWriter, svc: RunningService, when: str) -> None:
        if not self.sentinels:
            return
        idx = len(self.services)
        rows = run_sentinels(svc, self.sentinels, when, f"service#{idx}")
        self.oracle_results.extend(rows)
        writer.write_json("oracles.json", {"results": self.oracle_results})

    def _stop(self, svc: RunningService, writer: ArchiveWriter) -> None:
        if svc.process is None or svc.process.exit_code() is None:
            try:
                self._sentinels(writer, svc, "after")
            except DsvError as exc:
                writer.append_event({"event": "sentinel-error", "error": exc.message})
        if svc.process is None or svc.process.exit_code() is None:
            svc.read_final_info()
        idx = next(i for i, s in enumerate(self.services) if s.get("url") == svc.url and
                   (s.get("process") or {}).get("pid") == (svc.process.pid if svc.process else None))
        self.services[idx] = svc.identity() | {k: self.services[idx][k] for k in ("start_index", "first_leg")}
        writer.write_json("service.json", {"services": self.services, "legs": self.leg_services,
                                           "b2_shares_b1_service": not self.spec.fresh_candidate})
        svc.stop()
        writer.append_event({"event": "service-stopped", "url": svc.url, "t_ns": time.perf_counter_ns()})
        self.report("service-stopped", service=svc)

    async def _leg(self, writer: ArchiveWriter, svc: RunningService, leg: str) -> None:
        wl = self.spec.workload
        li = LEGS.index(leg)
        async with LoadClient(svc.url, protocol=svc.profile.wire_protocol, concurrency=wl.concurrency,
                              model=svc.profile.served_model_name,
                              timeout_s=self.spec.request_timeout_s) as client:
            for j in range(wl.warmup_waves):
                await self._wave(writer, svc, client, leg, li, j, "warmup")
            for j in range(wl.waves_per_leg):
                recs = await self._wave(writer, svc, client, leg, li, j, "measured")
                failed = [r for r in recs if not r.ok]
                if failed:
                    svc.check_alive()
                    raise MeasurementError(f"{len(failed)} of {len(recs)} requests failed in wave {j} "
                                           f"(first: {failed[0].error})",
                                           hint="the finished legs are kept in a partial archive; fix the "
                                           "cause and run the screen again")
                self.leg_records[leg].append(recs)
                self.report("abba-wave", leg=leg, wave=j, resident=m.resident_window(recs).rate,
                            http=m.http_window(recs).rate)

    async def _wave(self, writer: ArchiveWriter, svc: RunningService, client: LoadClient, leg: str, li: int,
                    j: int, phase: str) -> list[RequestRecord]:
        wl = self.spec.workload
        wave_id = f"{leg}.{'warmup' if phase == 'warmup' else 'measured'}.w{j:03d}"
        spec = WaveSpec(run_id=self.token, cell_id=leg, wave_id=wave_id, round_index=li, wave_index=j,
                        phase=phase, workload="decode", concurrency=wl.concurrency,
                        max_new_tokens=wl.max_new_tokens, ignore_eos=wl.ignore_eos,
                        cache="fresh-salt" if wl.cache_salt == "fresh" else "none")
        recs = await execute_wave(svc, client, spec, self.cases, self.witness)
        writer.write_wave(recs)
        record_witness(writer, self.witness, recs, wave_id, wl.concurrency)
        return recs

    def _finalize(self, writer: ArchiveWriter, status: str, error: DsvError | None,
                  anchor: dict[str, Any]) -> AbbaOutcome:
        wl = self.spec.workload
        rates: dict[str, list[tuple[float, float]]] = {}
        outputs: dict[str, dict[tuple[int, int, str], str]] = {}
        for leg, waves in self.leg_records.items():
            rates[leg] = [(m.resident_window(w).rate, m.http_window(w).rate) for w in waves]
            outputs[leg] = {(j, i, r.case_id): ids_hash16(r.output_ids) for j, w in enumerate(waves)
                            for i, r in enumerate(w)}
        legs = legs_from_rates({k: v for k, v in rates.items() if v})
        if wl.boundary == "http":
            legs = {k: LegSummary(v.leg, v.http_rates, v.http_rates) for k, v in legs.items()}
        result = summarize(legs, boundary=wl.boundary, noise_floor_pct=wl.noise_floor_pct)
        match = match_outputs(outputs)
        all_recs = writer.streamed_records()
        by_wave: dict[str, list[RequestRecord]] = {}
        for r in all_recs:
            by_wave.setdefault(r.wave_id, []).append(r)
        common = {"campaign": self.spec.name, "claim_class": self.spec.claim_class,
                  "protocol_class": "abba-screen"}
        if by_wave:
            wave_rows = [asdict(wave_result(v)) | common for v in by_wave.values()]
            for row in wave_rows:
                row["case_ids"] = list(row["case_ids"])
                row["errors"] = list(row["errors"])
            writer.write_table("waves.parquet", pa.Table.from_pylist(wave_rows))
        leg_rows = [{"leg": leg, "wave_rates": list(s.wave_rates), "http_rates": list(s.http_rates),
                     "median": s.median, "http_median": s.http_median,
                     **{f"service_{k}": v for k, v in self.leg_services.get(leg, {}).items()}} | common
                    for leg, s in legs.items()]
        if leg_rows:
            writer.write_table("legs.parquet", pa.Table.from_pylist(leg_rows))
        comp = {
            "screen": self.spec.name, "boundary": result.boundary, "concurrency": wl.concurrency,
            "waves_per_leg": wl.waves_per_leg,
            **{f"{leg.lower()}_median": (legs[leg].median if leg in legs else math.nan) for leg in LEGS},
            "control_mean": result.control_mean, "candidate_mean": result.candidate_mean,
            "ratio_pct": result.ratio_pct, "drift_pct": result.drift_pct, "spread_pct": result.spread_pct,
            "http_ratio_pct": result.http_ratio_pct, "separated": result.separated, "verdict": result.verdict,
            "reason": result.reason, "outputs_compared": match.compared,
            "outputs_identical_all_legs": match.identical_all_legs, "outputs_differing": match.differing,
            "outputs_identical_across_arms": match.identical_across_arms,
            "b2_shares_b1_service": not self.spec.fresh_candidate,
            "declared_change": ", ".join(self.spec.workload.declared_change),
            "undeclared_differences": len(self.undeclared),
            "allow_identity_change": self.spec.allow_identity_change,
            "status": status,
        } | common
        writer.write_table("comparison.parquet", pa.Table.from_pylist([comp]))
        writer.write_json("comparison.json", {"result": asdict(result), "outputs": asdict(match),
                                              "legs": self.leg_services, "failed_leg": self.failed_leg})
        if not self.services:
            writer.write_json("service.json", {"services": [], "legs": {}})
        backends = sorted({self.spec.control.backend, self.spec.candidate.backend})
        run = {
            "campaign": self.spec.name, "kind": "abba", "claim_class": self.spec.claim_class,
            "protocol_class": "abba-screen", "backend": backends[0] if len(backends) == 1 else "+".join(backends),
            "service_name": f"{self.spec.control.name} vs {self.spec.candidate.name}",
            "created_wall": anchor["wall_iso"], "run_token": self.token,
            "labels": list(self.spec.labels) + (["simulated"] if "sim" in backends else []),
            "error": error.message if error else None, "failed_leg": self.failed_leg,
            "oracles_failed": sum(1 for r in self.oracle_results if not r["passed"]),
            "identity_hash": identity_hash([s for s in self.services if s.get("first_leg") in ("A1", "A2")]),
            "direction": self.spec.direction,
            "candidate_identity_hash": identity_hash([s for s in self.services if s.get("first_leg") in ("B1", "B2")]),
        }
        path = writer.finalize(status=status, run=run)
        archive = open_archive(path)
        rows = ingest_archive(self.workspace, archive)
        findings = check_archive(archive)
        apply_findings(self.workspace, archive.archive_id, findings)
        if error is not None:
            where = f"finished legs are in archive {archive.archive_id}"
            error.hint = (error.hint + "; " if error.hint else "") + where
        return AbbaOutcome(archive, status, self.spec, result, match, self.leg_services, self.declared,
                           self.undeclared, error, rows, findings)


def run_abba(spec: AbbaSpec, workspace: Path, *, base: Path | None = None, reporter: Reporter = silent,
             spec_bytes: bytes | None = None) -> AbbaOutcome:
    """Run an ABBA screen into ``<workspace>/archives`` and the ``comparisons`` ledger."""
    governance = check_governance(spec, workspace, f"abba:{spec.name}")
    runner = AbbaRunner(spec, base or Path.cwd(), workspace, reporter, spec_bytes)
    runner.governance = governance
    return runner.run()
