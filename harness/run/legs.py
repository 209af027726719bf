"""What the leg runners share (ABBA screens, matched AR/SD runs; edge module: services, HTTP, files).

Both run the same fixed waves on a service per leg: warmups (kept, excluded), then ``waves_per_leg``
measured waves of ``concurrency`` requests, each wave archived and its server witness recorded. Shared
here: the fixed cases a workload names (:func:`fixed_cases`), the checked inputs (:class:`LegInputs`),
what an outcome offers (:class:`Outcome`: the archive id and the blocking findings), the per-leg service
bookkeeping (:func:`leg_service`), one leg's waves (:class:`LegWaves`, :func:`run_leg`) and how the legs
run and end (:func:`drive_legs`).
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Coroutine
from dataclasses import dataclass
from typing import Any

from harness.aio import new_event_loop
from harness.errors import DsvError, SpecError
from harness.evidence.findings import Finding
from harness.ids import leg_wave_id
from harness.inputs.corpus import Case, Corpus
from harness.inputs.spec import FixedWaves, LoadedSpec
from harness.oracle.model import Oracle
from harness.records import RequestRecord
from harness.run.prompts import PromptText, load_client
from harness.run.session import ServiceSession
from harness.run.skeleton import OutcomeT, drive
from harness.run.wave import WaveSpec, execute_wave, leg_waves
from harness.service.launch.manager import RunningService
from harness.store.archive import Archive, ArchiveWriter


def fixed_cases(corpus: Corpus, wl: FixedWaves) -> list[Case]:
    """The workload's fixed cases: those it lists, else the corpus's first ``concurrency`` (``SpecError``
    when the corpus has fewer)."""
    if wl.cases is not None:
        return [corpus.case(cid) for cid in wl.cases]
    if len(corpus.cases) < wl.concurrency:
        raise SpecError(f"corpus {corpus.name} has {len(corpus.cases)} cases; the workload needs "
                        f"{wl.concurrency}", hint="list case ids explicitly or lower concurrency")
    return list(corpus.cases[: wl.concurrency])


@dataclass(frozen=True)
class LegInputs:
    """What every leg run reads before it starts: the loaded spec, corpus, fixed cases, sentinels, the
    governance record and the prompt texts per arm (``None``: token ids are sent)."""

    loaded: LoadedSpec
    corpus: Corpus
    cases: list[Case]
    sentinels: list[Oracle]
    governance: dict[str, Any]
    texts: dict[str, PromptText | None]


class Outcome:
    """What every run outcome offers from its ``archive`` and ``findings`` fields."""

    archive: Archive
    findings: list[Finding]

    @property
    def archive_id(self) -> str:
        """The finalized archive's id."""
        return self.archive.archive_id

    @property
    def blocking(self) -> list[Finding]:
        """The evidence stage's blocking findings: any one makes the run's result rows invalid (a late
        simulator or a stalled client moved a wave's rate), so its verdict is not a claim."""
        return [f for f in self.findings if f.blocking]


def leg_service(svc: RunningService, session: ServiceSession, fresh: bool) -> dict[str, Any]:
    """A leg's service record: its PID and start time, its index in ``service.json``, whether the leg
    started it."""
    return {"pid": svc.process.pid if svc.process else None,
            "create_time": svc.process.create_time if svc.process else None,
            "service_index": len(session.services), "fresh_start": fresh}


@dataclass(frozen=True)
class LegWaves:
    """The waves every leg of one run sends: the run spec (its request timeout and client limits), its
    workload, the run token and the fixed cases, with the manifest hash of the corpus they come from."""

    spec: Any
    workload: FixedWaves
    run_id: str
    cases: list[Case]
    corpus_sha256: str


async def run_leg(writer: ArchiveWriter, session: ServiceSession, svc: RunningService, waves: LegWaves, leg: str, *,
                  round_index: int, text: PromptText | None, measured: Callable[[int, list[RequestRecord]], None],
                  kept: str, on_live: Callable[[int, str, Any], None] | None = None) -> None:
    """One leg's warmup and measured waves on ``svc``, each wave archived and witnessed;
    ``measured(j, records)`` is called per measured wave, ``on_live(j, phase, progress)`` while one runs."""
    wl = waves.workload
    async with load_client(svc.url, svc.profile, concurrency=wl.concurrency, timeout_s=waves.spec.request_timeout_s,
                           limits=waves.spec.client) as client:
        async def wave(j: int, phase: str) -> list[RequestRecord]:
            wave_id = leg_wave_id(leg, "warmup" if phase == "warmup" else "measured", j)
            ws = WaveSpec(run_id=waves.run_id, cell_id=leg, wave_id=wave_id, round_index=round_index, wave_index=j,
                          phase=phase, workload="decode", concurrency=wl.concurrency,
                          max_new_tokens=wl.max_new_tokens, ignore_eos=wl.ignore_eos, cache=wl.cache,
                          corpus_sha256=waves.corpus_sha256)
            live = (lambda t: on_live(j, phase, t)) if on_live is not None else None
            recs = await execute_wave(svc, client, ws, waves.cases, session.witness, text,
                                      selfcheck=session.selfcheck, on_live=live)
            writer.write_wave(recs)
            session.record_witness(recs, wave_id, wl.concurrency)
            return recs

        await leg_waves(svc, wave, warmup_waves=wl.warmup_waves, waves_per_leg=wl.waves_per_leg, measured=measured,
                        kept=kept)


def drive_legs(writer: ArchiveWriter, legs: Callable[[], Coroutine[Any, Any, None]], *,
               current: Callable[[], str | None], what: str, clean_up: Callable[[], None],
               finalize: Callable[[str, DsvError | None], OutcomeT]) -> OutcomeT:
    """Run the legs (``legs()``, in a fresh event loop) and end the run through the one skeleton
    (:func:`harness.run.skeleton.drive`); a failure or an interrupt names the leg it hit (``current()``)."""
    def body() -> None:
        with asyncio.Runner(loop_factory=new_event_loop) as runner:
            runner.run(legs())

    def failed(exc: DsvError) -> DsvError:
        exc.message = f"leg {current()} failed: {exc.message}"
        return exc

    return drive(writer, body, kept=lambda: f"during leg {current()}; finished legs kept", what=what, failed=failed,
                 clean_up=clean_up, finalize=finalize)
