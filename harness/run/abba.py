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

from harness.errors import DsvError, SpecError
from harness.evidence.findings import Finding
from harness.evidence.verdict import Verdict
from harness.hashing import ids_hash16
from harness.inputs.corpus import load_corpus
from harness.inputs.spec import AbbaSpec, LoadedSpec, ServiceProfile
from harness.measure import metrics as m
from harness.measure.abba import (
    LEGS,
    AbbaResult,
    LegSummary,
    OutputMatch,
    legs_from_rates,
    match_outputs,
    profile_differences,
    summarize,
)
from harness.measure.acceptance import acceptance_rows
from harness.measure.claims import draft_length
from harness.measure.results import run_count_methods, waves_table
from harness.measure.rows import build, rows_table
from harness.oracle.sentinels import load_sentinels
from harness.records import RequestRecord
from harness.run.base import open_run
from harness.run.energy import resident_windows
from harness.run.events import AbbaStart, AbbaWave, LegWaveLive, Reporter, silent
from harness.run.legs import LegInputs, LegWaves, Outcome, drive_legs, fixed_cases, leg_service, run_leg
from harness.run.options import RunOptions, check_options
from harness.run.partial import recover_records_only
from harness.run.prompts import openai_options, prompt_texts
from harness.run.session import (
    check_governance,
    run_labels,
    spec_counters,
    stack_differences,
    start_memory_sampler,
    write_memory,
)
from harness.run.skeleton import Finished, finish
from harness.service.devices.memory import MemorySampler
from harness.service.identity.identity import identity_hash
from harness.service.launch.manager import RunningService, check_port_free, port_field
from harness.store.archive import Archive, ArchiveWriter
from harness.store.runblock import RunBlock

__all__ = ["AbbaOutcome"]


@dataclass
class AbbaOutcome(Outcome):
    """What a screen produced: archive, status, per-leg wave rates, the result and output match
    (``archive_id`` and ``blocking``: :class:`harness.run.legs.Outcome`; any blocking finding makes the
    screen's comparison row invalid, so its verdict is not a claim)."""

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
    verdict: Verdict | None = None


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


def abba_port_field(source: Path | None, role: str) -> str:
    """Where an ABBA screen sets the ``role`` (``control`` or ``candidate``) service's port, for an
    error message: as :func:`port_field` says it for a spec, or, for a screen assembled from profile
    files (``dsv4h abba``, no spec file), that option's profile."""
    if source is None:
        return f"'port' in the {role} service profile (--{role})"
    return port_field(source, role)


@dataclass(frozen=True)
class AbbaInputs(LegInputs):
    """Everything a screen reads before it starts, loaded and checked by ``prepare_abba`` (``texts``:
    "A" control, "B" candidate)."""

    spec: AbbaSpec
    declared: list[str]
    undeclared: list[str]


def prepare_abba(loaded: LoadedSpec, workspace: Path) -> AbbaInputs:
    """Check the profiles and governance, load the corpus, the fixed cases and the sentinels, and
    refuse a fixed port already in use (all before any service starts or the archive opens)."""
    spec = loaded.spec
    if not isinstance(spec, AbbaSpec):
        raise SpecError(f"{loaded.source}: kind '{spec.kind}' is not an ABBA screen",
                        hint="run formal matrices with 'dsv4h campaign run'")
    declared, undeclared = check_profiles(spec)
    corpus = load_corpus(loaded.paths.corpora["workload"])
    cases = fixed_cases(corpus, spec.workload)
    sentinels = load_sentinels(loaded.paths.oracles)
    governance = check_governance(spec, workspace, f"abba:{spec.name}")
    texts = {"A": prompt_texts(spec.control), "B": prompt_texts(spec.candidate)}
    openai_options(spec.control)  # a missing tokenizer is refused before anything starts
    openai_options(spec.candidate)
    for role, profile in (("control", spec.control), ("candidate", spec.candidate)):
        check_port_free(profile, abba_port_field(loaded.source, role))  # a taken port: refused before the archive opens
    return AbbaInputs(loaded=loaded, corpus=corpus, cases=cases, sentinels=sentinels, governance=governance,
                      texts=texts, spec=spec, declared=declared, undeclared=undeclared)


