"""The stream-decoder interface and its result (pure).

A ``StreamDecoder`` turns SSE payloads (each stamped with the client monotonic time, in ns, of
the socket read that carried it) into the per-request facts a ``RequestRecord`` needs.
Implementations: ``SGLangDecoder`` (SGLang ``/generate``), ``VLLMDecoder`` (vLLM
``/v1/completions``), docs/serving-facts.md#sglang-stream-format.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from typing import Any, Protocol

from harness.load.spec import SpecReport

DONE = b"[DONE]"


@dataclass(slots=True)
class DecodedStream:
    """What a decoder extracted from one stream (the record's stream fields).

    ``event_ns[k]`` (client monotonic ns of the read that carried the event) and
    ``event_tokens[k]`` (cumulative output tokens after it) exist for every event that carried a
    count. ``emit_ns`` is parallel to ``event_ns`` when every counted event had
    ``meta_info.sim_emit_ns``, else empty. ``done_ns`` is the arrival of ``[DONE]`` (None if it
    never came). ``error`` is the first protocol-level failure seen (error event, malformed
    event, inconsistent counts, abort), else None; transport failures are the client's.
    ``final_text`` is the ``text`` of the last counted event (the whole answer when the server
    streams cumulative text, as SGLang does by default; None when the server sends no text).
    ``output_mode`` is "cumulative", "delta" or "none" (no output ids on the stream);
    a stream whose only tokens came in a single event reads the same either way and is
    reported as "cumulative". ``count_method`` says where ``event_tokens`` came from
    (``harness.load.openai`` lists the methods and which are exact). ``spec`` is what a speculative
    server reported about the request (``harness.load.spec``), None when it reported nothing.
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
    final_text: str | None = None
    count_method: str = "unknown"
    spec: SpecReport | None = None


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


def snippet(payload: bytes, n: int = 80) -> str:
    """The first ``n`` bytes of a payload as text, for error messages."""
    text = payload[:n].decode("utf-8", "replace")
    return text + ("..." if len(payload) > n else "")


def error_message(err: Any) -> str:
    """The message of an ``{"error": ...}`` value (a dict with ``message``, or anything else)."""
    if isinstance(err, dict):
        msg = err.get("message")
        return str(msg) if msg is not None else json.dumps(err)[:200]
    return str(err)[:200]


def finish_type(fr: Any) -> tuple[str | None, str | None]:
    """(type, message) of a finish_reason that may be None, a string or a dict."""
    if fr is None:
        return None, None
    if isinstance(fr, dict):
        kind = fr.get("type")
        msg = fr.get("message")
        return (str(kind) if kind is not None else None), (str(msg) if msg is not None else None)
    return str(fr), None


def openai_payload(payload: bytes) -> tuple[dict[str, Any] | None, str | None]:
    """An OpenAI-style chunk as a dict, or the reason it is not one: malformed JSON, not an object,
    or an ``{"error": ...}`` / ``object: error`` event (vLLM and generic OpenAI decoders)."""
    try:
        obj = json.loads(payload)
    except ValueError:
        obj = None
    if not isinstance(obj, dict):
        return None, f"malformed event: {snippet(payload)}"
    if "error" in obj or obj.get("object") == "error":
        return None, f"error event: {error_message(obj.get('error', obj))}"
    return obj, None


def show_id(v: Any) -> str:
    """A response or request id for an error message (JSON, at most 80 characters)."""
    return snippet(json.dumps(v).encode())


class SameId:
    """The check that every chunk of one OpenAI-style response carries the id of its first chunk
    (servers make their own ids, so there is nothing of the request's to compare with; a chunk of
    another response, say on a reused connection, shows as a change of id). Chunks without ``id``
    are not compared."""

    __slots__ = ("first",)

    def __init__(self) -> None:
        self.first: Any = None

    def check(self, obj: dict[str, Any]) -> str | None:
        """The error for chunk ``obj``'s id, else None."""
        cid = obj.get("id")
        if cid is None:
            return None
        if self.first is None:
            self.first = cid
            return None
        if cid != self.first:
            return f"response id {show_id(cid)} does not match the id {show_id(self.first)} of the stream's first chunk"
        return None


def int_or_none(v: Any) -> int | None:
    """``v`` if it is a JSON integer (not a bool), else None."""
    return v if isinstance(v, int) and not isinstance(v, bool) else None
