"""The open-loop rounds of offered rates, as a rate sweep and an SLA search's probes run them
(edge module: HTTP, files, clock).

:class:`RateRounds` is the prober both kinds own: it runs one planned round
(:class:`~harness.inputs.arrivals.RoundPlan`) on a service through the open-loop sender
(:func:`harness.run.open_loop.send_open_loop`) and keeps what the kind's tables are computed from.
Per round: its requests built from the corpus cases the plan names, its records archived (one wave),
its ``schedule.jsonl`` rows; a measured round (``round_index >= 0``) is measured with the session's
self-check (client loop, and the simulator's late steps before and after; one ``wave_checks.jsonl``
row under the round's wave id), appends a ``round`` event (id, status, start) and keeps its
``sweep_rounds`` row (:func:`harness.run.sweep_rows.round_row`), its records, start and energy window.
A warmup round (``round_index = -1``) is archived and its schedule kept, never counted.

:func:`recovered_rounds` reads the same rows back from a killed run's partial (a round without its
``round`` event ``incomplete``); :func:`write_rate_tables` writes the kind's cells and rounds tables
(``harness.kinds``: a sweep's ``sweep_cells.parquet`` / ``sweep_rounds.parquet``, an SLA search's
``sla_cells.parquet`` / ``sla_rounds.parquet``).
"""

from __future__ import annotations

import contextlib
import time
from collections.abc import Awaitable, Sequence
from dataclasses import dataclass
from typing import Any

from harness import ids
from harness.errors import DsvError
from harness.evidence import CLIENT_CPU_SHARE, SIM_LATENESS_FRACTION, STALL_FLOOR_S
from harness.ids import RequestIdentity
from harness.inputs.arrivals import RoundPlan
from harness.inputs.corpus import Case, Corpus, cache_salt
from harness.inputs.spec import SlaSpec, SweepSpec
from harness.interrupts import fault_point
from harness.kinds import kind_info, table_file
from harness.load.driver import LoadClient, WaveRequest
from harness.measure.rows import rows_table
from harness.measure.unit_load import LoadLimits
from harness.records import RequestRecord
from harness.run.energy import Window, round_window
from harness.run.events import Reporter, SweepRoundDone, SweepRoundStart
from harness.run.open_loop import Sent, connections, round_check, schedule_rows, send_open_loop, unit_edges
from harness.run.partial import read_events, read_jsonl
from harness.run.prompts import PromptText, load_client
from harness.run.session import ServiceSession
from harness.run.skeleton import Finished
from harness.run.sweep_rows import cell_id, round_row, sweep_cells
from harness.service.launch.manager import RunningService
from harness.store.archive import ArchiveWriter

LOAD_LIMITS = LoadLimits(sim_lateness_fraction=SIM_LATENESS_FRACTION, stall_s=STALL_FLOOR_S,
                         loop_cpu_share=CLIENT_CPU_SHARE)
"""When a measured round is invalid for load (harness.measure.unit_load): the thresholds of the rules
``sim-lateness``, ``client-stalled`` and ``client-bound``."""


