"""Faults, startup, death, shutdown, disconnects, the thread runner and the CLI process."""

from __future__ import annotations

import asyncio
import signal
import subprocess
import sys
import time
from pathlib import Path

import aiohttp
import pytest
from sim_helpers import parse_sse, prompt, run, serving, session, spawned, stream, unary

from harness.errors import ServiceError
from harness.sim import running_simulator

LONG = {"max_new_tokens": 400, "ignore_eos": True}


async def _raw_stream(s: aiohttp.ClientSession, payload: dict[str, object]) -> tuple[int, bytes, str | None]:
    """(status, bytes received, name of the client exception or None)."""
    received = b""
    try:
        async with s.post("/generate", json={**payload, "stream": True}) as r:
            async for chunk in r.content.iter_any():
                received += chunk
            return r.status, received, None
    except (aiohttp.ClientError, ConnectionError) as exc:
        return -1, received, type(exc).__name__


@pytest.mark.parametrize("via", ["request", "server"])
def test_close_mid_stream(via: str) -> None:
    async def body() -> None:
        opts: dict[str, object] = {"fault": "close_mid_stream:3"} if via == "server" else {"request_faults": True}
        payload: dict[str, object] = {"input_ids": prompt(10), "sampling_params": {"max_new_tokens": 20}}
        if via == "request":
            payload["sim_fault"] = "close_mid_stream:3"
        async with serving(**opts) as (server, s):
            _, received, error = await _raw_stream(s, payload)
            assert error is not None
            assert received.count(b"data: ") == 3
            assert b"[DONE]" not in received
            with pytest.raises(aiohttp.ClientError):
                await unary(s, payload)
            await asyncio.sleep(0.01)
            assert server.scheduler.num_running == 0
            assert not server.scheduler.inflight

    run(body())


def test_error_event_then_done_with_http_200() -> None:
    async def body() -> None:
        async with serving(request_faults=True) as (_, s):
            st = await stream(s, {"input_ids": prompt(10), "sim_fault": "error_event:2",
                                  "sampling_params": {"max_new_tokens": 20}})
            assert st.status == 200
            assert st.done
            assert len(st.events) == 3
            assert "error" in st.events[-1]
            assert st.events[-1]["error"]["message"]
            assert all("meta_info" in ev for ev in st.events[:2])
            status, out = await unary(s, {"input_ids": [5], "sim_fault": "error_event"})
            assert status == 500
            assert out["error"]["message"]

    run(body())


def test_slow_first_byte_and_http_500() -> None:
    async def body() -> None:
        async with serving(request_faults=True) as (_, s):
            t0 = time.perf_counter()
            async with s.post("/generate", json={"input_ids": [5], "stream": True, "sim_fault": "slow_first_byte:300",
                                                 "sampling_params": {"max_new_tokens": 2}}) as r:
                headers_after = time.perf_counter() - t0
                events, done = parse_sse(await r.read())
            assert headers_after >= 0.3
            assert done
            assert events[-1]["meta_info"]["completion_tokens"] == 2
            for stream_flag in (True, False):
                async with s.post("/generate", json={"input_ids": [5], "stream": stream_flag,
                                                     "sim_fault": "http_500"}) as r:
                    assert r.status == 500
                    assert (await r.json())["error"]["message"]

    run(body())


def test_server_fault_every_nth_request() -> None:
    async def body() -> None:
        async with serving(fault="http_500", fault_every=2) as (_, s):
            statuses = []
            for _ in range(4):
                status, _body = await unary(s, {"input_ids": [5], "sampling_params": {"max_new_tokens": 2}})
                statuses.append(status)
            assert statuses == [200, 500, 200, 500]

    run(body())


def test_health_503_during_startup_delay() -> None:
    async def body() -> None:
        async with serving(startup_delay_s=0.3) as (_, s):
            async with s.get("/health") as r:
                assert r.status == 503
            status, _ = await unary(s, {"input_ids": [5]})
            assert status == 503
            await asyncio.sleep(0.35)
            async with s.get("/health") as r:
                assert r.status == 200
            status, _ = await unary(s, {"input_ids": [5], "sampling_params": {"max_new_tokens": 2}})
            assert status == 200

    run(body())


