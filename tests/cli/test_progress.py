"""The live progress lines: round status shown literally, failed rounds, attached services."""

from __future__ import annotations

import re
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pytest
from rich.console import Console

from harness.cli.progress import LiveReporter, round_line
from harness.run.events import (
    AbbaStart,
    AbbaWave,
    CellSkipped,
    CellStart,
    Event,
    LegWaveLive,
    PlanReady,
    RoundDone,
    ServiceReady,
    ServiceStopped,
    SweepPlanReady,
    SweepRoundDone,
    SweepRoundStart,
    WarmupDone,
    WaveDone,
    WaveLive,
)


def ns(**fields: Any) -> Any:
    """A stand-in object (cells, plans, services) with just the attributes a reporter reads."""
    return SimpleNamespace(**fields)


def printed(*lines: object) -> str:
    console = Console(record=True, width=200, color_system=None)
    for line in lines:
        console.print(line)
    return console.export_text()


def test_round_line_shows_its_status_in_brackets() -> None:
    cell = ns(label="decode C32")
    text = printed(round_line(RoundDone(cell=cell, round=0, rate=1041.78, status="ok")),
                   round_line(RoundDone(cell=cell, round=1, rate=512.0, status="short")),
                   round_line(RoundDone(cell=cell, round=2, rate=float("nan"), status="failed",
                                        error="1 of 32 requests failed in wave 0")))
    lines = text.splitlines()
    assert lines[0] == "  decode C32   round 1: 1,041.78 tok/s [ok]", lines[0]
    assert lines[1].endswith("[short]")
    assert "round 3:" in lines[2] and lines[2].endswith("[failed] 1 of 32 requests failed in wave 0")


def test_reporter_prints_failed_rounds_and_detached_services() -> None:
    console = Console(record=True, width=200, color_system=None)
    rep = LiveReporter(console)
    cell = ns(label="decode C8")
    rep(RoundDone(cell=cell, round=0, status="failed", rate=float("nan"), error="4 of 8 requests failed in wave 1"))
    rep(ServiceStopped(service=ns(url="http://127.0.0.1:30021"), detached=True))
    rep(ServiceStopped(service=ns(url="http://127.0.0.1:30022"), detached=False))
    text = console.export_text()
    assert "[failed] 4 of 8 requests failed in wave 1" in text
    assert "detached from the service at http://127.0.0.1:30021 (not owned, left running)" in text
    assert text.count("service stopped") == 1


def test_eta_uses_the_plan_until_a_tenth_is_done_then_the_observed_pace() -> None:
    from harness.cli.progress import eta_s

    assert eta_s(200.0, 10.0, 30.0, planned_seconds=True) == 190.0      # 5% done: the plan's seconds
    assert eta_s(200.0, 50.0, 100.0, planned_seconds=True) == 300.0     # 2 s per planned s, 150 left
    assert eta_s(10.0, 0.5, 20.0, planned_seconds=False) is None        # cells, no pace yet: unknown
    assert eta_s(10.0, 5.0, 20.0, planned_seconds=False) == 20.0        # 4 s per cell, 5 cells left
    assert eta_s(10.0, 10.0, 20.0, planned_seconds=False) == 0.0


def test_cell_fraction_counts_rounds_and_the_running_round() -> None:
    from harness.cli.progress import cell_fraction

    decode = ns(workload="decode", rounds=3, min_resident_seconds=2.0, waves_per_round=None)
    prefill = ns(workload="prefill", rounds=3, min_resident_seconds=None, waves_per_round=2)
    assert cell_fraction(decode, 1, 3, 1.0) == 0.5                       # (1 + 1.0/2.0) / 3
    assert cell_fraction(decode, 2, 9, 7.5) == 1.0                       # resident beyond the need: capped
    assert abs(cell_fraction(prefill, 0, 1, 0.0) - 1 / 6) < 1e-12        # half a round of three


def _cells() -> list[Any]:
    return [ns(index=i, label=f"decode C{c}", cell_id=f"decode-c{c:02d}-0123abcd", workload="decode",
                            rounds=3, min_resident_seconds=1.0, waves_per_round=None) for i, c in enumerate((1, 4))]


