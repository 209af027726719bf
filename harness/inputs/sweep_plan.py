"""The arrival plan of a rate sweep: every round of every rate, before the run (pure).

A rate sweep (and each probe of an SLA search, which is a sweep of one rate) plans every round up
front: per offered rate, its warmup round (``round_index = -1``, when the spec asks for warmup
requests) and its ``rounds`` measured rounds, each an open-loop :class:`~harness.inputs.arrivals.RoundPlan`
drawn from the spec's arrival process and seed over the corpus's case ids. The plan is archived
(``arrivals.json``) with its hash before the service starts; the runner only follows it.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from harness.inputs.arrivals import RoundPlan, plan_hash, plan_round
from harness.inputs.corpus import Corpus
from harness.inputs.spec import SweepSpec, sweep_definition

__all__ = ["SweepPlan", "make_sweep_plan"]


@dataclass(frozen=True)
class SweepPlan:
    """Every round's arrival plan (warmup rounds have ``round_index = -1``) and the plan's hash."""

    rounds: tuple[RoundPlan, ...]
    plan_id: str
    definition: dict[str, Any]

    def to_json(self) -> dict[str, Any]:
        """``arrivals.json``."""
        return {"plan_id": self.plan_id, "definition": self.definition,
                "rounds": [r.to_json() for r in self.rounds]}


def make_sweep_plan(spec: SweepSpec, corpus: Corpus) -> SweepPlan:
    """Plan every round of every rate, in rate order, warmup first (pure: the same spec and corpus
    give the same plan and plan id)."""
    a = spec.arrivals
    ids = [c.case_id for c in corpus.cases]
    rounds: list[RoundPlan] = []
    for rate in spec.rate_list:
        if spec.warmup_requests:
            rounds.append(plan_round(a.process, rate, -1, ids, seed=a.seed, count=spec.warmup_requests,
                                     burstiness=a.burstiness))
        for k in range(spec.rounds):
            rounds.append(plan_round(a.process, rate, k, ids, seed=a.seed, count=a.count, duration_s=a.duration_s,
                                     burstiness=a.burstiness))
    definition = sweep_definition(spec) | {"corpus_manifest_sha256": corpus.manifest_sha256}
    return SweepPlan(tuple(rounds), plan_hash(rounds)[:16], definition)
