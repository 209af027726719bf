"""The comparisons guard (pure): refuse arithmetic that breaks the evidence rules.

Rule 1 (docs/evidence-rules.md#rule-1-native-and-speculative-results-are-different-claims): native
autoregressive, full-target speculative and approximate-target results are different claims; their
rates are never compared or combined. Rule 3: formal matrices and ABBA screens stay separate, and
percentages from different experiments are never added or multiplied. ``LabeledRate`` and
``LabeledPercent`` carry the labels; the functions here check them before doing any arithmetic and
raise ``EvidenceError`` citing the rule otherwise.

The one ratio across claim classes: a speculative-full-target rate over a native-ar rate measured in
the same matched AR/SD run (both rates of protocol class ``matched-sd`` and one ``archive_id``): the
two legs of one archive, on one target and workload. ``change_pct`` allows it;
``check_comparable`` (comparisons in general) never does.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from harness.errors import EvidenceError

RULE_1 = "rule 1: native, full-target speculative and approximate-target results are different claims"
RULE_3_PROTOCOL = "rule 3: formal three-round matrices and ABBA screens stay separate"
RULE_3_PERCENT = "rule 3: percentages from different experiments are never added or multiplied"
RULE_COUNTS = "approximate token counts never share a claim with exact ones"
_MATCHED_PROTOCOL = "matched-sd"
RULE_1_MATCHED = ("rule 1: a speculative rate over a native-AR rate exists only inside one matched AR/SD run "
                  "(protocol class matched-sd, one archive)")
_SPECULATIVE = ("speculative-full-target", "speculative-approximate")


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
    archive_id: str = ""  # the archive that measured it (matched AR/SD legs share one)


@dataclass(frozen=True)
class LabeledPercent:
    """A percentage change (10.0 = +10%) and the experiment that measured it."""

    value: float
    experiment: str
    boundary: str = "resident"


def matched(a: LabeledRate, b: LabeledRate) -> bool:
    """True when ``a`` and ``b`` are legs of one matched AR/SD run: protocol class matched-sd, one archive."""
    return (a.protocol_class == b.protocol_class == _MATCHED_PROTOCOL and a.archive_id != ""
            and a.archive_id == b.archive_id)


def _speculative_vs_native(a: LabeledRate, b: LabeledRate) -> bool:
    claims = {a.claim_class, b.claim_class}
    return "native-ar" in claims and bool(claims & set(_SPECULATIVE))


def check_comparable(a: LabeledRate, b: LabeledRate) -> None:
    """Raise EvidenceError unless ``a`` and ``b`` share claim class, protocol class, boundary and origin."""
    if a.claim_class != b.claim_class:
        hint = "compare results of the same claim class only"
        if _speculative_vs_native(a, b):
            hint += ("; a speculative speedup over native AR is the percent change (change_pct) of the two legs of one "
                     "matched AR/SD run (protocol class matched-sd)")
        raise EvidenceError(f"refusing to compare a {a.claim_class} rate with a {b.claim_class} rate ({RULE_1})",
                            hint=hint)
    _check_same_kind(a, b)


def _check_same_kind(a: LabeledRate, b: LabeledRate) -> None:
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


def check_ratio(candidate: LabeledRate, control: LabeledRate) -> None:
    """Raise EvidenceError unless ``candidate / control`` may be formed: ``check_comparable``, except that a
    speculative-full-target rate and a native-ar rate of one matched AR/SD run (``matched``) may be divided.
    An approximate-target rate is never set against native AR (rule 1: never a recovery target)."""
    if not _speculative_vs_native(candidate, control):
        check_comparable(candidate, control)
        return
    pair = f"{candidate.claim_class} rate over a {control.claim_class} rate"
    if "speculative-approximate" in (candidate.claim_class, control.claim_class):
        raise EvidenceError(f"refusing a {pair} ({RULE_1}): approximate verification does not reproduce the "
                            "target's outputs, so the two legs do different work",
                            hint="report the approximate-target rate on its own, labelled speculative-approximate")
    if not matched(candidate, control):
        where = ", ".join(sorted({f"{r.protocol_class} in {r.archive_id or 'an unnamed archive'}"
                                  for r in (candidate, control)}))
        raise EvidenceError(f"refusing a {pair} outside one matched AR/SD run ({where}) ({RULE_1_MATCHED}): only "
                            "the AR and SD legs of one matched run, on one target and workload, give a speedup",
                            hint="measure both in one matched AR/SD run (protocol class matched-sd) and divide "
                                 "its two legs")
    _check_same_kind(candidate, control)


def change_pct(candidate: LabeledRate, control: LabeledRate) -> LabeledPercent:
    """Candidate over control as a percentage change, after ``check_ratio``."""
    check_ratio(candidate, control)
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
