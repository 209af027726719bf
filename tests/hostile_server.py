"""A deliberately hostile SGLang-like HTTP server for fault tests (127.0.0.1, port 0, raw sockets).

``GET /health`` answers 200 and ``GET /server_info`` a small JSON object, so a run can attach to it;
generation requests (``POST /generate``, ``/v1/completions``) misbehave according to ``mode``:

- ``stall``: the connection is accepted and the request read, then nothing is ever sent (what a
  SIGSTOPped server looks like from the client: the kernel still accepts).
- ``stall-stream``: SSE headers and ``tokens`` events, then silence.
- ``endless``: SSE events with a rising ``completion_tokens`` every ``interval_s``, never ``[DONE]``.
- ``endless-flat``: events every ``interval_s`` whose count never rises (bytes, but no progress).
- ``rise-then-flat``: ``tokens`` rising events ``interval_s`` apart, then flat events forever.
- ``huge-event``: SSE headers, then ``data: `` followed by ``event_mb`` MB without an event end.

Each connection runs in its own daemon thread; ``client_closed`` counts generation streams the
client hung up on (the server's send failed), ``bytes_sent`` what the streams sent.
"""

from __future__ import annotations

import contextlib
import json
import socket
import threading
import time
from types import TracebackType

_SSE_HEAD = (b"HTTP/1.1 200 OK\r\nContent-Type: text/event-stream\r\nCache-Control: no-cache\r\n"
             b"Connection: close\r\n\r\n")


def _event(count: int, rid: str = "h") -> bytes:
    body = {"text": "x" * count, "output_ids": list(range(count)),
            "meta_info": {"id": rid, "prompt_tokens": 8, "cached_tokens": 0, "completion_tokens": count,
                          "finish_reason": None}}
    return b"data: " + json.dumps(body, separators=(",", ":")).encode() + b"\n\n"


def _request_id(head: bytes) -> str:
    """The request's ``X-Request-Id`` (the client sends its rid there and in the body), echoed as
    ``meta_info.id`` as SGLang echoes the rid; "h" without one."""
    for line in head.split(b"\r\n")[1:]:
        name, _, value = line.partition(b":")
        if name.strip().lower() == b"x-request-id":
            return value.strip().decode("latin-1")
    return "h"


class HostileServer:
    """See the module docstring."""

    def __init__(self, mode: str, *, interval_s: float = 0.002, tokens: int = 3, event_mb: int = 64) -> None:
        self.mode = mode
        self.interval_s = interval_s
        self.tokens = tokens
        self.event_mb = event_mb
        self.sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        self.sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        self.sock.bind(("127.0.0.1", 0))
        self.sock.listen(64)
        self.url = f"http://127.0.0.1:{self.sock.getsockname()[1]}"
        self.stop = threading.Event()
        self.client_closed = 0
        self.bytes_sent = 0
        self.generate_requests = 0
        self._lock = threading.Lock()
        self._threads: list[threading.Thread] = []
        self._acceptor = threading.Thread(target=self._accept, daemon=True)

    def __enter__(self) -> HostileServer:
        self._acceptor.start()
        return self

    def __exit__(self, et: type[BaseException] | None, ev: BaseException | None, tb: TracebackType | None) -> None:
        self.close()

    def close(self) -> None:
        """Stop accepting and end every connection thread."""
        self.stop.set()
        with contextlib.suppress(OSError):
            socket.create_connection(self.sock.getsockname(), timeout=1).close()  # wake accept()
        self._acceptor.join(5)
        self.sock.close()
        for t in self._threads:
            t.join(5)

    def _accept(self) -> None:
        while not self.stop.is_set():
            try:
                conn, _ = self.sock.accept()
            except OSError:
                return
            if self.stop.is_set():
                conn.close()
                return
            t = threading.Thread(target=self._serve, args=(conn,), daemon=True)
            self._threads.append(t)
            t.start()

    def _serve(self, conn: socket.socket) -> None:
        conn.settimeout(10)
        try:
            head = b""
            while b"\r\n\r\n" not in head:
                more = conn.recv(65536)
                if not more:
                    return
                head += more
            line = head.split(b"\r\n", 1)[0].decode("latin-1")
            method, path = line.split(" ")[:2]
            if method == "GET":
                self._get(conn, path)
            else:
                with self._lock:
                    self.generate_requests += 1
                self._generate(conn, _request_id(head))
        except OSError:
            pass
        finally:
            conn.close()

    def _get(self, conn: socket.socket, path: str) -> None:
        if path == "/health":
            body = b"ok"
        elif path in ("/server_info", "/get_server_info"):
            body = json.dumps({"model_path": "hostile", "tp_size": 1}).encode()
        else:
            conn.sendall(b"HTTP/1.1 404 Not Found\r\nContent-Length: 0\r\nConnection: close\r\n\r\n")
            return
        conn.sendall(b"HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nContent-Length: "
                     + str(len(body)).encode() + b"\r\nConnection: close\r\n\r\n" + body)

    def _send(self, conn: socket.socket, data: bytes) -> bool:
        try:
            conn.sendall(data)
        except OSError:
            with self._lock:
                self.client_closed += 1
            return False
        with self._lock:
            self.bytes_sent += len(data)
        return True

    def _generate(self, conn: socket.socket, rid: str = "h") -> None:
        mode = self.mode
        if mode == "stall":
            self.stop.wait()
            return
        if not self._send(conn, _SSE_HEAD):
            return
        if mode == "huge-event":
            self._huge(conn)
            return
        count = 0
        while not self.stop.is_set():
            rising = mode == "endless" or (mode in ("rise-then-flat", "stall-stream") and count < self.tokens)
            if mode == "stall-stream" and count >= self.tokens:
                self.stop.wait()
                return
            count += 1 if rising else 0
            if not self._send(conn, _event(max(count, 1) if mode != "endless-flat" else 1, rid)):
                return
            time.sleep(self.interval_s)

    def _huge(self, conn: socket.socket) -> None:
        if not self._send(conn, b"data: "):
            return
        block = b"x" * (1 << 16)
        for _ in range(self.event_mb * 16):
            if self.stop.is_set() or not self._send(conn, block):
                return
        self.stop.wait()
