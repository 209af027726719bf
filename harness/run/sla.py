"""SLA searches (kind and protocol class ``sla-search``; edge module: processes, HTTP, files, clock).

The highest open-loop request rate whose p99 TTFT / TPOT / E2E meet the spec's limits. A run on one
service started once (:class:`harness.run.base.OneServiceRunner`). Each probe is one rate-sweep cell:
its arrival plan is the sweep's plan of that one rate (:func:`harness.inputs.sweep_plan.make_sweep_plan`
of :func:`~harness.inputs.spec.probe_sweep`), its rounds are run by the search's prober
(:class:`harness.run.rate_rounds.RateRounds`, the open-loop sender of :mod:`harness.run.open_loop`)
and its rows are the sweep's (:mod:`harness.run.sweep_rows`); which rate comes next, and when the
search ends, is decided by the pure planner harness.measure.sla from the probes so far. Probes are
adaptive, so each probe's arrival plan is appended to ``arrivals.jsonl`` (with its plan id) before
its first request is sent. Every round of a probe writes its ``wave_checks.jsonl`` row as a sweep
round does (client self-check, the simulator's late steps), so the evidence rules judge each probe's
rounds (``sim-lateness``, ``sla-probe-invalid``). A probe whose client or simulator fell behind
(harness.measure.sla_load, read back from its ``wave_checks.jsonl`` rows) is invalid, not a failure:
the search measures that rate again (``search.max_remeasure`` times at most, fresh round indices, no
warmup) and withholds its result (``end`` ``invalid-load``) when no measurement was valid; every
measurement is kept as a probe row, an invalid one without a verdict.

The archive holds ``sla_cells.parquet`` (the probed rates' cells, as a sweep builds them; no ledger
table) and ``sla_rounds.parquet`` (ledger ``sla_rounds``), ``sla_probes.parquet`` (ledger
``sla_probes``) and ``sla.json``: every probe, the bracket (highest passing rate, lowest failing
rate), why the search ended, whether it converged, and the rule a probe passes by. Each probe that
ends appends a ``probe`` event; a killed search is finalized by :func:`recover_sla` from its
streamed records (the rounds as the sweep recovers them, every probe judged again).
"""

from __future__ import annotations

import contextlib
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from harness.errors import DsvError, SpecError
from harness.ids import probe_id
from harness.inputs.arrivals import plan_hash
from harness.inputs.corpus import Corpus, load_corpus
from harness.inputs.spec import MAX_RATE, LoadedSpec, SlaSpec, probe_sweep, sla_definition
from harness.inputs.sweep_plan import SweepPlan, make_sweep_plan
from harness.interrupts import fault_point
from harness.measure import sla, sla_load
from harness.measure.rows import build, row_dict, rows_table
from harness.measure.unit_load import round_load_problems
from harness.run.base import OneServiceRunner, OpenedRun
from harness.run.energy import Window
from harness.run.events import Reporter, SlaProbeDone, silent
from harness.run.options import RunOptions, check_options
from harness.run.partial import read_events, read_jsonl, recovered_run_block
from harness.run.rate_rounds import LOAD_LIMITS, RateRounds, RatesOutcome, recovered_rounds, write_rate_tables
from harness.run.skeleton import Finished, finish
from harness.run.sweep_rows import sweep_cells
from harness.service.launch.manager import RunningService, check_port_free, port_field
from harness.store.archive import ArchiveWriter
from harness.store.runblock import RunBlock

__all__ = ["SlaOutcome"]


def settings_of(spec: SlaSpec) -> sla.SearchSettings:
    """The planner's settings from the spec's ``search`` section."""
    s = spec.search
    rel = s.precision_rel is not None
    prec = s.precision_rel if s.precision_rel is not None else s.precision_req_s
    assert prec is not None  # the spec model requires one of them
    return sla.SearchSettings(start_req_s=s.start_req_s, precision=prec, relative=rel, max_probes=s.max_probes,
                              max_rate_req_s=s.max_rate_req_s if s.max_rate_req_s is not None else MAX_RATE)


def probe_plan(spec: SlaSpec, rate: float, corpus: Corpus, attempt: int = 0) -> SweepPlan:
    """The arrival plan of one measurement of a probe: the rate sweep's plan of that one rate; attempt
    ``a > 0`` (a re-measurement) is that plan's rounds ``a * rounds ..`` without the warmup (the
    service was warmed at this rate already; fresh round indices keep its ids distinct)."""
    if attempt == 0:
        return make_sweep_plan(probe_sweep(spec, [rate]), corpus)
    n = spec.rounds
    full = make_sweep_plan(probe_sweep(spec.model_copy(update={"rounds": n * (attempt + 1)}), [rate]), corpus)
    rounds = tuple(r for r in full.rounds if r.round_index >= n * attempt)
    return SweepPlan(rounds, plan_hash(list(rounds))[:16], full.definition)


