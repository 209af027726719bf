"""Live progress display of a campaign run (rich progress bars, a ticking clock, ETA from the plan)."""

from __future__ import annotations

import math
from collections.abc import Callable
from typing import Any, Self

from rich.console import Console, Group
from rich.live import Live
from rich.progress import (
    BarColumn,
    Progress,
    ProgressColumn,
    Task,
    TaskID,
    TaskProgressColumn,
    TextColumn,
    TimeElapsedColumn,
)
from rich.text import Text

from harness.cli.render import fmt
from harness.run.events import (
    AbbaStart,
    AbbaWave,
    CellSkipped,
    CellStart,
    Event,
    LegWaveLive,
    MatchedLegWave,
    MatchedStart,
    PlanReady,
    RoundDone,
    ServiceReady,
    ServiceStarting,
    ServiceStopped,
    SweepPlanReady,
    SweepRoundDone,
    SweepRoundStart,
    SweepStopped,
    WarmupDone,
    WaveDone,
    WaveLive,
)

_STATUS_STYLE = {"ok": "green", "failed": "bold red", "short": "yellow"}


def round_line(e: RoundDone) -> Text:
    """The line printed when a round ends: label, rate and its status in brackets (built as
    ``Text``, so ``[ok]`` is shown literally instead of being read as console markup), plus the
    reason of a failed round."""
    line = Text(f"  {e.cell.label:<12} round {e.round + 1}: {fmt(e.rate)} tok/s ")
    line.append(f"[{e.status}]", style=_STATUS_STYLE.get(e.status, ""))
    if e.error:
        line.append(f" {e.error}")
    return line


def eta_s(total: float, done: float, elapsed_s: float, *, planned_seconds: bool) -> float | None:
    """Seconds left of a run measured in plan units (``total``/``done``: planned seconds when
    ``planned_seconds``, else cells). Once 10% is done the remaining units are scaled by the
    observed pace (elapsed per unit done); before that, one second per planned second, or unknown
    (None) when the plan has no time estimate."""
    remaining = max(total - done, 0.0)
    if remaining == 0.0:
        return 0.0
    if total > 0 and done > 0.1 * total and elapsed_s > 0:
        return remaining * elapsed_s / done
    return remaining if planned_seconds else None


def live_line(t: Any, workload: str) -> str:
    """The running wave's live tally (a ``harness.load.live.LiveTally``) as one line, labelled
    provisional: output tokens received, requests with their first token of all, requests ended and,
    for decode, the resident window so far and its rate (the recorded figures come from the records
    after the wave)."""
    line = f"live (provisional): {t.tokens:,} tok  {t.first}/{t.n} first {t.done} done"
    if workload == "prefill":
        return line
    return line + f"  resident +{t.resident_s:.1f} s  {fmt(t.rate)} tok/s"


def cell_fraction(cell: Any, rounds_done: int, waves: int, resident_s: float) -> float:
    """Share of a cell's measured work done (0..1): finished rounds plus the running round's share
    (prefill: its waves of ``waves_per_round``; decode: resident seconds of ``min_resident_seconds``)."""
    if cell.workload == "prefill":
        current = waves / max(cell.waves_per_round or 1, 1)
    else:
        need = cell.min_resident_seconds or 0.0
        current = resident_s / need if need > 0 else float(waves > 0)
    return float(min((rounds_done + min(current, 1.0)) / max(cell.rounds, 1), 1.0))


def _clock(seconds: float | None) -> str:
    if seconds is None:
        return "-:--:--"
    s = round(seconds)
    return f"{s // 3600}:{s % 3600 // 60:02d}:{s % 60:02d}"


class PlanEtaColumn(ProgressColumn):
    """Time left from the plan (:func:`eta_s`), re-evaluated at every refresh so it ticks."""

    def __init__(self, planned_seconds: bool) -> None:
        super().__init__()
        self.planned_seconds = planned_seconds

    def render(self, task: Task) -> Text:
        left = eta_s(task.total or 0.0, task.completed, task.elapsed or 0.0, planned_seconds=self.planned_seconds)
        return Text(f"ETA {_clock(left)}" if task.fields.get("eta", True) else "", style="progress.remaining")


