"""The comparisons guard (pure): refuse arithmetic that breaks the evidence rules.

Rule 1 (docs/evidence-rules.md#rule-1-native-and-speculative-results-are-different-claims): native
autoregressive, full-target speculative and approximate-target results are different claims; their
rates are never compared or combined. Rule 3: formal matrices and ABBA screens stay separate, and
percentages from different experiments are never added or multiplied. ``LabeledRate`` and
``LabeledPercent`` carry the labels; the functions here check them before doing any arithmetic and
raise ``EvidenceError`` citing the rule otherwise.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from harness.errors import EvidenceError

RULE_1 = "rule 1: native, full-target speculative and approximate-target results are different claims"
RULE_3_PROTOCOL = "rule 3: formal three-round matrices and ABBA screens stay separate"
RULE_3_PERCENT = "rule 3: percentages from different experiments are never added or multiplied"
RULE_COUNTS = "approximate token counts never share a claim with exact ones"


@dataclass(frozen=True)
class LabeledRate:
    """A rate (tok/s) with the labels that decide what it may be compared with."""

    value: float
    claim_class: str
    protocol_class: str
    boundary: str = "resident"
    experiment: str = ""
    simulated: bool = False
    counts: str = "exact"  # "exact" or "approximate" token counts (harness.load.openai)


@dataclass(frozen=True)
class LabeledPercent:
    """A percentage change (10.0 = +10%) and the experiment that measured it."""

    value: float
    experiment: str
    boundary: str = "resident"


def check_comparable(a: LabeledRate, b: LabeledRate) -> None:
    """Raise EvidenceError unless ``a`` and ``b`` share claim class, protocol class, boundary and origin."""
    if a.claim_class != b.claim_class:
        raise EvidenceError(f"refusing to compare a {a.claim_class} rate with a {b.claim_class} rate ({RULE_1})",
                            hint="compare results of the same claim class only")
    if a.protocol_class != b.protocol_class:
        raise EvidenceError(f"refusing to compare a {a.protocol_class} result with a {b.protocol_class} result "
                            f"({RULE_3_PROTOCOL})", hint="compare formal cells with formal cells, screens within "
                            "their own ABBA")
    if a.boundary != b.boundary:
        raise EvidenceError(f"refusing to compare a {a.boundary} rate with a {b.boundary} rate (different "
                            "measurement boundaries)", hint="compare resident with resident, HTTP with HTTP")
    if a.simulated != b.simulated:
        raise EvidenceError("refusing to compare simulated with measured results",
                            hint="simulator numbers are never evidence about hardware")
    if a.counts != b.counts:
        raise EvidenceError(f"refusing to compare a rate from {a.counts} token counts with one from {b.counts} "
                            f"counts ({RULE_COUNTS})", hint="measure both through a path with exact counts "
                            "(server cumulative counts, usage on every chunk, or token ids)")


def ratio_pct(candidate: LabeledRate, control: LabeledRate) -> LabeledPercent:
    """Candidate over control as a percentage change, after ``check_comparable``."""
    check_comparable(candidate, control)
    if control.value == 0:
        raise EvidenceError("control rate is zero; no ratio exists")
    exp = candidate.experiment if candidate.experiment == control.experiment else \
        f"{control.experiment}|{candidate.experiment}"
    return LabeledPercent((candidate.value / control.value - 1.0) * 100.0, exp, candidate.boundary)


def _same_experiment(pcts: Sequence[LabeledPercent], op: str) -> None:
    exps = sorted({p.experiment for p in pcts})
    if len(exps) > 1:
        raise EvidenceError(f"refusing to {op} percentages from different experiments ({', '.join(exps)}) "
                            f"({RULE_3_PERCENT})", hint="report each experiment's percentage on its own")
    bounds = sorted({p.boundary for p in pcts})
    if len(bounds) > 1:
        raise EvidenceError(f"refusing to {op} percentages measured at different boundaries ({', '.join(bounds)})")


def add_percentages(pcts: Sequence[LabeledPercent]) -> LabeledPercent:
    """Sum percentages of ONE experiment (e.g. parts of one decomposition); refuses mixed experiments."""
    if not pcts:
        raise EvidenceError("no percentages to add")
    _same_experiment(pcts, "add")
    return LabeledPercent(sum(p.value for p in pcts), pcts[0].experiment, pcts[0].boundary)


def compound_percentages(pcts: Sequence[LabeledPercent]) -> LabeledPercent:
    """Multiply ratios (1 + p/100) of ONE experiment; refuses mixed experiments (the report's 3.599x
    must never be multiplied with the +10.32% of another screen)."""
    if not pcts:
        raise EvidenceError("no percentages to multiply")
    _same_experiment(pcts, "multiply")
    total = 1.0
    for p in pcts:
        total *= 1.0 + p.value / 100.0
    return LabeledPercent((total - 1.0) * 100.0, pcts[0].experiment, pcts[0].boundary)
