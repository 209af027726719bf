"""Cold-shape compilation cost of the simulator (pure): the first forward of a shape pays extra.

A real server compiles (CUDA graphs, torch.compile, kernel autotuning) the first time it meets a
shape; that forward is slow, once. A profile's ``cold_shape:`` block (:class:`ColdShapeSpec`) models
it for prefill forwards: the shape of a prefill forward's new prompt is ``(input-length bucket,
batch tier)``, the bucket being the index of the first of ``input_len_edges`` (tokens) at or above the
prompt's length (``len(edges)`` beyond the last edge; one bucket when no edges are declared) and the
batch tier the smallest of ``batch_tiers`` at or above the number of requests newly admitted in the
forward (the count itself above the last tier, or when no tiers are declared). The first forward of a
shape since the simulator process started lasts ``compile_s`` more per new shape it holds (model seconds,
scaled by ``time_scale`` like every model duration). Decode steps pay nothing (this models TTFT only).

The compiled shapes live in the process: a restarted simulator has lost them and pays again (no
persistent compile cache is modelled), so on the simulator a "restarted" request costs what a cold
one does (docs/coldness.md).
"""

from __future__ import annotations

import bisect
import itertools

from pydantic import Field, field_validator

from harness.formats import Strict

__all__ = ["ColdShapeSpec", "ColdShapes", "batch_tier", "length_bucket"]


def _increasing(name: str, v: tuple[int, ...]) -> tuple[int, ...]:
    if any(x < 1 for x in v) or any(b <= a for a, b in itertools.pairwise(v)):
        raise ValueError(f"{name} must be strictly increasing integers >= 1")
    return v


def length_bucket(edges: tuple[int, ...], input_len: int) -> int:
    """Index of the first edge >= ``input_len`` (tokens); ``len(edges)`` beyond the last one."""
    return bisect.bisect_left(edges, input_len)


def batch_tier(tiers: tuple[int, ...], n: int) -> int:
    """The smallest tier >= ``n``; ``n`` itself above the last tier or without tiers."""
    i = bisect.bisect_left(tiers, n)
    return tiers[i] if i < len(tiers) else n


class ColdShapeSpec(Strict):
    """A profile's cold-shape cost: ``compile_s`` extra model seconds on the first prefill forward of
    each (input-length bucket, batch tier) shape since the process started."""

    compile_s: float = Field(gt=0, le=3600, allow_inf_nan=False,
                             description="extra model seconds of the first prefill forward of a shape (s)")
    input_len_edges: tuple[int, ...] = Field(
        default=(), description="input-length bucket upper edges (tokens), strictly increasing; empty: one bucket")
    batch_tiers: tuple[int, ...] = Field(
        default=(), description="batch tiers (requests admitted in one forward), strictly increasing; empty: the "
        "count itself")

    @field_validator("input_len_edges")
    @classmethod
    def _edges(cls, v: tuple[int, ...]) -> tuple[int, ...]:
        return _increasing("input_len_edges", v)

    @field_validator("batch_tiers")
    @classmethod
    def _tiers(cls, v: tuple[int, ...]) -> tuple[int, ...]:
        return _increasing("batch_tiers", v)

    def shape(self, input_len: int, admitted: int) -> tuple[int, int]:
        """The shape of a prompt of ``input_len`` tokens in a forward admitting ``admitted`` requests."""
        return length_bucket(self.input_len_edges, input_len), batch_tier(self.batch_tiers, admitted)


class ColdShapes:
    """The shapes one simulator process has compiled so far, and the cost of a forward's new ones."""

    def __init__(self, spec: ColdShapeSpec) -> None:
        self.spec = spec
        self.seen: set[tuple[int, int]] = set()
        self.compiles = 0

    def forward_cost_s(self, prompt_lens: list[int]) -> float:
        """Extra model seconds (unscaled) of a prefill forward newly admitting prompts of
        ``prompt_lens`` tokens; their shapes are compiled from now on."""
        if not prompt_lens:
            return 0.0
        new = {self.spec.shape(n, len(prompt_lens)) for n in prompt_lens} - self.seen
        self.seen |= new
        self.compiles += len(new)
        return self.spec.compile_s * len(new)
