"""ABBA screen arithmetic (pure): legs A1 -> B1 -> B2 -> A2 (report sections 8.2-8.4, 10.2).

Each leg runs the same fixed waves; a leg's value is the median of its wave rates. The screen
reports the candidate/control change of the means of the arm medians, the return-control drift
(A2 vs A1), the candidate spread (B2 vs B1), whether every candidate wave beats every control wave,
and how many completions are identical across legs. A screen is never a formal cell; when the
drift is at least as large as the effect, the result is inconclusive.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

import numpy as np

from harness.inputs.spec import sectioned_dump, sectioned_key
from harness.measure.table_model import TableModel

__all__ = [
    "LEGS",
    "AbbaResult",
    "LegSummary",
    "OutputMatch",
    "legs_from_rates",
    "match_outputs",
    "profile_differences",
    "summarize",
]

LEGS = ("A1", "B1", "B2", "A2")
CONTROL_LEGS = ("A1", "A2")
CANDIDATE_LEGS = ("B1", "B2")


@dataclass(frozen=True)
class LegSummary:
    """One leg: its wave rates (tok/s, in order) and their median."""

    leg: str
    wave_rates: tuple[float, ...]
    http_rates: tuple[float, ...]

    @property
    def median(self) -> float:
        """Median of the leg's wave rates (NaN if none)."""
        return float(np.median(self.wave_rates)) if self.wave_rates else math.nan

    @property
    def http_median(self) -> float:
        """Median of the leg's whole-wave HTTP rates."""
        return float(np.median(self.http_rates)) if self.http_rates else math.nan


@dataclass(frozen=True)
class AbbaResult:
    """The screen's outcome. Percentages are plain percent values (10.0 means +10%).

    ``change_pct``: mean(B1, B2 medians) / mean(A1, A2 medians) - 1. ``drift_pct``: A2 / A1 - 1.
    ``spread_pct``: B2 / B1 - 1. ``separated``: every candidate wave beats every control wave in
    the direction of the effect. ``verdict``: ``faster``, ``slower``, ``no-difference`` or
    ``inconclusive`` (|drift| >= |effect|, or missing legs).
    """

    boundary: str
    legs: tuple[LegSummary, ...]
    control_mean: float
    candidate_mean: float
    change_pct: float
    drift_pct: float
    spread_pct: float
    http_change_pct: float
    separated: bool
    verdict: str
    reason: str


def _pct(a: float, b: float) -> float:
    return (a / b - 1.0) * 100.0 if b and not math.isnan(a) and not math.isnan(b) else math.nan


NOISE_MULTIPLE = 2.0


def summarize(legs: Mapping[str, LegSummary], *, boundary: str = "resident",
              noise_floor_pct: float = 0.5) -> AbbaResult:
    """Combine the four legs.

    Verdict: ``no-difference`` when effect, drift and spread are all below ``noise_floor_pct``;
    ``inconclusive`` when the effect is not more than ``NOISE_MULTIPLE`` times the larger of
    |drift| and |spread| (a gain the drift could explain is not reported as a gain); otherwise
    ``faster`` or ``slower``."""
    ordered = tuple(legs[k] for k in LEGS if k in legs)
    if any(k not in legs or not legs[k].wave_rates for k in LEGS):
        missing = [k for k in LEGS if k not in legs or not legs[k].wave_rates]
        nan = math.nan
        return AbbaResult(boundary, ordered, nan, nan, nan, nan, nan, nan, False, "inconclusive",
                          f"legs without data: {', '.join(missing)}")
    a1, b1, b2, a2 = (legs[k] for k in LEGS)
    control = (a1.median + a2.median) / 2
    candidate = (b1.median + b2.median) / 2
    ratio = _pct(candidate, control)
    drift = _pct(a2.median, a1.median)
    spread = _pct(b2.median, b1.median)
    http_ratio = _pct((b1.http_median + b2.http_median) / 2, (a1.http_median + a2.http_median) / 2)
    cand_waves = list(b1.wave_rates + b2.wave_rates)
    ctrl_waves = list(a1.wave_rates + a2.wave_rates)
    if ratio >= 0:
        separated = min(cand_waves) > max(ctrl_waves)
    else:
        separated = max(cand_waves) < min(ctrl_waves)
    noise = max(abs(drift), abs(spread))
    if abs(ratio) < noise_floor_pct and noise < noise_floor_pct:
        verdict = "no-difference"
        reason = (f"effect {ratio:+.3f}%, drift {drift:+.3f}% and spread {spread:+.3f}% are all below the "
                  f"{noise_floor_pct}% noise floor")
    elif abs(ratio) <= NOISE_MULTIPLE * noise:
        verdict = "inconclusive"
        reason = (f"the effect ({ratio:+.3f}%) is not clearly larger than the drift/spread "
                  f"(drift {drift:+.3f}%, spread {spread:+.3f}%; a claim needs more than {NOISE_MULTIPLE:g}x)")
    elif abs(ratio) < noise_floor_pct:
        verdict, reason = "no-difference", f"effect {ratio:+.3f}% is below the {noise_floor_pct}% noise floor"
    else:
        verdict = "faster" if ratio > 0 else "slower"
        reason = (f"candidate {ratio:+.3f}% vs control, larger than drift {drift:+.3f}% and spread "
                  f"{spread:+.3f}%" + ("; every candidate wave beats every control wave" if separated
                                       else "; waves overlap"))
    return AbbaResult(boundary, ordered, control, candidate, ratio, drift, spread, http_ratio, separated,
                      verdict, reason)


