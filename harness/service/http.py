"""Small blocking HTTP reads of a server dsv4h does not trust to be well behaved: every body is read
with a byte cap and an overall deadline (urllib's ``timeout`` bounds each socket operation, not the
whole read, so a server trickling one byte at a time would otherwise hold the caller for ever), and
redirects are never followed (dsv4h sends traffic only where the user pointed it)."""

from __future__ import annotations

import time
import urllib.error
import urllib.request
from typing import Protocol

from harness.errors import ServerUnreachable

CHUNK = 64 << 10


class _Body(Protocol):
    def read(self, n: int = ..., /) -> bytes: ...


class _NoRedirect(urllib.request.HTTPRedirectHandler):
    """A redirect is answered as its own status."""

    def redirect_request(self, *args: object, **kwargs: object) -> None:
        return None


OPENER = urllib.request.build_opener(_NoRedirect)


def read_bounded(body: _Body, url: str, *, max_bytes: int, deadline: float) -> bytes:
    """At most ``max_bytes`` of ``body`` read before ``deadline`` (``time.monotonic()`` seconds);
    raises ServerUnreachable when the body is longer or still arriving at the deadline."""
    # read1: what has arrived, up to n (HTTPResponse.read(n) waits for all n bytes or the end)
    read = getattr(body, "read1", None) or getattr(getattr(body, "fp", None), "read1", None) or body.read
    chunks: list[bytes] = []
    size = 0
    while True:
        if time.monotonic() > deadline:
            raise ServerUnreachable(f"{url} was still sending its answer at the deadline",
                                    hint="this is not a serving endpoint dsv4h reads; check the URL")
        chunk = read(min(CHUNK, max_bytes + 1 - size))
        if not chunk:
            return b"".join(chunks)
        chunks.append(chunk)
        size += len(chunk)
        if size > max_bytes:
            raise ServerUnreachable(f"{url} answered more than {max_bytes} bytes",
                                    hint="this is not a serving endpoint dsv4h reads; check the URL")


def request(url: str, *, data: bytes | None = None, timeout_s: float, max_bytes: int) -> tuple[int, bytes]:
    """GET (``data`` None) or POST ``url``; returns (status, body), the body read within ``max_bytes``
    and ``timeout_s`` in all (connection included). A 3xx is returned as is. Raises
    ServerUnreachable when nothing answers, the body is too long, or it does not end in time."""
    deadline = time.monotonic() + timeout_s
    req = urllib.request.Request(url, data=data, method="GET" if data is None else "POST")
    try:
        with OPENER.open(req, timeout=timeout_s) as resp:
            return int(resp.status), read_bounded(resp, url, max_bytes=max_bytes, deadline=deadline)
    except urllib.error.HTTPError as exc:
        with exc:
            return int(exc.code), read_bounded(exc, url, max_bytes=max_bytes, deadline=deadline)
    except (urllib.error.URLError, OSError) as exc:
        raise ServerUnreachable(f"nothing answers at {url}: {exc}",
                                hint="start the server, or check host and port") from exc
