"""Evidence rules of the newer workloads and count paths (pure): rate sweeps, imported peer results,
and how output tokens were counted. Registered in ``harness.evidence.rules.RULES``."""

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


def rule_external_claim(d: ArchiveData) -> list[Finding]:
    """Imported results are the peer's numbers, not measurements."""
    if d.run.get("claim_class") != "external":
        return []
    return [_f(d.archive_id, "external-claim", "info",
               f"imported result of {d.run.get('service_name')}: claim class external, the peer's own metric "
               "definitions (external.json); never combined with measured claims", "", [], "run")]


def rule_token_counts(d: ArchiveData) -> list[Finding]:
    """How output tokens were counted (harness.load.openai): approximate methods are said once
    (info); a per-chunk count that disagrees with the server's final usage is a warning on the waves
    it touched, since their rates count chunks rather than tokens."""
    measured = [r for r in d.requests if r.get("phase") == "measured" and r.get("ok")]
    approx = sorted({str(r.get("count_method")) for r in measured
                     if r.get("count_method") in ("chunks-reconciled", "retokenized", "chunks")})
    out: list[Finding] = []
    if approx:
        out.append(_f(d.archive_id, "token-counts", "info",
                      f"approximate token counts ({', '.join(approx)}): the server sent no exact per-chunk "
                      "counts; these rates never share a claim with exact ones", "", [], "run"))
    bad = [r for r in measured if r.get("count_method") in ("chunks", "retokenized")
           and r.get("completion_tokens") is not None and r.get("n_tokens") != r.get("completion_tokens")]
    if bad:
        ex = bad[0]
        out.append(_f(d.archive_id, "token-count-mismatch", "warning",
                      f"{len(bad)} request(s) counted {ex.get('n_tokens')} output tokens from the stream "
                      f"({ex.get('count_method')}) where the server's final usage says {ex.get('completion_tokens')}",
                      "prefer a path with exact counts (usage on every chunk, token ids); the server's totals are "
                      "kept in completion_tokens", sorted({str(r["wave_id"]) for r in bad})))
    return out
