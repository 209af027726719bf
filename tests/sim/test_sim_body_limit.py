"""The simulator's request-body limit (harness.sim.protocol.body_limit): a body larger than its longest
prompt as JSON is answered 413 before it is read or parsed, by Content-Length or, chunked, at the limit."""

from __future__ import annotations

import asyncio
import json
from collections.abc import AsyncIterator
from typing import Any

from sim_helpers import prompt, run, serving

from harness.sim import SimOptions
from harness.sim.protocol import body_limit


def test_limit_follows_the_prompt_limit() -> None:
    profile = SimOptions.build(profile="fast").resolved_profile
    assert (profile.context_length, profile.max_total_num_tokens) == (1_048_576, 1_048_576)
    assert body_limit(profile) == 1_048_575 * 8 + 2**20 == 9_437_176


async def _head_only(url: str, path: str, length: int) -> bytes:
    """Send only the headers of a request claiming ``length`` bytes; the server's answer."""
    host, port = url.split("//", 1)[1].rsplit(":", 1)
    reader, writer = await asyncio.open_connection(host, int(port))
    writer.write(f"POST {path} HTTP/1.1\r\nHost: sim\r\nContent-Type: application/json\r\n"
                 f"Content-Length: {length}\r\n\r\n".encode())
    await writer.drain()
    answer = await asyncio.wait_for(reader.read(4096), 10)
    writer.close()
    return answer


def test_declared_length_over_the_limit_is_refused_unread() -> None:
    async def body() -> list[bytes]:
        async with serving() as (server, _):
            limit = body_limit(server.profile)
            return [await _head_only(server.url, p, limit + 1) for p in ("/generate", "/v1/completions")]

    for answer in run(body()):
        assert answer.startswith(b"HTTP/1.1 413")
        assert b"larger than this server reads (9437176 bytes" in answer


def test_chunked_body_over_the_limit_is_refused_at_the_limit() -> None:
    async def chunks() -> AsyncIterator[bytes]:
        yield b'{"input_ids": ['
        for _ in range(10):
            yield b"1, " * 400_000  # 1.2 MB a chunk: 12 MB in all, over the 9 MB limit

    async def body() -> tuple[int, Any, int, Any]:
        async with serving() as (_, session):
            async with session.post("/generate", data=chunks(), headers={"Content-Type": "application/json"}) as r:
                big = (r.status, await r.json())
            async with session.post("/generate", data=json.dumps({"input_ids": prompt(8),
                                                                  "sampling_params": {"max_new_tokens": 2}})) as r:
                return *big, r.status, await r.json()

    status, answer, ok_status, ok = run(body())
    assert status == 413 and "9437176 bytes" in answer["error"]["message"]
    assert ok_status == 200 and ok["meta_info"]["completion_tokens"] == 2
