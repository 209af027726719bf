"""Decoder for SGLang native ``/generate`` streams (pure).

Speed matters (one call per streamed event, inside the timing path): ordinary events are never
``json.loads``-ed whole. The fast path parses only the event's last member, ``meta_info`` (a few
hundred bytes), and reads ``output_ids`` as the raw array just before it, counting commas, while
the stream's mode (cumulative or delta) is being decided. The final counted event is fully decoded
once, by ``finish``, which also reads a speculative server's counts from its ``meta_info``
(``harness.load.spec``).

The fast path agrees with a full parse of the same event (``SGLangDecoder(fast=False)``, which
``json.loads`` every event) on every well-formed JSON event; it is taken only when the bytes prove
what the full parse would see, else the event takes the full parse:

- the event is ``{...}`` with no byte after the closing brace, and no ``"error"`` string anywhere
  (an error member in any position, or at any depth, is judged by the full parse);
- ``"meta_info"`` occurs exactly once, and what follows its colon up to the final brace parses as
  one JSON object: then it is the top-level ``meta_info`` (a value followed only by the closing
  brace of the whole event belongs to the top-level object), and its ``completion_tokens`` and
  ``sim_emit_ns`` are read from that parse;
- when the ids are needed, ``"output_ids"`` occurs at most once and, if present, is a key whose
  value is an array of integers directly followed by ``, "meta_info"`` (so it is a member of the
  same top-level object).

A quoted name cannot occur inside a JSON string (its quotes would be escaped), so counting the
quoted name counts keys and equal string values; a string value only sends the event to the full
parse. An event that is not valid JSON may be counted by the fast path when its defect lies
before ``meta_info`` (the final event is always fully parsed).
"""

from __future__ import annotations

import json
import re
from typing import Any

from harness.load.decode import DONE, DecodedStream, error_message, finish_type, int_or_none, show_id, snippet
from harness.load.spec import sglang_spec

_META = b'"meta_info"'
_ERROR = b'"error"'
_IDS = b'"output_ids"'
_JSON_WS = " \t\r\n"
_SCAN: Any = json.JSONDecoder().scan_once  # type: ignore[attr-defined]  # json.loads' own scanner
_WS = rb"[ \t\r\n]*"
_COLON_AT = re.compile(_WS + rb":")
_IDS_BEFORE_META = re.compile(_WS + rb":" + _WS + rb"\[([0-9, \t\r\n-]*)\]" + _WS + rb"," + _WS + _META)
_INTS = re.compile(_WS + rb"(?:-?[0-9]+" + _WS + rb"(?:," + _WS + rb"-?[0-9]+" + _WS + rb")*)?")
_UNREAD = b"\x00"  # ids not read for this event (the stream's mode is known to be cumulative)
_RID = b'"rid"'
_RID_VALUE = re.compile(_WS + rb":" + _WS + rb'("(?:[^"\\]|\\.)*")')


def _int(v: Any) -> int | None:
    return v if isinstance(v, int) and not isinstance(v, bool) else None