def probe_rows(spec: SlaSpec, measured: Sequence[tuple[float, int]], rounds: Sequence[dict[str, Any]],
               cells: Sequence[dict[str, Any]], checks: Sequence[dict[str, Any]]) -> list[dict[str, Any]]:
    """One ``sla_probes`` row per measurement ((rate, attempt), in measurement order), its rounds
    judged for load against their self-check rows ``checks`` (harness.measure.sla_load), judged by
    the search's rule when valid, with the bracket marked."""
    by_cell = {c["arrival_rate_req_s"]: c for c in cells}
    by_round = {str(c["round_id"]): c for c in checks if c.get("round_id") is not None}
    rows = []
    for i, (rate, attempt) in enumerate(measured):
        got = sla_load.attempt_rounds(rounds, rate, attempt, spec.rounds)
        problems = [p for r in got for p in round_load_problems(r, by_round.get(str(r["round_id"])),
                                                                         LOAD_LIMITS)]
        rows.append(row_dict(build("sla_probes", sla_load.probe_row(i, rate, attempt, by_cell.get(rate), got,
                                                                    problems, spec.limits_s(), spec.rounds))))
    return sla_load.mark_bracket(rows)


@dataclass
class SlaOutcome(RatesOutcome):
    """What a search produced: the archive, the probes' cells and rounds (as a sweep's), the probes
    and the summary (``sla.json``'s result)."""

    probes: list[dict[str, Any]] = field(default_factory=list)
    result: dict[str, Any] = field(default_factory=dict)


class SlaRunner(OneServiceRunner[SlaSpec, SlaOutcome]):
    """Runs one SLA search into an archive (module docstring); its prober measures each probe as a
    sweep cell."""

    what = "SLA search"
    kept = "every finished probe is kept"

    def __init__(self, spec: SlaSpec, corpus: Corpus, workspace: Path, *, raw: bytes | None = None,
                 source: str = "", reporter: Reporter = silent) -> None:
        self.settings, self.corpus = settings_of(spec), corpus
        super().__init__(spec, workspace, raw=raw, source=source, reporter=reporter)
        # the probes' request and row settings: the search as a sweep (its rates are the probes')
        self.prober = RateRounds(probe_sweep(spec, []), corpus, self.token, self.texts, reporter)
        self.rates: list[float] = []  # every probed rate, once, in probe order
        self.measured: list[tuple[float, int]] = []  # every measurement: (rate, attempt), in order
        self.probes: list[dict[str, Any]] = []

    def corpora(self) -> dict[str, Any]:
        """The search's one corpus (in the sweep's role)."""
        return {"sweep": self.corpus.identity()}

    def extra_files(self) -> dict[str, Any]:
        """``plan.json``: what every probe's plan depends on besides its rate, and the pass rule."""
        return {"plan.json": {"definition": sla_definition(self.spec) | {
            "corpus_manifest_sha256": self.corpus.manifest_sha256}, "rule": sla.RULE}}

    def cells(self) -> list[dict[str, Any]]:
        """One ``sweep_cells`` row per probed rate."""
        return self.prober.cells(probe_sweep(self.spec, list(self.rates)))

    async def _probe(self, svc: RunningService, run: OpenedRun, rate: float, attempt: int) -> None:
        index = len(self.measured)
        plan = probe_plan(self.spec, rate, self.corpus, attempt)
        run.writer.append_jsonl("arrivals.jsonl", {"probe_index": index, "attempt": attempt,
                                                   "arrival_rate_req_s": rate} | plan.to_json())
        if rate not in self.rates:
            self.rates.append(rate)
        self.measured.append((rate, attempt))
        for rp in plan.rounds:
            await self.prober.measure(svc, run.session, run.writer, rp)
        self.probes = probe_rows(self.spec, self.measured, self.prober.rounds, self.cells(),
                                 read_jsonl(run.writer.dir, "wave_checks.jsonl"))
        row = self.probes[index]
        run.writer.append_event({"event": "probe", "probe_index": index, "attempt": attempt,
                                 "arrival_rate_req_s": rate, "passed": row["passed"], "plan_id": plan.plan_id})
        self.report(SlaProbeDone(row))
        fault_point("sla:probe-ended")

    async def measure(self, svc: RunningService, run: OpenedRun) -> None:
        """Measure the next step (harness.measure.sla_load.next_step: a re-measurement of an invalid
        probe, else the planner's next rate) until there is none."""
        while (step := sla_load.next_step(sla_load.measured_of(self.probes), self.settings,
                                          self.spec.search.max_remeasure)) is not None:
            await self._probe(svc, run, *step)

    def energy_windows(self) -> Sequence[Window]:
        """Each measured round's window."""
        return self.prober.energy_windows

    def finalize(self, run: OpenedRun, status: str, error: DsvError | None) -> SlaOutcome:
        """The search's tables and ``sla.json``, then the archive finished."""
        block = self.run_block(run, error)
        cells, rounds = self.cells(), self.prober.rounds
        probes = self.probes  # the probes that ended; a probe cut short keeps its rounds, not a verdict
        result = sla_load.summary(probes, self.settings, self.spec.search.max_remeasure,
                                  finished=status == "complete")
        done = finalize_sla(run.writer, self.workspace, self.spec, rounds, cells, probes, result, status=status,
                            run=block)
        return SlaOutcome(done, cells, rounds, error, probes=probes, result=result)


