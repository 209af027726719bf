"""SGLang native ``/generate`` wire format (pure): request validation and event encoding.

Streaming modes: ``cumulative`` (``output_ids`` and ``text`` cumulative, current SGLang), ``delta``
(both are deltas, like ``--incremental-streaming-output``) and ``skip-tokenizer-init`` (no ``text``
key, cumulative ``output_ids``; text prompts are refused).  Counts in ``meta_info`` are always
cumulative.  A speculative profile's final event also carries SGLang's speculative fields
(``harness.sim.speculation.sglang_meta``), as SGLang sends them only on the last one.
``sim_emit_ns`` is ``time.perf_counter_ns()`` taken as the event is encoded, right before it is
written.
"""

from __future__ import annotations

import json
import time
from dataclasses import dataclass
from typing import Any

from harness.sim.faults import parse_fault
from harness.sim.profiles import SimProfile
from harness.sim.scheduler import Chunk
from harness.sim.speculation import sglang_meta
from harness.sim.tokens import VOCAB_SIZE, decode_tokens, encode_text

DEFAULT_MAX_NEW_TOKENS = 128
DONE_EVENT = b"data: [DONE]\n\n"
_SEP = (",", ":")
_json_str = json.encoder.encode_basestring_ascii  # what json.dumps writes for a str (ensure_ascii)


BODY_BYTES_PER_TOKEN = 8  # a prompt token's JSON: up to 6 digits and ", " (a text byte: at most 6, "\\u00e9")
BODY_SLACK_BYTES = 1 << 20  # the rest of a body (sampling parameters, chat roles, a fault)


def body_limit(profile: SimProfile) -> int:
    """The largest request body the server reads, in bytes: what its longest prompt
    (``min(context_length, max_total_num_tokens) - 1`` tokens) takes as JSON, plus 1 MiB; a larger one
    is answered 413 before it is read or parsed (9 MiB for the default 1,048,576-token context)."""
    max_input = min(profile.context_length, profile.max_total_num_tokens) - 1
    return max_input * BODY_BYTES_PER_TOKEN + BODY_SLACK_BYTES


class BadRequest(Exception):
    """The request is malformed; answered with HTTP 400 and ``{"error": {"message": ...}}``."""


@dataclass(frozen=True)
class GenerateParams:
    """A validated ``/generate`` request."""

    input_ids: list[int]
    max_new_tokens: int
    ignore_eos: bool
    stop_ids: frozenset[int]
    stream: bool
    rid: str | None
    cache_salt: str | None
    extra_key: str | None
    fault: str | None


def _opt_str(body: dict[str, Any], key: str) -> str | None:
    value = body.get(key)
    if value is not None and not isinstance(value, str):
        raise BadRequest(f"{key} must be a string")
    return value


def _is_int(value: Any) -> bool:
    return isinstance(value, int) and not isinstance(value, bool)


def _prompt_ids(body: dict[str, Any], skip_tokenizer_init: bool) -> list[int]:
    has_text, has_ids = body.get("text") is not None, body.get("input_ids") is not None
    if has_text == has_ids:
        raise BadRequest("exactly one of 'text' or 'input_ids' must be given")
    if has_text:
        text = body["text"]
        if skip_tokenizer_init:
            raise BadRequest("text prompts need a tokenizer; this server runs with skip_tokenizer_init")
        if not isinstance(text, str):
            raise BadRequest("batched 'text' is not supported by the simulator; send one string")
        ids = encode_text(text)
    else:
        ids = body["input_ids"]
        # set(map(type, ...)) and min/max run in C: admission of a wave's requests is on the step loop
        if not isinstance(ids, list) or not set(map(type, ids)) <= {int}:  # exactly int: no bool, no float
            raise BadRequest("'input_ids' must be one list of integers (batches are not supported)")
        if ids and (min(ids) < 0 or max(ids) >= VOCAB_SIZE):
            raise BadRequest(f"token ids must be in [0, {VOCAB_SIZE})")
    if not ids:
        raise BadRequest("the prompt is empty")
    return ids


REQUEST_FAULTS_OFF = ("sim_fault is refused: this simulator was not started with request faults allowed "
                      "(dsv4h sim serve --allow-request-faults, SimOptions(request_faults=True))")


