"""Reading a server's Prometheus ``/metrics`` text (pure): the running and queued request gauges
that witness how many requests were resident together (SGLang and vLLM names), and vLLM's
speculative-decoding counters, whose before/after difference over a wave is the wave's own count."""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass

from prometheus_client.parser import text_string_to_metric_families

__all__ = ["counter_delta", "parse_gauges", "parse_spec_counters"]

RUNNING = ("sglang:num_running_reqs", "vllm:num_requests_running")
QUEUED = ("sglang:num_queue_reqs", "vllm:num_requests_waiting")

SPEC_DRAFTS = "vllm:spec_decode_num_drafts_total"  # verify steps that carried drafts
SPEC_DRAFT_TOKENS = "vllm:spec_decode_num_draft_tokens_total"
SPEC_ACCEPTED = "vllm:spec_decode_num_accepted_tokens_total"  # bonus tokens excluded
SPEC_PER_POS = "vllm:spec_decode_num_accepted_tokens_per_pos_total"  # label position="0".."k-1"
SPEC_TOTALS = (SPEC_DRAFTS, SPEC_DRAFT_TOKENS, SPEC_ACCEPTED)


@dataclass(frozen=True)
class LoadGauges:
    """Requests running and queued on the server (summed over label sets); None when not exported."""

    running: float | None
    queued: float | None


def parse_gauges(text: str) -> LoadGauges:
    """Extract the running/queued gauges from Prometheus exposition text."""
    values: dict[str, float] = {}
    for family in text_string_to_metric_families(text):
        for sample in family.samples:
            if sample.name in RUNNING or sample.name in QUEUED:
                values[sample.name] = values.get(sample.name, 0.0) + float(sample.value)
    running = next((values[n] for n in RUNNING if n in values), None)
    queued = next((values[n] for n in QUEUED if n in values), None)
    return LoadGauges(running, queued)


def per_pos_key(position: str) -> str:
    """The key of one position's accepted-token counter in a ``parse_spec_counters`` dict."""
    return f'{SPEC_PER_POS}{{position="{position}"}}'


def parse_spec_counters(text: str) -> dict[str, float]:
    """vLLM's speculative-decoding counters in exposition ``text``: each of ``SPEC_TOTALS`` summed
    over its label sets (engines, models), and the per-position counter summed per ``position``
    (key ``per_pos_key(position)``). Counters the server does not export, or exports with a value
    that is not a finite number >= 0, are absent (empty for a server without speculative decoding).
    Raises ValueError on text that is not exposition format."""
    values: dict[str, float] = {}
    bad: set[str] = set()
    for family in text_string_to_metric_families(text):
        for sample in family.samples:
            if sample.name in SPEC_TOTALS:
                key = sample.name
            elif sample.name == SPEC_PER_POS:
                key = per_pos_key(sample.labels.get("position", ""))
            else:
                continue
            v = float(sample.value)
            if not math.isfinite(v) or v < 0:
                bad.add(key)
            values[key] = values.get(key, 0.0) + v
    return {k: v for k, v in values.items() if k not in bad}


def counter_delta(before: Mapping[str, float], after: Mapping[str, float]) -> dict[str, float] | None:
    """``after - before`` for every counter in both (pure). None when a counter went down (the server
    restarted or reset its counters between the two readings: the wave's count is unknown)."""
    delta = {k: after[k] - before[k] for k in before if k in after}
    return None if any(v < 0 for v in delta.values()) else delta
