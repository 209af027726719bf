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

__all__ = ["DONE", "DecodedStream", "SGLangDecoder", "SSEParser", "StreamDecoder", "VLLMDecoder"]


class SSEParser:
    """Incremental SSE parser: ``feed(chunk)`` returns the data payloads completed by ``chunk``.

    An event ends at a blank line; its payload is its ``data:`` lines (one leading space
    stripped) joined with ``\\n``. Lines may end in ``\\n``, ``\\r\\n`` or ``\\r``; comment lines
    (``:...``) and other fields (``event``, ``id``, ``retry``) are ignored; a block without data
    lines yields nothing. The result does not depend on how the byte stream is split into chunks
    (a ``\\r`` ending a chunk is held back until the next byte shows whether ``\\n`` follows).
    ``[DONE]`` is returned as an ordinary payload (``DONE``); an unterminated tail is never
    returned.
    """

    __slots__ = ("_buf",)

    def __init__(self) -> None:
        self._buf = b""

    def feed(self, chunk: bytes) -> list[bytes]:
        """Append ``chunk`` (bytes of one socket read) and return the payloads it completed."""
        if (
            not self._buf
            and chunk.find(b"\n") == len(chunk) - 2
            and chunk[-1:] == b"\n"
            and chunk[:6] == b"data: "
            and b"\r" not in chunk
        ):
            return [chunk[6:-2]]  # fast path: one complete single-line event, nothing buffered
        data = self._buf + chunk if self._buf else chunk
        if b"\r" in data:
            data = _normalise_newlines(data)
        if b"\n\n" not in data:
            self._buf = data
            return []
        blocks = data.split(b"\n\n")
        self._buf = blocks.pop()
        out: list[bytes] = []
        for block in blocks:
            if block[:6] == b"data: " and b"\n" not in block:
                out.append(block[6:])
            elif block:
                payload = _parse_block(block)
                if payload is not None:
                    out.append(payload)
        return out


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
