"""SLA searches (kind and protocol class ``sla-search``; edge module: processes, HTTP, files, clock).

The highest open-loop request rate whose p99 TTFT / TPOT / E2E meet the spec's limits. Each probe is
one rate-sweep cell measured with the rate sweep's machinery (harness.run.sweep: the arrival plan of
``make_sweep_plan``, ``send_open_loop`` through :meth:`SweepRunner.run_round`, ``round_row``,
``sweep_cells``); which rate comes next, and when the search ends, is decided by the pure planner
harness.measure.sla from the probes so far. Probes are adaptive, so each probe's arrival plan is
appended to ``arrivals.jsonl`` (with its plan id) before its first request is sent. Every round of a
probe writes its ``wave_checks.jsonl`` row as a sweep round does (client self-check, the simulator's late
steps), so the evidence rules judge each probe's rounds (``sim-lateness``, ``sla-probe-invalid``).

The archive holds ``cells.parquet`` / ``rounds.parquet`` as a sweep writes them (ledgers
``sweep_cells`` / ``sweep_rounds``, protocol class ``sla-search``), ``probes.parquet`` (ledger
``sla_probes``) and ``sla.json``: every probe, the bracket (highest passing rate, lowest failing
rate), why the search ended, whether it converged, and the rule a probe passes by. Each probe that
ends appends a ``probe`` event; a killed search is finalized by :func:`recover_sla` from its
streamed records (the rounds as the sweep recovers them, every probe judged again).
"""

from __future__ import annotations

import asyncio
import json
import secrets
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pyarrow as pa

from harness.aio import new_event_loop
from harness.errors import DsvError, SpecError
from harness.inputs.corpus import Corpus, load_corpus
from harness.inputs.spec import LoadedSpec, SlaSpec, probe_sweep, sla_definition
from harness.inputs.spec.sweep import MAX_RATE
from harness.inputs.sweep_plan import SweepPlan, make_sweep_plan
from harness.interrupts import fault_point
from harness.measure import sla
from harness.measure.rows import check_row
from harness.oracle.sentinels import load_sentinels
from harness.run.energy import PowerLog
from harness.run.events import Reporter, SlaProbeDone, silent
from harness.run.partial import read_events, recovered_run_block
from harness.run.prompts import load_client, prompt_texts
from harness.run.session import ServiceSession, check_governance, one_service_run_block, open_writer, run_labels
from harness.run.skeleton import Finished, drive, finish
from harness.run.sweep import (
    MAX_CONNECTIONS,
    SweepOutcome,
    SweepRunner,
    recovered_rounds,
    sweep_cells,
)
from harness.service.manager import RunningService, check_port_free, port_field
from harness.store.archive import ArchiveWriter
from harness.store.runblock import RunBlock


def settings_of(spec: SlaSpec) -> sla.SearchSettings:
    """The planner's settings from the spec's ``search`` section."""
    s = spec.search
    rel = s.precision_rel is not None
    prec = s.precision_rel if s.precision_rel is not None else s.precision_req_s
    assert prec is not None  # the spec model requires one of them
    return sla.SearchSettings(start_req_s=s.start_req_s, precision=prec, relative=rel, max_probes=s.max_probes,
                              max_rate_req_s=s.max_rate_req_s if s.max_rate_req_s is not None else MAX_RATE)


def probe_plan(spec: SlaSpec, rate: float, corpus: Corpus) -> SweepPlan:
    """The arrival plan of one probe: the rate sweep's plan of that one rate."""
    return make_sweep_plan(probe_sweep(spec, [rate]), corpus)


def probe_rows(spec: SlaSpec, rates: Sequence[float], rounds: Sequence[dict[str, Any]],
               cells: Sequence[dict[str, Any]]) -> list[dict[str, Any]]:
    """One ``sla_probes`` row per probed rate (in probe order), judged and with the bracket marked."""
    by_cell = {c["arrival_rate_req_s"]: c for c in cells}
    rows = [check_row("sla_probes", sla.probe_row(i, rate, by_cell.get(rate),
                                                  [r for r in rounds if r["arrival_rate_req_s"] == rate],
                                                  spec.limits_s(), spec.rounds))
            for i, rate in enumerate(rates)]
    return sla.mark_bracket(rows)


@dataclass
class SlaOutcome(SweepOutcome):
    """What a search produced: a sweep's outcome (archive, cells, rounds) plus its probes and the
    summary (``sla.json``'s result)."""

    probes: list[dict[str, Any]] = field(default_factory=list)
    result: dict[str, Any] = field(default_factory=dict)


