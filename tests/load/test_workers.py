"""Load worker processes: sizing, merged records, synchronized start, a dying worker."""

from __future__ import annotations

import asyncio
import os
import signal

import pytest
from load_helpers import each_transport  # noqa: F401 - the fixture, used by pytestmark

from harness.errors import MeasurementError
from harness.load.driver import WaveRequest, run_wave
from harness.load.workers import WorkerLoadClient, auto_workers
from harness.sim import running_simulator

pytestmark = pytest.mark.usefixtures("each_transport")


def test_auto_workers_known_answers() -> None:
    assert auto_workers(3_200, cpus=16) == 1
    assert auto_workers(12_800, cpus=16) == 1  # 12,800 x 18 us = 0.23 of a core: one process stamps in time
    assert auto_workers(51_200, cpus=16) == 4  # 51,200 x 18 us / 0.30 = 3.07
    assert auto_workers(204_800, cpus=16) == 13  # 12.3
    assert auto_workers(51_200, cpus=16, transport="aiohttp") == 13  # 51,200 x 25 us / 0.10 = 12.8
    assert auto_workers(51_200, cpus=16, target_share=0.35, cpu_per_event_s=25e-6) == 4  # 3.66
    assert auto_workers(204_800, cpus=16, transport="aiohttp") == 15  # capped at one CPU short of the host
    assert auto_workers(51_200, cpus=2) == 1
    with pytest.raises(ValueError, match="offered rate"):
        auto_workers(-1)


def _wave(n: int) -> list[WaveRequest]:
    return [WaveRequest(list(range(10 + i, 40 + i)), 12, rid=f"r{i}", ignore_eos=True, cache_salt=f"s{i}")
            for i in range(n)]


def test_workers_merge_records_in_order() -> None:
    async def main(url: str) -> None:
        async with WorkerLoadClient(url, workers=2, concurrency=6, timeout_s=30) as client:
            recs = await run_wave(client, _wave(6))
            check = client.take_check()
        assert [r.rid for r in recs] == [f"r{i}" for i in range(6)]
        assert all(r.error is None and int(r.event_tokens[-1]) == 12 for r in recs)
        assert all(r.concurrency == 6 for r in recs)
        # the workers start together: every request is sent before the shortest one ends, so the wave
        # has a common resident window (a bound relative to the wave itself, which a busy machine
        # stretches alike, not a wall-clock constant)
        shortest_s = min((r.done_ns - r.send_ns) / 1e9 for r in recs)
        assert check is not None and check["workers"] == 2
        assert 0 <= check["send_skew_s"] < shortest_s, (check["send_skew_s"], shortest_s)
        assert check["loop_lag_p99_s"] is not None and len(check["worker_pids"]) == 2

    with running_simulator(profile="fast") as url:
        asyncio.run(main(url))


def test_dying_worker_fails_the_wave() -> None:
    async def main(url: str) -> None:
        async with WorkerLoadClient(url, workers=2, concurrency=4, timeout_s=30) as client:
            os.kill(client._workers[1].process.pid, signal.SIGKILL)
            client._workers[1].process.join(5)
            with pytest.raises(MeasurementError, match="died"):
                await run_wave(client, _wave(4))
            with pytest.raises(MeasurementError, match="broken"):
                await run_wave(client, _wave(4))

    with running_simulator(profile="fast") as url:
        asyncio.run(main(url))


def test_tally_in_shared_memory_round_trips_and_skips_a_torn_read() -> None:
    from harness.load.live import LiveTally
    from harness.load.workers import _SEQ, _SLOTS, publish_tally, read_tally

    beat = [0] * _SLOTS
    assert read_tally(beat, 3) == LiveTally(3)                   # nothing published yet: n only
    t = LiveTally(n=3, tokens=40, first=3, done=1, start_ns=5, end_ns=9, window_tokens=12)
    publish_tally(beat, t)
    assert read_tally(beat, 3) == t and beat[_SEQ] == 2
    beat[_SEQ] += 1                                              # a writer caught mid-write
    assert read_tally(beat, 3) is None


def test_workers_relay_the_live_tally_while_the_wave_runs() -> None:
    from harness.load.live import LiveTally

    seen: list[LiveTally] = []

    async def main(url: str) -> None:
        reqs = [WaveRequest(list(range(10 + i, 40 + i)), 300, rid=f"r{i}", ignore_eos=True, cache_salt=f"s{i}")
                for i in range(4)]
        async with WorkerLoadClient(url, workers=2, concurrency=4, timeout_s=30) as client:
            recs = await run_wave(client, reqs, on_live=seen.append)  # ~1.7 s of decode on the fast profile
        assert all(r.error is None for r in recs)

    with running_simulator(profile="fast") as url:
        asyncio.run(main(url))
    assert seen and all(t.n == 4 for t in seen)
    streaming = [t for t in seen if t.tokens > 0 and t.done < 4]
    assert streaming, seen                                       # updates before the wave ended, tokens in
    assert max(t.tokens for t in seen) <= 4 * 300
    assert any(t.resident_s > 0 and t.rate > 0 for t in streaming)
