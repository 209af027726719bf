"""Any OpenAI-compatible server: request bodies and the stream decoder (pure).

``/v1/completions`` (``openai-completions``) and ``/v1/chat/completions`` (``openai-chat``). How the
output tokens of each chunk are counted depends on what the server sends; the decoder uses the best
source available and records which one (``count_method``), in this order of preference:

1. ``usage-per-chunk`` (exact): cumulative ``usage.completion_tokens`` on every content chunk
   (vLLM with ``stream_options.continuous_usage_stats``);
2. ``token-ids`` (exact): per-chunk ``token_ids`` (vLLM's ``return_token_ids`` extension);
3. ``chunks-reconciled`` (approximate): one token per content chunk, and the total equals the
   final ``usage.completion_tokens`` (an empty-text chunk carrying ``finish_reason`` counts as the
   last token when that makes the totals agree: EOS decodes to no text); the split of tokens over
   chunks is assumed, not observed;
4. ``retokenized`` (approximate): without any usage from the server, the text deltas re-tokenized with
   the declared tokenizer (cumulatively, so a token split over two chunks is counted once);
5. ``chunks`` (approximate): one token per content chunk, unreconciled (no final usage and no
   tokenizer, or a final usage that disagrees: the disagreement is kept, ``completion_tokens`` holds
   the server's total, and the evidence rules report it).

Only exact methods (plus SGLang's native cumulative counts, ``server-cumulative``) may support a
rate claim of the exact class; :data:`EXACT_COUNT_METHODS` names them.

A speculative vLLM server's per-request counts (``metrics.speculative_decoding`` beside the final
``usage``) are read from the last chunk that carries usage (``harness.load.spec``).
"""

from __future__ import annotations

import json
from collections.abc import Callable, Sequence
from typing import Any, Literal

from harness.load.decode import DONE, DecodedStream, SameId, finish_type, int_or_none, openai_payload
from harness.load.spec import vllm_spec

__all__ = ["EXACT_COUNT_METHODS", "count_exactness"]

OpenAIKind = Literal["openai-completions", "openai-chat"]
CountMethod = Literal["server-cumulative", "usage-per-chunk", "token-ids", "chunks-reconciled", "retokenized",
                      "chunks", "unknown"]
EXACT_COUNT_METHODS: frozenset[str] = frozenset({"server-cumulative", "usage-per-chunk", "token-ids"})
Tokenize = Callable[[str], int]


def count_exactness(method: str) -> str:
    """``exact`` or ``approximate`` for a count method (``unknown`` for records before schema 3)."""
    if method == "unknown":
        return "unknown"
    return "exact" if method in EXACT_COUNT_METHODS else "approximate"


def openai_body(kind: OpenAIKind, model: str, prompt: Sequence[int] | str, max_new_tokens: int, *,
                ignore_eos: bool = False, cache_salt: str | None = None, token_ids: bool = False,
                continuous_usage: bool = True) -> bytes:
    """JSON body of a streamed, greedy request. ``prompt`` is a list of token ids (completions only)
    or text (for chat it becomes one user message, and the server applies its chat template).
    ``continuous_usage`` asks for usage on every chunk (ignored by servers without it);
    ``token_ids`` asks for vLLM's per-chunk token ids; ``ignore_eos`` and ``cache_salt`` are sent
    only when set (vLLM extensions; other servers may reject unknown keys)."""
    body: dict[str, Any] = {"model": model, "max_tokens": max_new_tokens, "temperature": 0, "stream": True,
                            "stream_options": {"include_usage": True, "continuous_usage_stats": continuous_usage}}
    if kind == "openai-chat":
        text = prompt if isinstance(prompt, str) else None
        if text is None:
            raise ValueError("openai-chat needs a text prompt (declare the corpus tokenizer to decode ids)")
        body["messages"] = [{"role": "user", "content": text}]
    else:
        body["prompt"] = prompt if isinstance(prompt, str) else [int(i) for i in prompt]
    if token_ids:
        body["return_token_ids"] = True
    if ignore_eos:
        body["ignore_eos"] = True
    if cache_salt is not None:
        body["cache_salt"] = cache_salt
    return json.dumps(body, separators=(",", ":")).encode()


def _chunk_text(kind: OpenAIKind, choice: dict[str, Any]) -> str | None:
    if kind == "openai-chat":
        delta = choice.get("delta")
        if not isinstance(delta, dict):
            return None
        parts = [delta.get(k) for k in ("reasoning_content", "content")]
        texts = [p for p in parts if isinstance(p, str)]
        return "".join(texts) if texts else None
    text = choice.get("text")
    return text if isinstance(text, str) else None


