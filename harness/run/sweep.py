"""Rate sweeps (protocol class ``rate-sweep``; edge module: processes, HTTP, files, clock).

A run on one service started once (:class:`harness.run.base.OneServiceRunner`: governance check,
archive preamble, one owned service with identity and sentinels, power, the one run skeleton's end).
Every round's arrival plan (:func:`harness.inputs.sweep_plan.make_sweep_plan`) is made and archived
(``arrivals.json``, with its hash) before the service starts; the runner then follows it open-loop
through its prober (:class:`harness.run.rate_rounds.RateRounds`, the open-loop sender of
:mod:`harness.run.open_loop`): request *i* is sent at round start + its planned offset whether or not
earlier requests finished, unless the ``max_concurrency`` cap holds it back. Per rate: warmup
requests at that rate (kept, never counted), then ``rounds`` measured rounds.

Per request the achieved schedule is kept in ``schedule.jsonl`` (planned send, actual send, lag, time
held by the cap); per round and per rate the throughput, latency (harness.measure.latency, both
definitions), goodput under the spec's SLOs and the schedule summary go to ``sweep_rounds.parquet`` and
``sweep_cells.parquet``, rows of the ``sweep_rounds`` / ``sweep_cells`` row models (:mod:`harness.run.sweep_rows`;
ledger tables of those names: never formal cells). A round whose client could not keep its schedule
is a finding (harness.evidence.sweep_rules).

Each measured round is measured with the client's self-check and, on the simulator, its late-step
counters before and after (one ``wave_checks.jsonl`` row per round under the round's wave id), which
the evidence rules judge per round (``sim-lateness``, ``client-stalled``). Each measured round that
ends appends a ``round`` event (its id, status and start); ``stop_at_saturation`` ends the sweep after
the first rate with an over-saturated round (``sweep-stopped`` event, ``sweep.json``'s ``stopped``).
:func:`recover_sweep` (the rate-sweep recovery of harness.run.kinds) finalizes a killed sweep's partial
from its streamed records with the same rows, a round without its ``round`` event marked
``incomplete`` (its ``wave_checks.jsonl`` rows are kept and judged).
"""

from __future__ import annotations

import time
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from harness.errors import DsvError, SpecError
from harness.inputs.corpus import Corpus, load_corpus
from harness.inputs.spec import LoadedSpec, SweepSpec, load_spec
from harness.inputs.sweep_plan import make_sweep_plan
from harness.measure import sweep as sw
from harness.measure.unit_load import late_cells
from harness.run.base import OneServiceRunner, OpenedRun
from harness.run.energy import Window
from harness.run.events import Reporter, SweepPlanReady, SweepStopped, silent
from harness.run.options import RunOptions, check_options
from harness.run.partial import read_events, read_json_or, read_jsonl, recovered_run_block
from harness.run.rate_rounds import LOAD_LIMITS, RateRounds, RatesOutcome, recovered_rounds, write_rate_tables
from harness.run.skeleton import Finished, finish
from harness.run.sweep_rows import slo_of, sweep_cells
from harness.service.launch.manager import RunningService, check_port_free, port_field
from harness.store.archive import ArchiveWriter
from harness.store.runblock import RunBlock

__all__ = ["SweepOutcome"]


def stopped_record(rate: float, rounds: Sequence[str]) -> dict[str, Any]:
    """``sweep.json``'s ``stopped`` (and the ``sweep-stopped`` event): the saturated rate, its
    saturated rounds and the rates not run (filled as the runner skips them)."""
    return {"at_rate_req_s": rate, "saturated_rounds": list(rounds), "not_run": [],
            "reason": f"stop_at_saturation: {len(rounds)} round(s) at {rate:g} req/s over-saturated "
                      "(docs/saturation.md); no higher rate run"}


@dataclass
class SweepOutcome(RatesOutcome):
    """What a sweep produced: the finished archive (ledgers, findings), its per-rate cells and rounds,
    and where ``stop_at_saturation`` ended it early (:func:`stopped_record`; None when it did not)."""

    stopped: dict[str, Any] | None = None


