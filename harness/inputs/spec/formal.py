"""Formal matrix specs (``kind: formal-matrix``, protocol class ``formal``; pure): decode and prefill
cells over frozen corpora on one service."""

from __future__ import annotations

import itertools
from pathlib import Path
from typing import Any, Literal

from pydantic import Field, field_validator, model_validator

from harness.formats import Strict, resolve_path
from harness.inputs.spec.base import (
    _PATH,
    MAX_CONCURRENCY,
    MAX_NEW_TOKENS,
    MAX_ROUNDS,
    MAX_SECONDS,
    MAX_TIERS,
    MAX_WAVES,
    TIERS,
    SpecPaths,
    inline_file,
    legacy_cache,
)
from harness.inputs.spec.service import LoadSettings, OneServiceSpec, ServiceProfile


class CorporaSpec(Strict):
    """Paths of frozen corpora (relative to the spec file, or to the working directory)."""

    decode: str | None = Field(None, max_length=_PATH, description="corpus of the decode cells")
    prefill: str | None = Field(None, max_length=_PATH, description="corpus of the prefill cells")


class _CellSection(Strict):
    """What decode and prefill sections check alike: their tiers, and the first cache spellings."""

    tiers: list[int]

    @model_validator(mode="before")
    @classmethod
    def _legacy_cache(cls, data: Any) -> Any:
        return legacy_cache(data)

    @field_validator("tiers")
    @classmethod
    def _tiers(cls, v: list[int]) -> list[int]:
        return _check_tiers(v)


class DecodeSpec(_CellSection):
    """Formal decode cells: duration-driven rounds of natural-EOS waves."""

    tiers: list[int] = Field(default_factory=lambda: list(TIERS),
                             description="concurrencies measured, one cell each (requests in flight)")
    rounds: int = Field(3, ge=1, le=MAX_ROUNDS, description="measured rounds per cell (count)")
    min_resident_seconds: float = Field(30.0, gt=0, le=MAX_SECONDS, allow_inf_nan=False,
                                        description="common resident window a round must reach (seconds)")
    warmup_waves: int = Field(1, ge=0, le=1000, description="unmeasured waves before each cell (count)")
    max_new_tokens: int = Field(2048, ge=1, le=MAX_NEW_TOKENS, description="cap on every answer (tokens)")
    ignore_eos: bool = Field(False, description="keep generating past EOS up to max_new_tokens")
    temperature: float = Field(0.0, ge=0, le=100, allow_inf_nan=False,
                               description="sampling temperature; 0 = greedy (ratio)")
    cache: Literal["fresh-salt", "none"] = Field("fresh-salt", description="prefix-cache defeat: a fresh cache "
                                                 "salt per request, or none (was cache_salt: fresh|none)")
    max_waves_per_round: int = Field(200, ge=1, le=MAX_WAVES,
                                     description="waves after which a round stops short of its window (count)")


class PrefillSpec(_CellSection):
    """Formal prefill cells: one output token, cache defeated, ``cached_tokens == 0`` verified."""

    tiers: list[int] = Field(default_factory=lambda: list(TIERS),
                             description="concurrencies measured, one cell each (requests in flight)")
    rounds: int = Field(3, ge=1, le=MAX_ROUNDS, description="measured rounds per cell (count)")
    waves_per_round: int = Field(1, ge=1, le=10_000, description="waves in each measured round (count)")
    warmup_waves: int = Field(1, ge=0, le=1000, description="unmeasured waves before each cell (count)")
    max_new_tokens: int = Field(1, ge=1, le=MAX_NEW_TOKENS, description="output per request (tokens)")
    cache: Literal["fresh-salt", "flush"] = Field("fresh-salt", description="how the prefix cache is defeated: a "
                                                  "fresh salt per request, or a flush before each wave (was "
                                                  "cache_defeat: salt|flush)")


class TtftShapesSpec(Strict):
    """The shape key that classifies requests cold, restarted or warm (docs/coldness.md): a request's
    shape is (input-length bucket of its prompt, batch tier of its concurrency)."""

    input_len_edges: list[int] = Field(
        default_factory=list, max_length=64,
        description="input-length bucket upper edges, strictly increasing; a prompt is in the bucket of the first "
        "edge at or above its length (one bucket beyond the last); empty: one bucket (tokens)")
    batch_tiers: list[int] = Field(
        default_factory=list, max_length=64,
        description="batch tiers, strictly increasing, e.g. the server's CUDA-graph batch sizes; a request's tier "
        "is the first at or above its concurrency; empty: the concurrency itself (requests in flight)")

    @field_validator("input_len_edges", "batch_tiers")
    @classmethod
    def _increasing(cls, v: list[int]) -> list[int]:
        if any(x < 1 for x in v) or any(b <= a for a, b in itertools.pairwise(v)):
            raise ValueError(f"{v} must be strictly increasing integers >= 1, e.g. [1024, 4096, 16384]")
        return v