class SlaRunner(SweepRunner):
    """Runs one SLA search into an archive (module docstring); measures each probe as a sweep cell."""

    def __init__(self, spec: SlaSpec, corpus: Corpus, workspace: Path, *, raw: bytes | None = None,
                 source: str = "", reporter: Reporter = silent) -> None:
        # the sweep's round machinery reads ``self.spec`` (the probes so far as a sweep's rates)
        self.sla, self.settings = spec, settings_of(spec)
        self.spec, self.corpus, self.workspace, self.raw = probe_sweep(spec, []), corpus, workspace, raw
        self.report = reporter
        self.governance = check_governance(spec, workspace, source)
        self.sentinels = load_sentinels([Path(p) for p in spec.oracles])
        self.token = secrets.token_hex(8)
        self.rounds, self.by_rate, self.starts, self.energy_windows = [], {}, {}, []
        self.texts = prompt_texts(spec.service)
        self.cases = {c.case_id: c for c in corpus.cases}
        self.rates: list[float] = []
        self.probes: list[dict[str, Any]] = []

    async def _probe(self, svc: RunningService, session: ServiceSession, writer: ArchiveWriter, rate: float) -> None:
        index = len(self.rates)
        plan = probe_plan(self.sla, rate, self.corpus)
        writer.append_jsonl("arrivals.jsonl", {"probe_index": index, "arrival_rate_req_s": rate} | plan.to_json())
        self.rates.append(rate)
        self.spec = probe_sweep(self.sla, list(self.rates))
        cap = self.spec.arrivals.max_concurrency
        for rp in plan.rounds:
            n = cap or max(1, min(len(rp.case_ids), MAX_CONNECTIONS))
            async with load_client(svc.url, self.spec.service, concurrency=n,
                                   timeout_s=self.spec.request_timeout_s, limits=self.spec.client) as client:
                await self.run_round(client, writer, rp, svc, session)
        self.probes = probe_rows(self.sla, self.rates, self.rounds, self.cells())
        row = self.probes[index]
        writer.append_event({"event": "probe", "probe_index": index, "arrival_rate_req_s": rate,
                             "passed": row["passed"], "plan_id": plan.plan_id})
        self.report(SlaProbeDone(row))
        fault_point("sla:probe-ended")

    async def _search(self, svc: RunningService, session: ServiceSession, writer: ArchiveWriter) -> None:
        while (rate := sla.next_rate(sla.probes_of(self.probes), self.settings)) is not None:
            await self._probe(svc, session, writer, rate)

    def run(self) -> SlaOutcome:
        """Run the search; always finalize an archive, whatever happens."""
        s = self.sla
        writer, anchor = open_writer(
            self.workspace, self.token, spec=s, spec_bytes=self.raw, corpora={"sweep": self.corpus.identity()},
            governance=self.governance,
            extra_files={"plan.json": {"definition": sla_definition(s) | {
                "corpus_manifest_sha256": self.corpus.manifest_sha256}, "rule": sla.RULE}})
        session = ServiceSession(writer, self.workspace, claim_class=s.claim_class, sentinels=self.sentinels,
                                 reporter=self.report, request_timeout_s=s.request_timeout_s)
        started: list[RunningService] = []
        power = PowerLog(writer)

        def body() -> None:
            started.append(session.start(s.service, s.service.name, {"start_index": 1}))
            power.start(started[0])
            with asyncio.Runner(loop_factory=new_event_loop) as runner:
                runner.run(self._search(started[0], session, writer))

        def after() -> None:  # sentinels after measurement; a Ctrl-C skips them
            if started:
                session.after_checks(started[0])

        def clean_up() -> None:
            try:
                power.write(self.energy_windows)
            finally:
                session.stop_all()

        return drive(writer, body, kept="every finished probe is kept", what="SLA search", after=after,
                     clean_up=clean_up,
                     finalize=lambda status, error: self._finish(writer, status, error, anchor, session))

    def _finish(self, writer: ArchiveWriter, status: str, error: DsvError | None, anchor: dict[str, Any],
                session: ServiceSession) -> SlaOutcome:
        s = self.sla
        labels = run_labels(s.labels, [s.service.backend], session.services)
        if session.oracles_failed:
            labels.append("oracle-failed")
        run = one_service_run_block(s, self.token, str(anchor.get("wall_iso", "")), session.services, labels=labels,
                            error=error.message if error else None, oracles_failed=session.oracles_failed)
        cells = self.cells()
        probes = self.probes  # the probes that ended; a probe cut short keeps its rounds, not a verdict
        result = sla.summary(probes, self.settings, finished=status == "complete")
        done = finalize_sla(writer, self.workspace, s, self.rounds, cells, probes, result, status=status, run=run)
        return SlaOutcome(done, cells, self.rounds, error, probes=probes, result=result)




def finalize_sla(writer: ArchiveWriter, workspace: Path, spec: SlaSpec, rounds: Sequence[dict[str, Any]],
                 cells: Sequence[dict[str, Any]], probes: Sequence[dict[str, Any]], result: dict[str, Any], *,
                 status: str, run: RunBlock) -> Finished:
    """Write ``cells`` / ``rounds`` (as a sweep does), ``probes.parquet`` and ``sla.json``, then finish
    the archive (finalize, ledgers, evidence)."""
    extra = {"campaign": spec.name, "claim_class": spec.claim_class, "protocol_class": spec.protocol_class}
    if cells:
        writer.write_table("cells.parquet", pa.Table.from_pylist([c | extra for c in cells]))
    if rounds:
        writer.write_table("rounds.parquet", pa.Table.from_pylist([r | extra for r in rounds]))
    if probes:
        writer.write_table("probes.parquet", pa.Table.from_pylist([p | extra for p in probes]))
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
    path = d / "arrivals.jsonl"
    for line in path.read_text(encoding="utf-8", errors="replace").splitlines() if path.is_file() else []:
        try:
            rate = float(json.loads(line)["arrival_rate_req_s"])
        except (ValueError, KeyError, TypeError):
            continue
        if rate not in rates:
            rates.append(rate)
    view = probe_sweep(spec, rates)
    rounds, by_rate, starts = recovered_rounds(writer, view)
    cells = sweep_cells(view, rounds, by_rate, starts)
    ended = {float(e["arrival_rate_req_s"]) for e in read_events(d) if e.get("event") == "probe"}
    # only the probes that ended are judged: one cut short keeps its rounds and cell, not a verdict
    probes = probe_rows(spec, [r for r in rates if r in ended], rounds, cells)
    run = recovered_run_block(writer, spec)
    result = sla.summary(probes, settings_of(spec), finished=False)
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

