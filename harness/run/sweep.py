"""Rate sweeps (protocol class ``rate-sweep``; edge module: processes, HTTP, files, clock).

Built on what every runner shares (:mod:`harness.run.session`: governance check, archive preamble, one
owned service with identity and sentinels) and ended by the one run skeleton
(:func:`harness.run.skeleton.drive`: clean up, end events, result tables, ``finish``). Every round's arrival
plan (:mod:`harness.inputs.sweep_plan`) is made and archived (``arrivals.json``, with its hash) before
the service starts; the runner then follows it open-loop: request *i* is sent at round start + its
planned offset whether or not earlier requests finished, unless the ``max_concurrency`` cap holds it
back. Per rate: warmup requests at that rate (kept, never counted), then ``rounds`` measured rounds.

Per request the achieved schedule is kept in ``schedule.jsonl`` (planned send, actual send, lag, time
held by the cap); per round and per rate the throughput, latency (harness.measure.latency, both
definitions), goodput under the spec's SLOs and the schedule summary go to ``rounds.parquet`` and
``cells.parquet``, rows of the ``sweep_rounds`` / ``sweep_cells`` row models (harness.measure.rows;
ledger tables of those names: never formal cells). A round whose client could not keep its schedule
is a finding (harness.evidence.sweep_rules).

Each measured round is measured with the client's self-check and, on the simulator, its late-step
counters before and after (:meth:`harness.run.selfcheck.WaveSelfCheck.around`, the formal path's): one
``wave_checks.jsonl`` row per round under the round's wave id (:func:`round_check`), which the evidence
rules judge per round (``sim-lateness``, ``client-stalled``). Each measured round that ends appends a
``round`` event (its id, status and start); the run ends with the events every runner writes
(``interrupted`` or ``failed``, then ``run-end``) and finalizes in the skeleton's one critical section.
:func:`recover_sweep` (the rate-sweep recovery of harness.run.kinds) finalizes a killed sweep's partial
from its streamed records with the same :func:`round_row` and :func:`sweep_cells`, a round without its
``round`` event marked ``incomplete`` (its ``wave_checks.jsonl`` rows are kept and judged).
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import math
import secrets
import statistics
import time
from collections.abc import Awaitable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pyarrow as pa

from harness import ids
from harness.aio import new_event_loop
from harness.errors import DsvError, SpecError
from harness.ids import RequestIdentity
from harness.inputs.arrivals import RoundPlan
from harness.inputs.corpus import Case, Corpus, cache_salt, load_corpus
from harness.inputs.spec import LoadedSpec, SweepSpec, load_spec
from harness.inputs.sweep_plan import make_sweep_plan
from harness.interrupts import fault_point
from harness.load.driver import LoadClient, WaveRequest
from harness.measure import sweep as sw
from harness.measure.rows import check_row
from harness.measure.saturation import saturation
from harness.oracle.sentinels import load_sentinels
from harness.records import RequestRecord
from harness.run.energy import PowerLog, Window, round_window
from harness.run.events import Reporter, SweepPlanReady, SweepRoundDone, SweepRoundStart, SweepStopped, silent
from harness.run.partial import read_events, read_json_or, recovered_run_block
from harness.run.prompts import load_client, prompt_texts
from harness.run.session import ServiceSession, check_governance, one_service_run_block, open_writer, run_labels
from harness.run.skeleton import Finished, drive, finish
from harness.service.manager import RunningService, check_port_free, port_field
from harness.store.archive import ArchiveWriter
from harness.store.runblock import RunBlock

NS = 1_000_000_000
START_LEAD_NS = 20_000_000  # the round starts this long after planning its first send
MAX_CONNECTIONS = 4096


def cell_id(rate: float) -> str:
    """Stable id of the cell of one offered rate (``harness.ids.sweep_cell_id``)."""
    return ids.sweep_cell_id(rate)


@dataclass
class _Sent:
    records: list[RequestRecord] = field(default_factory=list)
    planned_ns: list[int] = field(default_factory=list)
    cap_wait_ns: list[int] = field(default_factory=list)
    start_ns: int = 0


async def send_open_loop(client: LoadClient, requests: Sequence[WaveRequest], offsets_s: Sequence[float],
                         cap: int | None) -> _Sent:
    """Send ``requests[i]`` at start + ``offsets_s[i]`` (open loop), at most ``cap`` in flight; records
    in request order with each one's planned send and the time the cap held it."""
    out = _Sent(start_ns=time.perf_counter_ns() + START_LEAD_NS)
    sem = asyncio.Semaphore(cap) if cap else None
    planned = [out.start_ns + round(o * NS) for o in offsets_s]
    waits = [0] * len(requests)

    async def one(i: int) -> RequestRecord:
        if sem is None:
            return await client.send(requests[i])
        t = time.perf_counter_ns()
        async with sem:
            waits[i] = time.perf_counter_ns() - t
            return await client.send(requests[i])

    tasks: list[asyncio.Task[RequestRecord]] = []
    try:
        for i, target in enumerate(planned):
            delay = (target - time.perf_counter_ns()) / NS
            if delay > 0:
                await asyncio.sleep(delay)
            tasks.append(asyncio.ensure_future(one(i)))
        out.records = list(await asyncio.gather(*tasks))
    except BaseException:
        for t in tasks:
            t.cancel()
        await asyncio.gather(*tasks, return_exceptions=True)
        raise
    out.planned_ns, out.cap_wait_ns = planned, waits
    return out


