"""Wire protocol of the simulator: every endpoint, SSE framing, streaming modes, cache, validation."""

from __future__ import annotations

import asyncio
import json

import pytest
from sim_helpers import parse_sse, prompt, run, serving, stream, unary

from harness.sim.tokens import TEXT_TOKEN_OFFSET, decode_tokens


def test_introspection_endpoints() -> None:
    async def body() -> None:
        async with serving(profile="paper-tp8") as (server, s):
            async with s.get("/health") as r:
                assert r.status == 200
                assert await r.read() == b""
            infos = []
            for path in ("/server_info", "/get_server_info"):
                async with s.get(path) as r:
                    assert r.status == 200
                    infos.append(await r.json())
            info = infos[0]
            assert infos[0]["model_path"] == infos[1]["model_path"] == "sim://deepseek-v4-flash/paper-tp8"
            for key in (
                "tp_size", "dp_size", "ep_size", "speculative_algorithm", "chunked_prefill_size",
                "max_running_requests", "max_prefill_tokens", "mem_fraction_static", "page_size",
                "disable_radix_cache", "cuda_graph_bs", "cuda_graph_max_bs", "skip_tokenizer_init",
                "stream_interval", "incremental_streaming_output", "max_total_num_tokens",
                "max_req_input_len", "internal_states", "version",
            ):
                assert key in info, key
            assert info["tp_size"] == 8
            assert info["speculative_algorithm"] is None
            assert info["cuda_graph_bs"] == [1, 2, 4, 8, 16, 32, 64]
            assert info["chunked_prefill_size"] == 32768
            assert info["port"] == server.port
            assert len(info["internal_states"]) == 1
            assert info["internal_states"][0]["sim_late_steps"] == 0
            sim = info["dsv4h_simulator"]
            assert sim["profile"] == "paper-tp8"
            assert sim["parameters"]["decode_tiers"][-1] == [64, 1327.10]
            assert (sim["time_scale"], sim["step_factor"]) == (1.0, 1.0)

            async with s.get("/v1/models") as r:
                models = await r.json()
            assert models["object"] == "list"
            assert models["data"][0]["id"] == info["model_path"]
            assert models["data"][0]["owned_by"] == "sglang"
            assert models["data"][0]["object"] == "model"

            async with s.get("/metrics") as r:
                text = await r.text()
            for name in (
                "num_running_reqs", "num_queue_reqs", "token_usage", "prompt_tokens_total",
                "generation_tokens_total", "cached_tokens_total",
            ):
                assert f"# HELP sglang:{name} " in text
                assert f"# TYPE sglang:{name} " in text
                assert f'sglang:{name}{{model_name="sim://deepseek-v4-flash/paper-tp8"}} ' in text

    run(body())


def _check_cumulative(events: list[dict[str, object]]) -> None:
    prev: list[int] = []
    for i, ev in enumerate(events):
        assert list(ev) == ["text", "output_ids", "meta_info"]
        meta = ev["meta_info"]
        assert isinstance(meta, dict)
        ids = ev["output_ids"]
        assert isinstance(ids, list)
        assert ids[: len(prev)] == prev
        assert meta["completion_tokens"] == len(ids)
        assert ev["text"] == decode_tokens(ids)
        assert ev["text"]
        assert ("e2e_latency" in meta) == (i == len(events) - 1)
        assert (meta["finish_reason"] is None) == (i < len(events) - 1)
        for key in ("id", "prompt_tokens", "cached_tokens", "weight_version", "total_retractions", "sim_emit_ns"):
            assert key in meta
        prev = ids


def test_stream_shape_cumulative() -> None:
    async def body() -> None:
        async with serving() as (_, s):
            st = await stream(s, {"input_ids": prompt(20), "rid": "r1", "sampling_params": {"max_new_tokens": 12}})
            assert st.status == 200
            assert st.done
            assert st.raw.endswith(b"data: [DONE]\n\n")
            for part in st.raw.split(b"\n\n")[:-2]:
                payload = part[len(b"data: ") :]
                assert payload == json.dumps(json.loads(payload), separators=(",", ":")).encode()
            assert len(st.events) == 12
            _check_cumulative(st.events)
            meta = st.meta
            assert meta["id"] == "r1"
            assert meta["finish_reason"] == {"type": "length", "length": 12}
            assert meta["prompt_tokens"] == 20
            assert meta["cached_tokens"] == 0
            assert meta["weight_version"] == "default"
            emits = [ev["meta_info"]["sim_emit_ns"] for ev in st.events]
            assert emits == sorted(emits)

    run(body())