class SweepRunner(OneServiceRunner[SweepSpec, SweepOutcome]):
    """Runs one rate sweep into an archive (module docstring)."""

    what = "sweep"
    kept = "every finished round is kept"

    def __init__(self, spec: SweepSpec, corpus: Corpus, workspace: Path, *, raw: bytes | None = None,
                 source: str = "", reporter: Reporter = silent) -> None:
        self.corpus = corpus
        self.plan = make_sweep_plan(spec, corpus)
        super().__init__(spec, workspace, raw=raw, source=source, reporter=reporter)
        self.prober = RateRounds(spec, corpus, self.token, self.texts, reporter)
        self.stopped: dict[str, Any] | None = None  # stop_at_saturation: where and what was not run

    def corpora(self) -> dict[str, Any]:
        """The sweep's one corpus."""
        return {"sweep": self.corpus.identity()}

    def extra_files(self) -> dict[str, Any]:
        """``arrivals.json`` (every round's plan) and ``plan.json`` (its id, the rates, the SLOs)."""
        return {"arrivals.json": self.plan.to_json(),
                "plan.json": {"plan_id": self.plan.plan_id, "rates": self.spec.rate_list,
                              "slo": slo_of(self.spec).to_json()}}

    def opened(self, run: OpenedRun) -> None:
        """Report the plan."""
        self.report(SweepPlanReady(self.plan))

    async def measure(self, svc: RunningService, run: OpenedRun) -> None:
        """Every planned round in order (a client per round), until ``stop_at_saturation`` stops it."""
        for plan in self.plan.rounds:
            if self.stopped is not None:
                if plan.rate not in self.stopped["not_run"]:
                    self.stopped["not_run"].append(plan.rate)
                continue
            await self.prober.measure(svc, run.session, run.writer, plan)
            if self.spec.stop_at_saturation and plan.round_index == self.spec.rounds - 1:
                self._maybe_stop(plan.rate)
        if self.stopped is not None:
            run.writer.append_event({"event": "sweep-stopped", **self.stopped, "t_ns": time.perf_counter_ns()})

    def _maybe_stop(self, rate: float) -> None:
        """After the last round of ``rate``: stop when any of its rounds was over-saturated."""
        hit = [r["round_id"] for r in self.prober.rounds
               if r["arrival_rate_req_s"] == rate and r.get("saturated") is True]
        if hit:
            self.stopped = stopped_record(rate, hit)
            self.report(SweepStopped(rate, tuple(hit)))

    def energy_windows(self) -> Sequence[Window]:
        """Each measured round's window."""
        return self.prober.energy_windows

    def cells(self) -> list[dict[str, Any]]:
        """One row per rate: medians of the round values plus the rate's pooled latency."""
        return self.prober.cells(self.spec)

    def finalize(self, run: OpenedRun, status: str, error: DsvError | None) -> SweepOutcome:
        """The sweep's tables and ``sweep.json``, then the archive finished."""
        cells, rounds = self.cells(), self.prober.rounds
        done = finalize_sweep(run.writer, self.workspace, self.spec, self.plan.plan_id, rounds, cells, status,
                              self.run_block(run, error, plan_id=self.plan.plan_id), stopped=self.stopped)
        return SweepOutcome(done, cells, rounds, error, self.stopped)


def finalize_sweep(writer: ArchiveWriter, workspace: Path, spec: SweepSpec, plan_id: str,
                   rounds: Sequence[dict[str, Any]], cells: Sequence[dict[str, Any]], status: str,
                   run: RunBlock, *, stopped: dict[str, Any] | None = None) -> Finished:
    """Write the sweep's result tables (``cells``, ``rounds``) and ``sweep.json`` (with ``stopped``
    when ``stop_at_saturation`` ended it early), then finish the archive (finalize, ledgers, evidence)."""
    write_rate_tables(writer, spec, cells, rounds)
    slo = slo_of(spec)
    # never a saturated rate, nor one whose simulator or client fell behind: a steady state's goodput only
    k = sw.knee_of(cells, late_cells(rounds, read_jsonl(writer.dir, "wave_checks.jsonl"), LOAD_LIMITS))
    knee = {c: k.row[c] for c in ("arrival_rate_req_s", "goodput_median_req_s")} if k.row else None
    writer.write_json("sweep.json", {"cells": list(cells), "rounds": list(rounds), "knee": knee, "knee_note": k.note,
                                     "slo": slo.to_json(), "plan_id": plan_id, "goodput_definition": sw.__doc__,
                                     "stopped": stopped})
    return finish(writer, workspace, status, run)


def recover_sweep(workspace: Path, writer: ArchiveWriter, spec_json: dict[str, Any]) -> Finished:
    """Finalize a killed sweep's partial (``harness.run.kinds``: the rate-sweep recovery) from its
    streamed records as a sweep: status ``partial``, label ``recovered``, kind and protocol class
    ``rate-sweep``; each measured round's row and each rate's cell computed as the run computes them
    (``round_row``, ``sweep_cells``), a round that never reported its end marked ``incomplete``."""
    spec = SweepSpec.model_validate(spec_json)
    d = writer.dir
    rounds, by_rate, starts = recovered_rounds(writer, spec)
    plan_id = str(read_json_or(d, "plan.json", {}).get("plan_id", ""))
    run = recovered_run_block(writer, spec, plan_id=plan_id)
    stop = next((e for e in read_events(d) if e.get("event") == "sweep-stopped"), None)
    stopped = {k: v for k, v in stop.items() if k not in ("event", "t_ns")} if stop else None
    return finalize_sweep(writer, workspace, spec, plan_id, rounds, sweep_cells(spec, rounds, by_rate, starts),
                          "partial", run, stopped=stopped)


def run_sweep_loaded(loaded: LoadedSpec, workspace: Path, *, reporter: Reporter = silent) -> SweepOutcome:
    """Run the rate sweep of a loaded spec (the ``rate-sweep`` runner of harness.run.kinds) into
    ``<workspace>/archives`` and the ledgers."""
    spec = loaded.spec
    if not isinstance(spec, SweepSpec):
        raise SpecError(f"{loaded.source}: kind '{spec.kind}' is not a rate sweep",
                        hint="run formal matrices and ABBA screens with 'dsv4h campaign run'")
    spec = spec.model_copy(update={"oracles": [str(p) for p in loaded.paths.oracles]})
    corpus = load_corpus(loaded.paths.corpora["sweep"])
    check_port_free(spec.service, port_field(loaded.source))  # a taken port: refused before the archive opens
    return SweepRunner(spec, corpus, workspace, raw=loaded.raw, source=str(loaded.source or ""),
                       reporter=reporter).run()


def run_sweep(spec_path: Path, workspace: Path, *, reporter: Reporter = silent) -> SweepOutcome:
    """Run the rate sweep in ``spec_path`` into ``<workspace>/archives`` and the ledgers."""
    return run_sweep_loaded(load_spec(spec_path), workspace, reporter=reporter)


def run_kind(loaded: LoadedSpec, workspace: Path, reporter: Reporter, options: RunOptions) -> Any:
    """This kind's runner (the kind descriptor's ``run``, harness.kinds): options it does not take refused."""
    check_options(loaded, options)
    return run_sweep_loaded(loaded, workspace, reporter=reporter)