class AbbaRunner:
    """Runs one screen into one archive. Use ``run_abba``."""

    def __init__(self, inputs: AbbaInputs, workspace: Path, reporter: Reporter) -> None:
        self.inputs = inputs
        self.spec = inputs.spec
        self.declared, self.undeclared = inputs.declared, inputs.undeclared
        self.cases = inputs.cases
        self.workspace = workspace
        self.report = reporter
        self.token = f"{time.strftime('%Y%m%dT%H%M%S')}-{secrets.token_hex(3)}"
        self.leg_records: dict[str, list[list[RequestRecord]]] = {leg: [] for leg in LEGS}
        self.leg_services: dict[str, dict[str, Any]] = {}
        self.failed_leg: str | None = None

    def _service_json_extra(self) -> dict[str, Any]:
        return {"legs": self.leg_services, "b2_shares_b1_service": not self.spec.fresh_candidate}

    def run(self) -> AbbaOutcome:
        """Run the four legs; always finalize an archive with whatever finished."""
        opened = open_run(
            self.workspace, self.token, self.spec, spec_bytes=self.inputs.loaded.raw,
            corpora={"workload": self.inputs.corpus.identity()}, governance=self.inputs.governance,
            claim_class=self.spec.claim_class, sentinels=self.inputs.sentinels, reporter=self.report,
            service_json_extra=self._service_json_extra,
            extra_files={"identity_check.json": {
                "declared_change": self.spec.workload.declared_change, "declared_differences": self.declared,
                "undeclared_differences": self.undeclared,
                "allow_identity_change": self.spec.allow_identity_change}})
        writer, anchor, self.session, self.power = opened.writer, opened.anchor, opened.session, opened.power
        self.report(AbbaStart(self.spec, tuple(self.declared), tuple(self.undeclared)))
        sampler = start_memory_sampler(self.spec.control)

        return drive_legs(writer, lambda: self._legs(writer), current=lambda: self.failed_leg, what="screen",
                          clean_up=lambda: self._clean_up(writer, sampler),
                          finalize=lambda status, error: self._finalize(writer, status, error, anchor))

    def _clean_up(self, writer: ArchiveWriter, sampler: MemorySampler | None) -> None:
        """Store the memory and power samples (each measured wave's energy: ``energy.json``) and stop
        every service a signal left running."""
        try:
            if sampler is not None:
                write_memory(writer, sampler)
            self.power.write(resident_windows(writer.streamed_records()))
        finally:
            self.session.stop_all()

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
                        self.power.stop()
                        await asyncio.to_thread(self.session.stop, svc)
                        svc = None
                    svc = await asyncio.to_thread(
                        self.session.start, profile, f"abba-{leg}-{profile.name}",
                        {"start_index": len(self.session.services) + 1, "first_leg": leg}, leg=leg)
                    await asyncio.to_thread(self.power.start, svc)
                    if leg == "B1":
                        self._check_stacks()
                await asyncio.to_thread(svc.check_owners, f"before leg {leg}")
                self.leg_services[leg] = leg_service(svc, self.session, fresh)
                await self._leg(writer, svc, leg)
            self.failed_leg = None
        finally:
            self.power.stop()
            if svc is not None:
                await asyncio.to_thread(self.session.stop, svc)

    def _check_stacks(self) -> None:
        """Control and candidate may differ in their served stacks (model, source trees, packages, mapped
        libraries) only where ``declared_change`` says so (``identity.X`` entries); an undeclared
        difference refuses the screen before B1 is measured, unless ``allow_identity_change``
        (recorded)."""
        a1 = next((s for s in self.session.services if s.get("first_leg") == "A1"), None)
        b1 = self.session.services[-1]
        undeclared = stack_differences(a1, b1, self.spec.workload.declared_change) if a1 is not None else []
        if not undeclared:
            return
        if not self.spec.allow_identity_change:
            raise SpecError("control and candidate serve different stacks in undeclared components: "
                            + ", ".join(undeclared),
                            hint="declare them in the workload's declared_change as identity.COMPONENT (e.g. "
                            "identity.mapped.libfoo.so*), align the installations, or pass "
                            "--allow-identity-change (recorded); 'dsv4h identity diff' shows them")
        self.undeclared.extend(f"identity {x}" for x in undeclared)

    async def _leg(self, writer: ArchiveWriter, svc: RunningService, leg: str) -> None:
        def measured(j: int, recs: list[RequestRecord]) -> None:
            self.leg_records[leg].append(recs)
            self.report(AbbaWave(leg, j, resident=m.resident_window(recs).rate, http=m.http_window(recs).rate))

        await run_leg(writer, self.session, svc, LegWaves(self.spec, self.spec.workload, self.token, self.cases,
                                                              self.inputs.corpus.manifest_sha256), leg,
                      round_index=LEGS.index(leg), text=self.inputs.texts.get(leg[0]), measured=measured,
                      kept="the finished legs are kept in a partial archive",
                      on_live=lambda j, phase, t: self.report(LegWaveLive(leg, j, phase, t)))

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
        common = {"campaign": self.spec.name, "claim_class": self.spec.claim_class,
                  "protocol_class": "abba-screen"}
        records = writer.streamed_records()  # read back once; the view ingest and evidence share reuses it
        wave_rows = waves_table(records, common)
        if wave_rows is not None:
            writer.write_table("waves.parquet", wave_rows)
        leg_rows = [{"leg": leg, "wave_rates": list(s.wave_rates), "http_rates": list(s.http_rates),
                     "median": s.median, "http_median": s.http_median,
                     **{f"service_{k}": v for k, v in self.leg_services.get(leg, {}).items()}} | common
                    for leg, s in legs.items()]
        if leg_rows:
            writer.write_table("legs.parquet", pa.Table.from_pylist(leg_rows))
        # a speculative server's counts per measured wave
        acceptance = acceptance_rows(records, common, spec_counters(writer), draft_length(self.session.services))
        if acceptance:
            writer.write_table("acceptance.parquet", pa.Table.from_pylist(acceptance))
        comp = {
            "screen": self.spec.name, "boundary": result.boundary, "concurrency": wl.concurrency,
            "waves_per_leg": wl.waves_per_leg,
            **{f"{leg.lower()}_median_tok_s": (legs[leg].median if leg in legs else math.nan) for leg in LEGS},
            "control_mean_tok_s": result.control_mean, "candidate_mean_tok_s": result.candidate_mean,
            "change_pct": result.change_pct, "drift_pct": result.drift_pct, "spread_pct": result.spread_pct,
            "http_change_pct": result.http_change_pct, "separated": result.separated, "verdict": result.verdict,
            "reason": result.reason, "outputs_compared": match.compared,
            "outputs_identical_all_legs": match.identical_all_legs, "outputs_differing": match.differing,
            "outputs_identical_across_arms": match.identical_across_arms,
            "b2_shares_b1_service": not self.spec.fresh_candidate,
            "declared_change": ", ".join(self.spec.workload.declared_change),
            "undeclared_differences": len(self.undeclared),
            "allow_identity_change": self.spec.allow_identity_change,
            "status": status,
        }
        writer.write_table("comparisons.parquet", rows_table("comparisons", [build("comparisons", comp)], common))
        writer.write_json("comparison.json", {"result": asdict(result), "outputs": asdict(match),
                                              "legs": self.leg_services, "failed_leg": self.failed_leg})
        if not self.session.services:
            self.session.write_service_json()
        backends = sorted({self.spec.control.backend, self.spec.candidate.backend})
        services = self.session.services
        count_methods, count_labels = run_count_methods(records)
        run = RunBlock(count_methods=count_methods,
            campaign=self.spec.name, kind="abba", claim_class=self.spec.claim_class,
            protocol_class="abba-screen", backend=backends[0] if len(backends) == 1 else "+".join(backends),
            service_name=f"{self.spec.control.name} vs {self.spec.candidate.name}",
            created_wall=anchor["wall_iso"], run_token=self.token,
            labels=tuple(run_labels(self.spec.labels, backends, services) + count_labels),
            error=error.message if error else None, failed_leg=self.failed_leg,
            oracles_failed=self.session.oracles_failed,
            identity_hash=identity_hash([s for s in services if s.get("first_leg") in ("A1", "A2")]),
            direction=self.spec.direction,
            candidate_identity_hash=identity_hash([s for s in services if s.get("first_leg") in ("B1", "B2")]))
        done = finish(writer, self.workspace, status, run)
        archive = done.archive
        if error is not None:
            where = f"finished legs are in archive {archive.archive_id}"
            error.hint = (error.hint + "; " if error.hint else "") + where
        return AbbaOutcome(archive, status, self.spec, result, match, self.leg_services, self.declared,
                           self.undeclared, error, done.ledger_rows, done.findings, done.verdict)


def recover_abba(workspace: Path, writer: ArchiveWriter, spec: dict[str, Any]) -> Finished:
    """Finalize a killed screen's partial (the abba recovery of harness.run.kinds): its records, no
    verdict (status ``partial``, label ``recovered``, protocol class abba-screen)."""
    return recover_records_only(workspace, writer, spec, "abba", roles=("control", "candidate"),
                                claim=str((spec.get("workload") or {}).get("claim_class", "native-ar")))


def run_abba(loaded: LoadedSpec, workspace: Path, *, reporter: Reporter = silent) -> AbbaOutcome:
    """Run an ABBA screen into ``<workspace>/archives`` and the ``comparisons`` ledger."""
    return AbbaRunner(prepare_abba(loaded, workspace), workspace, reporter).run()


def run_kind(loaded: LoadedSpec, workspace: Path, reporter: Reporter, options: RunOptions) -> Any:
    """This kind's runner (the kind descriptor's ``run``, harness.kinds): options it does not take refused."""
    check_options(loaded, options)
    return run_abba(loaded, workspace, reporter=reporter)
