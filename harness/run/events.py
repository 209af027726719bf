"""Typed progress events: what the runners tell a ``Reporter`` while they run (pure values).

One frozen dataclass per event; ``kind`` (a class attribute) keeps the event's name as the runners
and logs spell it. Events are for display only: nothing recorded in an archive comes from them.
A ``Reporter`` is any callable taking one event; reporters dispatch with ``match event:``.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, ClassVar, Literal, Protocol

if TYPE_CHECKING:
    from harness.inputs.plan import CellPlan, Plan
    from harness.inputs.spec import AbbaSpec, MatchedSdSpec, ServiceProfile
    from harness.inputs.sweep_plan import SweepPlan
    from harness.load.live import LiveTally
    from harness.records import RequestRecord
    from harness.service.launch.manager import RunningService

__all__ = [
    "AbbaStart", "AbbaWave", "CellSkipped", "CellStart", "Event", "LegWaveLive", "MatchedLegWave", "MatchedStart",
    "PlanReady", "QuickStart", "RoundDone", "ServiceReady", "ServiceStarting", "ServiceStopped", "SlaProbeDone",
    "SweepPlanReady", "SweepRoundDone", "SweepRoundStart", "SweepStopped", "WarmupDone", "WaveDone", "WaveLive",
    "silent",
]

RoundStatus = Literal["ok", "short", "failed"]


@dataclass(frozen=True)
class PlanReady:
    """A formal campaign's plan, before any service starts."""

    kind: ClassVar[str] = "plan"
    plan: Plan


@dataclass(frozen=True)
class ServiceStarting:
    """A service is being launched (or attached); ``leg`` names the ABBA leg that needs it."""

    kind: ClassVar[str] = "service-starting"
    profile: ServiceProfile
    leg: str | None = None


@dataclass(frozen=True)
class ServiceReady:
    """A service answers and its identity was verified."""

    kind: ClassVar[str] = "service-ready"
    service: RunningService
    leg: str | None = None


@dataclass(frozen=True)
class ServiceStopped:
    """A service was stopped, or (``detached``, not owned) left running."""

    kind: ClassVar[str] = "service-stopped"
    service: RunningService | None
    detached: bool = False


@dataclass(frozen=True)
class CellStart:
    """A formal cell starts; ``rounds`` are the 0-based rounds still to measure."""

    kind: ClassVar[str] = "cell-start"
    cell: CellPlan
    rounds: tuple[int, ...]


@dataclass(frozen=True)
class CellSkipped:
    """A formal cell already complete in the resumed archive."""

    kind: ClassVar[str] = "cell-skipped"
    cell: CellPlan


@dataclass(frozen=True)
class WaveLive:
    """A running formal wave's provisional tally (about 4 Hz); ``round`` is -1 for a warmup."""

    kind: ClassVar[str] = "wave-live"
    cell: CellPlan
    round: int
    wave: int
    phase: str
    tally: LiveTally


@dataclass(frozen=True)
class WarmupDone:
    """Warmup wave ``wave`` (0-based) of a cell ended; its records are kept, never counted."""

    kind: ClassVar[str] = "warmup-done"
    cell: CellPlan
    wave: int
    records: Sequence[RequestRecord] = ()


@dataclass(frozen=True)
class WaveDone:
    """Measured wave ``wave`` of round ``round`` (attempt ``attempt``) ended. ``resident_s``: the
    round's resident seconds so far; ``round_rate``/``http_rate``: the round's rates so far (tok/s)."""

    kind: ClassVar[str] = "wave-done"
    cell: CellPlan
    round: int
    attempt: int
    wave: int
    resident_s: float
    round_rate: float
    http_rate: float
    records: Sequence[RequestRecord] = ()


@dataclass(frozen=True)
class RoundDone:
    """A measured round ended with ``status``; ``rate`` in tok/s (NaN when none); ``error`` says
    why a failed round failed."""

    kind: ClassVar[str] = "round-done"
    cell: CellPlan
    round: int
    status: RoundStatus
    rate: float
    error: str | None = None
    resident_s: float | None = None