class _Status:
    """The lines under the bars: current cell, its rounds' statuses, waves and rates (rendered at
    every refresh, so the figures are always the latest)."""

    def __init__(self, reporter: LiveReporter) -> None:
        self.r = reporter

    def __rich__(self) -> Text:
        s = self.r.state
        if "cell" not in s:
            return Text(s.get("phase", "preparing …"), style="dim")
        rounds = [Text(f"r{k + 1} ", style="dim").append(st, style=_STATUS_STYLE.get(st, "cyan"))
                  for k, st in sorted(s["rounds"].items())]
        text = Text(f"{s['cell']}  ")
        text.append(Text("  ").join(rounds) if rounds else Text("warmup", style="cyan"))
        nan = float("nan")
        cell = s["plan_cell"]
        live = s.get("live")
        if "round" not in s:
            text.append(f"\nwarmup: {s.get('warmups_done', 0)}/{cell.warmup_waves} waves done (kept, never counted)",
                        style="dim")
            if live is not None:
                text.append("\n" + live_line(live, cell.workload), style="dim")
            return text
        text.append(f"\nround {s.get('round', '-')}  wave {s.get('waves', 0)}  ")
        if cell.workload == "prefill":
            text.append(f"input {fmt(s.get('rate', nan))} tok/s")
        else:
            text.append(f"resident {fmt(s.get('resident_s', 0.0), 1)}/{cell.min_resident_seconds or 0:g} s  "
                        f"rate {fmt(s.get('rate', nan))}  HTTP {fmt(s.get('http', nan))} tok/s")
        if live is not None:
            text.append("\n" + live_line(live, cell.workload), style="dim")
        return text


