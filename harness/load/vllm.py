"""Decoder for vLLM OpenAI ``/v1/completions`` streams with ``return_token_ids`` (pure)."""

from __future__ import annotations

from typing import Any

from harness.load.decode import DONE, DecodedStream, SameId, finish_type, int_or_none, openai_payload
from harness.load.spec import vllm_spec


class VLLMDecoder:
    """Decoder for vLLM OpenAI ``/v1/completions`` streams with ``return_token_ids``.

    Each chunk's ``choices[0].token_ids`` is a delta; the count after a chunk is the running
    sum of those (text may be empty for a real token, so text is never counted). The first
    chunk's ``prompt_token_ids`` gives the prompt length; the final ``choices: []`` chunk's
    ``usage`` gives ``completion_tokens`` (checked against the sum), ``prompt_tokens`` and
    ``prompt_tokens_details.cached_tokens``, and the chunk's top-level ``metrics`` a speculative
    server's per-request counts (``harness.load.spec``). Every chunk is small, so every chunk is decoded.
    """

    __slots__ = (
        "_fr",
        "_ids",
        "_ids_seen",
        "_metrics",
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
        self._metrics: Any = None
        self._fr: Any = None
        self._ids_seen = SameId()

    def on_event(self, payload: bytes, t_ns: int) -> None:
        """Take one payload (see ``StreamDecoder``)."""
        if self.done_ns is not None or not payload:
            return
        if payload == DONE:
            self.done_ns = t_ns
            return
        self.n_events += 1
        obj, problem = openai_payload(payload)
        if obj is None:
            self._fail(problem or "malformed event")
            return
        wrong_id = self._ids_seen.check(obj)
        if wrong_id is not None:
            self._fail(wrong_id)
        choices = obj.get("choices")
        if isinstance(choices, list) and choices and isinstance(choices[0], dict):
            self._choice(choices[0], t_ns)
        usage = obj.get("usage")
        if isinstance(usage, dict):
            self._usage = usage
            self._metrics = obj.get("metrics")

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
        out.count_method = "token-ids"
        out.finish_reason, abort_msg = finish_type(self._fr)
        if out.finish_reason == "abort":
            self._fail(f"aborted: {abort_msg or 'no message'}")
        out.completion_tokens = len(self._ids) if self._saw_ids else None
        if self._usage is not None:
            self._apply_usage(out, self._usage)
        out.spec = vllm_spec(self._metrics)
        if self.n_events and not self._saw_ids and self.error is None:
            self._fail("no token_ids on the stream (does the server support return_token_ids?)")
        out.error = self.error
        return out

    def _apply_usage(self, out: DecodedStream, usage: dict[str, Any]) -> None:
        ct = int_or_none(usage.get("completion_tokens"))
        if ct is not None and self._saw_ids and ct != len(self._ids):
            self._fail(f"inconsistent token_ids: {len(self._ids)} streamed, usage says {ct}")
        out.completion_tokens = ct if ct is not None else out.completion_tokens
        pt = int_or_none(usage.get("prompt_tokens"))
        out.prompt_tokens = pt if pt is not None else out.prompt_tokens
        details = usage.get("prompt_tokens_details")
        if isinstance(details, dict):
            out.cached_tokens = int_or_none(details.get("cached_tokens"))