def round_check(cell: str, round_index: int, concurrency: int, *, workload: str = "sweep",
                **fields: Any) -> tuple[str, dict[str, Any]]:
    """(wave id, unit fields) of the ``wave_checks.jsonl`` row of measured round ``round_index`` of
    ``cell`` (pure; a sweep round, an SLA-search probe's round, a trace replay's one window): keyed by
    the round's one wave id (``ids.wave_id(cell, round_index, 0)``, the id its requests carry), with
    its ``round_id``, ``cell_id``, ``phase`` ``measured``, ``workload`` and ``concurrency`` (the cap, 0
    without one) plus ``fields``. The self-check's own fields are added by
    ``ServiceSession.record_check``."""
    unit = {"round_id": ids.round_id(cell, round_index), "cell_id": cell, "phase": "measured",
            "workload": workload, "concurrency": concurrency} | fields
    return ids.wave_id(cell, round_index, 0), unit


def unit_edges(start_ns: int, records: Sequence[RequestRecord]) -> list[int]:
    """The client instants that define an open-loop unit's rate (pure): its start and its last response's
    end (``harness.measure.sweep.span_s``); none without records."""
    return [start_ns, max(r.done_ns for r in records)] if records else []


def stopped_record(rate: float, rounds: Sequence[str]) -> dict[str, Any]:
    """``sweep.json``'s ``stopped`` (and the ``sweep-stopped`` event): the saturated rate, its
    saturated rounds and the rates not run (filled as the runner skips them)."""
    return {"at_rate_req_s": rate, "saturated_rounds": list(rounds), "not_run": [],
            "reason": f"stop_at_saturation: {len(rounds)} round(s) at {rate:g} req/s over-saturated "
                      "(docs/saturation.md); no higher rate run"}


def slo_of(spec: SweepSpec) -> sw.Slo:
    """The spec's latency objectives in seconds."""
    s = spec.slo
    return sw.Slo(*[None if v is None else v / 1000 for v in (s.ttft_ms, s.tpot_ms, s.e2e_ms)])


def round_row(spec: SweepSpec, rate: float, round_index: int, records: Sequence[RequestRecord], start_ns: int,
              sched: Sequence[dict[str, Any]], status: str) -> dict[str, Any]:
    """The ``rounds`` row of one measured round from its records, its start (monotonic ns) and its
    schedule rows (``schedule.jsonl``: ``lag_s``, ``client_lag_s``, ``cap_wait_s`` per request)."""
    tol = spec.schedule_tolerance_ms / 1000
    client_rows = [{"lag_s": r["client_lag_s"]} for r in sched]
    summ = sw.schedule_summary(client_rows, tol)
    total = sw.schedule_summary(sched, tol)
    cid = cell_id(rate)
    row = {"round_id": ids.round_id(cid, round_index), "cell_id": cid, "round_index": round_index,
           "arrival_rate_req_s": rate, "status": status}
    row |= sw.rate_row(records, start_ns=start_ns, slo=slo_of(spec))
    row |= {f"client_{k}": v for k, v in summ.items()} | {
        "send_lag_p99_s": total["lag_p99_s"],
        "capped_requests": sum(1 for r in sched if float(r.get("cap_wait_s", 0.0)) > 0)}
    row |= saturation(records).columns()
    return check_row("sweep_rounds", row)


