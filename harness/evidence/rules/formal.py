"""Evidence rules of the formal matrix protocol (pure; kind ``formal-matrix``): every cell that ran has its
required ok rounds (``formal-rounds``), decode rounds reach the resident minimum and waves span enough
decode steps (``resident-short``), and the matrix was measured on one service start
(``service-restarts``). Rules about cells consider only cells that ran (have waves)."""

from __future__ import annotations

from harness.evidence.findings import ArchiveData, Finding
from harness.evidence.findings import make_finding as _f
from harness.evidence.rules._registry import rule

MIN_RESIDENT_STEPS = 16
"""resident-short: the fewest decode steps (resident tokens / concurrency) a measured decode wave's
resident window may span before it is a warning."""


def _cells_that_ran(d: ArchiveData) -> set[str]:
    """Cell ids with at least one wave (warmup or measured) in the archive."""
    return {str(w.get("cell_id")) for w in d.waves if w.get("cell_id") is not None}


@rule("formal-rounds", kinds=("formal-matrix",))
def rule_formal_rounds(d: ArchiveData) -> list[Finding]:
    """Formal cells need all their rounds ok; a round that is not ok is kept but flagged."""
    out: list[Finding] = []
    ran = _cells_that_ran(d)
    not_run: list[str] = []
    for c in d.cells:
        statuses = list(c.get("round_status") or [])
        ok = statuses.count("ok")
        need = int(c.get("rounds_required", 3))
        if ok >= need:
            continue
        if c["cell_id"] not in ran:
            not_run.append(str(c["cell_id"]))
            continue
        out.append(_f(d.archive_id, "formal-rounds", "blocking",
                      f"cell {c['cell_id']} has {ok} ok rounds of {need} required",
                      "resume the campaign to complete it: its spec's 'dsv4h campaign run' with --resume "
                      f"{d.archive_id}",
                      [c["cell_id"]]))
    if not_run:
        out.append(_f(d.archive_id, "formal-rounds", "blocking",
                      f"{len(not_run)} cell(s) not run: the run stopped before them",
                      f"resume the campaign to run them: its spec's 'dsv4h campaign run' with --resume {d.archive_id}",
                      not_run))
    bad = [r for r in d.rounds if r.get("status") != "ok"]
    if bad:
        out.append(_f(d.archive_id, "formal-rounds", "warning",
                      f"{len(bad)} round(s) not ok (kept, excluded from medians): "
                      + ", ".join(f"{r['round_id']}={r.get('status')}" for r in bad[:6]),
                      "look at the failed attempts' errors; never drop them from the archive",
                      [r["round_id"] for r in bad]))
    return out


@rule("resident-short", kinds=("formal-matrix",))
def rule_resident_short(d: ArchiveData) -> list[Finding]:
    """Decode rounds must reach the spec's resident minimum; waves must span enough steps."""
    out: list[Finding] = []
    min_s = float((d.spec.get("decode") or {}).get("min_resident_seconds") or 0.0)
    short = [r for r in d.rounds if r.get("workload") == "decode" and r.get("status") in ("ok", "short")
             and float(r.get("seconds") or 0.0) < min_s]
    if short:
        out.append(_f(d.archive_id, "resident-short", "blocking",
                      f"{len(short)} decode round(s) below the {min_s:g} s resident minimum: "
                      + ", ".join(f"{r['round_id']} {float(r.get('seconds') or 0):.2f} s" for r in short[:6]),
                      "raise max_waves_per_round or max_new_tokens so rounds reach the minimum",
                      [r["round_id"] for r in short]))
    few = []
    for w in d.waves:
        if w.get("phase") != "measured" or w.get("workload") != "decode":
            continue
        conc = max(int(w.get("concurrency") or 1), 1)
        steps = float(w.get("resident_tokens") or 0) / conc
        if float(w.get("resident_seconds") or 0) > 0 and steps < MIN_RESIDENT_STEPS:
            few.append(w["wave_id"])
    if few:
        out.append(_f(d.archive_id, "resident-short", "warning",
                      f"{len(few)} measured wave(s) span fewer than {MIN_RESIDENT_STEPS} decode steps in their "
                      "resident window", "use longer answers (max_new_tokens) so resident windows cover "
                      "enough steps", few))
    return out


@rule("service-restarts", kinds=("formal-matrix",))
def rule_service_restarts(d: ArchiveData) -> list[Finding]:
    """A formal matrix is one fresh service; a resumed matrix spans several and says so."""
    n = int(d.run.get("service_starts") or len(d.services) or 1)
    if n <= 1:
        return []
    return [_f(d.archive_id, "service-restarts", "warning",
               f"the matrix was measured on {n} service starts (resumed); cells are not all from one process",
               "for a publishable formal matrix run every cell on one fresh service", [])]