def test_delta_and_skip_tokenizer_modes() -> None:
    async def body() -> None:
        payload = {"input_ids": prompt(30), "sampling_params": {"max_new_tokens": 10}}
        async with serving() as (_, s):
            full = await stream(s, payload)
        async with serving(stream_mode="delta") as (_, s):
            delta = await stream(s, payload)
            async with s.get("/server_info") as r:
                assert (await r.json())["incremental_streaming_output"] is True
        async with serving(stream_mode="skip-tokenizer-init") as (_, s):
            skip = await stream(s, payload)
            st = await stream(s, {"text": "hello"})
            assert st.status == 400
            assert "error" in json.loads(st.raw)
            status, nonstream = await unary(s, payload)
            assert status == 200
            assert "text" not in nonstream
            async with s.get("/server_info") as r:
                assert (await r.json())["skip_tokenizer_init"] is True
        want_ids = full.last["output_ids"]
        assert [t for ev in delta.events for t in ev["output_ids"]] == want_ids
        assert "".join(ev["text"] for ev in delta.events) == full.last["text"]
        assert [ev["meta_info"]["completion_tokens"] for ev in delta.events] == list(range(1, 11))
        assert all(len(ev["output_ids"]) == 1 for ev in delta.events)
        assert all("text" not in ev for ev in skip.events)
        assert skip.last["output_ids"] == want_ids
        assert [len(ev["output_ids"]) for ev in skip.events] == list(range(1, 11))

    run(body())


def test_stream_interval_groups_tokens() -> None:
    async def body() -> None:
        async with serving(stream_interval=4) as (_, s):
            st = await stream(s, {"input_ids": prompt(8), "sampling_params": {"max_new_tokens": 11}})
        counts = [ev["meta_info"]["completion_tokens"] for ev in st.events]
        assert counts == [1, 5, 9, 11]
        assert st.done
        _check_cumulative(st.events)

    run(body())


def test_text_prompt_and_nonstreaming_body() -> None:
    async def body() -> None:
        async with serving() as (_, s):
            status, out = await unary(s, {"text": "héllo", "sampling_params": {"max_new_tokens": 6}})
            st = await stream(s, {"input_ids": [b + TEXT_TOKEN_OFFSET for b in "héllo".encode()],
                                  "sampling_params": {"max_new_tokens": 6}})
        assert status == 200
        assert list(out) == ["text", "output_ids", "meta_info"]
        assert out["meta_info"]["prompt_tokens"] == len("héllo".encode())
        assert out["meta_info"]["completion_tokens"] == 6
        assert "e2e_latency" in out["meta_info"]
        assert out["output_ids"] == st.last["output_ids"]
        assert out["text"] == st.last["text"]

    run(body())


@pytest.mark.parametrize(
    ("payload", "fragment"),
    [
        ({"text": "a", "input_ids": [5]}, "exactly one"),
        ({}, "exactly one"),
        ({"input_ids": []}, "empty"),
        ({"input_ids": [[1, 2]]}, "batches"),
        ({"input_ids": [5], "sampling_params": {"max_new_tokens": 0}}, "max_new_tokens"),
        ({"input_ids": [5], "cache_salt": 3}, "cache_salt"),
        ({"input_ids": [5], "sim_fault": "nope"}, "not started with request faults allowed"),
    ],
)
def test_invalid_requests_get_400_json(payload: dict[str, object], fragment: str) -> None:
    async def body() -> None:
        async with serving() as (_, s):
            for stream_flag in (True, False):
                async with s.post("/generate", json={**payload, "stream": stream_flag}) as r:
                    assert r.status == 400
                    err = await r.json()
                    assert fragment in err["error"]["message"]
            async with s.post("/generate", data=b"{not json") as r:
                assert r.status == 400

    run(body())


def test_duplicate_rid_rejected_while_in_flight() -> None:
    async def body() -> None:
        async with serving() as (_, s):
            long = asyncio.create_task(stream(s, {"input_ids": prompt(5), "rid": "dup", "sampling_params": {
                "max_new_tokens": 200, "ignore_eos": True}}))
            await asyncio.sleep(0.05)
            async with s.post("/generate", json={"input_ids": [5], "rid": "dup"}) as r:
                assert r.status == 400
                assert "duplicate" in (await r.json())["error"]["message"]
            first = await long
            assert first.meta["completion_tokens"] == 200
            again = await stream(s, {"input_ids": [5], "rid": "dup", "sampling_params": {"max_new_tokens": 2}})
            assert again.status == 200

    run(body())