class LiveReporter:
    """A run ``Reporter`` drawn with rich's progress components: an overall bar with elapsed time
    and an ETA from the plan's estimate, a bar for the current cell, the running round's status
    and rates, the running wave's live tally (``wave-live``, provisional; all ticking at 4 Hz), and
    one printed line per finished round."""

    def __init__(self, console: Console, title: str = "campaign",
                 get_time: Callable[[], float] | None = None) -> None:
        """``get_time``: the clock of the bars (seconds; default monotonic), injectable for tests."""
        self.console = console
        self.get_time = get_time
        self.title = title
        self.state: dict[str, Any] = {}
        self.progress: Progress | None = None
        self.live = Live(console=console, refresh_per_second=4, transient=True,
                         get_renderable=self._renderable)
        self.overall: TaskID | None = None
        self.cell_task: TaskID | None = None
        self.estimates: list[float] = []
        self.done_s = 0.0
        self.n_cells = 0

    def __enter__(self) -> LiveReporter:
        self.live.__enter__()
        return self

    def __exit__(self, *exc: object) -> None:
        self.live.__exit__(None, None, None)

    def _renderable(self) -> Group:
        parts: list[Any] = [self.progress] if self.progress is not None else []
        return Group(*parts, _Status(self))

    def _plan(self, plan: Any) -> None:
        est = plan.estimate_s
        self.console.print(f"plan {plan.plan_id}: {len(plan.cells)} cells"
                           + (f", estimated {est / 60:.1f} min" if est else ""))
        self.n_cells = len(plan.cells)
        timed = bool(plan.cell_estimates_s) and len(plan.cell_estimates_s) == self.n_cells
        self.estimates = list(plan.cell_estimates_s) if timed else [1.0] * self.n_cells
        self.progress = Progress(TextColumn("{task.description}"), BarColumn(bar_width=24), TaskProgressColumn(),
                                 TimeElapsedColumn(), PlanEtaColumn(planned_seconds=timed), console=self.console,
                                 auto_refresh=False, get_time=self.get_time)
        self.overall = self.progress.add_task(f"{self.title} {plan.plan_id}", total=sum(self.estimates) or 1.0)

    def _advance(self) -> None:
        """Move both bars to the current cell's share of its work."""
        s = self.state
        if self.progress is None or "cell_index" not in s:
            return
        i = s["cell_index"]
        if s.get("finished"):
            if self.overall is not None:
                self.progress.update(self.overall, completed=self.done_s)
            return
        done_rounds = sum(1 for st in s["rounds"].values() if st in ("ok", "short", "failed"))
        live = s.get("live") if "round" in s else None  # a warmup wave's window counts for nothing
        resident = s.get("resident_s", 0.0) + (live.resident_s if live is not None else 0.0)
        frac = cell_fraction(s["plan_cell"], done_rounds, s.get("round_waves", 0), resident)
        if self.cell_task is not None:
            self.progress.update(self.cell_task, completed=frac * s["plan_cell"].rounds)
        if self.overall is not None and i < len(self.estimates):
            self.progress.update(self.overall, completed=self.done_s + frac * self.estimates[i])

    def _cell_start(self, cell: Any, todo: list[int]) -> None:
        if self.progress is None:
            return
        if self.cell_task is not None:
            self.progress.remove_task(self.cell_task)
        rounds = {k: "ok" for k in range(cell.rounds) if k not in todo}
        self.state = {"cell": f"{cell.label} ({cell.cell_id})", "cell_index": cell.index, "plan_cell": cell,
                      "rounds": rounds, "waves": 0}
        self.cell_task = self.progress.add_task(f"{cell.index + 1}/{self.n_cells} {cell.label}",
                                                total=cell.rounds, eta=False)
        self._advance()

    def _cell_end(self, cell: Any, skipped: bool = False) -> None:
        if cell.index < len(self.estimates):
            if skipped and self.progress is not None and self.overall is not None:
                # a cell done in the resumed archive costs nothing now: drop it from the total
                task = self.progress.tasks[self.overall]
                self.progress.update(self.overall, total=max((task.total or 0.0) - self.estimates[cell.index], 1e-9))
            else:
                self.done_s += self.estimates[cell.index]
                self.state["finished"] = True
                if self.progress is not None and self.cell_task is not None:
                    self.progress.update(self.cell_task, completed=cell.rounds)

    def _live(self, e: WaveLive) -> None:
        """A running wave's provisional tally (``wave-live``, ~4 Hz): shown under the round line."""
        if "rounds" not in self.state:
            return
        self.state["live"] = e.tally
        if e.phase == "measured" and "round" not in self.state:  # the first round's first wave
            self.state["rounds"][e.round] = "running"
            self.state["round"] = f"{e.round + 1}/{e.cell.rounds}"

    def _wave_done(self, e: WaveDone) -> None:
        k = e.round
        if self.state.get("round_key") != (k, e.attempt):
            self.state.update(round_key=(k, e.attempt), round_waves=0)
        self.state["rounds"][k] = "running"
        self.state.pop("live", None)
        self.state.update(round=f"{k + 1}/{e.cell.rounds}" + (f" (attempt {e.attempt + 1})" if e.attempt else ""),
                          waves=e.wave + 1, round_waves=e.wave + 1, resident_s=e.resident_s,
                          rate=e.round_rate, http=e.http_rate)

    def _round_done(self, e: RoundDone) -> None:
        if "rounds" in self.state:
            self.state["rounds"][e.round] = e.status
            self.state.pop("live", None)
            nxt = e.round + 2
            self.state.update(round_waves=0, resident_s=0.0, waves=0, rate=float("nan"), http=float("nan"),
                              round=f"{nxt}/{e.cell.rounds} starting" if nxt <= e.cell.rounds else "done")
            if len(self.state["rounds"]) == e.cell.rounds and all(
                    st != "running" for st in self.state["rounds"].values()):
                self._cell_end(e.cell)
        self.console.print(round_line(e))

    def __call__(self, event: Event) -> None:
        match event:
            case PlanReady(plan=plan):
                self._plan(plan)
            case ServiceStarting(profile=profile):
                self.state["phase"] = f"starting service '{profile.name}' …"
                self.console.print(f"starting service '{profile.name}' (backend {profile.backend}) …")
            case ServiceReady(service=svc):
                pid = f", pid {svc.process.pid}" if svc.process else " (attached, not owned)"
                self.console.print(f"service ready at {svc.url}{pid}")
            case ServiceStopped(service=svc, detached=detached):
                where = f" at {svc.url}" if svc is not None else ""
                self.console.print(f"detached from the service{where} (not owned, left running)" if detached
                                   else "service stopped")
            case CellStart(cell=cell, rounds=rounds):
                self._cell_start(cell, list(rounds))
            case CellSkipped(cell=cell):
                self._cell_end(cell, skipped=True)
                self.console.print(f"[dim]{cell.label}: already complete in the resumed archive[/]")
            case WaveLive():
                self._live(event)
            case WarmupDone(wave=wave):
                self.state["warmups_done"] = wave + 1
                self.state.pop("live", None)
            case WaveDone():
                self._wave_done(event)
            case RoundDone():
                self._round_done(event)
        self._advance()
        self.live.refresh()