class SGLangDecoder:
    """Decoder for SGLang native ``/generate`` streams (docs/serving-facts.md#sglang-stream-format).

    Counts come from ``meta_info.completion_tokens`` (cumulative); ``output_ids`` may be
    cumulative or deltas, decided per stream by which reading agrees with the counts. Tolerates
    a missing ``text`` key and unknown keys. ``fast=False`` parses every event in full (the
    reference the fast path is tested against; same results on well-formed events).
    """

    __slots__ = (
        "_cum_ok",
        "_delta_ok",
        "_delta_sum",
        "_deltas",
        "_emit",
        "_fast",
        "_last",
        "_prev",
        "_resolved",
        "_rid",
        "_saw_ids",
        "_want_emit",
        "done_ns",
        "error",
        "event_ns",
        "event_tokens",
        "n_events",
    )

    def __init__(self, *, fast: bool = True) -> None:
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
        self._fast = fast
        self._rid: str | None = None  # the rid the request sent: every meta_info.id must be it

    def expect_request(self, body: bytes) -> None:
        """Learn the ``rid`` the request body sends (its last ``"rid"`` key, as ``sglang_body`` writes
        it). SGLang answers with ``meta_info.id`` = that rid (``TokenizerManager._handle_batch_output``
        builds ``meta_info = {"id": rid, ...}`` from the request's own rid), so an event with another id
        belongs to another request (say, a response replayed on a reused connection) and fails this one.
        A body without a rid (the server makes one up) is not checked."""
        k = len(body)
        while (k := body.rfind(_RID, 0, k)) >= 0:
            m = _RID_VALUE.match(body, k + len(_RID))
            if m is not None:
                try:
                    rid = json.loads(m.group(1))
                except ValueError:
                    return
                self._rid = rid if isinstance(rid, str) else None
                return

    def _check_id(self, meta: dict[str, Any]) -> None:
        rid = self._rid
        if rid is not None:
            got = meta.get("id")
            if got is not None and got != rid:
                self._fail(f"response id {show_id(got)} does not match request rid {show_id(rid)}")

    def on_event(self, payload: bytes, t_ns: int) -> None:
        """Take one payload (see ``StreamDecoder``)."""
        if self.done_ns is not None or not payload:
            return
        if payload == DONE:
            self.done_ns = t_ns
            return
        self.n_events += 1
        read = self._read_fast(payload) if self._fast else None
        if read is None:
            self._slow(payload, t_ns)
            return
        ct, emit, inner = read
        self._take_emit(emit)
        self._count(payload, ct, t_ns, inner)

    def _read_fast(self, payload: bytes) -> tuple[int, Any, bytes | None] | None:
        """(count, emit time, raw ids or None) when the bytes prove them (module doc), else None."""
        if payload[:1] != b"{" or payload[-1:] != b"}":
            return None
        k = payload.rfind(_META)
        colon = _COLON_AT.match(payload, k + len(_META)) if k > 0 else None
        if colon is None or payload.find(_ERROR, 0, k) >= 0:
            return None
        try:
            tail = payload[colon.end():-1].decode()
            meta, end = _SCAN(tail, len(tail) - len(tail.lstrip(_JSON_WS)))
        except (StopIteration, ValueError):  # ValueError covers JSONDecodeError and UnicodeDecodeError
            return None
        ct = _int(meta.get("completion_tokens")) if isinstance(meta, dict) else None
        if ct is None or tail[end:].strip(_JSON_WS):
            return None
        self._check_id(meta)
        emit = meta.get("sim_emit_ns")
        if self._resolved and not self._delta_ok and ct >= self._prev:
            return ct, emit, _UNREAD  # cumulative ids: only the final event's are read
        i = payload.rfind(_IDS, 0, k)
        if i < 0:
            return ct, emit, None
        arr = _IDS_BEFORE_META.match(payload, i + len(_IDS))
        if arr is None or arr.end() != k + len(_META) or _INTS.fullmatch(arr.group(1)) is None:
            return None
        return ct, emit, arr.group(1)

    def _slow(self, payload: bytes, t_ns: int) -> None:
        try:
            obj = json.loads(payload)
        except ValueError:
            self._fail(f"malformed event: {snippet(payload)}")
            return
        if not isinstance(obj, dict):
            self._fail(f"malformed event: {snippet(payload)}")
            return
        if "error" in obj:
            self._fail(f"error event: {error_message(obj['error'])}")
            return
        meta = obj.get("meta_info")
        if isinstance(meta, dict):
            self._check_id(meta)
        ct = _int(meta.get("completion_tokens")) if isinstance(meta, dict) else None
        if ct is None:
            return  # an event without a count (tolerated, not counted)
        assert isinstance(meta, dict)
        if self._resolved and not self._delta_ok and ct >= self._prev:
            inner: bytes | None = _UNREAD  # cumulative ids: only the final event's are used (by finish)
        else:
            ids = obj.get("output_ids")
            if ids is not None and (not isinstance(ids, list) or any(_int(i) is None for i in ids)):
                self._fail(f"malformed event: output_ids is not a list of integers: {snippet(payload)}")
                return
            inner = None if ids is None else ",".join(map(str, ids)).encode()
        self._take_emit(meta.get("sim_emit_ns"))
        self._count(payload, ct, t_ns, inner)

    def _take_emit(self, emit: Any) -> None:
        if self._want_emit:
            if _int(emit) is not None:
                self._emit.append(emit)
            else:
                self._want_emit = False

    def _count(self, payload: bytes, ct: int, t_ns: int, inner: bytes | None) -> None:
        """Record a counted event and track the output-id mode (``inner``: the raw ids array
        without brackets, None when the event has none, ``_UNREAD`` when not read)."""
        if ct < self._prev:
            self._fail(f"malformed event: completion_tokens went from {self._prev} to {ct}")
        self._prev = ct
        self.event_ns.append(t_ns)
        self.event_tokens.append(ct)
        self._last = payload
        if inner is _UNREAD:
            return
        if not self._resolved:
            self._track_ids(inner, ct)
        elif self._delta_ok and inner is not None and inner.strip():
            self._deltas.append(inner)

    def _track_ids(self, inner: bytes | None, ct: int) -> None:
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
        out.count_method = "server-cumulative"
        if self._last is None:
            out.error = self.error
            return out
        try:
            obj = json.loads(self._last)
            meta = obj.get("meta_info") or {}
        except (ValueError, AttributeError):
            self._fail(f"malformed event: {snippet(self._last)}")
            obj, meta = {}, {}
        out.completion_tokens = self.event_tokens[-1]
        text = obj.get("text") if isinstance(obj, dict) else None
        out.final_text = text if isinstance(text, str) else None
        out.prompt_tokens = int_or_none(meta.get("prompt_tokens"))
        out.cached_tokens = int_or_none(meta.get("cached_tokens"))
        out.finish_reason, abort_msg = finish_type(meta.get("finish_reason"))
        if out.finish_reason == "abort":
            self._fail(f"aborted: {abort_msg or 'no message'}")
        if isinstance(meta, dict):
            out.spec = sglang_spec(meta)  # only the final meta_info carries them (harness.load.spec)
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
            if isinstance(ids, list) and all(_int(i) is not None for i in ids):
                out.output_ids = list(ids)
            else:
                out.output_ids = []
                self._fail("malformed event: the final output_ids is not a list of integers")
            out.output_mode = "cumulative" if self._cum_ok else "unknown"
        if out.output_mode != "unknown" and len(out.output_ids) != out.completion_tokens:
            self._fail(
                f"inconsistent output_ids: {len(out.output_ids)} {out.output_mode} ids for "
                f"completion_tokens {out.completion_tokens}"
            )
