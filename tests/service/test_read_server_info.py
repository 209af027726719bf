"""``read_server_info`` (harness.service.launch.manager): the server's own report, read the same way on every
protocol, so a simulator is known from its ``/server_info`` whatever the client speaks; vLLM's own
(development) ``/server_info`` is not read as a configuration."""

from __future__ import annotations

import asyncio
import json
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

import pytest
from sim_helpers import run, serving

from harness.service.identity.origin import server_is_simulator
from harness.service.launch.manager import read_server_info

MODELS = {"object": "list", "data": [{"id": "m", "object": "model"}]}


@contextmanager
def answering(routes: dict[str, Any]) -> Iterator[str]:
    """A loopback server (port 0) answering GET ``routes`` with their JSON, 404 elsewhere."""

    class Handler(BaseHTTPRequestHandler):
        def do_GET(self) -> None:
            if self.path not in routes:
                self.send_error(404)
                return
            body = json.dumps(routes[self.path]).encode()
            self.send_response(200)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

        def log_message(self, *args: object) -> None:
            pass

    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}"
    finally:
        server.shutdown()
        server.server_close()
        thread.join(10)


@pytest.mark.parametrize("protocol", ["sglang", "vllm", "openai-completions", "openai-chat"])
def test_the_simulator_is_known_on_every_protocol(protocol: str) -> None:
    async def main() -> dict[str, Any]:
        async with serving() as (server, _session):
            return await asyncio.to_thread(read_server_info, server.url, protocol)

    info = run(main())
    assert info["_source"] == "/server_info" and server_is_simulator(info)


def test_vllm_reads_v1_models_beside_a_dev_server_info() -> None:
    dev = {"vllm_config": {"model": "m"}, "version": "0.32.0"}
    with answering({"/server_info": dev, "/v1/models": MODELS}) as url:
        assert read_server_info(url, "vllm") == {"_source": "/v1/models", "models": MODELS}
        # another protocol takes an SGLang-style report as it is
        assert read_server_info(url, "openai-completions")["_source"] == "/server_info"


def test_a_server_without_server_info_falls_back_to_v1_models() -> None:
    with answering({"/v1/models": MODELS}) as url:
        for protocol in ("sglang", "vllm", "openai-completions"):
            info = read_server_info(url, protocol)
            assert info == {"_source": "/v1/models", "models": MODELS} and not server_is_simulator(info)