class OpenAIDecoder:
    """Decoder for OpenAI-compatible streams (see the module docstring for the count methods).

    ``tokenize`` (text -> token count) enables ``retokenized`` counting; ``force`` pins a method
    (``usage-per-chunk``, ``token-ids``, ``chunks`` or ``retokenized``): a stream that cannot
    support it fails with a reason instead of falling back silently.
    """

    def __init__(self, kind: OpenAIKind, *, tokenize: Tokenize | None = None, force: str | None = None) -> None:
        self.kind = kind
        self.tokenize = tokenize
        self.force = force
        self.done_ns: int | None = None
        self.n_events = 0
        self.error: str | None = None
        # per content chunk: arrival, usage count (or None), token-id delta (or None), text delta
        self._t: list[int] = []
        self._usage_ct: list[int | None] = []
        self._ids: list[list[int] | None] = []
        self._text: list[str] = []
        self._final_usage: dict[str, Any] | None = None
        self._metrics: Any = None  # top-level ``metrics`` of the last usage chunk (vLLM per-request metrics)
        self._prompt_len: int | None = None
        self._fr: Any = None
        self._finish_ns: int | None = None  # arrival of an empty-text chunk that carried finish_reason
        self._ids_seen = SameId()  # every chunk carries the first chunk's id

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
        usage = obj.get("usage") if isinstance(obj.get("usage"), dict) else None
        if usage is not None:
            self._final_usage = usage
            self._metrics = obj.get("metrics")
        choices = obj.get("choices")
        if isinstance(choices, list) and choices and isinstance(choices[0], dict):
            self._choice(choices[0], usage, t_ns)

    def on_body_end(self, t_ns: int) -> None:
        """The body ended without ``[DONE]``. Some servers (transformers serve) close the stream after
        the chunk that carries ``finish_reason``: that is a complete answer, ended at ``t_ns``. Without a
        finish reason the stream stays unfinished (the client reports the disconnect)."""
        if self.done_ns is None and self._fr is not None and self.error is None:
            self.done_ns = t_ns

    def _choice(self, c: dict[str, Any], usage: dict[str, Any] | None, t_ns: int) -> None:
        prompt = c.get("prompt_token_ids")
        if isinstance(prompt, list):
            self._prompt_len = len(prompt)
        text = _chunk_text(self.kind, c)
        if c.get("finish_reason") is not None:
            self._fr = c.get("finish_reason")
            if not text:
                self._finish_ns = t_ns
        ids = c.get("token_ids") if isinstance(c.get("token_ids"), list) else None
        ct = int_or_none(usage.get("completion_tokens")) if usage is not None else None
        continuous = all(x is not None for x in self._usage_ct)  # usage on every content chunk so far
        before = next((x for x in reversed(self._usage_ct) if x is not None), 0)
        if not text and not ids and not (continuous and ct is not None and ct > before):
            return  # a role-only or finish-only chunk; a token with empty text shows in per-chunk usage or ids
        self._t.append(t_ns)
        self._usage_ct.append(ct)
        self._ids.append([int(i) for i in ids] if ids is not None else None)
        self._text.append(text or "")

    def _fail(self, reason: str) -> None:
        if self.error is None:
            self.error = reason

    def _method(self) -> str:
        if self.force is not None:
            return self.force
        if self._usage_ct and all(c is not None for c in self._usage_ct):
            return "usage-per-chunk"
        if self._ids and all(i is not None for i in self._ids):
            return "token-ids"
        final = self._final_completion_tokens()
        if final is not None and final == len(self._t):
            return "chunks-reconciled"
        if final is not None and final == len(self._t) + 1 and self._finish_ns is not None:
            # the last token (EOS, or any token whose text is empty) rode on the finish chunk
            self._t.append(self._finish_ns)
            self._usage_ct.append(None)
            self._ids.append(None)
            self._text.append("")
            return "chunks-reconciled"
        if final is None and self.tokenize is not None:
            return "retokenized"
        # a final usage that disagrees with the chunk count is the server's exact total: keep it beside
        # the per-chunk counts (the mismatch is an evidence finding) rather than guess with a tokenizer
        return "chunks"

    def _final_completion_tokens(self) -> int | None:
        return int_or_none(self._final_usage.get("completion_tokens")) if self._final_usage is not None else None

    def _counts(self, method: str) -> list[int] | None:
        """Cumulative output tokens after each content chunk under ``method`` (None: unsupported)."""
        if method == "usage-per-chunk":
            if any(c is None for c in self._usage_ct):
                return None
            return [int(c) for c in self._usage_ct if c is not None]
        if method == "token-ids":
            if any(i is None for i in self._ids):
                return None
            out, n = [], 0
            for ids in self._ids:
                n += len(ids or [])
                out.append(n)
            return out
        if method == "retokenized":
            if self.tokenize is None:
                return None
            out, acc, best = [], "", 0
            for piece in self._text:
                acc += piece
                best = max(best, self.tokenize(acc))  # counts never go back
                out.append(best)
            return out
        return list(range(1, len(self._t) + 1))  # chunks, chunks-reconciled

    def finish(self) -> DecodedStream:
        """Return the stream's facts; ``count_method`` says how the counts were made."""
        method = self._method()
        counts = self._counts(method)
        if counts is None:
            self._fail(f"count method {method} is not supported by this stream (pinned by the profile)")
            counts = []
        keep = [i for i, c in enumerate(counts) if i == 0 or c > counts[i - 1]] if counts else []
        ids = [t for chunk in self._ids for t in (chunk or [])] if method == "token-ids" else []
        out = DecodedStream(n_events=self.n_events, done_ns=self.done_ns,
                            event_ns=[self._t[i] for i in keep], event_tokens=[counts[i] for i in keep],
                            output_ids=ids, output_mode="delta" if ids else "none",
                            prompt_tokens=self._prompt_len, final_text="".join(self._text) if self._text else None)
        out.count_method = method
        out.finish_reason, abort_msg = finish_type(self._fr)
        if out.finish_reason == "abort":
            self._fail(f"aborted: {abort_msg or 'no message'}")
        final = self._final_completion_tokens()
        out.completion_tokens = final if final is not None else (counts[-1] if counts else 0)
        if self._final_usage is not None:
            pt = int_or_none(self._final_usage.get("prompt_tokens"))
            out.prompt_tokens = pt if pt is not None else out.prompt_tokens
            details = self._final_usage.get("prompt_tokens_details")
            if isinstance(details, dict):
                out.cached_tokens = int_or_none(details.get("cached_tokens"))
        out.spec = vllm_spec(self._metrics)
        if method in EXACT_COUNT_METHODS and final is not None and counts and counts[-1] != final:
            self._fail(f"inconsistent counts: {counts[-1]} streamed ({method}), usage says {final}")
        out.error = self.error
        return out