class RateRounds:
    """Runs planned open-loop rounds on a service and keeps their rows (module docstring).

    ``spec`` gives what every round's requests and rows read (request settings, the cap, SLOs,
    schedule tolerance; its rate list is not read here); ``token`` is the run's."""

    def __init__(self, spec: SweepSpec, corpus: Corpus, token: str, texts: PromptText | None,
                 reporter: Reporter) -> None:
        self.spec, self.token, self.texts, self.report = spec, token, texts, reporter
        self.cases = {c.case_id: c for c in corpus.cases}
        self.corpus_sha256 = corpus.manifest_sha256
        self.rounds: list[dict[str, Any]] = []  # every measured round's row, in run order
        self.by_rate: dict[float, list[RequestRecord]] = {}
        self.starts: dict[float, list[int]] = {}
        self.energy_windows: list[Window] = []  # each measured round's window (harness.run.energy)

    def cells(self, view: SweepSpec) -> list[dict[str, Any]]:
        """One ``sweep_cells`` row per rate of ``view`` that has measured rounds."""
        return sweep_cells(view, self.rounds, self.by_rate, self.starts)

    def request(self, case: Case, rate: float, k: int, i: int) -> WaveRequest:
        """Request ``i`` of round ``k`` (warmup: ``k = -1``) at ``rate``: one wave per round."""
        s = self.spec
        declared = case.output_tokens if s.use_case_output_lengths else None
        cid = cell_id(rate)
        wave = ids.wave_id(cid, k, 0)
        return WaveRequest(
            input_ids=case.ids_list(), rid=ids.sweep_request_id(self.token, cid, k, i),
            max_new_tokens=min(declared, s.max_new_tokens) if declared else s.max_new_tokens,
            ignore_eos=True if declared else s.ignore_eos,
            prompt_text=self.texts(case) if self.texts else None,
            cache_salt=cache_salt(self.token, cid, k, i),
            identity=RequestIdentity(run_id=self.token, cell_id=cid, round_index=k, wave_id=wave, wave_index=0,
                                     phase="warmup" if k < 0 else "measured", workload="sweep",
                                     case_id=case.case_id, input_hash=case.sha256[:16], request_index=i,
                                     corpus_sha256=self.corpus_sha256),
            concurrency=s.arrivals.max_concurrency or 0)

    async def measure(self, svc: RunningService, session: ServiceSession, writer: ArchiveWriter,
                      plan: RoundPlan) -> None:
        """Run one planned round on ``svc`` with a client of its own (:meth:`run_round`)."""
        s = self.spec
        async with load_client(svc.url, s.service, concurrency=connections(s.arrivals.max_concurrency,
                                                                           len(plan.case_ids)),
                               timeout_s=s.request_timeout_s, limits=s.client) as client:
            await self.run_round(client, writer, plan, svc, session)

    async def run_round(self, client: LoadClient, writer: ArchiveWriter, plan: RoundPlan, svc: RunningService,
                        session: ServiceSession) -> None:
        """Send one planned round open-loop through ``client`` and archive it (module docstring)."""
        reqs = [self.request(self.cases[c], plan.rate, plan.round_index, i) for i, c in enumerate(plan.case_ids)]
        self.report(SweepRoundStart(plan.rate, plan.round_index, len(reqs)))
        cap = self.spec.arrivals.max_concurrency

        def send() -> Awaitable[Sent]:
            return send_open_loop(client, reqs, plan.offsets_s, cap)

        sent = await (send() if plan.round_index < 0 else session.selfcheck.around(svc, client, send))
        writer.write_wave(sent.records)
        cid = cell_id(plan.rate)
        sched = schedule_rows(sent.planned_ns, sent.records, sent.cap_wait_ns,
                              lambda i: {"cell_id": cid, "rate": plan.rate, "round_index": plan.round_index})
        for row in sched:
            writer.append_jsonl("schedule.jsonl", row)
        if plan.round_index < 0:
            return
        wave, unit = round_check(cid, plan.round_index, cap or 0, arrival_rate_req_s=plan.rate)
        session.record_check(wave, unit, unit_edges(sent.start_ns, sent.records))
        fault_point("sweep:round-written")
        row = round_row(self.spec, plan.rate, plan.round_index, sent.records, sent.start_ns, sched,
                        "ok" if all(r.ok for r in sent.records) else "failed")
        writer.append_event({"event": "round", "round_id": row["round_id"], "status": row["status"],
                             "start_ns": sent.start_ns, "t_ns": time.perf_counter_ns()})
        self.rounds.append(row)
        self.by_rate.setdefault(plan.rate, []).extend(sent.records)
        win = round_window(ids.wave_id(row["cell_id"], plan.round_index, 0), row["cell_id"], cap or 0,
                           sent.start_ns, sent.records, round_id=row["round_id"], arrival_rate_req_s=plan.rate)
        self.energy_windows.extend([win] if win is not None else [])
        self.starts.setdefault(plan.rate, []).append(sent.start_ns)
        self.report(SweepRoundDone(row))
        fault_point("sweep:round-ended")


def recovered_rounds(writer: ArchiveWriter, spec: SweepSpec
                     ) -> tuple[list[dict[str, Any]], dict[float, list[RequestRecord]], dict[float, list[int]]]:
    """The measured rounds of ``spec``'s rates found in a partial's streamed records (rows as
    :func:`~harness.run.sweep_rows.round_row` computes them, a round without its ``round`` event
    ``incomplete``), with each rate's records and round starts (what ``sweep_cells`` takes)."""
    d = writer.dir
    ended = {str(e["round_id"]): e for e in read_events(d) if e.get("event") == "round" and e.get("round_id")}
    sched: dict[tuple[str, int], list[dict[str, Any]]] = {}
    for r in read_jsonl(d, "schedule.jsonl"):
        with contextlib.suppress(ValueError, KeyError, TypeError):
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


def write_rate_tables(writer: ArchiveWriter, spec: SweepSpec | SlaSpec, cells: Sequence[dict[str, Any]],
                      rounds: Sequence[dict[str, Any]]) -> dict[str, Any]:
    """Write the kind's cells and rounds tables (``KindInfo.cells`` / ``rounds``, each only when it
    has rows), every row with the run's campaign, claim class and protocol class; returns those
    columns (the kind's other tables carry them too)."""
    extra = {"campaign": spec.name, "claim_class": spec.claim_class, "protocol_class": spec.protocol_class}
    info = kind_info(spec.kind)
    if cells:
        writer.write_table(table_file(info.cells), rows_table("sweep_cells", cells, extra))
    if rounds:  # an SLA search's rounds are sweep rounds too (row model SweepRoundRow)
        writer.write_table(table_file(info.rounds), rows_table("sweep_rounds", rounds, extra))
    return extra


@dataclass
class RatesOutcome:
    """What a run of offered rates produced (a sweep, an SLA search): the finished archive (ledgers,
    findings), its per-rate cells and its measured rounds."""

    finished: Finished
    cells: list[dict[str, Any]]
    rounds: list[dict[str, Any]]
    error: DsvError | None = None

    @property
    def archive_id(self) -> str:
        """The finalized archive's id."""
        return self.finished.archive.archive_id