class _OneBar:
    """A live display of one bar (elapsed, ETA) over a status line; subclasses are ``Reporter`` s."""

    def __init__(self, console: Console, *, planned_seconds: bool, get_time: Callable[[], float] | None) -> None:
        self.console = console
        self.progress = Progress(TextColumn("{task.description}"), BarColumn(bar_width=24), TaskProgressColumn(),
                                 TimeElapsedColumn(), PlanEtaColumn(planned_seconds=planned_seconds),
                                 console=console, auto_refresh=False, get_time=get_time)
        self.status = Text("starting …", style="dim")
        self.live = Live(console=console, refresh_per_second=4, transient=True,
                         get_renderable=lambda: Group(self.progress, self.status))

    def __enter__(self) -> Self:
        self.live.__enter__()
        return self

    def __exit__(self, *exc: object) -> None:
        self.live.__exit__(None, None, None)


class AbbaLive(_OneBar):
    """A screen ``Reporter``: one bar over the four legs' measured waves (elapsed, ETA from the
    observed pace), the running leg and its last wave's rates, and one printed line per wave."""

    def __init__(self, console: Console, get_time: Callable[[], float] | None = None) -> None:
        super().__init__(console, planned_seconds=False, get_time=get_time)
        self.task: TaskID | None = None

    def __call__(self, event: Event) -> None:
        match event:
            case AbbaStart(spec=spec):
                self.console.print("ABBA screen: legs A1 -> B1 -> B2 -> A2")
                self.task = self.progress.add_task(f"screen {spec.name} C{spec.workload.concurrency}",
                                                   total=4 * spec.workload.waves_per_leg)
            case ServiceReady(service=svc, leg=leg):
                pid = getattr(getattr(svc, "process", None), "pid", None)
                self.console.print(f"leg {leg}: service ready at {getattr(svc, 'url', '')} (pid {pid})")
                self.status = Text(f"leg {leg}: warmup", style="cyan")
            case AbbaWave(leg=leg, wave=wave, resident=res, http=http):
                self.console.print(f"  {leg} wave {wave + 1}: resident {fmt(res)} tok/s, HTTP {fmt(http)} tok/s")
                self.status = Text(f"leg {leg}: wave {wave + 1} resident {fmt(res)} tok/s, HTTP {fmt(http)} tok/s")
                if self.task is not None:
                    self.progress.advance(self.task)
            case LegWaveLive(leg=leg, wave=wave, phase=phase, tally=tally):  # provisional, ~4 Hz
                what = "warmup" if phase == "warmup" else f"wave {wave + 1}"
                self.status = Text(f"leg {leg}: {what} {live_line(tally, 'decode')}", style="cyan")
        self.live.refresh()


