"""Pure parts of wave execution: request building and the /metrics residency witness."""

from __future__ import annotations

import asyncio
import time

import numpy as np
import pytest

from harness.aio import run
from harness.inputs.corpus import Case
from harness.load.prom import parse_gauges
from harness.run.selfcheck import LoopMonitor, edge_delay_s, loop_summary, sim_lateness
from harness.run.wave import WaveSpec, build_requests, witness_summary


def test_witness_uses_only_samples_wholly_inside_the_window() -> None:
    samples = [(90, 105, 4.0, 0.0), (110, 120, 8.0, 0.0), (150, 160, 8.0, 0.0), (195, 205, 7.0, 0.0)]
    s = witness_summary("w", 8, 100, 200, samples)
    assert s["samples_in_window"] == 2
    assert s["running_min_in_window"] == 8.0 and s["running_max_in_window"] == 8.0
    empty = witness_summary("w", 8, 100, 101, samples)
    assert empty["samples_in_window"] == 0 and empty["running_min_in_window"] is None


def test_parse_gauges_sglang_and_vllm() -> None:
    sg = ('# TYPE sglang:num_running_reqs gauge\nsglang:num_running_reqs{model_name="m"} 12.0\n'
          'sglang:num_queue_reqs{model_name="m"} 3.0\n')
    assert parse_gauges(sg).running == 12.0 and parse_gauges(sg).queued == 3.0
    vl = ('vllm:num_requests_running{engine="0",model_name="m"} 2.0\n'
          'vllm:num_requests_running{engine="1",model_name="m"} 3.0\n')
    assert parse_gauges(vl).running == 5.0
    assert parse_gauges("other_metric 1\n").running is None


def test_build_requests_unique_rids_and_salts() -> None:
    cases = [Case("c000", np.array([1, 2, 3], dtype=np.int32), "h0", 3, {}),
             Case("c001", np.array([4, 5], dtype=np.int32), "h1", 2, {})]
    spec = WaveSpec(run_id="run", cell_id="cell", wave_id="cell.r0.w000", round_index=0, wave_index=0,
                    phase="measured", workload="decode", concurrency=2, max_new_tokens=8, ignore_eos=False,
                    cache="fresh-salt")
    reqs = build_requests(spec, cases)
    assert [r.rid for r in reqs] == ["run.cell.r0.w000.000", "run.cell.r0.w000.001"]
    assert len({r.cache_salt for r in reqs}) == 2 and all(r.cache_salt for r in reqs)
    assert [r.identity.case_id for r in reqs] == ["c000", "c001"] and reqs[1].input_len == 2
    assert [r.identity.request_index for r in reqs] == [0, 1]  # the i of the rid: its slot in the wave
    assert reqs[0].identity.corpus_sha256 == ""  # a wave outside a corpus
    named = build_requests(WaveSpec(**{**spec.__dict__, "corpus_sha256": "c" * 64}), cases)
    assert {r.identity.corpus_sha256 for r in named} == {"c" * 64}
    none = build_requests(WaveSpec(**{**spec.__dict__, "cache": "none"}), cases)
    assert all(r.cache_salt is None for r in none)


def test_loop_summary_known_answers() -> None:
    s = loop_summary([1_000_000, 2_000_000, 3_000_000], wall_s=2.0, loop_cpu_s=0.5, process_cpu_s=0.8)
    assert s["loop_samples"] == 3 and s["loop_lag_p50_s"] == 0.002 and s["loop_lag_max_s"] == 0.003
    assert abs(s["loop_lag_p99_s"] - 0.00298) < 1e-12
    assert s["loop_cpu_share"] == 0.25 and s["process_cpu_share"] == 0.4
    empty = loop_summary([], wall_s=1.0, loop_cpu_s=0.0, process_cpu_s=0.0)
    assert empty["loop_lag_p99_s"] is None and empty["loop_samples"] == 0


def test_sim_lateness_from_server_info() -> None:
    info = {"internal_states": [{"sim_late_steps": 3, "sim_lateness_total_s": 0.5}]}
    assert sim_lateness(info) == (3, 0.5, 3, 0.5)                    # no decode counters: all count as decode
    info["internal_states"][0] |= {"sim_late_decode_steps": 1, "sim_decode_lateness_total_s": 0.02}
    assert sim_lateness(info) == (3, 0.5, 1, 0.02)
    assert sim_lateness({"internal_states": [{"num_running_reqs": 1}]}) is None
    assert sim_lateness({}) is None and sim_lateness(None) is None


def test_loop_monitor_sees_a_blocked_loop() -> None:
    async def body() -> dict[str, object]:
        mon = LoopMonitor(interval_s=0.002)
        mon.start()
        await asyncio.sleep(0.05)
        t0 = time.thread_time()
        # a callback that keeps the loop busy for 80 ms of this thread's CPU (a known amount of work,
        # however long a busy machine takes to grant it: at least 80 ms of wall time too)
        while time.thread_time() - t0 < 0.08:
            pass
        await asyncio.sleep(0.05)
        return mon.stop()

    s = run(body())
    assert isinstance(s["loop_lag_max_s"], float) and s["loop_lag_max_s"] >= 0.05
    assert isinstance(s["loop_samples"], int) and s["loop_samples"] >= 10
    # the monitor counts the loop thread's CPU: the 80 ms of work (plus a little of its own) ...
    cpu, wall = s["loop_cpu_s"], s["wall_s"]
    assert isinstance(cpu, float) and isinstance(wall, float) and 0.08 <= cpu < 0.08 + 0.5 * wall
    # ... and reports its share of the wave's wall time
    assert s["loop_cpu_share"] == pytest.approx(cpu / wall)


def test_edge_delay_takes_only_stalls_that_span_an_instant() -> None:
    ms = 1_000_000
    posted = [0, 5 * ms, 10 * ms, 15 * ms, 100 * ms]
    delays = [1 * ms, 40 * ms, 36 * ms, 31 * ms, 2 * ms]  # the loop stalled from 5 to 46 ms
    assert edge_delay_s(posted, delays, [3 * ms]) == 0.001  # before the stall (the probe at 0 ran at 1 ms)
    assert edge_delay_s(posted, delays, [30 * ms]) == 0.040  # inside it: the longest probe spanning it
    assert edge_delay_s(posted, delays, [101 * ms]) == 0.002
    assert edge_delay_s(posted, delays, [70 * ms]) == 0.0  # nothing spans 70 ms
    assert edge_delay_s([], [], [1]) is None