def test_live_display_bars_eta_and_round_status() -> None:
    now = [100.0]
    console = Console(record=True, width=80, color_system=None)
    rep = LiveReporter(console, get_time=lambda: now[0])
    cells = _cells()
    plan = ns(plan_id="7ee4c8d13f972977", cells=cells, estimate_s=40.0, cell_estimates_s=(10.0, 30.0))
    rep(PlanReady(plan=plan))
    rep(CellStart(cell=cells[0], rounds=(0, 1, 2)))
    rep(WaveDone(cell=cells[0], round=0, attempt=0, wave=0, resident_s=0.5, round_rate=88.0, http_rate=80.0))
    assert rep.progress is not None and rep.overall is not None
    overall = rep.progress.tasks[rep.overall]
    assert overall.total == 40.0 and abs(overall.completed - 10.0 * 0.5 / 3) < 1e-9
    rep(RoundDone(cell=cells[0], round=0, status="ok", rate=88.0))
    rep(WaveDone(cell=cells[0], round=1, attempt=0, wave=0, resident_s=0.2, round_rate=87.0, http_rate=80.0))
    live = Console(record=True, width=80, color_system=None)
    live.print(rep._renderable())
    frame = live.export_text()
    assert "campaign 7ee4c8d13f972977" in frame and "1/2 decode C1" in frame
    assert "r1 ok" in frame and "r2 running" in frame
    assert "round 2/3" in frame and "resident 0.2/1 s" in frame and "HTTP 80.00 tok/s" in frame
    assert all(len(line) <= 80 for line in frame.splitlines())
    # the clock ticks with nothing happening: two renders 3 s apart differ in elapsed time
    first = _elapsed(rep)
    now[0] += 3.0
    assert _elapsed(rep) != first
    # finishing the first cell's rounds moves the overall bar to that cell's estimate
    for k in (1, 2):
        rep(RoundDone(cell=cells[0], round=k, status="ok", rate=88.0))
    assert abs(rep.progress.tasks[rep.overall].completed - 10.0) < 1e-9


def _elapsed(rep: LiveReporter) -> str:
    c = Console(record=True, width=80, color_system=None)
    c.print(rep._renderable())
    return c.export_text().splitlines()[0]


def test_resumed_cells_leave_the_total() -> None:
    console = Console(record=True, width=80, color_system=None)
    rep = LiveReporter(console)
    cells = _cells()
    rep(PlanReady(plan=ns(plan_id="p", cells=cells, estimate_s=40.0, cell_estimates_s=(10.0, 30.0))))
    rep(CellSkipped(cell=cells[0]))
    assert rep.progress is not None and rep.overall is not None
    assert rep.progress.tasks[rep.overall].total == 30.0
    assert "decode C1: already complete in the resumed archive" in console.export_text()


def test_abba_live_counts_measured_waves_of_four_legs() -> None:
    from harness.cli.progress import AbbaLive

    console = Console(record=True, width=80, color_system=None)
    live = AbbaLive(console)
    spec = ns(name="abba-demo", workload=ns(concurrency=32, waves_per_leg=3))
    live(AbbaStart(spec=spec))
    live(ServiceReady(leg="A1", service=ns(url="http://127.0.0.1:1", process=ns(pid=7))))
    live(AbbaWave(leg="A1", wave=0, resident=1041.78, http=990.5))
    assert live.task is not None
    task = live.progress.tasks[live.task]
    assert (task.total, task.completed) == (12, 1)
    text = console.export_text()
    assert "leg A1: service ready at http://127.0.0.1:1 (pid 7)" in text
    assert "  A1 wave 1: resident 1,041.78 tok/s, HTTP 990.50 tok/s" in text


