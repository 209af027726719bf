"""Evidence rules of open-loop rate sweeps (pure): a round whose client could not keep the planned arrival
schedule (``sweep-schedule``) and rate cells with missing or failed rounds (``sweep-rounds``). Registered in
``harness.evidence.rules.RULES``."""

from __future__ import annotations

from harness.evidence.findings import ArchiveData, Finding
from harness.evidence.findings import make_finding as _f


def _sweep(d: ArchiveData) -> bool:
    return d.run.get("protocol_class") == "rate-sweep"


def rule_sweep_schedule(d: ArchiveData) -> list[Finding]:
    """Rounds whose client could not keep the planned arrival schedule."""
    if not _sweep(d):
        return []
    tol = float(d.spec.get("schedule_tolerance_ms", 50.0)) / 1000
    late = [r for r in d.rounds if r.get("client_schedule_kept") is False]
    return [_f(d.archive_id, "sweep-schedule", "blocking",
               f"{r['round_id']}: the client sent requests up to {float(r['client_lag_p99_s']) * 1e3:.1f} ms (p99) "
               f"after their planned time (tolerance {tol * 1e3:.0f} ms); the offered rate was not the planned one",
               "lower the rate or run the client on a less loaded machine; the achieved schedule is in "
               "schedule.jsonl", [str(r["round_id"]), str(r["cell_id"])]) for r in late]


def rule_sweep_rounds(d: ArchiveData) -> list[Finding]:
    """Rate cells with missing or failed rounds."""
    if not _sweep(d):
        return []
    out = []
    for c in d.cells:
        ok, planned = int(c.get("rounds_ok", 0)), int(c.get("rounds_planned", 3))
        if ok < planned:
            out.append(_f(d.archive_id, "sweep-rounds", "blocking",
                          f"{c['cell_id']}: {ok} of {planned} rounds ok", "find the failed requests in the "
                          "archive and run the sweep again", [str(c["cell_id"])]))
    return out

