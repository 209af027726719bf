"""What a speculative-decoding server reports about one request (pure; docs/speculative.md).

Two sources, read from values the decoders already parsed:

- SGLang ``/generate``: the final event's ``meta_info`` (``sglang_spec``). SGLang 0.5.23
  (``TokenizerManager._calculate_spec_decoding_metrics``) writes ``spec_verify_ct``,
  ``spec_num_correct_drafts``, ``spec_num_proposed_drafts`` (= verify_ct x (num_draft_tokens - 1)),
  ``spec_correct_drafts_histogram`` and the derived ``spec_accept_rate`` / ``spec_accept_length``,
  only when ``spec_verify_ct > 0``. Older builds say ``spec_accept_token_num`` (correct drafts),
  ``spec_draft_token_num`` (proposed) and ``spec_accept_histogram``; another pair seen is
  ``spec_accepted_drafts`` / ``spec_proposed_drafts``. Every alias is read; the derived fields are
  ignored (old builds send them as 0; a reader recomputes them from the counts).
- vLLM V1 (``--per-request-spec-decode-metrics``): top-level ``metrics.speculative_decoding`` of the
  final usage chunk (``choices: []``; vLLM 0.32.0 ``completion/serving.py`` and
  ``chat_completion/serving.py`` build it with ``build_spec_decoding_metrics``) (``vllm_spec``):
  ``num_spec_steps``, ``num_draft_tokens``, ``num_accepted_draft_tokens``, ``acceptance_histogram``.

A value is a count only if it is a JSON integer (not a bool, not a float) in ``0..MAX_COUNT``;
anything else reads as absent, never as a number made up from it. A histogram with one bad entry
reads as empty. The record keeps what the server said: whether the counts can be true (against each
other and against the stream) is checked before any use, by ``harness.measure.claims``.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

MAX_COUNT = 2**31 - 1  # the record stores counts as int32
SGLANG_SOURCE = "sglang-meta-info"
VLLM_SOURCE = "vllm-request-metrics"

SGLANG_STEPS = "spec_verify_ct"
SGLANG_ACCEPTED = ("spec_num_correct_drafts", "spec_accept_token_num", "spec_accepted_drafts")
SGLANG_PROPOSED = ("spec_num_proposed_drafts", "spec_draft_token_num", "spec_proposed_drafts")
SGLANG_HISTOGRAM = ("spec_correct_drafts_histogram", "spec_accept_histogram")


@dataclass(frozen=True)
class SpecReport:
    """One request's speculative counts as the server reported them (None: not reported).

    ``steps``: verify steps; ``proposed``: draft tokens proposed; ``accepted``: draft tokens accepted
    (bonus token excluded); ``histogram[i]``: verify steps that accepted i drafts (empty if none)."""

    source: str
    steps: int | None
    proposed: int | None
    accepted: int | None
    histogram: tuple[int, ...] = field(default=())


def count(v: Any) -> int | None:
    """``v`` if it is a JSON integer (not a bool) in ``0..MAX_COUNT``, else None."""
    if type(v) is int and 0 <= v <= MAX_COUNT:  # type(...) is int: a bool (an int subclass) is not a count
        return v
    return None


def histogram(v: Any) -> tuple[int, ...]:
    """A list of counts as a tuple; empty when ``v`` is not a list or any entry is not a count."""
    if not isinstance(v, list):
        return ()
    out = [c for c in map(count, v) if c is not None]
    return tuple(out) if len(out) == len(v) else ()


def _first(meta: Mapping[str, Any], names: Sequence[str]) -> int | None:
    for name in names:
        c = count(meta.get(name))
        if c is not None:
            return c
    return None


def sglang_spec(meta: Mapping[str, Any]) -> SpecReport | None:
    """The counts in an SGLang final ``meta_info`` (module docstring), or None when it carries no
    valid ``spec_verify_ct > 0`` (native decoding, or a server that sent nothing usable)."""
    steps = count(meta.get(SGLANG_STEPS))
    if not steps:
        return None
    hist: tuple[int, ...] = ()
    for name in SGLANG_HISTOGRAM:
        if name in meta:
            hist = histogram(meta[name])
            break
    return SpecReport(SGLANG_SOURCE, steps, _first(meta, SGLANG_PROPOSED), _first(meta, SGLANG_ACCEPTED), hist)


def vllm_spec(metrics: Any) -> SpecReport | None:
    """The counts in a vLLM final usage chunk's top-level ``metrics`` value (module docstring), or
    None when it has no ``speculative_decoding`` object with a valid ``num_spec_steps``. Zero steps
    is kept (the server decodes speculatively but ran no verify step for this request)."""
    if not isinstance(metrics, dict):
        return None
    sd = metrics.get("speculative_decoding")
    if not isinstance(sd, dict):
        return None
    steps = count(sd.get("num_spec_steps"))
    if steps is None:
        return None
    return SpecReport(VLLM_SOURCE, steps, count(sd.get("num_draft_tokens")),
                      count(sd.get("num_accepted_draft_tokens")), histogram(sd.get("acceptance_histogram")))


def spec_fields(spec: SpecReport | None) -> dict[str, Any]:
    """The ``RequestRecord`` fields (schema 4) for ``spec``; none (the defaults) when None."""
    if spec is None:
        return {}
    return {"spec_steps": spec.steps, "spec_proposed": spec.proposed, "spec_accepted": spec.accepted,
            "spec_source": spec.source, "spec_histogram": list(spec.histogram)}
