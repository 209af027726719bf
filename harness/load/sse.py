"""Server-sent events: an incremental byte parser (pure, no I/O).

``SSEParser.feed`` turns socket reads into complete event payloads; the decoders that interpret
payloads live in ``harness.load.decode`` (protocol), ``harness.load.sglang`` and
``harness.load.vllm`` and are re-exported here, so ``harness.load.sse`` is the one place to
import the whole pure streaming layer from.
"""

from __future__ import annotations

from harness.load.decode import DONE, DecodedStream, StreamDecoder
from harness.load.sglang import SGLangDecoder
from harness.load.vllm import VLLMDecoder

__all__ = ["DEFAULT_MAX_EVENT_BYTES", "DONE", "DecodedStream", "EventTooLong", "SGLangDecoder", "SSEParser",
           "StreamDecoder", "VLLMDecoder"]

DEFAULT_MAX_EVENT_BYTES = 4 << 20


class EventTooLong(ValueError):
    """One event grew past the parser's ``max_event_bytes`` without ending (the stream is unusable)."""


class SSEParser:
    """Incremental SSE parser: ``feed(chunk)`` returns the data payloads completed by ``chunk``.

    An event ends at a blank line; its payload is its ``data:`` lines (one leading space
    stripped) joined with ``\\n``. Lines may end in ``\\n``, ``\\r\\n`` or ``\\r``; comment lines
    (``:...``) and other fields (``event``, ``id``, ``retry``) are ignored; a block without data
    lines yields nothing. The result does not depend on how the byte stream is split into chunks
    (a ``\\r`` ending a chunk is held back until the next byte shows whether ``\\n`` follows).
    ``[DONE]`` is returned as an ordinary payload (``DONE``); an unterminated tail is never
    returned. ``close()`` at the end of the body returns the event a held ``\\r`` completes.

    Bounded and linear: at most ``max_event_bytes`` of an unfinished event are held (more raises
    ``EventTooLong``), and each byte is scanned for an event end once, however the stream is split.
    """

    __slots__ = ("_buf", "_cr", "max_event_bytes")

    def __init__(self, max_event_bytes: int = DEFAULT_MAX_EVENT_BYTES) -> None:
        self._buf = bytearray()
        self._cr = False  # the last chunk ended in \r (held back)
        self.max_event_bytes = max_event_bytes

    def feed(self, chunk: bytes) -> list[bytes]:
        """Append ``chunk`` (bytes of one socket read) and return the payloads it completed."""
        if (
            not self._buf
            and not self._cr
            and chunk.find(b"\n") == len(chunk) - 2
            and chunk[-1:] == b"\n"
            and chunk[:6] == b"data: "
            and b"\r" not in chunk
        ):
            return [chunk[6:-2]]  # fast path: one complete single-line event, nothing buffered
        if self._cr:
            chunk = b"\r" + chunk
            self._cr = False
        if b"\r" in chunk:
            chunk = _normalise_newlines(chunk)
            if chunk.endswith(b"\r"):
                self._cr = True
                chunk = chunk[:-1]
        buf = self._buf
        start = len(buf) - 1 if buf else 0
        buf += chunk
        if buf.find(b"\n\n", start) < 0:
            self._check(len(buf))
            return []
        blocks = bytes(buf).split(b"\n\n")
        rest = blocks.pop()
        self._check(len(rest))
        self._buf = bytearray(rest)
        out: list[bytes] = []
        for block in blocks:
            if block[:6] == b"data: " and b"\n" not in block:
                out.append(block[6:])
            elif block:
                payload = _parse_block(block)
                if payload is not None:
                    out.append(payload)
        return out

    def close(self) -> list[bytes]:
        """The body ended: a held ``\\r`` still ends its line, so the event it completes is returned;
        what remains is an event without its blank line, dropped (SSE dispatches only at a blank line)."""
        out = self.feed(b"\n") if self._cr else []
        self._buf = bytearray()
        self._cr = False
        return out

    def _check(self, held: int) -> None:
        if held > self.max_event_bytes:
            self._buf = bytearray()
            raise EventTooLong(f"an SSE event grew past {self.max_event_bytes} bytes without ending "
                               f"(limit: client.max_event_bytes)")


def _normalise_newlines(data: bytes) -> bytes:
    held = data.endswith(b"\r")
    if held:
        data = data[:-1]
    data = data.replace(b"\r\n", b"\n").replace(b"\r", b"\n")
    return data + b"\r" if held else data


def _parse_block(block: bytes) -> bytes | None:
    lines: list[bytes] = []
    for line in block.split(b"\n"):
        if not line or line[:1] == b":":
            continue
        name, _, value = line.partition(b":")
        if name != b"data":
            continue
        lines.append(value[1:] if value[:1] == b" " else value)
    return b"\n".join(lines) if lines else None