@dataclass(frozen=True)
class AbbaStart:
    """An ABBA screen starts, with the declared and undeclared profile differences."""

    kind: ClassVar[str] = "abba-start"
    spec: AbbaSpec
    declared: tuple[str, ...] = ()
    undeclared: tuple[str, ...] = ()


@dataclass(frozen=True)
class AbbaWave:
    """A measured wave of leg ``leg`` ended: its resident and HTTP output rates (tok/s)."""

    kind: ClassVar[str] = "abba-wave"
    leg: str
    wave: int
    resident: float
    http: float


@dataclass(frozen=True)
class MatchedStart:
    """A matched AR/SD run starts, with the declared profile differences."""

    kind: ClassVar[str] = "matched-start"
    spec: MatchedSdSpec
    declared: tuple[str, ...] = ()


@dataclass(frozen=True)
class MatchedLegWave:
    """A measured wave of matched leg ``leg`` ended: its resident rate (tok/s) and, for a speculative
    leg whose server reported counts, its tokens per verify step (NaN otherwise)."""

    kind: ClassVar[str] = "matched-wave"
    leg: str
    wave: int
    resident: float
    tokens_per_step: float


@dataclass(frozen=True)
class LegWaveLive:
    """A running ABBA wave's provisional tally (about 4 Hz)."""

    kind: ClassVar[str] = "wave-live"
    leg: str
    wave: int
    phase: str
    tally: LiveTally


@dataclass(frozen=True)
class SweepPlanReady:
    """A rate sweep's plan, before its service starts."""

    kind: ClassVar[str] = "sweep-plan"
    plan: SweepPlan


@dataclass(frozen=True)
class SweepRoundStart:
    """A sweep round at ``rate`` req/s starts with ``n`` requests (``round_index`` -1: warmup)."""

    kind: ClassVar[str] = "sweep-round-start"
    rate: float
    round_index: int
    n: int


@dataclass(frozen=True)
class SweepRoundDone:
    """A measured sweep round ended; ``row`` is its results row (harness.run.sweep)."""

    kind: ClassVar[str] = "sweep-round-done"
    row: dict[str, Any] = field(default_factory=dict)


@dataclass(frozen=True)
class SweepStopped:
    """``stop_at_saturation`` ends the sweep after ``rate``: ``rounds`` of it were over-saturated."""

    kind: ClassVar[str] = "sweep-stopped"
    rate: float
    rounds: tuple[str, ...]


@dataclass(frozen=True)
class SlaProbeDone:
    """An SLA-search probe ended; ``row`` is its ``sla_probes`` row (harness.run.sla)."""

    kind: ClassVar[str] = "sla-probe-done"
    row: dict[str, Any] = field(default_factory=dict)


@dataclass(frozen=True)
class QuickStart:
    """A quick bench starts sending to ``url``."""

    kind: ClassVar[str] = "quick-start"
    url: str
    protocol: str
    simulated: bool
    num_prompts: int
    concurrency: int


@dataclass(frozen=True)
class QuickProgress:
    """``done`` of ``total`` quick-bench requests finished."""

    kind: ClassVar[str] = "quick-progress"
    done: int
    total: int


Event = (PlanReady | ServiceStarting | ServiceReady | ServiceStopped | CellStart | CellSkipped | WaveLive
         | WarmupDone | WaveDone | RoundDone | AbbaStart | AbbaWave | MatchedStart | MatchedLegWave | LegWaveLive
         | SweepPlanReady | SweepRoundStart | SweepRoundDone | SweepStopped | SlaProbeDone | QuickStart
         | QuickProgress)


class Reporter(Protocol):
    """Receives progress events, one at a time; the CLI renders them."""

    def __call__(self, event: Event) -> None: ...


def silent(event: Event) -> None:
    """The reporter that shows nothing."""
    return None
