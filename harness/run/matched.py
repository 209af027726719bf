"""Matched AR/SD runs (kind and protocol class ``matched-sd``; edge module: processes, HTTP, files).

The same frozen inputs and waves on a native autoregressive service and a speculative one, leg by leg
in the spec's declared order (default AR1 -> SD1 -> SD2 -> AR2), every leg on a freshly started
service verified under its arm's claim (AR legs ``native-ar``, SD legs the spec's ``sd_claim``: a
server that does not speculate is refused for it). Measured like an ABBA leg (warmups, then
``waves_per_leg`` waves of ``concurrency`` requests), ended by the one run skeleton
(:func:`harness.run.skeleton.drive`). The result (:mod:`harness.measure.matched`) goes to
``matched.json`` and ``matched_sd.parquet`` (ledger table ``matched_sd``), the per-leg values to
``legs.parquet``, the per-wave speculative counts to ``acceptance.parquet`` (ledger table
``acceptance``). Never a formal cell or an ABBA screen.
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
from harness.inputs.corpus import load_corpus
from harness.inputs.spec import LoadedSpec, MatchedSdSpec
from harness.measure import metrics as m
from harness.measure.abba import profile_differences
from harness.measure.acceptance import acceptance_rows, contradictions_of, counts_of
from harness.measure.claims import draft_length
from harness.measure.matched import LegData, MatchedResult, compare_outputs, step_gaps, summarize_matched
from harness.measure.results import run_count_methods, waves_table
from harness.measure.rows import build, row_dict, rows_table
from harness.measure.speculative import sum_counts
from harness.oracle.sentinels import load_sentinels
from harness.records import RequestRecord
from harness.run.base import open_run
from harness.run.energy import resident_windows
from harness.run.events import MatchedLegWave, MatchedStart, Reporter, silent
from harness.run.legs import LegInputs, LegWaves, Outcome, drive_legs, fixed_cases, leg_service, run_leg
from harness.run.options import RunOptions, check_options
from harness.run.partial import recover_records_only
from harness.run.prompts import openai_options, prompt_texts
from harness.run.session import (
    check_governance,
    run_labels,
    spec_counters,
    stack_differences,
)
from harness.run.skeleton import Finished, finish
from harness.service.identity.identity import identity_hash
from harness.service.launch.manager import RunningService, check_port_free
from harness.store.archive import Archive, ArchiveWriter
from harness.store.runblock import RunBlock

__all__ = ["MatchedOutcome"]


@dataclass(frozen=True)
class MatchedInputs(LegInputs):
    """Everything a matched run reads before it starts, loaded and checked by ``prepare_matched``
    (``texts``: "AR" and "SD")."""

    spec: MatchedSdSpec
    declared: list[str]


def prepare_matched(loaded: LoadedSpec, workspace: Path) -> MatchedInputs:
    """Check that the profiles differ only in the declared speculative keys, load the corpus, the
    fixed cases and the sentinels, check governance and refuse a taken fixed port (all before any
    service starts or the archive opens)."""
    spec = loaded.spec
    if not isinstance(spec, MatchedSdSpec):
        raise SpecError(f"{loaded.source}: kind '{spec.kind}' is not a matched AR/SD run",
                        hint="run it with 'dsv4h campaign run'")
    declared, undeclared = profile_differences(spec.ar.model_dump(mode="json"), spec.sd.model_dump(mode="json"),
                                               spec.declared_change)
    if undeclared:
        raise SpecError(f"{loaded.source or 'the spec'}: the ar and sd profiles differ in more than the declared "
                        "speculative change:\n  " + "\n  ".join(undeclared),
                        hint="align the profiles, or list the keys in 'declared_change' (a matched run compares "
                        "one served model with and without speculation)")
    if not declared:
        raise SpecError(f"{loaded.source or 'the spec'}: the ar and sd profiles are identical",
                        hint="give the sd profile its speculative configuration (sim.speculative, or the "
                        "server's speculative flags in launch.extra_args)")
    corpus = load_corpus(loaded.paths.corpora["workload"])
    cases = fixed_cases(corpus, spec.workload)
    sentinels = load_sentinels(loaded.paths.oracles)
    governance = check_governance(spec, workspace, f"matched-sd:{spec.name}")
    texts = {"AR": prompt_texts(spec.ar), "SD": prompt_texts(spec.sd)}
    for role, profile in (("ar", spec.ar), ("sd", spec.sd)):
        openai_options(profile)
        check_port_free(profile, f"'{role}.port' in {loaded.source or 'the spec'}")
    return MatchedInputs(loaded=loaded, corpus=corpus, cases=cases, sentinels=sentinels, governance=governance,
                         texts=texts, spec=spec, declared=declared)


@dataclass
class MatchedOutcome(Outcome):
    """What a matched run produced: archive, status, result and the services of each leg
    (``archive_id`` and ``blocking``: :class:`harness.run.legs.Outcome`; any blocking finding makes the
    run's result rows invalid, not a claim)."""

    archive: Archive
    status: str
    spec: MatchedSdSpec
    result: MatchedResult
    leg_services: dict[str, dict[str, Any]]
    declared_differences: list[str]
    error: DsvError | None = None
    ledger_rows: dict[str, int] = field(default_factory=dict)
    findings: list[Finding] = field(default_factory=list)
    verdict: Verdict | None = None


class MatchedRunner:
    """Runs one matched AR/SD run into one archive. Use ``run_matched``."""

    def __init__(self, inputs: MatchedInputs, workspace: Path, reporter: Reporter) -> None:
        self.inputs = inputs
        self.spec = inputs.spec
        self.workspace = workspace
        self.report = reporter
        self.token = f"{time.strftime('%Y%m%dT%H%M%S')}-{secrets.token_hex(3)}"
        self.leg_records: dict[str, list[list[RequestRecord]]] = {leg: [] for leg in self.spec.order}
        self.leg_services: dict[str, dict[str, Any]] = {}
        self.current_leg: str | None = None

    def run(self) -> MatchedOutcome:
        """Run every leg in order; always finalize an archive with whatever finished."""
        opened = open_run(
            self.workspace, self.token, self.spec, spec_bytes=self.inputs.loaded.raw,
            corpora={"workload": self.inputs.corpus.identity()}, governance=self.inputs.governance,
            claim_class=self.spec.sd_claim, sentinels=self.inputs.sentinels, reporter=self.report,
            service_json_extra=lambda: {"legs": self.leg_services},
            extra_files={"identity_check.json": {"declared_change": self.spec.declared_change,
                                                 "declared_differences": self.inputs.declared}})
        writer, anchor, self.session, self.power = opened.writer, opened.anchor, opened.session, opened.power
        self.report(MatchedStart(self.spec, tuple(self.inputs.declared)))

        return drive_legs(writer, lambda: self._legs(writer), current=lambda: self.current_leg, what="matched run",
                          clean_up=lambda: self._clean_up(writer),
                          finalize=lambda status, error: self._finalize(writer, status, error, anchor))

    def _clean_up(self, writer: ArchiveWriter) -> None:
        """Store the power samples (each measured wave's energy: ``energy.json``) and stop every
        service a signal left running."""
        try:
            self.power.write(resident_windows(writer.streamed_records()))
        finally:
            self.session.stop_all()

    async def _legs(self, writer: ArchiveWriter) -> None:
        for li, leg in enumerate(self.spec.order):
            self.current_leg = leg
            profile = self.spec.profile_of(leg)
            svc = await asyncio.to_thread(
                self.session.start, profile, f"matched-{leg}-{profile.name}",
                {"start_index": len(self.session.services) + 1, "first_leg": leg},
                claim_class=MatchedSdSpec.arm_claim(leg, self.spec.sd_claim), leg=leg)
            try:
                await asyncio.to_thread(self.power.start, svc)
                self._check_stack(leg)
                await asyncio.to_thread(svc.check_owners, f"before leg {leg}")
                self.leg_services[leg] = leg_service(svc, self.session, True)
                await self._leg(writer, svc, leg, li)
            finally:
                self.power.stop()
                await asyncio.to_thread(self.session.stop, svc)
        self.current_leg = None

    def _check_stack(self, leg: str) -> None:
        """Every leg serves the first leg's stack (model, source trees, packages, mapped libraries)
        except where ``declared_change`` declares it (``identity.X``): an undeclared difference
        refuses the run before the leg is measured."""
        first = self.session.services[0]
        undeclared = stack_differences(first, self.session.services[-1], self.spec.declared_change)
        if undeclared:
            raise SpecError(f"leg {leg} serves a different stack than leg {self.spec.order[0]} in undeclared "
                            "components: " + ", ".join(undeclared),
                            hint="align the installations, or declare them as identity.COMPONENT in "
                            "declared_change; 'dsv4h identity diff' shows them")

    async def _leg(self, writer: ArchiveWriter, svc: RunningService, leg: str, li: int) -> None:
        def measured(j: int, recs: list[RequestRecord]) -> None:
            self.leg_records[leg].append(recs)
            counts = counts_of(recs, self._draft_tokens())
            self.report(MatchedLegWave(leg, j, resident=m.resident_window(recs).rate,
                                       tokens_per_step=counts.tokens_per_step if counts else math.nan))

        waves = LegWaves(self.spec, self.spec.workload, self.token, self.inputs.cases,
                         self.inputs.corpus.manifest_sha256)
        await run_leg(writer, self.session, svc, waves, leg, round_index=li, text=self.inputs.texts.get(leg[:2]),
                      measured=measured, kept="the finished legs are kept")

    def _draft_tokens(self) -> int | None:
        """k of the SD arm's services, when they say it (the counts' claims are checked against it)."""
        return draft_length(_arm(self.session.services, "SD"))

    def _leg_data(self, leg: str) -> LegData:
        waves = self.leg_records.get(leg, [])
        gaps: list[float] = []
        for w in waves:
            win = m.resident_window(w)
            if win.contributes:
                gaps += step_gaps([r.event_ns for r in w], [r.event_tokens for r in w], win.start_ns, win.end_ns)
        k = self._draft_tokens()
        # one contradicted request withholds the leg's counts: never a sum of the waves that look fine
        withheld = any(contradictions_of(w, k) for w in waves)
        counts = [] if withheld else [c for c in (counts_of(w, k) for w in waves) if c is not None]
        return LegData(leg, tuple(m.resident_window(w).rate for w in waves),
                       tuple(m.http_window(w).rate for w in waves), tuple(gaps),
                       sum_counts(counts) if counts else None, counts_withheld=withheld)

    def _finalize(self, writer: ArchiveWriter, status: str, error: DsvError | None,
                  anchor: dict[str, Any]) -> MatchedOutcome:
        spec, wl = self.spec, self.spec.workload
        legs = [self._leg_data(leg) for leg in spec.order]
        outputs = {leg: {(j, i, r.case_id): [int(x) for x in r.output_ids] for j, w in enumerate(waves)
                         for i, r in enumerate(w)} for leg, waves in self.leg_records.items()}
        result = summarize_matched(legs, spec.order, wl.concurrency, compare_outputs(outputs, spec.order),
                                   wl.noise_floor_pct)
        common = {"campaign": spec.name, "claim_class": spec.sd_claim, "protocol_class": "matched-sd"}
        records = writer.streamed_records()  # read once; the view ingest and evidence share reuses it
        wave_rows = waves_table(records, common)
        if wave_rows is not None:
            writer.write_table("waves.parquet", wave_rows)
        writer.write_table("legs.parquet", pa.Table.from_pylist([leg_row(x) | common for x in legs]))
        acc = acceptance_rows(records, common, spec_counters(writer), self._draft_tokens())
        if acc:
            writer.write_table("acceptance.parquet", pa.Table.from_pylist(acc))
        writer.write_table("matched_sd.parquet", rows_table("matched_sd", [matched_row(spec, result, status)], common))
        writer.write_json("matched.json", {"result": result_json(result), "legs": self.leg_services,
                                           "failed_leg": self.current_leg})
        if not self.session.services:
            self.session.write_service_json()
        services = self.session.services
        backends = sorted({spec.ar.backend, spec.sd.backend})
        count_methods, count_labels = run_count_methods(records)
        run = RunBlock(count_methods=count_methods, campaign=spec.name, kind="matched-sd",
                       claim_class=spec.sd_claim, protocol_class="matched-sd",
                       backend=backends[0] if len(backends) == 1 else "+".join(backends),
                       service_name=f"{spec.ar.name} vs {spec.sd.name}", created_wall=anchor["wall_iso"],
                       run_token=self.token, labels=tuple(run_labels(spec.labels, backends, services) + count_labels),
                       error=error.message if error else None, failed_leg=self.current_leg,
                       oracles_failed=self.session.oracles_failed,
                       identity_hash=identity_hash(_arm(services, "AR")),
                       candidate_identity_hash=identity_hash(_arm(services, "SD")),
                       direction=spec.direction)
        done = finish(writer, self.workspace, status, run)
        if error is not None:
            error.hint = (error.hint + "; " if error.hint else "") + f"finished legs are in archive {done.archive_id}"
        return MatchedOutcome(done.archive, status, spec, result, self.leg_services, self.inputs.declared, error,
                              done.ledger_rows, done.findings, done.verdict)


def _arm(services: list[dict[str, Any]], arm: str) -> list[dict[str, Any]]:
    return [s for s in services if str(s.get("first_leg", "")).startswith(arm)]


def _f(v: float) -> float | None:
    return None if v is None or (isinstance(v, float) and math.isnan(v)) else float(v)


def leg_row(x: LegData) -> dict[str, Any]:
    """One ``legs.parquet`` row: the leg's rates, step time and counts."""
    c = x.counts
    return {"leg": x.leg, "arm": x.arm, "wave_rates_tok_s": list(x.resident_rates),
            "http_rates_tok_s": list(x.http_rates), "median_tok_s": _f(x.median),
            "http_median_tok_s": _f(x.http_median), "step_ms": _f(x.step_s * 1e3),
            "step_samples": len(x.step_gaps_s), "tokens_per_step": _f(c.tokens_per_step) if c else None,
            "acceptance_rate": _f(c.acceptance_rate) if c else None, "spec_source": c.source if c else None}


def matched_row(spec: MatchedSdSpec, r: MatchedResult, status: str) -> dict[str, Any]:
    """The one ``matched_sd.parquet`` row (ledger table ``matched_sd``), built as its row model."""
    be, o = r.break_even, r.outputs
    return row_dict(build("matched_sd", {"run": spec.name, "order": " ".join(spec.order), "concurrency": r.concurrency,
            "ar_rate_tok_s": _f(r.ar_rate), "sd_rate_tok_s": _f(r.sd_rate), "change_pct": _f(r.change_pct),
            "http_change_pct": _f(r.http_change_pct), "ar_drift_pct": _f(r.ar_drift_pct),
            "sd_spread_pct": _f(r.sd_spread_pct), "tokens_per_step": _f(r.tokens_per_step),
            "acceptance_rate": _f(r.acceptance_rate), "spec_source": r.counts.source if r.counts else None,
            "t_ar_s": _f(r.t_ar_s), "t_sd_s": _f(r.t_sd_s),
            "t_sd_implied_s": _f(r.t_sd_implied_s), "t_sd_over_t_ar": _f(be.ratio),
            "reconcile_rel": _f(r.reconcile_rel), "reconciled": r.reconciled, "verdict": be.verdict,
            "reason": be.reason, "outputs_compared": o.compared, "outputs_identical": o.identical,
            "outputs_differing": o.differing, "sd_claim": spec.sd_claim, "status": status}))


def result_json(r: MatchedResult) -> dict[str, Any]:
    """``matched.json``'s result: every figure with its unit in the name."""
    return {"concurrency": r.concurrency, "ar_rate_tok_s": _f(r.ar_rate), "sd_rate_tok_s": _f(r.sd_rate),
            "change_pct": _f(r.change_pct), "http_change_pct": _f(r.http_change_pct),
            "ar_drift_pct": _f(r.ar_drift_pct), "sd_spread_pct": _f(r.sd_spread_pct),
            "counts": asdict(r.counts) if r.counts else None, "tokens_per_step": _f(r.tokens_per_step),
            "acceptance_rate": _f(r.acceptance_rate), "t_ar_s": _f(r.t_ar_s), "t_sd_s": _f(r.t_sd_s),
            "t_sd_implied_s": _f(r.t_sd_implied_s), "reconcile_rel": _f(r.reconcile_rel),
            "reconciled": r.reconciled,
            "break_even": {k: (_f(v) if isinstance(v, float) else v) for k, v in asdict(r.break_even).items()},
            "outputs": asdict(r.outputs) | {"differing": r.outputs.differing}}


def recover_matched(workspace: Path, writer: ArchiveWriter, spec: dict[str, Any]) -> Finished:
    """Finalize a killed matched run's partial (the matched-sd recovery of harness.run.kinds): its
    records, no verdict (status ``partial``, label ``recovered``, kind and protocol class matched-sd)."""
    return recover_records_only(workspace, writer, spec, "matched-sd", roles=("ar", "sd"),
                                claim=str(spec.get("sd_claim", "speculative-full-target")))


def run_matched(loaded: LoadedSpec, workspace: Path, *, reporter: Reporter = silent) -> MatchedOutcome:
    """Run a matched AR/SD spec into ``<workspace>/archives`` and the ledgers."""
    return MatchedRunner(prepare_matched(loaded, workspace), workspace, reporter).run()


def run_kind(loaded: LoadedSpec, workspace: Path, reporter: Reporter, options: RunOptions) -> Any:
    """This kind's runner (the kind descriptor's ``run``, harness.kinds): options it does not take refused."""
    check_options(loaded, options)
    return run_matched(loaded, workspace, reporter=reporter)
