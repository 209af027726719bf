"""Load generation: SSE parsing (pure), the streaming HTTP client and the wave driver.

Typical use::

    async with LoadClient("http://127.0.0.1:30021", concurrency=8) as client:
        records = await run_wave(client, [WaveRequest(ids, 256, rid=f"r{i}") for i, ids in ...])
"""

from __future__ import annotations

from harness.load.client import (
    PROTOCOLS,
    Protocol,
    probe,
    sglang_body,
    stream_request,
    vllm_body,
)
from harness.load.driver import LoadClient, WaveRequest, run_sync, run_wave, run_wave_sync
from harness.load.sse import DecodedStream, SGLangDecoder, SSEParser, StreamDecoder, VLLMDecoder

__all__ = [
    "PROTOCOLS",
    "DecodedStream",
    "LoadClient",
    "Protocol",
    "SGLangDecoder",
    "SSEParser",
    "StreamDecoder",
    "VLLMDecoder",
    "WaveRequest",
    "probe",
    "run_sync",
    "run_wave",
    "run_wave_sync",
    "sglang_body",
    "stream_request",
    "vllm_body",
]
