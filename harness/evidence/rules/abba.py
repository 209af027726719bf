"""Evidence rule of ABBA screens (pure): ``abba-drift``, a screen whose drift or spread is not smaller than
its effect (inconclusive), or one missing legs. It reads ``comparison.json`` (``ArchiveData.comparison``),
which only ABBA screens write; it is declared for every kind so that any archive carrying a comparison is
judged by it."""

from __future__ import annotations

import math

from harness.evidence.findings import ArchiveData, Finding
from harness.evidence.findings import make_finding as _f
from harness.evidence.rules._registry import ALL, rule


@rule("abba-drift", kinds=ALL)
def rule_abba_drift(d: ArchiveData) -> list[Finding]:
    """An ABBA screen whose drift or spread is at least its effect is inconclusive."""
    res = (d.comparison or {}).get("result")
    if not res:
        return []
    ratio, drift, spread = (float(res.get(k, math.nan)) for k in ("change_pct", "drift_pct", "spread_pct"))
    if any(math.isnan(x) for x in (ratio, drift, spread)):
        return [_f(d.archive_id, "abba-drift", "blocking", "the screen is missing legs; no comparison exists",
                   "run all four legs A1 -> B1 -> B2 -> A2", ["comparison"])]
    if abs(drift) >= abs(ratio) or abs(spread) >= abs(ratio):
        return [_f(d.archive_id, "abba-drift", "warning",
                   f"drift {drift:+.3f}% / spread {spread:+.3f}% not smaller than the effect {ratio:+.3f}%: "
                   "inconclusive", "repeat the screen or use more waves per leg; do not report a gain",
                   ["comparison"])]
    return []