def test_abba_live_shows_the_running_waves_tally() -> None:
    from harness.cli.progress import AbbaLive
    from harness.load.live import LiveTally

    console = Console(record=True, width=120, color_system=None)
    live = AbbaLive(console)
    live(AbbaStart(spec=ns(name="abba-demo", workload=ns(concurrency=4, waves_per_leg=3))))
    tally = LiveTally(n=4, tokens=1200, first=4, done=0, start_ns=1_000_000_000, end_ns=3_000_000_000,
                      window_tokens=800)
    live(LegWaveLive(leg="B1", wave=1, phase="measured", tally=tally))
    assert str(live.status) == ("leg B1: wave 2 live (provisional): 1,200 tok  4/4 first 0 done  resident +2.0 s  "
                                "400.00 tok/s")
    live(LegWaveLive(leg="A1", wave=0, phase="warmup", tally=tally))
    assert str(live.status).startswith("leg A1: warmup live (provisional): 1,200 tok")


def test_warmup_is_shown_as_not_counted() -> None:
    rep = LiveReporter(Console(record=True, width=80, color_system=None))
    cells = [ns(**vars(c), warmup_waves=2) for c in _cells()]
    rep(PlanReady(plan=ns(plan_id="p", cells=cells, estimate_s=None, cell_estimates_s=())))
    rep(CellStart(cell=cells[0], rounds=(0, 1, 2)))
    rep(WarmupDone(cell=cells[0], wave=0, records=[]))
    frame = Console(record=True, width=80, color_system=None)
    frame.print(rep._renderable())
    text = frame.export_text()
    assert "warmup: 1/2 waves done (kept, never counted)" in text
    assert "ETA -:--:--" in text                                     # no estimate, no pace yet: unknown


def test_sweep_live_advances_by_planned_seconds() -> None:
    from harness.cli.progress import SweepLive

    rounds = [ns(rate=4.0, round_index=-1, offsets_s=(0.0, 1.0)),
              ns(rate=4.0, round_index=0, offsets_s=(0.0, 3.0)),
              ns(rate=8.0, round_index=0, offsets_s=(0.0, 2.0))]
    console = Console(record=True, width=80, color_system=None)
    live = SweepLive(console)
    live(SweepPlanReady(plan=ns(plan_id="9e51", rounds=rounds)))
    assert live.task is not None
    task = live.progress.tasks[live.task]
    assert task.total == 2.0 + 4.0 + 3.0                        # each span plus one second of drain
    live(SweepRoundStart(rate=8.0, round_index=0, n=16))
    assert live.progress.tasks[live.task].completed == 6.0
    live(SweepRoundDone(row={"arrival_rate_req_s": 8.0, "round_index": 0, "n_ok": 16, "n_requests": 16,
                                  "goodput_req_s": 7.5, "request_throughput_req_s": 7.9,
                                  "output_throughput_tok_s": 1264.04, "ttft_p50_s": 1.2804,
                                  "tpot_p50_s": 0.0512, "itl_p50_s": 0.02371, "e2e_p50_s": float("nan"),
                                  "client_lag_p99_s": 0.0012}))
    assert ("8 req/s round 0: 16/16 ok, 7.90 req/s, output 1,264 tok/s, goodput 7.50 req/s, TTFT p50 1,280 ms, "
            "TPOT p50 51.2 ms, ITL p50 23.7 ms, E2E p50 — ms, client lag p99 1.2 ms"
            in " ".join(console.export_text().split()))  # rich wraps the line at 80 columns


def _frame(rep: LiveReporter) -> str:
    c = Console(record=True, width=80, color_system=None)
    c.print(rep._renderable())
    return c.export_text()


def test_live_line_labels_the_tally_provisional() -> None:
    from harness.cli.progress import live_line
    from harness.load.live import LiveTally

    t = LiveTally(n=8, tokens=1024, first=8, done=1, start_ns=1_000_000_000, end_ns=1_640_000_000,
                  window_tokens=212)
    assert live_line(t, "decode") == "live (provisional): 1,024 tok  8/8 first 1 done  resident +0.6 s  331.25 tok/s"
    assert live_line(LiveTally(n=8, tokens=3, first=3), "prefill") == "live (provisional): 3 tok  3/8 first 0 done"
    assert live_line(LiveTally(n=2, tokens=5, first=1), "decode").endswith("resident +0.0 s  — tok/s")


