"""No unbounded wait in a wave (issue 23): a wave-level deadline on both transports, and a stopped load
worker is killed by its parent, its requests failed, the other workers' records kept."""

from __future__ import annotations

import asyncio
import contextlib
import os
import signal
import time
from typing import Any

import pytest
from load_helpers import each_transport  # noqa: F401 - the fixture, used by pytestmark

from harness.errors import MeasurementError
from harness.load import driver, workers
from harness.load.client import StreamLimits
from harness.load.driver import LoadClient, WaveRequest, WaveWatch, run_wave
from harness.load.workers import WorkerLoadClient
from harness.sim import running_simulator

pytestmark = pytest.mark.usefixtures("each_transport")


def _wave(n: int, tokens: int = 12) -> list[WaveRequest]:
    return [WaveRequest(list(range(10 + i, 40 + i)), tokens, rid=f"r{i}", ignore_eos=True, cache_salt=f"s{i}")
            for i in range(n)]


class _Counts:
    """A decoder stand-in with live cumulative counts."""

    def __init__(self) -> None:
        self.event_tokens: list[int] = []
        self.n_events = 0
        self.done_ns: int | None = None


def test_wave_watch_follows_the_request_limits() -> None:
    class C:
        timeout_s = 2.0
        limits = StreamLimits(deadline_factor=2.0, deadline_grace_s=1.0)

    d = _Counts()
    watch = WaveWatch(C(), _wave(1, tokens=100), [d], send_ns=0, margin_s=0.5)  # type: ignore[arg-type,list-item]
    assert watch.tick(0, [0]) == int((2 + 2 + 0.5) * 1e9)  # no output yet: send + silence, + silence + margin
    d.event_tokens.append(1)
    watch.tick(int(1e9), [0])  # first output at 1 s
    d.event_tokens.append(11)
    # 10 tokens in 0.1 s: step 10 ms; limit min(1.1 + 2, 1 + 1 + 2 x 100 x 0.01) = 3.1 s, + 2 + 0.5
    assert watch.tick(int(1.1e9), [0]) == int(5.6e9)
    d.event_tokens.append(12)  # one more token at 3.1 s: the silence bound (3.1 + 2) is now the smaller
    assert watch.tick(int(3.1e9), [0]) == int(7.6e9)
    assert watch.tick(int(1.1e9), []) == int(4.5e9)  # nothing pending: send + silence + margins


def test_wave_deadline_fails_a_request_that_evades_its_own_limits(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(driver, "WAVE_MARGIN_S", 0.2)

    async def main(url: str) -> None:
        async with LoadClient(url, concurrency=3, timeout_s=0.4) as client:
            real = client.send

            async def send(req: WaveRequest, body: bytes | None = None, n: int = 1, decoder: Any = None) -> Any:
                if req.rid == "r1":
                    await asyncio.sleep(3600)  # a request its own bounds do not end
                return await real(req, body, n, decoder)

            client.send = send  # type: ignore[method-assign,assignment]
            t0 = time.monotonic()
            recs = await run_wave(client, _wave(3))
            took = time.monotonic() - t0
        assert took < 5, took
        assert [r.rid for r in recs] == ["r0", "r1", "r2"]
        assert recs[0].ok and recs[2].ok
        assert not recs[1].ok and recs[1].error is not None
        assert recs[1].error.startswith("wave deadline exceeded after ")
        assert recs[1].wave_id == "" and recs[1].concurrency == 3  # identity kept

    with running_simulator(profile="fast") as url:
        asyncio.run(main(url))


def _stop_later(pid: int, after_s: float, cont_after_s: float | None = None) -> asyncio.Task[None]:
    async def go() -> None:
        await asyncio.sleep(after_s)
        os.kill(pid, signal.SIGSTOP)
        if cont_after_s is not None:
            await asyncio.sleep(cont_after_s)
            with contextlib.suppress(ProcessLookupError):
                os.kill(pid, signal.SIGCONT)

    return asyncio.ensure_future(go())


def test_stopped_worker_is_killed_and_its_requests_fail(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(workers, "WORKER_SILENCE_S", 1.0)

    async def main(url: str) -> None:
        async with WorkerLoadClient(url, workers=2, concurrency=4, timeout_s=30) as client:
            pid = client._workers[1].process.pid
            stopper = _stop_later(pid, 0.3)
            t0 = time.monotonic()
            try:
                recs = await run_wave(client, _wave(4, tokens=400))  # ~2 s of decode on the fast profile
            finally:
                await stopper
                with contextlib.suppress(ProcessLookupError):
                    os.kill(pid, signal.SIGCONT)
            took = time.monotonic() - t0
            check = client.take_check()
            assert took < 8, took  # the silence bound, not the server or a 120 s wait
            assert not client._workers[1].process.is_alive()
            assert [r.rid for r in recs] == ["r0", "r1", "r2", "r3"]
            for r in (recs[1], recs[3]):  # worker 1's share
                assert r.error is not None and f"load worker 1 (pid {pid}) was silent" in r.error
                assert "killed it" in r.error
            assert recs[0].ok and recs[2].ok  # worker 0's records are kept, unchanged
            assert check is not None and check["stalled_workers"] == [1]
            assert check["worker_silence_max_s"] >= 1.0 and check["client_stall_s"] >= 1.0
            with pytest.raises(MeasurementError, match="broken"):
                await run_wave(client, _wave(4))

    with running_simulator(profile="fast") as url:
        asyncio.run(main(url))


def test_a_short_stop_is_seen_as_a_stall(monkeypatch: pytest.MonkeyPatch) -> None:
    """A worker stopped for less than the silence bound finishes its wave; the stall is in its check."""

    async def main(url: str) -> None:
        async with WorkerLoadClient(url, workers=2, concurrency=4, timeout_s=30) as client:
            pid = client._workers[1].process.pid
            stopper = _stop_later(pid, 0.3, cont_after_s=1.5)
            recs = await run_wave(client, _wave(4, tokens=400))
            await stopper
            check = client.take_check()
        assert all(r.ok for r in recs)
        assert check is not None and check["stalled_workers"] == []
        assert check["client_stall_s"] >= 1.2, check
        assert check["loop_gap_max_s"] >= 1.2, check

    with running_simulator(profile="fast") as url:
        asyncio.run(main(url))
