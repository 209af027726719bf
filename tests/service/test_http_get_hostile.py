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
from harness.service.manager import http_get, http_post


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
