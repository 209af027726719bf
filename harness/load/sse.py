"""Server-sent events: an incremental byte parser and the stream decoders built on it (pure, no I/O).

``SSEParser.feed`` turns socket reads into complete event payloads. A ``StreamDecoder`` turns
payloads (each stamped with the client monotonic time of the read that carried it, in ns) into
the per-request facts a ``RequestRecord`` needs: ``SGLangDecoder`` for SGLang ``/generate``,
``VLLMDecoder`` for vLLM ``/v1/completions`` (GUIDE section 4).

Speed matters (one decoder call per streamed event, inside the timing path): the SGLang decoder
never ``json.loads`` an ordinary event. It finds the ``"completion_tokens":`` key from the end
of the payload (``meta_info`` comes last), reads ``sim_emit_ns`` the same way, and counts
``output_ids`` by commas only until the stream's mode (cumulative or delta) is known. The final
counted event is fully decoded once, by ``finish``; events without a count, error events and
anything unexpected take the full ``json.loads`` path. A key pattern ``"name":`` cannot occur
inside a JSON string (its quotes would be escaped), so a match is a real key.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass, field
from typing import Any, Protocol

DONE = b"[DONE]"


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


@dataclass(slots=True)
class DecodedStream:
    """What a decoder extracted from one stream (the record's stream fields).

    ``event_ns[k]`` (client monotonic ns of the read that carried the event) and
    ``event_tokens[k]`` (cumulative output tokens after it) exist for every event that carried a
    count. ``emit_ns`` is parallel to ``event_ns`` when every counted event had
    ``meta_info.sim_emit_ns``, else empty. ``done_ns`` is the arrival of ``[DONE]`` (None if it
    never came). ``error`` is the first protocol-level failure seen (error event, malformed
    event, inconsistent counts, abort), else None; transport failures are the client's.
    ``output_mode`` is "cumulative", "delta" or "none" (no output ids on the stream);
    a stream whose only tokens came in a single event reads the same either way and is
    reported as "cumulative".
    """

    n_events: int = 0
    done_ns: int | None = None
    event_ns: list[int] = field(default_factory=list)
    event_tokens: list[int] = field(default_factory=list)
    emit_ns: list[int] = field(default_factory=list)
    output_ids: list[int] = field(default_factory=list)
    prompt_tokens: int | None = None
    cached_tokens: int | None = None
    completion_tokens: int | None = None
    finish_reason: str | None = None
    output_mode: str = "none"
    error: str | None = None


class StreamDecoder(Protocol):
    """Interprets the payloads of one streamed response.

    ``on_event`` is called once per payload in arrival order with the client monotonic time
    (ns) of the socket read that carried it; it never raises on bad input (it records an error
    instead) and ignores payloads after ``[DONE]``. ``done_ns`` and ``n_events`` (data events
    seen, ``[DONE]`` excluded) are readable at any time. ``finish`` is called once at the end.
    """

    done_ns: int | None
    n_events: int

    def on_event(self, payload: bytes, t_ns: int) -> None: ...

    def finish(self) -> DecodedStream: ...


def _snippet(payload: bytes, n: int = 80) -> str:
    text = payload[:n].decode("utf-8", "replace")
    return text + ("..." if len(payload) > n else "")


def _error_message(err: Any) -> str:
    if isinstance(err, dict):
        msg = err.get("message")
        return str(msg) if msg is not None else json.dumps(err)[:200]
    return str(err)[:200]


def _finish_type(fr: Any) -> tuple[str | None, str | None]:
    """(type, message) of a finish_reason that may be None, a string or a dict."""
    if fr is None:
        return None, None
    if isinstance(fr, dict):
        kind = fr.get("type")
        msg = fr.get("message")
        return (str(kind) if kind is not None else None), (str(msg) if msg is not None else None)
    return str(fr), None


_CT_KEY = b'"completion_tokens":'
_EMIT_KEY = b'"sim_emit_ns":'
_IDS_KEY = b'"output_ids":'
_INT_AT = re.compile(rb"[ \t\r\n]*(\d+)")
_ARRAY_AT = re.compile(rb"[ \t\r\n]*\[([^\]]*)\]")


class SGLangDecoder:
    """Decoder for SGLang native ``/generate`` streams (GUIDE section 4).

    Counts come from ``meta_info.completion_tokens`` (cumulative); ``output_ids`` may be
    cumulative or deltas, decided per stream by which reading agrees with the counts. Tolerates
    a missing ``text`` key and unknown keys. Only the last counted event is fully validated
    JSON; earlier ones are checked for shape (``{...}``) and their count and emit time read.
    """

    __slots__ = (
        "_cum_ok",
        "_delta_ok",
        "_delta_sum",
        "_deltas",
        "_emit",
        "_last",
        "_prev",
        "_resolved",
        "_saw_ids",
        "_want_emit",
        "done_ns",
        "error",
        "event_ns",
        "event_tokens",
        "n_events",
    )

    def __init__(self) -> None:
        self.done_ns: int | None = None
        self.n_events = 0
        self.error: str | None = None
        self.event_ns: list[int] = []
        self.event_tokens: list[int] = []
        self._emit: list[int] = []
        self._want_emit = True
        self._last: bytes | None = None
        self._prev = 0
        self._saw_ids = False
        self._cum_ok = True
        self._delta_ok = True
        self._resolved = False
        self._deltas: list[bytes] = []
        self._delta_sum = 0

    def on_event(self, payload: bytes, t_ns: int) -> None:
        """Take one payload (see ``StreamDecoder``)."""
        if self.done_ns is not None or not payload:
            return
        if payload == DONE:
            self.done_ns = t_ns
            return
        self.n_events += 1
        i = payload.rfind(_CT_KEY)
        if i < 0 or payload[:1] != b"{" or payload[-1:] != b"}" or payload.startswith(b'{"error"'):
            self._slow(payload, t_ns)
            return
        m = _INT_AT.match(payload, i + 20)
        if m is None:
            self._slow(payload, t_ns)
            return
        emit: int | None = None
        if self._want_emit:
            j = payload.rfind(_EMIT_KEY)
            if j >= 0:
                e = _INT_AT.match(payload, j + 14)
                emit = int(e.group(1)) if e is not None else None
        self._count(payload, int(m.group(1)), emit, t_ns)

    def _slow(self, payload: bytes, t_ns: int) -> None:
        try:
            obj = json.loads(payload)
        except ValueError:
            self._fail(f"malformed event: {_snippet(payload)}")
            return
        if not isinstance(obj, dict):
            self._fail(f"malformed event: {_snippet(payload)}")
            return
        if "error" in obj:
            self._fail(f"error event: {_error_message(obj['error'])}")
            return
        meta = obj.get("meta_info")
        ct = meta.get("completion_tokens") if isinstance(meta, dict) else None
        if not isinstance(ct, int) or isinstance(ct, bool):
            return  # an event without a count (tolerated, not counted)
        assert isinstance(meta, dict)
        emit = meta.get("sim_emit_ns")
        self._count(payload, ct, emit if isinstance(emit, int) else None, t_ns)

    def _count(self, payload: bytes, ct: int, emit: int | None, t_ns: int) -> None:
        if ct < self._prev:
            self._fail(f"malformed event: completion_tokens went from {self._prev} to {ct}")
        self._prev = ct
        self.event_ns.append(t_ns)
        self.event_tokens.append(ct)
        if self._want_emit:
            if emit is None:
                self._want_emit = False
            else:
                self._emit.append(emit)
        self._last = payload
        if not self._resolved:
            self._track_ids(payload, ct)
        elif self._delta_ok:
            inner = self._ids_inner(payload)
            if inner is not None and inner.strip():
                self._deltas.append(inner)

    @staticmethod
    def _ids_inner(payload: bytes) -> bytes | None:
        k = payload.find(_IDS_KEY)
        if k < 0:
            return None
        m = _ARRAY_AT.match(payload, k + 13)
        return m.group(1) if m is not None else None

    def _track_ids(self, payload: bytes, ct: int) -> None:
        inner = self._ids_inner(payload)
        if inner is None:
            n = 0
        else:
            self._saw_ids = True
            n = inner.count(b",") + 1 if inner.strip() else 0
        if inner is not None:
            self._cum_ok = self._cum_ok and n == ct
        self._delta_ok = self._delta_ok and self._delta_sum + n == ct
        self._delta_sum += n
        if self._delta_ok and n:
            assert inner is not None
            self._deltas.append(inner)
        if self._cum_ok != self._delta_ok:
            self._resolved = True
            if not self._delta_ok:
                self._deltas = []
        elif not self._cum_ok and self._saw_ids:
            self._resolved = True
            self._fail(f"inconsistent output_ids: {n} ids in an event with completion_tokens {ct}")

    def _fail(self, reason: str) -> None:
        if self.error is None:
            self.error = reason

    def finish(self) -> DecodedStream:
        """Decode the last counted event in full and return the stream's facts."""
        out = DecodedStream(
            n_events=self.n_events,
            done_ns=self.done_ns,
            event_ns=self.event_ns,
            event_tokens=self.event_tokens,
            emit_ns=self._emit if len(self._emit) == len(self.event_ns) else [],
        )
        if self._last is None:
            out.error = self.error
            return out
        try:
            obj = json.loads(self._last)
            meta = obj.get("meta_info") or {}
        except (ValueError, AttributeError):
            self._fail(f"malformed event: {_snippet(self._last)}")
            obj, meta = {}, {}
        out.completion_tokens = self.event_tokens[-1]
        out.prompt_tokens = _int_or_none(meta.get("prompt_tokens"))
        out.cached_tokens = _int_or_none(meta.get("cached_tokens"))
        out.finish_reason, abort_msg = _finish_type(meta.get("finish_reason"))
        if out.finish_reason == "abort":
            self._fail(f"aborted: {abort_msg or 'no message'}")
        if self._saw_ids:
            self._final_ids(out, obj)
        out.error = self.error
        return out

    def _final_ids(self, out: DecodedStream, obj: dict[str, Any]) -> None:
        if self._delta_ok:  # deltas (or a stream both readings agree on)
            joined = b",".join(self._deltas)
            out.output_ids = json.loads(b"[" + joined + b"]") if joined else []
            out.output_mode = "cumulative" if self._cum_ok else "delta"
        else:
            ids = obj.get("output_ids")
            out.output_ids = list(ids) if isinstance(ids, list) else []
            out.output_mode = "cumulative" if self._cum_ok else "unknown"
        if out.output_mode != "unknown" and len(out.output_ids) != out.completion_tokens:
            self._fail(
                f"inconsistent output_ids: {len(out.output_ids)} {out.output_mode} ids for "
                f"completion_tokens {out.completion_tokens}"
            )


def _int_or_none(v: Any) -> int | None:
    return v if isinstance(v, int) and not isinstance(v, bool) else None


class VLLMDecoder:
    """Decoder for vLLM OpenAI ``/v1/completions`` streams with ``return_token_ids``.

    Each chunk's ``choices[0].token_ids`` is a delta; the count after a chunk is the running
    sum of those (text may be empty for a real token, so text is never counted). The first
    chunk's ``prompt_token_ids`` gives the prompt length; the final ``choices: []`` chunk's
    ``usage`` gives ``completion_tokens`` (checked against the sum), ``prompt_tokens`` and
    ``prompt_tokens_details.cached_tokens``. Every chunk is small, so every chunk is decoded.
    """

    __slots__ = (
        "_fr",
        "_ids",
        "_prompt_len",
        "_saw_ids",
        "_usage",
        "done_ns",
        "error",
        "event_ns",
        "event_tokens",
        "n_events",
    )

    def __init__(self) -> None:
        self.done_ns: int | None = None
        self.n_events = 0
        self.error: str | None = None
        self.event_ns: list[int] = []
        self.event_tokens: list[int] = []
        self._ids: list[int] = []
        self._saw_ids = False
        self._prompt_len: int | None = None
        self._usage: dict[str, Any] | None = None
        self._fr: Any = None

    def on_event(self, payload: bytes, t_ns: int) -> None:
        """Take one payload (see ``StreamDecoder``)."""
        if self.done_ns is not None or not payload:
            return
        if payload == DONE:
            self.done_ns = t_ns
            return
        self.n_events += 1
        try:
            obj = json.loads(payload)
        except ValueError:
            obj = None
        if not isinstance(obj, dict):
            self._fail(f"malformed event: {_snippet(payload)}")
            return
        if "error" in obj or obj.get("object") == "error":
            self._fail(f"error event: {_error_message(obj.get('error', obj))}")
            return
        choices = obj.get("choices")
        if isinstance(choices, list) and choices and isinstance(choices[0], dict):
            self._choice(choices[0], t_ns)
        usage = obj.get("usage")
        if isinstance(usage, dict):
            self._usage = usage

    def _choice(self, c: dict[str, Any], t_ns: int) -> None:
        prompt = c.get("prompt_token_ids")
        if isinstance(prompt, list):
            self._prompt_len = len(prompt)
        ids = c.get("token_ids")
        if isinstance(ids, list):
            self._saw_ids = True
            self._ids.extend(ids)
            self.event_ns.append(t_ns)
            self.event_tokens.append(len(self._ids))
        if c.get("finish_reason") is not None:
            self._fr = c.get("finish_reason")

    def _fail(self, reason: str) -> None:
        if self.error is None:
            self.error = reason

    def finish(self) -> DecodedStream:
        """Return the stream's facts (see ``DecodedStream``)."""
        out = DecodedStream(
            n_events=self.n_events,
            done_ns=self.done_ns,
            event_ns=self.event_ns,
            event_tokens=self.event_tokens,
            output_ids=self._ids,
            output_mode="delta" if self._saw_ids else "none",
            prompt_tokens=self._prompt_len,
        )
        out.finish_reason, abort_msg = _finish_type(self._fr)
        if out.finish_reason == "abort":
            self._fail(f"aborted: {abort_msg or 'no message'}")
        out.completion_tokens = len(self._ids) if self._saw_ids else None
        if self._usage is not None:
            self._apply_usage(out, self._usage)
        if self.n_events and not self._saw_ids and self.error is None:
            self._fail("no token_ids on the stream (does the server support return_token_ids?)")
        out.error = self.error
        return out

    def _apply_usage(self, out: DecodedStream, usage: dict[str, Any]) -> None:
        ct = _int_or_none(usage.get("completion_tokens"))
        if ct is not None and self._saw_ids and ct != len(self._ids):
            self._fail(f"inconsistent token_ids: {len(self._ids)} streamed, usage says {ct}")
        out.completion_tokens = ct if ct is not None else out.completion_tokens
        pt = _int_or_none(usage.get("prompt_tokens"))
        out.prompt_tokens = pt if pt is not None else out.prompt_tokens
        details = usage.get("prompt_tokens_details")
        if isinstance(details, dict):
            out.cached_tokens = _int_or_none(details.get("cached_tokens"))
