"""Fit a simulator profile to measured rates (pure): ``dsv4h sim calibrate ARCHIVE --out profile.yaml``.

Decode: every measured decode tier C becomes the profile tier ``(C, median resident rate)`` (the
resident window has exactly C requests running, so the profile's rate(B = C) is the measurement).
Prefill: a wave of n fresh prompts of L tokens takes ``gather + f(n) a + n L / p`` seconds, where
``f(n)`` is the number of forwards the scheduler forms (``ceil(n L / chunk_budget)`` while n is within
the admission limit); a least-squares fit of ``n L / rate(n) - gather`` on ``(f(n), n L)`` gives the
fixed cost ``a`` and the prefill rate ``p``. Gather window, admission and chunk budget are inputs
(what the server reports or the user knows), not fitted.

Validity: a profile is fitted only from cells the archive's verdict holds valid. :func:`check_cells`
refuses (``EvidenceError``, exit 7) cells it marks invalid, naming each with its rules, unless invalid
cells are allowed; the profile then records them (``SimProfile.calibration``,
:class:`harness.sim.profiles.CalibrationSource`). The verdict itself is decided by the caller
(``harness.evidence``, a later layer) and passed in as plain data: cell id -> rules.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np

from harness.errors import EvidenceError
from harness.sim.profiles import CalibrationSource, SimProfile

__all__ = ["calibrate_profile", "check_cells", "invalid_line", "profile_yaml"]


def fit_prefill(rates: Mapping[int, float], prompt_len: float, *, gather_s: float, chunk_budget: int,
                admission: int) -> tuple[float, float]:
    """(a seconds, p tok/s) from measured prefill rates (input tok/s) per wave size n."""
    rows, ys = [], []
    for n, rate in sorted(rates.items()):
        if rate <= 0 or n < 1:
            continue
        tokens = n * prompt_len
        forwards = max(math.ceil(tokens / chunk_budget), math.ceil(n / admission))
        rows.append((float(forwards), tokens))
        ys.append(tokens / rate - gather_s)
    if not rows:
        raise ValueError("no prefill tiers to fit")
    x, y = np.asarray(rows), np.asarray(ys)
    if len(rows) == 1 or np.linalg.matrix_rank(x) < 2:
        # One equation: keep the rate implied with no fixed cost.
        return 0.0, float(x[0, 1] / max(y[0], 1e-9))
    (a, inv_p), *_ = np.linalg.lstsq(x, y, rcond=None)
    a = max(float(a), 0.0)
    inv_p = float(inv_p)
    if inv_p <= 0:
        raise ValueError("prefill rates do not fall with the prompt tokens of a wave; cannot fit p")
    return a, 1.0 / inv_p


def invalid_line(invalid: Mapping[str, Sequence[str]]) -> str:
    """``cell (rule, ...)`` per invalid cell, joined by ``; `` (the order given)."""
    return "; ".join(f"{cell} ({', '.join(rules) or 'invalid'})" for cell, rules in invalid.items())


def check_cells(archive_id: str, invalid: Mapping[str, Sequence[str]], *, allow_invalid: bool) -> None:
    """Refuse to fit from ``invalid`` cells (cell id -> the rules that invalidate it; the cells a fit
    would use that the archive's verdict marks invalid): one ``EvidenceError`` naming every such cell
    and its rules, unless ``allow_invalid``. Nothing to refuse when ``invalid`` is empty."""
    if not invalid or allow_invalid:
        return
    n = len(invalid)
    raise EvidenceError(
        f"archive {archive_id}: {n} cell{'s' if n > 1 else ''} the fit would use "
        f"{'are' if n > 1 else 'is'} invalid by its evidence: {invalid_line(invalid)}; no profile is written",
        hint="re-measure those cells (dsv4h evidence check ARCHIVE shows the findings), or pass --allow-invalid to "
             "fit from them anyway (the profile then records them under calibration.invalid_cells)")


def calibrate_profile(name: str, decode: Mapping[int, float], prefill: Mapping[int, float] | None = None, *,
                      prompt_len: float = 8192, gather_s: float = 0.020, chunk_budget: int = 32768,
                      admission: int = 16, base: SimProfile | None = None, source: str = "",
                      calibration: CalibrationSource | None = None) -> SimProfile:
    """A profile whose decode tiers are the measured ``decode`` rates and whose prefill model fits the
    measured ``prefill`` rates (the ``base`` profile's prefill model when none were measured).
    ``calibration``: the archive the rates came from and the invalid cells among them, recorded in
    the profile (its description names those cells too); rates in tok/s, ``gather_s`` in s."""
    if not decode:
        raise ValueError("no decode tiers measured; a profile needs at least one")
    tiers = tuple((int(c), float(r)) for c, r in sorted(decode.items()))
    fields: dict[str, Any] = base.model_dump() if base is not None else {
        "prefill_a_s": 0.0, "prefill_rate_tps": 1e6, "eos_min": 200, "eos_max": 1800}
    if prefill:
        fields["prefill_a_s"], fields["prefill_rate_tps"] = fit_prefill(
            prefill, prompt_len, gather_s=gather_s, chunk_budget=chunk_budget, admission=admission)
    fields |= {"name": name, "decode_tiers": tiers, "gather_s": gather_s, "chunk_budget": chunk_budget,
               "prefill_admission": admission,
               "max_running": max(int(fields.get("max_running", 0) or 0), tiers[-1][0]),
               "description": f"calibrated from {source}" if source else "calibrated from measured rates",
               "calibration": calibration}
    if calibration is not None and calibration.invalid_cells:
        fields["description"] += f"; INVALID cells used: {invalid_line(calibration.invalid_cells)}"
    return SimProfile.model_validate(fields)


def profile_yaml(profile: SimProfile) -> str:
    """The profile as a YAML file ``load_profile_file`` reads back identically."""
    import yaml

    data = profile.model_dump(mode="json")
    data["decode_tiers"] = [list(t) for t in profile.decode_tiers]
    data["cuda_graph_bs"] = list(profile.cuda_graph_bs)
    if data.get("calibration") is None:
        data.pop("calibration", None)
    header = "# Simulator profile fitted by `dsv4h sim calibrate` (load with --profile-file or sim.profile_file).\n"
    return header + yaml.safe_dump(data, sort_keys=False, default_flow_style=None, width=120)