def test_live_tally_moves_the_display_inside_a_wave() -> None:
    from harness.load.live import LiveTally

    now = [0.0]
    rep = LiveReporter(Console(record=True, width=80, color_system=None), get_time=lambda: now[0])
    cells = _cells()
    rep(PlanReady(plan=ns(plan_id="p", cells=cells, estimate_s=40.0, cell_estimates_s=(10.0, 30.0))))
    rep(CellStart(cell=cells[1], rounds=(0, 1, 2)))
    rep(RoundDone(cell=cells[1], round=0, status="ok", rate=186.0))
    tally = LiveTally(n=4, tokens=300, first=4, done=0, start_ns=10**9, end_ns=15 * 10**8,
                      window_tokens=93)
    rep(WaveLive(cell=cells[1], round=1, wave=0, phase="measured", tally=tally))
    frame = _frame(rep)
    assert "round 2/3 starting" in frame
    assert "live (provisional): 300 tok  4/4 first 0 done  resident +0.5 s  186.00 tok/s" in frame
    assert all(len(line) <= 80 for line in frame.splitlines())
    assert rep.progress is not None and rep.cell_task is not None   # the live 0.5 s of the 1 s a round needs
    assert abs(rep.progress.tasks[rep.cell_task].completed - 1.5) < 1e-9
    rep(WaveDone(cell=cells[1], round=1, attempt=0, wave=0, resident_s=0.5, round_rate=185.0, http_rate=150.0))
    assert "live (provisional)" not in _frame(rep)                # the recorded figures replace it


def test_the_first_wave_of_a_cell_shows_its_round_not_warmup() -> None:
    from harness.load.live import LiveTally

    rep = LiveReporter(Console(record=True, width=80, color_system=None))
    cells = [ns(**vars(c), warmup_waves=0) for c in _cells()]
    rep(PlanReady(plan=ns(plan_id="p", cells=cells, estimate_s=None, cell_estimates_s=())))
    rep(CellStart(cell=cells[0], rounds=(0, 1, 2)))
    rep(WaveLive(cell=cells[0], round=0, wave=0, phase="measured", tally=LiveTally(n=1, tokens=7, first=1)))
    frame = _frame(rep)
    assert "warmup" not in frame and "r1 running" in frame and "round 1/3  wave 0" in frame
    assert "live (provisional): 7 tok  1/1 first 0 done" in frame


@pytest.mark.slow
def test_a_campaign_wave_shows_tokens_before_it_ends(tmp_path: Path) -> None:
    """Every display update of a short campaign on the simulator is captured: one made while the
    first measured wave was running (before its ``wave-done``) already showed tokens received."""
    from harness.run.campaign import run_campaign

    corpus = Path(__file__).resolve().parents[2] / "corpora" / "sim-code-512"
    spec = tmp_path / "s.yaml"
    # profile fast at C2: ~5 ms per token, so each 300-token wave streams for over a second (several
    # 4 Hz ticks); a busy machine only makes the wave longer
    spec.write_text(f"""
name: live-tally
claim_class: native-ar
service: {{backend: sim, sim: {{profile: fast}}, startup_timeout_s: 60}}
corpora: {{decode: {corpus}}}
decode: {{tiers: [2], rounds: 1, min_resident_seconds: 0.1, warmup_waves: 0, max_new_tokens: 300,
          ignore_eos: true}}
""")
    rep = LiveReporter(Console(record=True, width=80, color_system=None))
    seen: list[tuple[str, int, str]] = []

    def sink(event: Event) -> None:
        rep(event)
        tokens = event.tally.tokens if isinstance(event, WaveLive) else -1
        seen.append((event.kind, tokens, _frame(rep) if isinstance(event, WaveLive) else ""))

    out = run_campaign(spec, tmp_path / "ws", reporter=sink)
    assert out.status == "complete", out.error
    kinds = [k for k, _, _ in seen]
    end = kinds.index("wave-done")
    during = [(t, f) for k, t, f in seen[:end] if k == "wave-live"]
    moving = [f for t, f in during if t > 0]
    assert moving, during
    assert re.search(r"live \(provisional\): [1-9][\d,]* tok  \d/2 first", moving[-1]), moving[-1]
