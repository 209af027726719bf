"""OpenAI-compatible wire format of the simulator (pure): ``/v1/completions`` and ``/v1/chat/completions``.

Requests: ``prompt`` as token ids or text (completions), ``messages`` (chat: the text of every message
joined, tokenized like a text prompt), ``max_tokens``, ``stream``, ``stream_options`` (``include_usage``,
``continuous_usage_stats``), ``return_token_ids``, ``ignore_eos``, ``cache_salt``. Chunks carry text
deltas; how usage is reported depends on the server option ``openai_usage``, so every counting path of
a client can be exercised against a known answer:

- ``honor``: usage on every chunk when ``continuous_usage_stats`` is asked (vLLM), a final usage chunk
  when ``include_usage`` is asked;
- ``final-only``: ``continuous_usage_stats`` is ignored (many servers);
- ``none``: no usage at all, text deltas only (``transformers serve``).

A speculative profile with ``vllm_per_request`` ``summary`` or ``detailed`` adds vLLM 0.32.0's
``metrics.speculative_decoding`` to the final usage chunk (only that one, as vLLM does: see
``vllm/entrypoints/openai/completion/serving.py`` of 0.32.0, the ``include_usage`` branch).
"""

from __future__ import annotations

import json
import time
from dataclasses import dataclass
from typing import Any, Literal

from harness.sim.profiles import SimProfile
from harness.sim.protocol import BadRequest, GenerateParams
from harness.sim.scheduler import Chunk
from harness.sim.speculation import vllm_request_metrics
from harness.sim.tokens import VOCAB_SIZE, decode_tokens, encode_text

OpenAIUsage = Literal["honor", "final-only", "none"]
_SEP = (",", ":")


@dataclass(frozen=True)
class OpenAIParams:
    """A validated OpenAI request: the generate parameters plus the streaming options asked for."""

    generate: GenerateParams
    include_usage: bool
    continuous_usage: bool
    token_ids: bool
    model: str


def _prompt(body: dict[str, Any], kind: str) -> list[int]:
    if kind == "chat":
        msgs = body.get("messages")
        if not isinstance(msgs, list) or not msgs:
            raise BadRequest("messages must be a non-empty list")
        parts = []
        for m in msgs:
            content = m.get("content") if isinstance(m, dict) else None
            if not isinstance(content, str):
                raise BadRequest("every message needs a string 'content'")
            parts.append(content)
        return list(encode_text("\n".join(parts)))
    prompt = body.get("prompt")
    if isinstance(prompt, str):
        return list(encode_text(prompt))
    if isinstance(prompt, list) and prompt and all(isinstance(t, int) and 0 <= t < VOCAB_SIZE for t in prompt):
        return [int(t) for t in prompt]
    raise BadRequest("prompt must be a string or a non-empty list of token ids")


def parse_openai(body: Any, kind: Literal["completions", "chat"], profile: SimProfile) -> OpenAIParams:
    """Validate an OpenAI request body; raises ``BadRequest`` with a one-line reason."""
    if not isinstance(body, dict):
        raise BadRequest("the body must be a JSON object")
    ids = _prompt(body, kind)
    max_new = body.get("max_tokens", body.get("max_completion_tokens", 16))
    if not isinstance(max_new, int) or isinstance(max_new, bool) or max_new < 1:
        raise BadRequest("max_tokens must be an integer >= 1")
    limit = min(profile.context_length, profile.max_total_num_tokens)
    if len(ids) + max_new > limit:
        raise BadRequest(f"requested {len(ids)} input + {max_new} new tokens exceeds the maximum context ({limit})")
    opts = body.get("stream_options") or {}
    if not isinstance(opts, dict):
        raise BadRequest("stream_options must be an object")
    salt = body.get("cache_salt")
    gen = GenerateParams(input_ids=ids, max_new_tokens=max_new, ignore_eos=bool(body.get("ignore_eos", False)),
                         stop_ids=frozenset(), stream=bool(body.get("stream", False)), rid=None,
                         cache_salt=salt if isinstance(salt, str) else None, extra_key=None, fault=None)
    return OpenAIParams(gen, include_usage=bool(opts.get("include_usage", False)),
                        continuous_usage=bool(opts.get("continuous_usage_stats", False)),
                        token_ids=bool(body.get("return_token_ids", False)), model=str(body.get("model", "")))


class OpenAIEncoder:
    """Turns scheduler chunks of one request into OpenAI chunk JSON (no SSE framing)."""

    def __init__(self, kind: Literal["completions", "chat"], params: OpenAIParams, usage_mode: OpenAIUsage,
                 rid: str, prompt_tokens: int, spec_metrics: str = "none") -> None:
        """``spec_metrics``: vLLM's ``--per-request-spec-decode-metrics`` (``none|summary|detailed``)."""
        self.kind = kind
        self.spec_metrics = spec_metrics
        self.params = params
        self.usage_mode = usage_mode
        self.rid = rid
        self.prompt_tokens = prompt_tokens
        self.completion_tokens = 0
        self.created = int(time.time())
        self._first = True

    def _usage(self, cached: int) -> dict[str, Any]:
        return {"prompt_tokens": self.prompt_tokens, "completion_tokens": self.completion_tokens,
                "total_tokens": self.prompt_tokens + self.completion_tokens,
                "prompt_tokens_details": {"cached_tokens": cached}}

    def _envelope(self, choices: list[dict[str, Any]]) -> dict[str, Any]:
        obj = "chat.completion.chunk" if self.kind == "chat" else "text_completion"
        return {"id": f"cmpl-{self.rid}", "object": obj, "created": self.created, "model": self.params.model,
                "choices": choices}

    def encode(self, chunk: Chunk, *, cached_tokens: int) -> list[bytes]:
        """The payloads for one scheduler chunk (a final chunk may add the usage-only chunk)."""
        self.completion_tokens += len(chunk.token_ids)
        text = decode_tokens(chunk.token_ids)
        finish = None if chunk.finish is None else ("length" if chunk.finish.get("type") == "length" else "stop")
        if self.kind == "chat":
            delta: dict[str, Any] = {"content": text}
            if self._first:
                delta["role"] = "assistant"
            choice: dict[str, Any] = {"index": 0, "delta": delta, "finish_reason": finish}
        else:
            choice = {"index": 0, "text": text, "finish_reason": finish}
        if self.params.token_ids:
            choice["token_ids"] = list(chunk.token_ids)
        self._first = False
        out = self._envelope([choice])
        if self.usage_mode == "honor" and self.params.continuous_usage:
            out["usage"] = self._usage(cached_tokens)
        payloads = [json.dumps(out, separators=_SEP).encode()]
        if finish is not None and self.usage_mode != "none" and self.params.include_usage:
            tail = self._envelope([]) | {"usage": self._usage(cached_tokens)}
            if chunk.spec is not None and self.spec_metrics != "none":
                tail["metrics"] = {"speculative_decoding": vllm_request_metrics(
                    chunk.spec, detailed=self.spec_metrics == "detailed")}
            payloads.append(json.dumps(tail, separators=_SEP).encode())
        return payloads