class MatchedLive(_OneBar):
    """A matched AR/SD ``Reporter``: one bar over every leg's measured waves, the running leg, and one
    printed line per wave (resident rate; tokens per verify step on a speculative leg)."""

    def __init__(self, console: Console, get_time: Callable[[], float] | None = None) -> None:
        super().__init__(console, planned_seconds=False, get_time=get_time)
        self.task: TaskID | None = None

    def __call__(self, event: Event) -> None:
        match event:
            case MatchedStart(spec=spec):
                self.console.print("matched AR/SD run: legs " + " -> ".join(spec.order)
                                   + " (each on a freshly started service)")
                self.task = self.progress.add_task(f"matched {spec.name} C{spec.workload.concurrency}",
                                                   total=len(spec.order) * spec.workload.waves_per_leg)
            case ServiceReady(service=svc, leg=leg):
                pid = getattr(getattr(svc, "process", None), "pid", None)
                self.console.print(f"leg {leg}: service ready at {getattr(svc, 'url', '')} (pid {pid})")
                self.status = Text(f"leg {leg}: warmup", style="cyan")
            case MatchedLegWave(leg=leg, wave=wave, resident=res, tokens_per_step=a):
                extra = f", {a:.3f} tokens per step" if not math.isnan(a) else ""  # NaN on AR legs
                self.console.print(f"  {leg} wave {wave + 1}: resident {fmt(res)} tok/s{extra}")
                self.status = Text(f"leg {leg}: wave {wave + 1} resident {fmt(res)} tok/s{extra}")
                if self.task is not None:
                    self.progress.advance(self.task)
        self.live.refresh()


class SweepLive(_OneBar):
    """A rate-sweep ``Reporter``: one bar over the plan's rounds in planned seconds (elapsed, ETA from
    the plan), the running rate and round, and one printed line per measured round."""

    def __init__(self, console: Console, get_time: Callable[[], float] | None = None) -> None:
        super().__init__(console, planned_seconds=True, get_time=get_time)
        self.spans: list[tuple[float, int, float]] = []
        self.task: TaskID | None = None

    def __call__(self, event: Event) -> None:
        match event:
            case SweepPlanReady(plan=plan):  # the runner's plan (harness.run.sweep): one span per round
                self.spans = [(r.rate, r.round_index, (r.offsets_s[-1] if r.offsets_s else 0.0) + 1.0)
                              for r in plan.rounds]
                self.task = self.progress.add_task(f"sweep {plan.plan_id}",
                                                   total=sum(x for *_, x in self.spans) or 1.0)
            case SweepRoundStart(rate=rate, round_index=k, n=n) if self.task is not None:
                at = next((i for i, (r, kk, _) in enumerate(self.spans) if (r, kk) == (rate, k)), len(self.spans))
                self.progress.update(self.task, completed=sum(x for *_, x in self.spans[:at]))
                what = "warmup" if k < 0 else f"round {k + 1}"
                self.status = Text(f"{rate:g} req/s {what}: {n} requests in flight", style="cyan")
            case SweepRoundDone(row=row):
                from harness.cli.listing import ms, num  # the listings' number format (never an exponent)

                self.console.print(
                    f"{num(row['arrival_rate_req_s'])} req/s round {row['round_index']}: "
                    f"{row['n_ok']}/{row['n_requests']} ok, "
                    f"{num(row.get('request_throughput_req_s'), 2)} req/s, "
                    f"output {num(row.get('output_throughput_tok_s'))} tok/s, "
                    f"goodput {num(row.get('goodput_req_s'), 2)} req/s, TTFT p50 {ms(row.get('ttft_p50_s'))} ms, "
                    f"TPOT p50 {ms(row.get('tpot_p50_s'))} ms, ITL p50 {ms(row.get('itl_p50_s'))} ms, "
                    f"E2E p50 {ms(row.get('e2e_p50_s'))} ms, client lag p99 {ms(row.get('client_lag_p99_s'))} ms"
                    + (", OVER-SATURATED" if row.get("saturated") is True else ""))
            case SweepStopped(rate=rate, rounds=rounds):
                self.console.print(f"stop_at_saturation: {len(rounds)} round(s) at {rate:g} req/s over-saturated; "
                                   "no higher rate is run", style="yellow", soft_wrap=True)
        self.live.refresh()
