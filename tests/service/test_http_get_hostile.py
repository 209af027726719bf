"""``service.manager.http_get`` reads a server's bytes (health, /server_info, /v1/models: ``dsv4h
bench`` detects its server with it): a redirect is never followed (traffic goes only where the user
pointed it) and an endless body is cut at a bound with one clean error."""

from __future__ import annotations

import threading
from collections.abc import Iterator
from contextlib import contextmanager
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import pytest

from harness.errors import ServerUnreachable
from harness.service.launch.manager import http_get, http_post


@contextmanager
def server(handler: type[BaseHTTPRequestHandler]) -> Iterator[tuple[str, list[str]]]:
    hits: list[str] = []
    handler.hits = hits  # type: ignore[attr-defined]
    srv = ThreadingHTTPServer(("127.0.0.1", 0), handler)
    threading.Thread(target=srv.serve_forever, daemon=True).start()
    try:
        yield f"http://127.0.0.1:{srv.server_address[1]}", hits
    finally:
        srv.shutdown()
        srv.server_close()


class Target(BaseHTTPRequestHandler):
    def do_GET(self) -> None:
        self.hits.append(self.path)  # type: ignore[attr-defined]
        self.send_response(200)
        self.end_headers()
        self.wfile.write(b"{}")

    do_POST = do_GET

    def log_message(self, *args: object) -> None:
        return None


def test_a_redirect_is_returned_not_followed() -> None:
    with server(Target) as (target, hits):
        class Redirect(Target):
            def do_GET(self) -> None:
                self.send_response(302)
                self.send_header("Location", target + "/elsewhere")
                self.send_header("Content-Length", "0")
                self.end_headers()

            do_POST = do_GET

        with server(Redirect) as (url, _):
            assert http_get(url + "/server_info")[0] == 302
            assert http_post(url + "/flush_cache")[0] == 302
    assert hits == []  # the redirect's target never saw a request


def test_an_endless_body_is_cut_with_one_error() -> None:
    class Endless(Target):
        def do_GET(self) -> None:
            self.send_response(200)
            self.end_headers()
            chunk = b"x" * 65536
            try:
                for _ in range(64):  # 4 MiB, past the 1 MiB bound given below
                    self.wfile.write(chunk)
            except OSError:
                pass

    with server(Endless) as (url, _), pytest.raises(ServerUnreachable, match="answered more than 1048576 bytes"):
        http_get(url + "/server_info", max_bytes=1 << 20)


class Trickle(Target):
    """Headers at once, then one byte every 50 ms for ever (each socket read is quick, so urllib's
    per-operation timeout alone would never fire)."""

    def do_GET(self) -> None:
        self.send_response(200)
        self.end_headers()
        try:
            while True:
                self.wfile.write(b"x")
                self.wfile.flush()
                threading.Event().wait(0.05)
        except OSError:
            pass

    do_POST = do_GET


def test_a_trickling_body_ends_at_the_overall_deadline() -> None:
    with server(Trickle) as (url, _):
        with pytest.raises(ServerUnreachable, match="still sending its answer at the deadline"):
            http_get(url + "/health", timeout_s=0.5)
        with pytest.raises(ServerUnreachable, match="still sending its answer at the deadline"):
            http_post(url + "/flush_cache", timeout_s=0.5)


def test_an_endless_post_answer_is_cut_too() -> None:
    class EndlessPost(Target):
        def do_POST(self) -> None:
            self.send_response(500)
            self.end_headers()
            try:
                for _ in range(64):
                    self.wfile.write(b"x" * 65536)
            except OSError:
                pass

    with server(EndlessPost) as (url, _), pytest.raises(ServerUnreachable, match="answered more than 65536"):
        http_post(url + "/flush_cache", max_bytes=65536)


def test_sim_power_from_a_hostile_server_is_one_service_error() -> None:
    """The power sampler's ``/sim/power`` read (an attached server that says it is the simulator):
    a flood, a trickle and a non-JSON answer each become a counted read error, never a hang."""
    from harness.errors import ServiceError
    from harness.service.devices.power import MAX_POWER_BYTES, parse_sim_power_json
    from harness.service.devices.power import http_get as power_get

    class Flood(Target):
        def do_GET(self) -> None:
            self.send_response(200)
            self.end_headers()
            try:
                for _ in range(MAX_POWER_BYTES // 65536 + 4):
                    self.wfile.write(b"[" * 65536)
            except OSError:
                pass

    with server(Flood) as (url, _), pytest.raises(ServiceError, match="answered more than"):
        power_get(url + "/sim/power")
    with server(Trickle) as (url, _), pytest.raises(ServiceError, match="deadline"):
        power_get(url + "/sim/power", timeout_s=0.5)
    with server(Target) as (url, _), pytest.raises(ServiceError, match="unexpected payload"):
        parse_sim_power_json(power_get(url + "/sim/power"))


def test_a_flooded_metrics_answer_reads_as_no_metrics() -> None:
    """The witness's ``/metrics`` reads (aiohttp) keep at most ``limit`` bytes: a longer answer is a
    ValueError, which the witness takes as "no counters" rather than holding it in memory."""
    import asyncio

    import aiohttp

    from harness.run.wave import metrics_text

    class Big(Target):
        def do_GET(self) -> None:
            self.send_response(200)
            self.end_headers()
            try:
                for _ in range(8):
                    self.wfile.write(b"# HELP x\n" * 8192)
            except OSError:
                pass

    async def read(url: str, limit: int) -> str:
        async with aiohttp.ClientSession() as session, session.get(url + "/metrics") as resp:
            return await metrics_text(resp, limit)

    with server(Big) as (url, _):
        assert asyncio.run(read(url, 1 << 20)).startswith("# HELP x\n")
        with pytest.raises(ValueError, match="more than 65536 bytes"):
            asyncio.run(read(url, 65536))