def test_prefix_cache_salt_and_flush() -> None:
    async def body() -> None:
        ids = prompt(64)
        sp = {"max_new_tokens": 2}
        async with serving() as (_, s):
            first = await stream(s, {"input_ids": ids, "cache_salt": "a", "sampling_params": sp})
            hit = await stream(s, {"input_ids": ids, "cache_salt": "a", "sampling_params": sp})
            longer = await stream(s, {"input_ids": [*ids, 9, 9], "cache_salt": "a", "sampling_params": sp})
            fresh = await stream(s, {"input_ids": ids, "cache_salt": "b", "sampling_params": sp})
            other_key = await stream(s, {"input_ids": ids, "cache_salt": "a", "extra_key": "x", "sampling_params": sp})
            async with s.post("/flush_cache") as r:
                assert r.status == 200
                assert r.content_type == "text/plain"
                assert "flushed" in (await r.text()).lower()
            flushed = await stream(s, {"input_ids": ids, "cache_salt": "a", "sampling_params": sp})
            async with s.get("/metrics") as r:
                metrics = await r.text()
        assert first.meta["cached_tokens"] == 0
        assert hit.meta["cached_tokens"] == 63
        assert longer.meta["cached_tokens"] == 64
        assert fresh.meta["cached_tokens"] == 0
        assert other_key.meta["cached_tokens"] == 0
        assert flushed.meta["cached_tokens"] == 0
        assert hit.last["output_ids"] == first.last["output_ids"]
        assert 'sglang:cached_tokens_total{model_name="sim://deepseek-v4-flash/fast"} 127.0' in metrics

    run(body())


def test_flush_cache_refused_while_running() -> None:
    async def body() -> None:
        async with serving() as (_, s):
            task = asyncio.create_task(stream(s, {"input_ids": prompt(5), "sampling_params": {
                "max_new_tokens": 100, "ignore_eos": True}}))
            await asyncio.sleep(0.03)
            async with s.get("/flush_cache") as r:
                assert r.status == 400
                assert r.content_type == "text/plain"
                assert "pending" in await r.text()
            async with s.get("/metrics") as r:
                assert 'sglang:num_running_reqs{model_name="sim://deepseek-v4-flash/fast"} 1.0' in await r.text()
            await task
            async with s.get("/flush_cache") as r:
                assert r.status == 200

    run(body())


def test_parse_sse_rejects_bad_framing() -> None:
    with pytest.raises(AssertionError):
        parse_sse(b"data: {}\n")
    events, done = parse_sse(b'data: {"a":1}\n\ndata: [DONE]\n\n')
    assert events == [{"a": 1}]
    assert done


def test_long_prompt_is_chunked_and_counts_are_reported() -> None:
    async def body() -> None:
        async with serving() as (server, s):
            st = await stream(s, {"input_ids": prompt(40_000), "sampling_params": {"max_new_tokens": 3}})
            assert server.scheduler.stats.prefill_forwards == 2  # 32768 + 7232 tokens
            async with s.get("/metrics") as r:
                text = await r.text()
        assert st.meta["prompt_tokens"] == 40_000
        assert st.meta["completion_tokens"] == 3
        assert 'sglang:prompt_tokens_total{model_name="sim://deepseek-v4-flash/fast"} 40000.0' in text
        assert 'sglang:generation_tokens_total{model_name="sim://deepseek-v4-flash/fast"} 3.0' in text

    run(body())


def test_a_busy_port_is_one_error_naming_host_port_and_the_fix() -> None:
    import socket

    from testkit import run_cli

    with socket.socket() as holder:
        holder.bind(("127.0.0.1", 0))
        holder.listen()
        port = holder.getsockname()[1]
        code, _out, err = run_cli("sim", "serve", "--profile", "fast", "--host", "127.0.0.1", "--port", str(port))
    assert code == 4, err
    assert f"error: cannot listen on 127.0.0.1:{port}: the port is already in use" in err
    assert "--port 0" in err and f"stop the process holding port {port}" in err
    assert "check the path" not in err