def _check_tiers(v: list[int]) -> list[int]:
    if not v:
        raise ValueError("tiers is empty; list at least one concurrency, e.g. [1, 2, 4, 8, 16, 32, 64]")
    if len(v) > MAX_TIERS:
        raise ValueError(f"{len(v)} tiers; at most {MAX_TIERS}")
    if any(c < 1 or c > MAX_CONCURRENCY for c in v):
        raise ValueError(f"every tier must be a concurrency from 1 to {MAX_CONCURRENCY}")
    if len(set(v)) != len(v):
        raise ValueError("tiers contain duplicates")
    return sorted(v)


class CampaignSpec(OneServiceSpec):
    """A formal matrix campaign (``kind: formal-matrix``)."""

    kind: Literal["formal-matrix"] = Field("formal-matrix", description="spec kind (the default when absent)")
    protocol_class: Literal["formal"] = Field("formal", description="evidence protocol class (fixed by the kind)")
    corpora: CorporaSpec = Field(default_factory=CorporaSpec, description="frozen corpora per workload")
    decode: DecodeSpec | None = Field(None, description="decode cells (needs corpora.decode)")
    prefill: PrefillSpec | None = Field(None, description="prefill cells (needs corpora.prefill)")
    analysis_plan: str | None = Field(None, max_length=_PATH,
                                      description="analysis plan frozen with 'dsv4h freeze FILE' before the run")
    order: list[Literal["decode", "prefill"]] = Field(default_factory=lambda: ["decode", "prefill"],  # type: ignore[arg-type]
                                                      description="workloads in the order they run")
    load: LoadSettings = Field(default_factory=lambda: LoadSettings(),  # noqa: PLW0108 - mypy needs the call
                               description="how the load is generated")
    ttft_shapes: TtftShapesSpec = Field(default_factory=lambda: TtftShapesSpec(),  # noqa: PLW0108
                                        description="shape key of the cold / restarted / warm TTFT classes "
                                        "(docs/coldness.md)")

    @classmethod
    def inline_files(cls, data: dict[str, Any], base: Path) -> None:
        """A ``service`` naming a profile file: its content inline (its paths then resolve against the
        spec's directory, as formal specs always have)."""
        inline_file(data, "service", base, ServiceProfile)

    def spec_paths(self, base: Path) -> SpecPaths:
        """The decode and prefill corpora (of the sections present), the oracles and the analysis plan."""
        corpora: dict[str, Path] = {}
        if self.decode is not None and self.corpora.decode:
            corpora["decode"] = resolve_path(self.corpora.decode, base)
        if self.prefill is not None and self.corpora.prefill:
            corpora["prefill"] = resolve_path(self.corpora.prefill, base)
        plan = resolve_path(self.analysis_plan, base) if self.analysis_plan else None
        return SpecPaths(corpora=corpora, oracles=self.oracle_paths(base), analysis_plan=plan)

    @model_validator(mode="after")
    def _check(self) -> CampaignSpec:
        if self.decode is None and self.prefill is None:
            raise ValueError("a formal matrix needs a 'decode' section, a 'prefill' section, or both")
        if self.decode is not None and not self.corpora.decode:
            raise ValueError("'decode' is set but 'corpora.decode' is missing")
        if self.prefill is not None and not self.corpora.prefill:
            raise ValueError("'prefill' is set but 'corpora.prefill' is missing")
        if self.reopen is not None and self.direction is None:
            raise ValueError("'reopen' needs the 'direction' it reopens")
        if len(set(self.order)) != len(self.order):
            raise ValueError(f"'order' lists a workload twice: {self.order}")
        dropped = [w for w, sec in (("decode", self.decode), ("prefill", self.prefill))
                   if sec is not None and w not in self.order]
        if dropped:
            raise ValueError(f"'{dropped[0]}' is set but 'order' ({self.order}) leaves it out, so it would never "
                             f"run; add it to 'order' or remove the section")
        return self
