"""Simulated speculative decoding (pure): the profile block, the seeded acceptance draws, the counts.

A verify step proposes ``k`` draft tokens per running request; draft ``i`` is accepted with the
conditional probability ``p_i`` given drafts ``1..i-1`` were accepted, so a step emits
``1 + accepted`` tokens (the bonus token included) and ``E[a] = 1 + sum_i prod_{j<=i} p_j``
(``expected_tokens_per_step``).  Draws are a position-addressable hash of ``(seed, prompt, n_out at the
step's start)``, so a rerun of the same prompts reproduces every step's acceptance whatever the batch.
Full-target speculation: the tokens are the target's greedy tokens, only grouped differently.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any, Literal

import numpy as np
import numpy.typing as npt
from pydantic import Field, model_validator

from harness.formats import Strict
from harness.sim.tokens import prompt_hash

__all__ = ["SpeculativeSpec"]

_MASK = (1 << 64) - 1
_GOLDEN = 0x9E3779B97F4A7C15
_TWO64 = float(1 << 64)


class ForgedReport(Strict):
    """Fault injection for tests (``speculative.forge_report``): what the server REPORTS on each request
    instead of its true counts, so the harness's claim checks (harness.measure.claims) can be shown to
    catch a lying server. The stream (tokens, timing) stays true. ``steps`` / ``proposed`` /
    ``accepted``: fixed values reported for every request; ``all_accepted``: report every draft of every
    true verify step as accepted (proposed = accepted = k x steps, histogram to match: a believable lie
    the stream contradicts)."""

    steps: int | None = Field(default=None, ge=0, description="reported verify steps (count)")
    proposed: int | None = Field(default=None, ge=0, description="reported drafts proposed (count)")
    accepted: int | None = Field(default=None, ge=0, description="reported drafts accepted (count)")
    all_accepted: bool = False


class SpeculativeSpec(Strict):
    """Profile block ``speculative:`` (absent: native autoregressive decoding).

    ``draft_tokens`` is k; ``accept_probs`` the per-position conditional acceptance p_1..p_k;
    ``verify_cost`` multiplies the native decode step of the same batch (a verify step's duration);
    ``sglang_fields`` picks SGLang's current (``new``) or older (``old``) ``meta_info`` names;
    ``vllm_per_request`` is vLLM's ``--per-request-spec-decode-metrics`` on the OpenAI endpoints;
    ``forge_report`` (tests only) makes the per-request reports lie (:class:`ForgedReport`).
    """

    algorithm: str = Field(default="EAGLE", min_length=1, description="reported as speculative_algorithm")
    draft_model: str = Field(default="sim-draft", description="reported as speculative_draft_model_path")
    draft_tokens: int = Field(ge=1, le=64, description="k: draft tokens proposed per verify step")
    accept_probs: tuple[float, ...] = Field(description="p_1..p_k, conditional acceptance per position")
    verify_cost: float = Field(gt=0, description="verify step time / native decode step time, same batch")
    seed: int = Field(default=0, ge=0)
    sglang_fields: Literal["new", "old"] = "new"
    vllm_per_request: Literal["none", "summary", "detailed"] = "none"
    forge_report: ForgedReport | None = Field(default=None, description="fault injection for tests: forged "
                                              "per-request counts (ForgedReport); absent: the true counts")

    @model_validator(mode="after")
    def _check(self) -> SpeculativeSpec:
        if len(self.accept_probs) != self.draft_tokens:
            raise ValueError(f"accept_probs needs draft_tokens = {self.draft_tokens} values, "
                             f"got {len(self.accept_probs)}")
        if any(not 0.0 <= p <= 1.0 for p in self.accept_probs):
            raise ValueError("every accept_probs value must be in [0, 1]")
        return self

    @property
    def expected_tokens_per_step(self) -> float:
        """E[a], tokens per verify step, bonus included."""
        return expected_tokens_per_step(self.accept_probs)


def expected_tokens_per_step(accept_probs: Sequence[float]) -> float:
    """E[a] = 1 + sum_{i=1..k} prod_{j=1..i} p_j: expected tokens per verify step (bonus included)."""
    total, prefix = 1.0, 1.0
    for p in accept_probs:
        prefix *= p
        total += prefix
    return total


def expected_acceptance_rate(accept_probs: Sequence[float]) -> float:
    """Expected accepted / proposed drafts: (E[a] - 1) / k."""
    return (expected_tokens_per_step(accept_probs) - 1.0) / len(accept_probs)


def request_key(seed: int, input_ids: Sequence[int] | npt.NDArray[np.int32]) -> int:
    """The 64-bit draw key of one request: its prompt's hash mixed with the profile's seed."""
    return (int.from_bytes(prompt_hash(input_ids)[16:24], "little") ^ (seed * _GOLDEN)) & _MASK


def _splitmix64(x: int) -> int:
    z = (x + _GOLDEN) & _MASK
    z = ((z ^ (z >> 30)) * 0xBF58476D1CE4E5B9) & _MASK
    z = ((z ^ (z >> 27)) * 0x94D049BB133111EB) & _MASK
    return z ^ (z >> 31)


def accepted_drafts(accept_probs: Sequence[float], key: int, position: int) -> int:
    """Accepted drafts (0..k) of the verify step that starts at output position ``position`` of the
    request with draw key ``key``: draft i is kept while its uniform draw is below p_i."""
    base = _splitmix64(key ^ ((position + 1) * _GOLDEN & _MASK))
    for i, p in enumerate(accept_probs):
        if _splitmix64(base + i) / _TWO64 >= p:
            return i
    return len(accept_probs)


@dataclass
class SpecTally:
    """One request's speculative counts: verify steps, drafts proposed and accepted (bonus excluded),
    the histogram (index i: steps that accepted i drafts) and each step's accepted count, in order."""

    draft_tokens: int
    key: int = 0
    steps: int = 0
    proposed: int = 0
    accepted: int = 0
    histogram: list[int] = field(default_factory=list)
    per_step: list[int] = field(default_factory=list)
    forge: ForgedReport | None = None

    def __post_init__(self) -> None:
        if not self.histogram:
            self.histogram = [0] * (self.draft_tokens + 1)

    def reported(self) -> tuple[int, int, int, list[int]]:
        """(steps, proposed, accepted, histogram) as the server reports them: the true counts, or the
        forged ones of ``forge`` (:class:`ForgedReport`)."""
        f = self.forge
        if f is None:
            return self.steps, self.proposed, self.accepted, list(self.histogram)
        if f.all_accepted:
            every = self.draft_tokens * self.steps
            return self.steps, every, every, [0] * self.draft_tokens + [self.steps]
        return (self.steps if f.steps is None else f.steps, self.proposed if f.proposed is None else f.proposed,
                self.accepted if f.accepted is None else f.accepted, list(self.histogram))

    def observe(self, accepted: int) -> None:
        """Count one verify step that kept ``accepted`` drafts."""
        self.steps += 1
        self.proposed += self.draft_tokens
        self.accepted += accepted
        self.histogram[accepted] += 1
        self.per_step.append(accepted)


def sglang_meta(tally: SpecTally, completion_tokens: int, names: str) -> dict[str, Any]:
    """The final event's ``meta_info`` speculative fields (empty when no verify step ran).

    ``new`` as SGLang 0.5.23 (``tokenizer_manager._calculate_spec_decoding_metrics``):
    ``spec_accept_length = completion_tokens / spec_verify_ct``; ``old``: the older names, with the
    derived fields present but 0 (a reader recomputes them from the counts)."""
    if tally.steps <= 0:
        return {}
    steps, proposed, accepted, hist = tally.reported()
    if names == "old":
        return {"spec_verify_ct": steps, "spec_accept_token_num": accepted,
                "spec_draft_token_num": proposed, "spec_accept_length": 0, "spec_accept_rate": 0,
                "spec_accept_histogram": hist}
    return {"spec_accept_rate": accepted / proposed if proposed else 0.0,
            "spec_accept_length": completion_tokens / steps if steps else 0.0,
            "spec_num_correct_drafts": accepted, "spec_num_proposed_drafts": proposed,
            "spec_verify_ct": steps, "spec_correct_drafts_histogram": hist}


def vllm_request_metrics(tally: SpecTally, detailed: bool) -> dict[str, Any]:
    """vLLM 0.32.0's ``metrics.speculative_decoding`` object (``RequestSpecDecodeMetrics.to_dict``,
    ``vllm/v1/metrics/stats.py``): the per-step arrays only when ``detailed``."""
    steps, proposed, accepted, hist = tally.reported()
    out: dict[str, Any] = {
        "mean_acceptance_length": 1.0 + accepted / steps if steps else 1.0,
        "draft_acceptance_rate": accepted / proposed if proposed else 0.0,
        "acceptance_histogram": hist,
        "num_spec_steps": steps,
        "num_accepted_draft_tokens": accepted,
        "num_draft_tokens": proposed,
        "num_spec_tokens": tally.draft_tokens,
    }
    if detailed and tally.per_step:
        out["per_step_accepted"] = list(tally.per_step)
        out["per_step_drafted"] = [tally.draft_tokens] * len(tally.per_step)
    return out


@dataclass
class SpecTotals:
    """Lifetime counts of one server (``/metrics`` counters, ``avg_spec_accept_length``)."""

    draft_tokens: int
    steps: int = 0
    proposed: int = 0
    accepted: int = 0
    per_pos: list[int] = field(default_factory=list)

    def __post_init__(self) -> None:
        if not self.per_pos:
            self.per_pos = [0] * self.draft_tokens

    def observe(self, accepted: int) -> None:
        """Count one verify step of one request that kept ``accepted`` drafts."""
        self.steps += 1
        self.proposed += self.draft_tokens
        self.accepted += accepted
        for i in range(accepted):
            self.per_pos[i] += 1

    @property
    def avg_accept_length(self) -> float | None:
        """Lifetime tokens per verify step (1 + accepted / steps), None before the first step."""
        return 1.0 + self.accepted / self.steps if self.steps else None
