"""Campaign spec -> ordered cells, rounds and waves with stable ids (pure).

Ids derive from canonical JSON of what defines a cell (workload, concurrency, sampling, corpus
manifest hash), so the same cell in the same spec always has the same id, and a changed definition
never reuses an old id. Decode rounds are duration-driven: the plan gives their minimum, the run
decides how many waves they need.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any, Literal

from harness import ids
from harness.hashing import sha256_json
from harness.inputs.spec import CampaignSpec
from harness.inputs.spec.base import CacheDefeat

__all__ = ["CellPlan", "Plan", "build_plan", "sim_cell_estimate", "wave_cases"]

Workload = Literal["decode", "prefill"]


@dataclass(frozen=True)
class CellPlan:
    """One formal cell: a workload at one concurrency, run for ``rounds`` measured rounds."""

    cell_id: str
    index: int
    workload: Workload
    concurrency: int
    rounds: int
    warmup_waves: int
    max_new_tokens: int
    ignore_eos: bool
    temperature: float
    cache: CacheDefeat
    corpus: str
    corpus_sha256: str
    min_resident_seconds: float | None = None
    waves_per_round: int | None = None
    max_waves_per_round: int = 200
    definition: dict[str, Any] = field(default_factory=dict, compare=False)

    def round_id(self, k: int, attempt: int = 0) -> str:
        """Stable id of measured round ``k`` (0-based); a retried round (after a failure and
        ``--resume``) adds its attempt number, so the failed attempt stays distinct and kept."""
        return ids.round_id(self.cell_id, k, attempt)

    def wave_id(self, k: int, j: int, attempt: int = 0, service_start: int = 0) -> str:
        """Stable id of wave ``j`` of round ``k``; ``k = -1`` names a warmup wave (warmups are
        numbered per service start, since each new service is warmed anew)."""
        return ids.wave_id(self.cell_id, k, j, attempt, service_start)

    @property
    def label(self) -> str:
        """Short human label, e.g. ``decode C8``."""
        return f"{self.workload} C{self.concurrency}"


@dataclass(frozen=True)
class Plan:
    """The ordered cells of a campaign and a wall-time estimate (seconds, None if unknown), total
    and per cell (``cell_estimates_s``, in cell order; empty when unknown)."""

    campaign: str
    plan_id: str
    cells: tuple[CellPlan, ...]
    estimate_s: float | None
    estimate_basis: str
    cell_estimates_s: tuple[float, ...] = ()


PLAN_CACHE_WORDS: dict[str, dict[str, str]] = {"decode": {"fresh-salt": "fresh", "none": "none"},
                                               "prefill": {"fresh-salt": "salt", "flush": "flush"}}
"""The cache-defeat word a cell's definition hashes: the first spec spelling (``cache_salt`` /
``cache_defeat``), so a cell id and plan id made before ``cache:`` replaced them stay the same (a
partial archive of an older plan can still be resumed)."""


def _cell_id(workload: Workload, concurrency: int, definition: dict[str, Any]) -> str:
    return ids.formal_cell_id(workload, concurrency, sha256_json(definition))


def build_plan(
    spec: CampaignSpec,
    corpus_hashes: dict[str, str],
    *,
    estimator: Callable[[CellPlan], float | None] | None = None,
    estimate_basis: str = "",
) -> Plan:
    """Ordered cells for ``spec``. ``corpus_hashes`` maps workload -> corpus manifest SHA-256.

    ``estimator`` returns the expected seconds of one cell (warmups included) or None; the plan's
    estimate is their sum when every cell has one.
    """
    cells: list[CellPlan] = []
    for workload in spec.order:
        if workload == "decode" and spec.decode is not None:
            d = spec.decode
            for c in d.tiers:
                definition = {
                    "workload": "decode", "concurrency": c, "rounds": d.rounds,
                    "min_resident_seconds": d.min_resident_seconds, "warmup_waves": d.warmup_waves,
                    "max_new_tokens": d.max_new_tokens, "ignore_eos": d.ignore_eos,
                    "temperature": d.temperature, "cache": PLAN_CACHE_WORDS["decode"][d.cache],
                    "corpus_sha256": corpus_hashes.get("decode", ""),
                }
                cells.append(CellPlan(
                    cell_id=_cell_id("decode", c, definition), index=len(cells), workload="decode",
                    concurrency=c, rounds=d.rounds, warmup_waves=d.warmup_waves,
                    max_new_tokens=d.max_new_tokens, ignore_eos=d.ignore_eos,
                    temperature=d.temperature,
                    cache=d.cache,
                    corpus=spec.corpora.decode or "", corpus_sha256=corpus_hashes.get("decode", ""),
                    min_resident_seconds=d.min_resident_seconds,
                    max_waves_per_round=d.max_waves_per_round, definition=definition,
                ))
        if workload == "prefill" and spec.prefill is not None:
            p = spec.prefill
            for c in p.tiers:
                definition = {
                    "workload": "prefill", "concurrency": c, "rounds": p.rounds,
                    "waves_per_round": p.waves_per_round, "warmup_waves": p.warmup_waves,
                    "max_new_tokens": p.max_new_tokens, "cache": PLAN_CACHE_WORDS["prefill"][p.cache],
                    "corpus_sha256": corpus_hashes.get("prefill", ""),
                }
                cells.append(CellPlan(
                    cell_id=_cell_id("prefill", c, definition), index=len(cells), workload="prefill",
                    concurrency=c, rounds=p.rounds, warmup_waves=p.warmup_waves,
                    max_new_tokens=p.max_new_tokens, ignore_eos=True, temperature=0.0,
                    cache=p.cache,
                    corpus=spec.corpora.prefill or "", corpus_sha256=corpus_hashes.get("prefill", ""),
                    waves_per_round=p.waves_per_round, definition=definition,
                ))
    plan_id = sha256_json({"campaign": spec.name, "cells": [c.definition for c in cells]})[:16]
    estimate: float | None = None
    per_cell: tuple[float, ...] = ()
    if estimator is not None:
        parts = [estimator(c) for c in cells]
        if all(p is not None for p in parts):
            per_cell = tuple(float(p) for p in parts if p is not None)
            estimate = float(sum(per_cell))
    return Plan(spec.name, plan_id, tuple(cells), estimate, estimate_basis if estimate is not None else "", per_cell)


def wave_cases(n_cases: int, concurrency: int, wave_counter: int) -> list[int]:
    """Corpus case indices of the ``wave_counter``-th wave of a cell (warmups count too).

    Cycles through the corpus so successive waves expose successive case mixtures; with more
    requests than cases a wave repeats cases (each request still gets its own rid and salt).
    """
    start = (wave_counter * concurrency) % n_cases
    return [(start + i) % n_cases for i in range(concurrency)]


def sim_cell_estimate(
    cell: CellPlan,
    *,
    decode_rate: Callable[[int], float],
    prefill_rate: Callable[[int, int], float],
    prompt_len: int,
    mean_answer_tokens: float,
) -> float:
    """Expected seconds for a cell on a service with a known rate model (the simulator).

    Decode: each wave pays prefill of C prompts plus ``mean_answer_tokens`` decode steps at
    ``step(C) = C / rate(C)``; a round needs enough waves for ``min_resident_seconds``.
    Prefill: each wave is C prompts at the modelled prefill rate.
    """
    c = cell.concurrency
    prefill_s = c * prompt_len / prefill_rate(c, prompt_len)
    if cell.workload == "prefill":
        waves = cell.warmup_waves + cell.rounds * (cell.waves_per_round or 1)
        return waves * prefill_s
    step = c / decode_rate(c)
    answer = min(mean_answer_tokens, cell.max_new_tokens)
    wave_s = prefill_s + answer * step
    resident_per_wave = max(answer * 0.5 * step, 1e-3)
    per_round = max(1, math.ceil((cell.min_resident_seconds or 0.0) / resident_per_wave))
    return (cell.warmup_waves + cell.rounds * per_round) * wave_s