def parse_generate(body: Any, profile: SimProfile, *, skip_tokenizer_init: bool,
                   request_faults: bool = False) -> GenerateParams:
    """Validate a ``/generate`` JSON body; raises ``BadRequest`` with a one-line reason. A ``sim_fault``
    field is refused unless ``request_faults`` (the server's option of that name) and its argument is
    within ``harness.sim.faults.FAULT_MAX``."""
    if not isinstance(body, dict):
        raise BadRequest("the body must be a JSON object")
    ids = _prompt_ids(body, skip_tokenizer_init)
    sp = body.get("sampling_params") or {}
    if not isinstance(sp, dict):
        raise BadRequest("sampling_params must be an object")
    max_new = sp.get("max_new_tokens", DEFAULT_MAX_NEW_TOKENS)
    if max_new is None:
        max_new = DEFAULT_MAX_NEW_TOKENS
    if not _is_int(max_new) or max_new < 1:
        raise BadRequest("max_new_tokens must be an integer >= 1")
    temperature = sp.get("temperature", 0.0)
    if not isinstance(temperature, int | float) or temperature < 0:
        raise BadRequest("temperature must be a number >= 0")
    stop_ids = sp.get("stop_token_ids") or []
    if not isinstance(stop_ids, list) or not all(_is_int(t) for t in stop_ids):
        raise BadRequest("stop_token_ids must be a list of integers")
    stream = body.get("stream", False)
    if not isinstance(stream, bool):
        raise BadRequest("stream must be a boolean")
    max_input = min(profile.context_length, profile.max_total_num_tokens) - 1
    if len(ids) > max_input:
        raise BadRequest(f"the input ({len(ids)} tokens) is longer than the model's max input ({max_input})")
    if len(ids) + max_new > min(profile.context_length, profile.max_total_num_tokens):
        raise BadRequest(
            f"requested {len(ids)} input + {max_new} new tokens exceeds the maximum context length "
            f"({min(profile.context_length, profile.max_total_num_tokens)})"
        )
    fault = _opt_str(body, "sim_fault")
    if fault is not None and not request_faults:
        raise BadRequest(REQUEST_FAULTS_OFF)
    if fault is not None:
        try:
            parse_fault(fault)
        except ValueError as exc:
            raise BadRequest(str(exc)) from None
    return GenerateParams(
        input_ids=ids,
        max_new_tokens=max_new,
        ignore_eos=bool(sp.get("ignore_eos", False)),
        stop_ids=frozenset(stop_ids),
        stream=stream,
        rid=_opt_str(body, "rid"),
        cache_salt=_opt_str(body, "cache_salt"),
        extra_key=_opt_str(body, "extra_key"),
        fault=fault,
    )


def error_body(message: str, code: int) -> dict[str, Any]:
    """SGLang-style error object."""
    return {"error": {"message": message, "code": code}}


def error_event(message: str) -> bytes:
    """A mid-stream error event (sent with HTTP 200, followed by ``[DONE]``)."""
    return b"data: " + json.dumps(error_body(message, 500), separators=_SEP).encode() + b"\n\n"


class EventEncoder:
    """Turns scheduler chunks of one request into event JSON (no SSE framing), in one streaming mode.
    ``spec_fields`` (``new`` | ``old``, speculative profiles only) names the final event's speculative
    fields."""

    def __init__(self, rid: str, mode: str, prompt_tokens: int, spec_fields: str | None = None) -> None:
        self.rid = rid
        self.spec_fields = spec_fields
        self.mode = mode
        self.prompt_tokens = prompt_tokens
        self.completion_tokens = 0
        self._ids_json = ""
        self._text = ""
        self._meta_head: str | None = None

    def _advance(self, chunk: Chunk) -> tuple[str, str]:
        """Count the chunk's tokens; the ``output_ids`` JSON body and ``text`` this event carries
        (deltas or cumulative, by mode)."""
        new_ids = ",".join(map(str, chunk.token_ids))
        self.completion_tokens += len(chunk.token_ids)
        if self.mode == "delta":
            return new_ids, decode_tokens(chunk.token_ids)
        if new_ids:
            self._ids_json = f"{self._ids_json},{new_ids}" if self._ids_json else new_ids
        if self.mode != "skip-tokenizer-init":
            self._text += decode_tokens(chunk.token_ids)
        return self._ids_json, self._text

    def encode_progress(self, chunk: Chunk, *, cached_tokens: int) -> bytes:
        """``encode`` of a non-final chunk (no finish, no ``e2e_latency``), byte-identical, without
        building the meta dict: the hot path of the simulator's direct event writes."""
        if chunk.finish is not None:
            return self.encode(chunk, cached_tokens=cached_tokens, e2e_latency=None)
        ids_json, text = self._advance(chunk)
        text_part = "" if self.mode == "skip-tokenizer-init" else f'"text":{_json_str(text)},'
        if self._meta_head is None:
            self._meta_head = f'{{"id":{_json_str(self.rid)},"finish_reason":null,"prompt_tokens":{self.prompt_tokens},'
        return (f'{{{text_part}"output_ids":[{ids_json}],"meta_info":{self._meta_head}"completion_tokens":'
                f'{self.completion_tokens},"cached_tokens":{cached_tokens},"weight_version":"default",'
                f'"total_retractions":0,"sim_emit_ns":{time.perf_counter_ns()}}}}}').encode()

    def encode(self, chunk: Chunk, *, cached_tokens: int, e2e_latency: float | None) -> bytes:
        """Encode one event; ``e2e_latency`` (s) only on the last one."""
        ids_json, text = self._advance(chunk)
        meta: dict[str, Any] = {
            "id": self.rid,
            "finish_reason": chunk.finish,
            "prompt_tokens": self.prompt_tokens,
            "completion_tokens": self.completion_tokens,
            "cached_tokens": cached_tokens,
            "weight_version": "default",
            "total_retractions": 0,
        }
        if e2e_latency is not None:
            meta["e2e_latency"] = e2e_latency
        if chunk.spec is not None and self.spec_fields is not None and chunk.finish is not None:
            meta.update(sglang_meta(chunk.spec, self.completion_tokens, self.spec_fields))
        text_part = "" if self.mode == "skip-tokenizer-init" else f'"text":{json.dumps(text)},'
        meta["sim_emit_ns"] = time.perf_counter_ns()
        return f'{{{text_part}"output_ids":[{ids_json}],"meta_info":{json.dumps(meta, separators=_SEP)}}}'.encode()