def sweep_cells(spec: SweepSpec, rounds: Sequence[dict[str, Any]], by_rate: dict[float, list[RequestRecord]],
                starts: dict[float, list[int]]) -> list[dict[str, Any]]:
    """One row per rate: medians of the round values plus the rate's pooled latency."""
    out: list[dict[str, Any]] = []
    for rate in spec.rate_list:
        rows = [r for r in rounds if r["arrival_rate_req_s"] == rate]
        if not rows:
            continue
        ok = [r for r in rows if r["status"] == "ok"]
        cell: dict[str, Any] = {"cell_id": cell_id(rate), "workload": "sweep", "arrival_rate_req_s": rate,
                                "rounds_ok": len(ok), "rounds_planned": spec.rounds,
                                "concurrency": spec.arrivals.max_concurrency or 0}
        for key, unit in (("request_throughput", "req_s"), ("output_throughput", "tok_s"),
                          ("input_throughput", "tok_s"), ("goodput", "req_s")):
            vals = [float(r[f"{key}_{unit}"]) for r in ok if not math.isnan(float(r[f"{key}_{unit}"]))]
            cell[f"{key}_median_{unit}"] = statistics.median(vals) if vals else math.nan
            cell[f"{key}_min_{unit}"] = min(vals) if vals else math.nan
            cell[f"{key}_max_{unit}"] = max(vals) if vals else math.nan
        recs = by_rate.get(rate, [])
        cell |= {k: v for k, v in sw.rate_row(recs, start_ns=min(starts[rate]), slo=slo_of(spec)).items()
                 if k.startswith(("ttft", "tpot", "itl", "e2e"))}
        cell["schedule_kept"] = all(bool(r["client_schedule_kept"]) for r in rows)
        cell["client_lag_p99_s"] = max(float(r["client_lag_p99_s"]) for r in rows)
        cell["saturated_rounds"] = sum(1 for r in ok if r.get("saturated") is True)
        out.append(check_row("sweep_cells", cell))
    return out


@dataclass
class SweepOutcome:
    """What a sweep produced: the finished archive (ledgers, findings) and its per-rate cells."""

    finished: Finished
    cells: list[dict[str, Any]]
    rounds: list[dict[str, Any]]
    error: DsvError | None = None
    stopped: dict[str, Any] | None = None  # stop_at_saturation ended the sweep early (stopped_record)

    @property
    def archive_id(self) -> str:
        """The finalized archive's id."""
        return self.finished.archive.archive_id


