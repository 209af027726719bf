"""Fault injection through request bodies is a test hook: off unless the simulator was started with
``request_faults`` (``dsv4h sim serve --allow-request-faults``), and its arguments are bounded (issue 23)."""

from __future__ import annotations

import asyncio
import time

import pytest
from sim_helpers import prompt, run, serving, stream
from typer.testing import CliRunner

from harness.cli.sim_cmd import app
from harness.errors import SpecError
from harness.sim import SimOptions
from harness.sim.faults import FAULT_MAX, parse_fault


def test_fault_arguments_are_bounded() -> None:
    assert parse_fault("stall_loop:5000").arg == 5000
    with pytest.raises(ValueError, match="<= 5000"):
        parse_fault("stall_loop:15000")
    with pytest.raises(ValueError, match="<= 60000"):
        parse_fault("slow_first_byte:600000")
    with pytest.raises(ValueError, match="<= 0"):
        parse_fault("http_500:3")
    assert set(FAULT_MAX) == {"close_mid_stream", "error_event", "slow_first_byte", "http_500", "stall",
                              "stall_loop", "retract", "ignore_salt"}
    with pytest.raises(SpecError):
        SimOptions.build(profile="fast", fault="stall_loop:999999")
    assert SimOptions.build(profile="fast").request_faults is False


def test_request_fault_without_the_flag_is_refused_and_the_loop_stays_free() -> None:
    async def body() -> None:
        async with serving() as (server, s):
            for flag in (True, False):
                async with s.post("/generate", json={"input_ids": prompt(8), "stream": flag,
                                                     "sim_fault": "stall_loop:5000"}) as r:
                    assert r.status == 400
                    assert "--allow-request-faults" in (await r.json())["error"]["message"]
            t0 = time.perf_counter()
            async with s.get("/health") as r:
                assert r.status == 200
            assert time.perf_counter() - t0 < 1.0  # the loop was never blocked
            assert server.scheduler.num_running == 0 and not server.scheduler.inflight
            ok = await stream(s, {"input_ids": prompt(8), "sampling_params": {"max_new_tokens": 3}})
            assert ok.done and ok.meta["completion_tokens"] == 3  # requests without the field are served

    run(body())


def test_request_fault_with_the_flag_out_of_range_is_refused() -> None:
    async def body() -> None:
        async with serving(request_faults=True) as (_, s):
            for spec in ("stall_loop:15000", "retract:100001", "slow_first_byte:-1", "nope"):
                async with s.post("/generate", json={"input_ids": prompt(8), "stream": True, "sim_fault": spec}) as r:
                    assert r.status == 400, spec
            t0 = time.perf_counter()
            async with s.get("/health") as r:
                assert r.status == 200
            assert time.perf_counter() - t0 < 1.0
            st = await asyncio.wait_for(stream(s, {"input_ids": prompt(8), "sim_fault": "error_event:1",
                                                   "sampling_params": {"max_new_tokens": 5}}), timeout=10)
            assert "error" in st.events[-1]  # within range and allowed: the fault applies

    run(body())


def test_cli_has_the_flag() -> None:
    out = CliRunner().invoke(app, ["serve", "--help"], env={"COLUMNS": "200", "NO_COLOR": "1"})
    assert out.exit_code == 0
    assert "--allow-request-faults" in out.output