def test_die_after_requests_cuts_everything() -> None:
    async def body() -> None:
        async with serving(die_after_requests=2) as (server, s):
            first = asyncio.create_task(_raw_stream(s, {"input_ids": prompt(10), "sampling_params": LONG}))
            ok = await stream(s, {"input_ids": [5], "sampling_params": {"max_new_tokens": 2}})
            assert ok.done
            await asyncio.sleep(0.05)
            _, _, third_error = await _raw_stream(s, {"input_ids": [6]})
            _, received, error = await first
            assert error is not None
            assert received.count(b"data: ") >= 1
            assert b"[DONE]" not in received
            assert third_error is not None
            assert server.died.is_set()
            assert server.death_reason == "died after 2 requests"
            async with aiohttp.ClientSession() as fresh:
                with pytest.raises(aiohttp.ClientConnectionError):
                    await fresh.get(server.url + "/health")

    run(body())


def test_die_after_seconds() -> None:
    async def body() -> None:
        async with serving(die_after_s=0.2) as (server, s):
            _, received, error = await _raw_stream(s, {"input_ids": prompt(10), "sampling_params": LONG})
            assert error is not None
            assert b"[DONE]" not in received
            assert server.died.is_set()

    run(body())


def test_client_disconnect_aborts_request() -> None:
    async def body() -> None:
        async with serving() as (server, s):
            payload = {"input_ids": prompt(10), "stream": True, "sampling_params": LONG}
            async with s.post("/generate", json=payload) as r:
                await r.content.readline()
                assert server.scheduler.num_running == 1
            await asyncio.sleep(0.05)
            assert server.scheduler.num_running == 0
            assert not server.scheduler.inflight

    run(body())


def test_stop_aborts_streams_with_done() -> None:
    async def body() -> None:
        async with serving() as (server, s):
            task = asyncio.create_task(stream(s, {"input_ids": prompt(10), "sampling_params": LONG}))
            await asyncio.sleep(0.05)
            await server.stop()
            st = await task
            assert st.done
            assert st.meta["finish_reason"]["type"] == "abort"

    run(body())


def test_running_simulator_thread() -> None:
    async def body(url: str) -> None:
        async with session(url) as s:
            st = await stream(s, {"input_ids": [0, 128803, 3085, 344, 270, 6102, 294, 8760, 2755, 128804, 128822]})
            assert "".join(ev["text"] for ev in st.events) == "The capital of France is **Paris**."
            assert st.last["text"] == ""  # delta mode: the EOS token's text is empty

    with running_simulator(profile="fast", stream_mode="delta") as url:
        assert url.startswith("http://127.0.0.1:")
        run(body(url))
    with pytest.raises(ServiceError), running_simulator(profile="fast", host="256.0.0.1"):
        pass


def test_cli_serve_process(tmp_path: Path) -> None:
    ready = tmp_path / "url.txt"
    with spawned("--profile", "fast", "--ready-file", str(ready), "--stream-interval", "2") as (proc, url):
        assert ready.read_text().strip() == url

        async def body() -> None:
            async with session(url) as s:
                async with s.get("/server_info") as r:
                    info = await r.json()
                assert info["stream_interval"] == 2
                assert info["dsv4h_simulator"]["profile"] == "fast"

        run(body())
        proc.send_signal(signal.SIGTERM)
        assert proc.wait(timeout=10) == 0


def test_cli_process_exits_when_it_dies() -> None:
    with spawned("--profile", "fast", "--die-after-requests", "0") as (proc, url):

        async def body() -> None:
            async with session(url) as s:
                _, _, error = await _raw_stream(s, {"input_ids": [5]})
                assert error is not None

        run(body())
        assert proc.wait(timeout=10) == 4  # ServiceDied
        assert proc.stderr is not None
        assert "simulated death" in proc.stderr.read()


def test_cli_unknown_profile_and_profiles_table() -> None:
    base = [sys.executable, "-c", "from harness.cli import main; main()", "sim"]
    bad = subprocess.run([*base, "serve", "--profile", "nope"], check=False, capture_output=True, text=True, timeout=30)
    assert bad.returncode == 2
    assert "paper-tp8" in bad.stderr
    table = subprocess.run([*base, "profiles"], check=False, capture_output=True, text=True, timeout=30)
    assert table.returncode == 0
    assert "1327.10" in table.stdout
    helptext = subprocess.run([*base, "serve", "--help"], check=False, capture_output=True, text=True, timeout=30)
    assert "Example" in helptext.stdout