class SweepRunner:
    """Runs one rate sweep into an archive (module docstring)."""

    def __init__(self, spec: SweepSpec, corpus: Corpus, workspace: Path, *, raw: bytes | None = None,
                 source: str = "", reporter: Reporter = silent) -> None:
        self.spec, self.corpus, self.workspace, self.raw = spec, corpus, workspace, raw
        self.report = reporter
        self.plan = make_sweep_plan(spec, corpus)
        self.governance = check_governance(spec, workspace, source)
        self.sentinels = load_sentinels([Path(p) for p in spec.oracles])
        self.token = secrets.token_hex(8)
        self.rounds: list[dict[str, Any]] = []
        self.by_rate: dict[float, list[RequestRecord]] = {}
        self.starts: dict[float, list[int]] = {}
        self.texts = prompt_texts(spec.service)
        self.cases = {c.case_id: c for c in corpus.cases}
        self.energy_windows: list[Window] = []  # each measured round's window (harness.run.energy)
        self.stopped: dict[str, Any] | None = None  # stop_at_saturation: where and what was not run

    def _request(self, case: Case, rate: float, k: int, i: int) -> WaveRequest:
        s = self.spec
        declared = case.output_tokens if s.use_case_output_lengths else None
        cid = cell_id(rate)
        wave = ids.wave_id(cid, k, 0)  # one wave per round; a warmup round is k = -1
        return WaveRequest(
            input_ids=case.ids_list(), rid=ids.sweep_request_id(self.token, cid, k, i),
            max_new_tokens=min(declared, s.max_new_tokens) if declared else s.max_new_tokens,
            ignore_eos=True if declared else s.ignore_eos,
            prompt_text=self.texts(case) if self.texts else None,
            cache_salt=cache_salt(self.token, cid, k, i),
            identity=RequestIdentity(run_id=self.token, cell_id=cid, round_index=k, wave_id=wave, wave_index=0,
                                     phase="warmup" if k < 0 else "measured", workload="sweep",
                                     case_id=case.case_id, input_hash=case.sha256[:16]),
            concurrency=s.arrivals.max_concurrency or 0)

    async def run_round(self, client: LoadClient, writer: ArchiveWriter, plan: RoundPlan, svc: RunningService,
                        session: ServiceSession) -> None:
        """Send one planned round open-loop on ``svc``, archive its records and schedule; a measured
        round is measured with the session's self-check (``WaveSelfCheck.around``: client loop, and the
        simulator's late steps before and after) and its row appended to ``wave_checks.jsonl``
        (``round_check``), and its ``rounds`` row goes to ``self.rounds`` (and its records, start and
        energy window beside it)."""
        reqs = [self._request(self.cases[c], plan.rate, plan.round_index, i) for i, c in enumerate(plan.case_ids)]
        self.report(SweepRoundStart(plan.rate, plan.round_index, len(reqs)))
        cap = self.spec.arrivals.max_concurrency

        def send() -> Awaitable[_Sent]:
            return send_open_loop(client, reqs, plan.offsets_s, cap)

        sent = await (send() if plan.round_index < 0 else session.selfcheck.around(svc, client, send))
        writer.write_wave(sent.records)
        sched = sw.schedule(sent.planned_ns, sent.records)
        for row, wait in zip(sched, sent.cap_wait_ns, strict=True):
            row |= {"cell_id": cell_id(plan.rate), "rate": plan.rate, "round_index": plan.round_index,
                    "cap_wait_s": wait / NS, "client_lag_s": row["lag_s"] - wait / NS}
            writer.append_jsonl("schedule.jsonl", row)
        if plan.round_index < 0:
            return
        wave, unit = round_check(cell_id(plan.rate), plan.round_index, cap or 0, arrival_rate_req_s=plan.rate)
        session.record_check(wave, unit, unit_edges(sent.start_ns, sent.records))
        fault_point("sweep:round-written")
        row = round_row(self.spec, plan.rate, plan.round_index, sent.records, sent.start_ns, sched,
                        "ok" if all(r.ok for r in sent.records) else "failed")
        writer.append_event({"event": "round", "round_id": row["round_id"], "status": row["status"],
                             "start_ns": sent.start_ns, "t_ns": time.perf_counter_ns()})
        self.rounds.append(row)
        self.by_rate.setdefault(plan.rate, []).extend(sent.records)
        win = round_window(ids.wave_id(row["cell_id"], plan.round_index, 0), row["cell_id"],
                           self.spec.arrivals.max_concurrency or 0, sent.start_ns, sent.records,
                           round_id=row["round_id"], arrival_rate_req_s=plan.rate)
        self.energy_windows.extend([win] if win is not None else [])
        self.starts.setdefault(plan.rate, []).append(sent.start_ns)
        self.report(SweepRoundDone(row))
        fault_point("sweep:round-ended")

    @property
    def _slo(self) -> sw.Slo:
        return slo_of(self.spec)

    async def _run(self, svc: RunningService, session: ServiceSession, writer: ArchiveWriter) -> None:
        cap = self.spec.arrivals.max_concurrency
        for plan in self.plan.rounds:
            if self.stopped is not None:
                if plan.rate not in self.stopped["not_run"]:
                    self.stopped["not_run"].append(plan.rate)
                continue
            n = cap or max(1, min(len(plan.case_ids), MAX_CONNECTIONS))
            async with load_client(svc.url, self.spec.service, concurrency=n,
                                   timeout_s=self.spec.request_timeout_s, limits=self.spec.client) as client:
                await self.run_round(client, writer, plan, svc, session)
            if self.spec.stop_at_saturation and plan.round_index == self.spec.rounds - 1:
                self._maybe_stop(writer, plan.rate)
        if self.stopped is not None:
            writer.append_event({"event": "sweep-stopped", **self.stopped, "t_ns": time.perf_counter_ns()})

    def _maybe_stop(self, writer: ArchiveWriter, rate: float) -> None:
        """After the last round of ``rate``: stop when any of its rounds was over-saturated."""
        hit = [r["round_id"] for r in self.rounds if r["arrival_rate_req_s"] == rate and r.get("saturated") is True]
        if hit:
            self.stopped = stopped_record(rate, hit)
            self.report(SweepStopped(rate, tuple(hit)))

    def cells(self) -> list[dict[str, Any]]:
        """One row per rate: medians of the round values plus the rate's pooled latency."""
        return sweep_cells(self.spec, self.rounds, self.by_rate, self.starts)

    def run(self) -> SweepOutcome:
        """Run the sweep; always finalize an archive, whatever happens."""
        s = self.spec
        writer, anchor = open_writer(
            self.workspace, self.token, spec=s, spec_bytes=self.raw,
            corpora={"sweep": self.corpus.identity()},
            governance=self.governance,
            extra_files={"arrivals.json": self.plan.to_json(),
                         "plan.json": {"plan_id": self.plan.plan_id, "rates": s.rate_list,
                                       "slo": self._slo.to_json()}})
        session = ServiceSession(writer, self.workspace, claim_class=s.claim_class, sentinels=self.sentinels,
                                 reporter=self.report, request_timeout_s=s.request_timeout_s)
        self.report(SweepPlanReady(self.plan))
        started: list[RunningService] = []
        power = PowerLog(writer)

        def body() -> None:
            started.append(session.start(s.service, s.service.name, {"start_index": 1}))
            power.start(started[0])
            with asyncio.Runner(loop_factory=new_event_loop) as runner:
                runner.run(self._run(started[0], session, writer))

        def after() -> None:  # sentinels after measurement; a Ctrl-C skips them
            if started:
                session.after_checks(started[0])

        return drive(writer, body, kept="every finished round is kept", what="sweep", after=after,
                     clean_up=lambda: self._clean_up(power, session),
                     finalize=lambda status, error: self._finalize(writer, status, error, anchor, session))

    def _clean_up(self, power: PowerLog, session: ServiceSession) -> None:
        """Store the power samples and each measured round's energy (``energy.json``), then stop the
        service."""
        try:
            power.write(self.energy_windows)
        finally:
            session.stop_all()

    def _finalize(self, writer: ArchiveWriter, status: str, error: DsvError | None, anchor: dict[str, Any],
                  session: ServiceSession) -> SweepOutcome:
        s = self.spec
        cells = self.cells()
        labels = run_labels(s.labels, [s.service.backend], session.services)
        if session.oracles_failed:
            labels.append("oracle-failed")
        run = one_service_run_block(s, self.token, str(anchor.get("wall_iso", "")), session.services, labels=labels,
                              error=error.message if error else None, oracles_failed=session.oracles_failed,
                              plan_id=self.plan.plan_id)
        done = finalize_sweep(writer, self.workspace, s, self.plan.plan_id, self.rounds, cells, status, run,
                              stopped=self.stopped)
        return SweepOutcome(done, cells, self.rounds, error, self.stopped)




