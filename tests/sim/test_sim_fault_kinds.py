"""The faults the evidence fault suite injects: retraction, stalled streams, a late simulator, and
faults limited to the first requests."""

from __future__ import annotations

import asyncio

import aiohttp
import pytest
from sim_helpers import prompt, run, serving, stream

from harness.sim.faults import parse_fault

LONG = {"max_new_tokens": 80, "ignore_eos": True}


def test_new_fault_kinds_parse() -> None:
    assert parse_fault("stall").arg == 2 and parse_fault("stall_loop").arg == 200
    assert parse_fault("retract:7").arg == 7
    with pytest.raises(ValueError, match="retract"):
        parse_fault("bogus")


def test_retract_holds_the_request_as_queued_then_finishes_it() -> None:
    async def body() -> None:
        async with serving(request_faults=True) as (server, s):
            sched = server.scheduler
            held = {"input_ids": prompt(12, 1), "sampling_params": LONG, "sim_fault": "retract:30"}
            other = {"input_ids": prompt(12, 2), "sampling_params": LONG}
            t1 = asyncio.ensure_future(stream(s, held))
            t2 = asyncio.ensure_future(stream(s, other))
            seen: set[tuple[int, int]] = set()
            while not (t1.done() and t2.done()):
                seen.add((sched.num_running, sched.num_waiting))
                await asyncio.sleep(0.002)
            a, b = t1.result(), t2.result()
            assert a.done and b.done and a.meta["completion_tokens"] == 80 == b.meta["completion_tokens"]
            assert (1, 1) in seen  # one running, the retracted one reported as queued
            assert a.meta["cached_tokens"] > 0  # admitted again: its prompt came from the prefix cache
            assert not sched.held and not sched.inflight

    run(body())


def test_retract_alone_is_released_when_nothing_else_runs() -> None:
    async def body() -> None:
        async with serving(request_faults=True) as (_, s):
            st = await asyncio.wait_for(stream(s, {"input_ids": prompt(12), "sampling_params": LONG,
                                                   "sim_fault": "retract:1000"}), timeout=10)
            assert st.done and st.meta["completion_tokens"] == 80

    run(body())


def test_stall_goes_silent_and_keeps_the_connection_open() -> None:
    async def body() -> None:
        received: list[bytes] = []

        async def read(s: aiohttp.ClientSession) -> None:
            async with s.post("/generate", json={"input_ids": prompt(10), "stream": True,
                                                 "sampling_params": LONG, "sim_fault": "stall:3"}) as r:
                async for chunk in r.content.iter_any():
                    received.append(chunk)

        async with serving(request_faults=True) as (server, s):
            with pytest.raises(TimeoutError):
                await asyncio.wait_for(read(s), timeout=0.5)
            body = b"".join(received)
            assert body.count(b"data: ") == 3 and b"[DONE]" not in body
            await asyncio.sleep(0.05)
            assert not server.scheduler.inflight  # the stalled request no longer runs

    run(body())


def test_stall_loop_makes_the_simulator_late() -> None:
    async def body() -> None:
        async with serving(request_faults=True) as (_, s):
            other = asyncio.ensure_future(stream(s, {"input_ids": prompt(12, 2), "sampling_params": LONG}))
            await asyncio.sleep(0.05)
            late = await stream(s, {"input_ids": prompt(12, 1), "sampling_params": {"max_new_tokens": 8},
                                    "sim_fault": "stall_loop:150"})
            await other
            assert late.done
            async with s.get("/server_info") as r:
                state = (await r.json())["internal_states"][0]
            assert state["sim_late_steps"] >= 1 and state["sim_lateness_total_s"] >= 0.1

    run(body())


def test_fault_first_limits_server_faults_to_the_first_requests() -> None:
    async def body() -> None:
        async with serving(fault="http_500", fault_first=2) as (_, s):
            statuses = []
            for i in range(4):
                async with s.post("/generate", json={"input_ids": prompt(8, i), "stream": True,
                                                     "sampling_params": {"max_new_tokens": 2}}) as r:
                    statuses.append(r.status)
                    await r.read()
            assert statuses == [500, 500, 200, 200]
            async with s.get("/server_info") as r:
                assert (await r.json())["dsv4h_simulator"]["fault_first"] == 2

    run(body())


def test_ignore_salt_serves_a_repeated_prompt_from_the_cache() -> None:
    async def body() -> None:
        async with serving(request_faults=True) as (_, s):
            req = {"input_ids": prompt(64), "sampling_params": {"max_new_tokens": 1}}
            first = await stream(s, req | {"cache_salt": "a"})
            salted = await stream(s, req | {"cache_salt": "b"})
            ignored = await stream(s, req | {"cache_salt": "c", "sim_fault": "ignore_salt"})
            again = await stream(s, req | {"cache_salt": "d", "sim_fault": "ignore_salt"})
            assert first.meta["cached_tokens"] == 0 and salted.meta["cached_tokens"] == 0
            assert ignored.meta["cached_tokens"] == 0  # the unsalted prefix was not cached yet
            assert again.meta["cached_tokens"] > 0

    run(body())
