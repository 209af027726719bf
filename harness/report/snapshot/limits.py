"""The limits a report states next to its numbers: what each claim does not establish (pure text).

Contract: :func:`formal_limits` and :func:`screen_limits` turn one frozen formal-matrix or ABBA-screen
entry of the snapshot into sentences; :data:`GENERAL_LIMITS` holds the report-wide ones. They are frozen
into the snapshot (its ``limits`` keys), so a rebuilt report states the limits of the version that froze it.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

__all__ = ["GENERAL_LIMITS", "formal_limits", "screen_limits"]


def formal_limits(entry: Mapping[str, Any]) -> list[str]:
    """The limits of one formal matrix's claims, as sentences (pure)."""
    lim = [
        f"Formal three-round matrix, claim class '{entry.get('claim_class')}': never compared or combined with "
        "other claim classes or with ABBA screens.",
        "Prefill and resident-decode cells are medians of the ok round rates; every round is listed. Min-max is "
        "the observed range of the rounds, not a confidence interval.",
        "Resident decode excludes admission, prefill and drain; the whole-wave HTTP output rate includes them. "
        "They are distinct metrics and their gap is not a host-overhead measurement.",
        "Prefill divides all prompt tokens of a wave by the time to its last first token (one output token, "
        "fresh cache salts).",
    ]
    spec = entry.get("spec") or {}
    dec = spec.get("decode") or {}
    if dec:
        lim.append(f"Decode protocol of this archive: max_new_tokens {dec.get('max_new_tokens')}, at least "
                   f"{dec.get('min_resident_seconds')} s of resident windows per round, "
                   f"{dec.get('rounds')} rounds per cell; the numbers hold for that protocol only.")
    if entry.get("simulated"):
        lim.append("SIMULATED: produced by the built-in simulator, not by a model on hardware. It shows what "
                   "the harness measures, not how fast any model is.")
    if entry.get("status") != "complete":
        lim.append(f"The archive is {entry.get('status')}: some cells may lack rounds.")
    return lim


def screen_limits(entry: Mapping[str, Any]) -> list[str]:
    """The limits of one ABBA screen's claims, as sentences (pure)."""
    def pct(v: Any) -> str:
        return "n/a" if v is None else f"{float(v):+.3f}%"

    lim = [
        "ABBA screen (legs A1 -> B1 -> B2 -> A2), not a formal cell; never combined with formal matrices.",
        f"The candidate/control change ({pct(entry.get('change_pct'))}) holds for this workload only "
        f"(C{entry.get('concurrency')}, {entry.get('boundary')} boundary); it must not be added to or multiplied "
        "with percentages from other experiments.",
        f"Return-control drift A2 vs A1 is {pct(entry.get('drift_pct'))} and candidate spread B2 vs B1 "
        f"{pct(entry.get('spread_pct'))}: an effect not larger than these is not resolved by this screen.",
        "Min-max across waves are observed ranges, not confidence intervals.",
        f"The whole-wave HTTP ratio ({pct(entry.get('http_change_pct'))}) is a different boundary and does not "
        "establish the same percentage.",
    ]
    if entry.get("b2_shares_b1_service"):
        lim.append("B1 and B2 shared one candidate service; A1 and A2 were independently started controls.")
    if entry.get("simulated"):
        lim.append("SIMULATED: produced by the built-in simulator, not by a model on hardware.")
    if entry.get("status") != "complete":
        lim.append(f"The archive is {entry.get('status')}: legs may be missing.")
    return lim


GENERAL_LIMITS = (
    "Native autoregressive, full-target speculative and approximate-target results are different claims; "
    "their rates are never compared or combined.",
    "Checkpoint precision, component equality, repeated output hashes and end-to-end answer quality are "
    "distinct claims; no check substitutes for another.",
    "Formal three-round matrices and ABBA screens are shown in separate sections and never combined. "
    "Min/max are observed ranges, not confidence intervals.",
    "Historical results keep their original protocol labels and are never presented as current.",
    "Logged flags are not proof that a code path ran: service identities below come from the servers' own "
    "reports.",
    "GPU memory figures are the peak observed in samples at the sampling interval, not an allocator peak.",
    "Oracle checks are bounded fixed-input checks; they do not certify long contexts, other batch shapes or "
    "answer quality.",
)