def finalize_sweep(writer: ArchiveWriter, workspace: Path, spec: SweepSpec, plan_id: str,
                   rounds: Sequence[dict[str, Any]], cells: Sequence[dict[str, Any]], status: str,
                   run: RunBlock, *, stopped: dict[str, Any] | None = None) -> Finished:
    """Write the sweep's result tables (``cells``, ``rounds``) and ``sweep.json`` (with ``stopped``
    when ``stop_at_saturation`` ended it early), then finish the archive (finalize, ledgers, evidence)."""
    extra = {"campaign": spec.name, "claim_class": spec.claim_class, "protocol_class": spec.protocol_class}
    if cells:
        writer.write_table("cells.parquet", pa.Table.from_pylist([c | extra for c in cells]))
    if rounds:
        writer.write_table("rounds.parquet", pa.Table.from_pylist([r | extra for r in rounds]))
    slo = slo_of(spec)
    knee = sw.knee([{k: c[k] for k in ("arrival_rate_req_s", "goodput_median_req_s")} for c in cells])
    writer.write_json("sweep.json", {"cells": list(cells), "rounds": list(rounds), "knee": knee,
                                     "slo": slo.to_json(), "plan_id": plan_id, "goodput_definition": sw.__doc__,
                                     "stopped": stopped})
    return finish(writer, workspace, status, run)


