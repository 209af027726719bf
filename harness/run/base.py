"""What the runners share to start and end a run (edge module: files, processes, HTTP).

- :func:`open_run`: the archive opened with the run's preamble (spec, corpora, environment,
  governance, the kind's extra files, ``run-start``; :func:`harness.run.session.open_writer`), the
  :class:`~harness.run.session.ServiceSession` that starts and records its services, and the run's
  :class:`~harness.run.energy.PowerLog`. Formal matrices, ABBA screens, matched runs, rate sweeps,
  SLA searches and trace replays open their archives through it (a quick screen attaches to a
  running server and writes its own preamble).
- :class:`OneServiceRunner`: a run on one service started once (rate sweeps, SLA searches, trace
  replays): the inputs checked before anything starts (governance, sentinels, prompt texts), the
  service started with ``start_index`` 1 and power sampled on it, the kind's measurement run in a
  fresh event loop, the sentinels after measurement (skipped when interrupted), the power samples
  and energy windows stored and every service stopped at clean-up, and the end through the one run
  skeleton (:func:`harness.run.skeleton.drive`) into the kind's ``finalize``.
"""

from __future__ import annotations

import asyncio
import secrets
from abc import ABC, abstractmethod
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, ClassVar, Generic, TypeVar

from harness.aio import new_event_loop
from harness.errors import DsvError
from harness.inputs.spec import ClaimClass, KindSpec, ReplaySpec, SlaSpec, SweepSpec
from harness.oracle.model import Oracle
from harness.oracle.sentinels import load_sentinels
from harness.run.energy import PowerLog, Window
from harness.run.events import Reporter
from harness.run.prompts import prompt_texts
from harness.run.session import ServiceSession, check_governance, one_service_run_block, open_writer, run_labels
from harness.run.skeleton import OutcomeT, drive
from harness.service.launch.manager import RunningService
from harness.store.archive import ArchiveWriter
from harness.store.runblock import RunBlock


@dataclass(frozen=True)
class OpenedRun:
    """A run whose archive is open: the partial's writer, the run-start wall anchor, the service
    session and the power log (nothing sampled until ``power.start``)."""

    writer: ArchiveWriter
    anchor: dict[str, Any]
    session: ServiceSession
    power: PowerLog

    @property
    def created_wall(self) -> str:
        """The run's start (wall clock, ISO), as the run block records it."""
        return str(self.anchor.get("wall_iso", ""))


def open_run(  # noqa: PLR0913 - open_writer's preamble plus the session's settings
        workspace: Path, token: str, spec: KindSpec, *, spec_bytes: bytes | None, corpora: Mapping[str, Any],
        governance: Mapping[str, Any], claim_class: ClaimClass, sentinels: Sequence[Oracle], reporter: Reporter,
        extra_files: Mapping[str, Any] = {}, resumed_from: str | None = None, services: Sequence[dict[str, Any]] = (),
        service_json_extra: Callable[[], dict[str, Any]] = dict) -> OpenedRun:
    """Open the run's partial archive with its preamble (``open_writer``: a resumed archive is claimed
    first), and the session (``claim_class`` verified on every service it starts, ``services`` the ones
    a resumed run inherits, ``service_json_extra()`` merged into ``service.json``) and power log that
    write into it. Nothing is started."""
    writer, anchor = open_writer(workspace, token, spec=spec, spec_bytes=spec_bytes, corpora=corpora,
                                 governance=governance, extra_files=extra_files, resumed_from=resumed_from)
    session = ServiceSession(writer, workspace, claim_class=claim_class, sentinels=sentinels, reporter=reporter,
                             services=services, service_json_extra=service_json_extra,
                             request_timeout_s=spec.request_timeout_s)
    return OpenedRun(writer, anchor, session, PowerLog(writer))


SpecT = TypeVar("SpecT", bound=SweepSpec | SlaSpec | ReplaySpec)


class OneServiceRunner(ABC, Generic[SpecT, OutcomeT]):
    """Runs one kind on one service started once into an archive (module docstring). A kind gives
    its corpora and extra preamble files, what it does once the archive is open (:meth:`opened`), its
    measurement (:meth:`measure`), the energy windows of what it measured and its ``finalize``; the
    class attributes name the run in an interrupt's message (``what``, ``kept``) and whether power is
    sampled (``samples_power``)."""

    what: ClassVar[str]
    kept: ClassVar[str]
    samples_power: ClassVar[bool] = True

    def __init__(self, spec: SpecT, workspace: Path, *, raw: bytes | None, source: str, reporter: Reporter) -> None:
        self.spec, self.workspace, self.raw, self.report = spec, workspace, raw, reporter
        self.governance = check_governance(spec, workspace, source)
        self.sentinels = load_sentinels([Path(p) for p in spec.oracles])
        self.token = secrets.token_hex(8)
        self.texts = prompt_texts(spec.service)

    @abstractmethod
    def corpora(self) -> dict[str, Any]:
        """``corpora.json``: each corpus's identity by its role."""

    def extra_files(self) -> dict[str, Any]:
        """The kind's files of the preamble (name -> JSON), written before the service starts."""
        return {}

    def opened(self, run: OpenedRun) -> None:
        """Called once the archive is open, before the service starts."""

    @abstractmethod
    async def measure(self, svc: RunningService, run: OpenedRun) -> None:
        """The kind's measurement on the started service."""

    def energy_windows(self) -> Sequence[Window]:
        """The windows ``energy.json`` gives the energy of (read at clean-up)."""
        return ()

    @abstractmethod
    def finalize(self, run: OpenedRun, status: str, error: DsvError | None) -> OutcomeT:
        """Write the kind's result tables and finish the archive (inside the skeleton's critical section)."""

    def run_block(self, run: OpenedRun, error: DsvError | None, *, plan_id: str | None = None) -> RunBlock:
        """The run block: the spec's labels (``simulated``, ``oracle-failed`` where they apply), the
        session's services, the error that ended the run."""
        s, session = self.spec, run.session
        labels = run_labels(s.labels, [s.service.backend], session.services)
        if session.oracles_failed:
            labels.append("oracle-failed")
        return one_service_run_block(s, self.token, run.created_wall, session.services, labels=labels,
                                     error=error.message if error else None, oracles_failed=session.oracles_failed,
                                     plan_id=plan_id)

    def run(self) -> OutcomeT:
        """Run the kind; always finalize an archive once it is open, whatever happens."""
        s = self.spec
        run = open_run(self.workspace, self.token, s, spec_bytes=self.raw, corpora=self.corpora(),
                       governance=self.governance, claim_class=s.claim_class, sentinels=self.sentinels,
                       reporter=self.report, extra_files=self.extra_files())
        session = run.session
        self.opened(run)
        started: list[RunningService] = []

        def body() -> None:
            started.append(session.start(s.service, s.service.name, {"start_index": 1}))
            if self.samples_power:
                run.power.start(started[0])
            with asyncio.Runner(loop_factory=new_event_loop) as runner:
                runner.run(self.measure(started[0], run))

        def after() -> None:  # sentinels after measurement; a Ctrl-C skips them
            if started:
                session.after_checks(started[0])

        def clean_up() -> None:  # the power samples and each measured unit's energy, then stop the service
            try:
                if self.samples_power:
                    run.power.write(self.energy_windows())
            finally:
                session.stop_all()

        return drive(run.writer, body, kept=self.kept, what=self.what, after=after, clean_up=clean_up,
                     finalize=lambda status, error: self.finalize(run, status, error))
