"""Decoder for SGLang native ``/generate`` streams (pure).

Speed matters (one call per streamed event, inside the timing path): ordinary events are never
``json.loads``-ed. The decoder finds the ``"completion_tokens":`` key from the end of the payload
(``meta_info`` comes last), reads ``sim_emit_ns`` the same way, and counts ``output_ids`` by
commas only until the stream's mode (cumulative or delta) is known. The final counted event is
fully decoded once, by ``finish``; events without a count, error events and anything unexpected
take the full ``json.loads`` path. A key pattern ``"name":`` cannot occur inside a JSON string
(its quotes would be escaped), so a match is a real key.
"""

from __future__ import annotations

import json
import re
from typing import Any

from harness.load.decode import DONE, DecodedStream, error_message, finish_type, int_or_none, snippet

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
        ct = int(m.group(1))
        if self._want_emit:
            j = payload.rfind(_EMIT_KEY)
            e = _INT_AT.match(payload, j + 14) if j >= 0 else None
            if e is None:
                self._want_emit = False
            else:
                self._emit.append(int(e.group(1)))
        if ct < self._prev or not self._resolved or self._delta_ok:
            self._count(payload, ct, t_ns)
            return
        # common case: counts rising, cumulative output_ids already recognised
        self._prev = ct
        self.event_ns.append(t_ns)
        self.event_tokens.append(ct)
        self._last = payload

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
        ct = meta.get("completion_tokens") if isinstance(meta, dict) else None
        if not isinstance(ct, int) or isinstance(ct, bool):
            return  # an event without a count (tolerated, not counted)
        assert isinstance(meta, dict)
        emit = meta.get("sim_emit_ns")
        if self._want_emit:
            if isinstance(emit, int):
                self._emit.append(emit)
            else:
                self._want_emit = False
        self._count(payload, ct, t_ns)

    def _count(self, payload: bytes, ct: int, t_ns: int) -> None:
        """Record a counted event (emit time already taken) and track the output-id mode."""
        if ct < self._prev:
            self._fail(f"malformed event: completion_tokens went from {self._prev} to {ct}")
        self._prev = ct
        self.event_ns.append(t_ns)
        self.event_tokens.append(ct)
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