@dataclass(frozen=True)
class OutputMatch:
    """Completion equality across legs for requests matched by (wave position, case)."""

    compared: int
    identical_all_legs: int
    differing: int
    identical_within_control: int
    identical_within_candidate: int
    identical_across_arms: int


def match_outputs(outputs: Mapping[str, Mapping[tuple[int, int, str], str]]) -> OutputMatch:
    """``outputs[leg][(wave_index, position, case_id)] = output hash``. A key is compared only when
    present in all four legs."""
    keys: set[tuple[int, int, str]] | None = None
    for leg in LEGS:
        ks = set(outputs.get(leg, {}))
        keys = ks if keys is None else keys & ks
    keys = keys or set()
    all_same = within_a = within_b = across = 0
    for k in keys:
        a1, b1, b2, a2 = (outputs[leg][k] for leg in LEGS)
        all_same += a1 == b1 == b2 == a2
        within_a += a1 == a2
        within_b += b1 == b2
        across += a1 == b1
    return OutputMatch(len(keys), all_same, len(keys) - all_same, within_a, within_b, across)


def legs_from_rates(rates: Mapping[str, Sequence[tuple[float, float]]]) -> dict[str, LegSummary]:
    """Build leg summaries from ``{leg: [(resident_rate, http_rate), ...]}`` (NaN waves dropped)."""
    out = {}
    for leg, vals in rates.items():
        res = tuple(r for r, _ in vals if not math.isnan(r))
        http = tuple(h for _, h in vals if not math.isnan(h))
        out[leg] = LegSummary(leg, res, http)
    return out


_IGNORED_PROFILE_KEYS = ("name", "launch.port", "launch.startup_timeout_s")


def _ignored(key: str) -> bool:
    return any(key == i or key.startswith(i + ".") for i in _IGNORED_PROFILE_KEYS)


def _flatten(obj: object, prefix: str = "") -> dict[str, object]:
    if isinstance(obj, dict):
        out: dict[str, object] = {}
        for k, v in obj.items():
            out.update(_flatten(v, f"{prefix}{k}."))
        return out
    return {prefix[:-1]: obj}


def profile_differences(control: Mapping[str, object], candidate: Mapping[str, object],
                        declared: Sequence[str]) -> tuple[list[str], list[str]]:
    """Compare two service profiles (as dicts). Returns (declared differences, undeclared ones).

    A key is declared when it equals a ``declared`` entry or lies under one (``launch.env`` covers
    every environment variable; ``sim.step_factor`` covers just that). Name, port and startup timeout
    never count as differences. Profiles and keys in spec format 1's flat spelling (``env``, a flat
    profile of an old archive) are read in the sectioned one, which the returned lines use.
    """
    a = {k: v for k, v in _flatten(sectioned_dump(control)).items() if not _ignored(k)}
    b = {k: v for k, v in _flatten(sectioned_dump(candidate)).items() if not _ignored(k)}
    declared = [sectioned_key(d) for d in declared]
    declared_diffs: list[str] = []
    undeclared: list[str] = []
    for key in sorted(set(a) | set(b)):
        va, vb = a.get(key, "<absent>"), b.get(key, "<absent>")
        if va == vb:
            continue
        line = f"{key}: control {va!r}, candidate {vb!r}"
        if any(key == d or key.startswith(d + ".") for d in declared):
            declared_diffs.append(line)
        else:
            undeclared.append(line)
    return declared_diffs, undeclared


@dataclass(frozen=True, kw_only=True)
class ComparisonRow:
    """``comparisons``: one ABBA screen's legs (tokens/s) and verdict. ``change_pct``: (candidate /
    control mean - 1) x 100, ``http_change_pct`` the same at the HTTP boundary (ledger schema 6;
    before, ``change_pct`` / ``http_change_pct``)."""

    screen: str
    boundary: str | None = None
    concurrency: int
    waves_per_leg: int
    a1_median_tok_s: float | None = None
    b1_median_tok_s: float | None = None
    b2_median_tok_s: float | None = None
    a2_median_tok_s: float | None = None
    control_mean_tok_s: float | None = None
    candidate_mean_tok_s: float | None = None
    change_pct: float | None = None
    drift_pct: float | None = None
    spread_pct: float | None = None
    http_change_pct: float | None = None
    separated: bool | None = None
    verdict: str
    reason: str | None = None
    outputs_compared: int | None = None
    outputs_identical_all_legs: int | None = None
    outputs_differing: int | None = None
    outputs_identical_across_arms: int | None = None
    b2_shares_b1_service: bool | None = None
    declared_change: str | None = None
    undeclared_differences: int | None = None
    allow_identity_change: bool | None = None
    status: str
    verdict_as_measured: str | None = None  # ``verdict`` is ``withheld`` when a blocking finding invalidates the run


TABLES: dict[str, TableModel] = {"comparisons": TableModel(ComparisonRow, verdict=True)}
"""An ABBA screen's ledger table (its descriptor's ``row_models``)."""
