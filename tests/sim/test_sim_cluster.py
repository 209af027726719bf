"""The simulator cluster: K processes on one port share one step grid and one set of counters."""

from __future__ import annotations

import asyncio
import multiprocessing as mp
import subprocess
import sys
import urllib.request
from typing import Any

import pytest
from sim_helpers import prompt, run, session, spawned, stream

from harness.errors import SpecError
from harness.inputs.spec import ServiceProfile
from harness.service.launch.command import sim_command
from harness.sim import get_profile
from harness.sim.batching import grid_step_s, next_grid_instant
from harness.sim.board import ClusterBoard
from harness.sim.scheduler import Scheduler, _Forward


def test_grid_step_of_a_constant_step_profile() -> None:
    prof = get_profile("scale-20ms")
    assert grid_step_s(prof) == pytest.approx(0.020, abs=1e-12)
    assert grid_step_s(prof, step_factor=0.5) == pytest.approx(0.010, abs=1e-12)
    assert grid_step_s(prof, time_scale=2.0) == pytest.approx(0.040, abs=1e-12)


def test_a_profile_whose_step_depends_on_the_batch_is_refused() -> None:
    with pytest.raises(SpecError, match="cannot run as several processes on one step grid"):
        grid_step_s(get_profile("paper-tp8"))


@pytest.mark.parametrize(("start", "duration", "end"), [
    (1.000, 0.020, 1.020),  # a decode step begun on the grid ends on the next instant
    (1.000, 0.0189, 1.020),  # a shorter step (log-interpolated tier) too
    (1.000, 0.001, 1.020),  # a short prefill ends on the next instant after its start
    (1.007, 0.001, 1.020),
    (1.011, 0.020, 1.040),  # a late start skips to the instant after half a step
    (1.000, 0.100, 1.100),  # a long forward ends on the instant nearest its end
])
def test_next_grid_instant(start: float, duration: float, end: float) -> None:
    assert next_grid_instant(1.0, 0.02, start, duration) == pytest.approx(end, abs=1e-9)


def test_board_sums_rows_and_keeps_maxima() -> None:
    board = ClusterBoard(3, mp.get_context("spawn"))
    board.publish(0, {"pid": 11, "sim_late_steps": 2, "sim_lateness_total_s": 0.25, "sim_emit_lateness_max_s": 0.004,
                      "sim_generation_tokens_total": 100})
    board.publish(2, {"pid": 13, "sim_late_steps": 1, "sim_lateness_total_s": 0.5, "sim_emit_lateness_max_s": 0.009,
                      "sim_generation_tokens_total": 50})
    rows = board.rows()
    assert [r["pid"] for r in rows] == [11, 0, 13]
    tot = board.totals()
    assert tot["sim_late_steps"] == 3
    assert tot["sim_lateness_total_s"] == pytest.approx(0.75)
    assert tot["sim_emit_lateness_max_s"] == pytest.approx(0.009)
    assert tot["sim_generation_tokens_total"] == 150
    assert (tot["sim_processes"], tot["sim_processes_started"]) == (3, 2)


def test_service_profile_asks_for_processes() -> None:
    prof = ServiceProfile.model_validate({"name": "s", "backend": "sim",
                                          "sim": {"profile": "scale-20ms", "processes": 3}})
    argv = sim_command(prof).argv
    assert argv[argv.index("--processes") + 1] == "3"
    bad = ServiceProfile.model_validate({"name": "s", "backend": "sim",
                                         "sim": {"profile": "paper-tp8", "processes": 2}})
    with pytest.raises(SpecError, match="paper-tp8"):
        sim_command(bad)


def test_cli_refuses_processes_for_a_batch_dependent_profile() -> None:
    out = subprocess.run([sys.executable, "-c", "from harness.cli import main; main()", "sim", "serve", "--port", "0",
                          "--profile", "paper-tp8", "--processes", "2"], check=False, capture_output=True, text=True,
                         timeout=60)
    assert out.returncode != 0
    assert "cannot run as several processes on one step grid" in " ".join((out.stdout + out.stderr).split())


