"""Evidence rules about where a number came from (pure): an imported peer result is the peer's own number
(``external-claim``), and output tokens counted approximately are said so (``token-counts``,
``token-count-mismatch``). Both apply to every kind (``external-claim`` reads the claim class, not the
kind)."""

from __future__ import annotations

from harness.evidence.findings import ArchiveData, Finding
from harness.evidence.findings import make_finding as _f
from harness.evidence.rules._registry import ALL, rule


@rule("external-claim", kinds=ALL)
def rule_external_claim(d: ArchiveData) -> list[Finding]:
    """Imported results are the peer's numbers, not measurements."""
    if d.run.get("claim_class") != "external":
        return []
    return [_f(d.archive_id, "external-claim", "info",
               f"imported result of {d.run.get('service_name')}: claim class external, the peer's own metric "
               "definitions (external.json); never combined with measured claims", "", [], "run")]


@rule("token-counts", "token-count-mismatch", kinds=ALL)
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