def finalize_sla(writer: ArchiveWriter, workspace: Path, spec: SlaSpec, rounds: Sequence[dict[str, Any]],
                 cells: Sequence[dict[str, Any]], probes: Sequence[dict[str, Any]], result: dict[str, Any], *,
                 status: str, run: RunBlock) -> Finished:
    """Write ``sla_cells`` / ``sla_rounds`` (as a sweep writes its own), ``sla_probes.parquet`` and
    ``sla.json``, then finish the archive (finalize, ledgers, evidence)."""
    # each round names its measurement, so a finding on a round reaches that measurement's probe row
    rounds = [dict(r) | {"probe_id": probe_id(float(r["arrival_rate_req_s"]), int(r["round_index"]) // spec.rounds)}
              for r in rounds]
    extra = write_rate_tables(writer, spec, cells, rounds)
    if probes:
        writer.write_table("sla_probes.parquet", rows_table("sla_probes", probes, extra))
    writer.write_json("sla.json", result | {"probes": list(probes), "limits_ms": spec.limits.model_dump(mode="json"),
                                            "cells": list(cells), "rounds": list(rounds)})
    return finish(writer, workspace, status, run)


def recover_sla(workspace: Path, writer: ArchiveWriter, spec_json: dict[str, Any]) -> Finished:
    """Finalize a killed search's partial (the sla-search recovery of harness.run.kinds): the probed
    rates from ``arrivals.jsonl``, their rounds as the sweep recovers them, every probe that ended (its
    ``probe`` event) judged again, a probe cut short kept as rounds and a cell without a verdict;
    status ``partial``, label ``recovered``, ``sla.json`` ``end`` ``interrupted`` unless it had ended."""
    spec = SlaSpec.model_validate(spec_json)
    d = writer.dir
    rates: list[float] = []
    measured: list[tuple[float, int]] = []
    for row in read_jsonl(d, "arrivals.jsonl"):
        with contextlib.suppress(ValueError, KeyError, TypeError):
            m = (float(row["arrival_rate_req_s"]), int(row.get("attempt", 0)))
            measured.append(m)
            if m[0] not in rates:
                rates.append(m[0])
    # every measurement's rounds (a re-measurement's round indices follow the first's)
    view = probe_sweep(spec.model_copy(update={"rounds": spec.rounds * (1 + spec.search.max_remeasure)}), rates)
    rounds, by_rate, starts = recovered_rounds(writer, view)
    cells = sweep_cells(probe_sweep(spec, rates), rounds, by_rate, starts)
    ended = {(float(e["arrival_rate_req_s"]), int(e.get("attempt", 0)))
             for e in read_events(d) if e.get("event") == "probe"}
    # only the measurements that ended are judged: one cut short keeps its rounds and cell, not a verdict
    probes = probe_rows(spec, [m for m in measured if m in ended], rounds, cells, read_jsonl(d, "wave_checks.jsonl"))
    run = recovered_run_block(writer, spec)
    result = sla_load.summary(probes, settings_of(spec), spec.search.max_remeasure, finished=False)
    return finalize_sla(writer, workspace, spec, rounds, cells, probes, result, status="partial", run=run)


def run_sla_loaded(loaded: LoadedSpec, workspace: Path, *, reporter: Reporter = silent) -> SlaOutcome:
    """Run the SLA search of a loaded spec (the ``sla-search`` runner of harness.run.kinds) into
    ``<workspace>/archives`` and the ledgers."""
    spec = loaded.spec
    if not isinstance(spec, SlaSpec):
        raise SpecError(f"{loaded.source}: kind '{spec.kind}' is not an SLA search",
                        hint="run it with 'dsv4h campaign run'")
    spec = spec.model_copy(update={"oracles": [str(p) for p in loaded.paths.oracles]})
    corpus = load_corpus(loaded.paths.corpora["sweep"])
    check_port_free(spec.service, port_field(loaded.source))  # a taken port: refused before the archive opens
    return SlaRunner(spec, corpus, workspace, raw=loaded.raw, source=str(loaded.source or ""),
                     reporter=reporter).run()


def run_kind(loaded: LoadedSpec, workspace: Path, reporter: Reporter, options: RunOptions) -> Any:
    """This kind's runner (the kind descriptor's ``run``, harness.kinds): options it does not take refused."""
    check_options(loaded, options)
    return run_sla_loaded(loaded, workspace, reporter=reporter)