async def _wave(url: str, n: int, tokens: int) -> tuple[list[Any], dict[str, Any]]:
    async with session(url) as s:
        streams = await asyncio.gather(*(stream(s, {"input_ids": prompt(16, seed=i), "rid": f"r{i}",
                                                    "sampling_params": {"max_new_tokens": tokens,
                                                                        "ignore_eos": True}})
                                         for i in range(n)))
        async with s.get("/server_info") as resp:
            info = await resp.json()
    return list(streams), info


def test_two_processes_share_one_step_grid_and_report_all_counters() -> None:
    with spawned("--profile", "scale-20ms", "--stream-mode", "delta", "--processes", "2") as (_, url):
        streams, info = run(_wave(url, 8, 20))
        # /metrics speaks for the whole cluster too (the concurrency witness reads it): 8 x 20 tokens
        metrics = [urllib.request.urlopen(url + "/metrics", timeout=5).read().decode() for _ in range(4)]
    for text in metrics:
        line = next(x for x in text.splitlines() if x.startswith("sglang:generation_tokens_total"))
        assert float(line.rsplit(" ", 1)[1]) == 160.0
    assert all(st.status == 200 and st.done for st in streams)
    assert [st.meta["completion_tokens"] for st in streams] == [20] * 8
    assert [len(st.events) for st in streams] == [20] * 8  # delta mode: one event per step
    states = info["internal_states"]
    total, rows = states[0], states[1:]
    assert info["dsv4h_simulator"]["processes"] == 2
    assert info["dsv4h_simulator"]["grid_step_s"] == pytest.approx(0.020)
    assert len(rows) == 2 and len({r["pid"] for r in rows}) == 2 and all(r["pid"] > 0 for r in rows)
    assert total["sim_generation_tokens_total"] == 160 == sum(r["sim_generation_tokens_total"] for r in rows)
    assert total["sim_generate_requests"] == 8
    assert total["sim_late_steps"] == sum(r["sim_late_steps"] for r in rows)
    t0, step = int(total["sim_grid_t0_ns"]), 20_000_000
    # every event leaves in the first half of a step after its grid instant, whichever process wrote it;
    # on a busy machine an event may leave later only in a step the servers report late (a step emits
    # at most one event per running request: 8 here)
    phases = [(int(ev["meta_info"]["sim_emit_ns"]) - t0) % step for st in streams for ev in st.events]
    off_grid = sum(p >= step // 2 for p in phases)
    assert off_grid <= 8 * int(total["sim_late_steps"]), (off_grid, total["sim_late_steps"], max(phases))



@pytest.mark.parametrize(("kind", "duration", "now", "end", "lost"), [
    ("decode", 0.020, 1.009, 1.020, 0.0),  # reached 9 ms late: still ends on its instant
    ("decode", 0.020, 1.011, 1.040, 0.020),  # past half a step: one grid step skipped
    ("prefill", 0.001, 1.015, 1.020, 0.0),  # a short prefill planned late still ends on its instant
    ("prefill", 0.001, 1.021, 1.040, 0.020),
])
def test_lateness_on_a_grid_counts_the_steps_skipped(kind: str, duration: float, now: float, end: float,
                                                     lost: float) -> None:
    sched = Scheduler(get_profile("scale-20ms"), grid=(1.0, 0.02))
    assert sched._end_of(_Forward(kind, duration, []), 1.0, now) == pytest.approx(end, abs=1e-9)
    assert sched.stats.late_steps == (lost > 0)
    assert sched.stats.late_decode_steps == (lost > 0 and kind == "decode")
    assert sched.stats.lateness_total_s == pytest.approx(lost, abs=1e-9)


def test_lateness_without_a_grid_restarts_the_timeline() -> None:
    sched = Scheduler(get_profile("scale-20ms"))
    assert sched._end_of(_Forward("decode", 0.020, []), 1.0, 1.009) == pytest.approx(1.020)
    assert sched._end_of(_Forward("decode", 0.020, []), 1.0, 1.011) == pytest.approx(1.031)
    assert sched.stats.late_steps == 1
    assert sched.stats.lateness_total_s == pytest.approx(0.011)