def recover_sweep(workspace: Path, writer: ArchiveWriter, spec_json: dict[str, Any]) -> Finished:
    """Finalize a killed sweep's partial (``harness.run.kinds``: the rate-sweep recovery) from its
    streamed records as a sweep: status ``partial``, label ``recovered``, kind and protocol class
    ``rate-sweep``; each measured round's row and each rate's cell computed as the run computes them
    (:func:`round_row`, :func:`sweep_cells`), a round that never reported its end marked ``incomplete``."""
    spec = SweepSpec.model_validate(spec_json)
    d = writer.dir
    rounds, by_rate, starts = recovered_rounds(writer, spec)
    plan_id = str(read_json_or(d, "plan.json", {}).get("plan_id", ""))
    run = recovered_run_block(writer, spec, plan_id=plan_id)
    stop = next((e for e in read_events(d) if e.get("event") == "sweep-stopped"), None)
    stopped = {k: v for k, v in stop.items() if k not in ("event", "t_ns")} if stop else None
    return finalize_sweep(writer, workspace, spec, plan_id, rounds, sweep_cells(spec, rounds, by_rate, starts),
                          "partial", run, stopped=stopped)


def recovered_rounds(writer: ArchiveWriter, spec: SweepSpec
                     ) -> tuple[list[dict[str, Any]], dict[float, list[RequestRecord]], dict[float, list[int]]]:
    """The measured rounds of ``spec``'s rates found in a partial's streamed records (rows as
    :func:`round_row` computes them, a round without its ``round`` event ``incomplete``), with each
    rate's records and round starts (what :func:`sweep_cells` takes)."""
    d = writer.dir
    events = read_events(d)
    ended = {str(e["round_id"]): e for e in events if e.get("event") == "round" and e.get("round_id")}
    sched: dict[tuple[str, int], list[dict[str, Any]]] = {}
    path = d / "schedule.jsonl"
    for line in path.read_text(encoding="utf-8", errors="replace").splitlines() if path.is_file() else []:
        with contextlib.suppress(ValueError, KeyError, TypeError):
            r = json.loads(line)
            sched.setdefault((str(r["cell_id"]), int(r["round_index"])), []).append(r)
    recs: dict[tuple[str, int], list[RequestRecord]] = {}
    for rec in writer.streamed_records():
        if rec.phase == "measured":
            recs.setdefault((rec.cell_id, rec.round_index), []).append(rec)
    rounds: list[dict[str, Any]] = []
    by_rate: dict[float, list[RequestRecord]] = {}
    starts: dict[float, list[int]] = {}
    for rate in spec.rate_list:
        for k in range(spec.rounds):
            got = recs.get((cell_id(rate), k))
            if not got:
                continue
            ev = ended.get(ids.round_id(cell_id(rate), k))
            start_ns = int(ev["start_ns"]) if ev and ev.get("start_ns") else min(r.send_ns for r in got)
            status = str(ev.get("status", "incomplete")) if ev else "incomplete"
            rounds.append(round_row(spec, rate, k, got, start_ns, sched.get((cell_id(rate), k), []), status))
            by_rate.setdefault(rate, []).extend(got)
            starts.setdefault(rate, []).append(start_ns)
    return rounds, by_rate, starts


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
