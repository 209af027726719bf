"""Each kind's part of the report's summary card and description, from its snapshot entries (pure).

A kind names its contributor as ``KindInfo.report_summary`` (:data:`harness.kinds.KINDS`);
:func:`harness.report.summary.summary_card` calls it, in ``KINDS`` order, with the entries of the kind's
``report_section`` and the snapshot's findings, and the contributor returns a
:class:`~harness.report.summary.KindSummary`: the count noun, the names the description lists, its key
numbers and its verdict rows. Units and validity as in :mod:`harness.report.summary` (rates in tokens per
second, goodput in requests per second, effects in percent; superseded or invalid entries give no key
number).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from harness.report.summary import (
    KindSummary,
    archive_note,
    count_noun,
    finite,
    is_valid,
    slo_text,
    verdict_text,
)

Entries = Sequence[Mapping[str, Any]]
Findings = Sequence[Mapping[str, Any]]


def _blocked_cells(findings: Findings, archive_id: str) -> set[str]:
    """Row ids (cells and their rounds/waves) named by a blocking finding of the archive."""
    return {str(r) for f in findings if f.get("archive_id") == archive_id and f.get("severity") == "blocking"
            for r in f.get("rows") or []}


def _cell_invalid(cell: Mapping[str, Any], blocked: set[str]) -> bool:
    """A cell the snapshot marks invalid (before cells carried ``valid``: one a blocking finding names)."""
    if "valid" in cell:
        return cell.get("valid") is False
    cid = str(cell.get("cell_id"))
    return any(r == cid or r.startswith(cid + ".") for r in blocked)


def _best_cell(entry: Mapping[str, Any], workload: str, blocked: set[str]) -> tuple[Mapping[str, Any] | None, int]:
    """The cell of ``workload`` with the largest finite median that is valid (:func:`_cell_invalid`), and
    how many cells of that workload were left out for a blocking finding."""
    cells = [c for c in entry.get("cells") or [] if c.get("workload") == workload and finite(c.get("median_tok_s"))]
    left_out = [c for c in cells if _cell_invalid(c, blocked)]
    usable = [c for c in cells if c not in left_out]
    best = max(usable, key=lambda c: (float(c["median_tok_s"]), -int(c.get("concurrency") or 0)), default=None)
    return best, len(left_out)


def _number(entry: Mapping[str, Any], quantity: str, value: float, unit: str, detail: str) -> dict[str, Any]:
    """One key-number row of ``entry`` (its campaign, classes, archive id and simulated flag)."""
    return {"subject": entry.get("campaign"), "quantity": quantity, "value": value, "unit": unit, "detail": detail,
            "claim_class": entry.get("claim_class"), "protocol_class": entry.get("protocol_class"),
            "archive_id": entry.get("archive_id"), "simulated": bool(entry.get("simulated"))}


def _formal_numbers(entry: Mapping[str, Any], findings: Findings) -> list[dict[str, Any]]:
    blocked = _blocked_cells(findings, str(entry.get("archive_id")))
    out = []
    for workload, what, unit in (("decode", "best resident decode cell median", "output tok/s"),
                                 ("prefill", "best prefill cell median", "input tok/s")):
        best, left_out = _best_cell(entry, workload, blocked)
        if best is None:
            continue
        n_ok = sum(1 for s in best.get("round_status") or [] if s == "ok")
        detail = f"{archive_note(entry)}; C{best.get('concurrency')}, median of " \
                 f"{count_noun(n_ok, 'ok round', 'ok rounds')}"
        if left_out:
            detail += f"; {count_noun(left_out, 'cell', 'cells')} with a blocking finding left out"
        out.append(_number(entry, what, float(best["median_tok_s"]), unit, detail))
    return out


def formal_summary(entries: Entries, findings: Findings) -> KindSummary:
    """Formal matrices: per valid matrix its best resident decode and prefill cell medians (tok/s)."""
    return KindSummary("formal", "formal P/D matrix", "formal P/D matrices", tuple(e.get("campaign") for e in entries),
                       key_numbers=tuple(n for e in entries if is_valid(e) for n in _formal_numbers(e, findings)))


def _verdict(entry: Mapping[str, Any]) -> dict[str, Any]:
    """A screen's verdict row; a withheld one (invalid by a blocking finding) shows none of its figures."""
    withheld = entry.get("verdict") == "withheld" or not is_valid(entry)
    figures = {k: None if withheld else entry.get(k) for k in ("change_pct", "drift_pct", "spread_pct")}
    return {"subject": entry.get("screen"), "verdict": verdict_text(entry), **figures, "withheld": withheld,
            "separated": bool(entry.get("separated")) and not withheld, "boundary": entry.get("boundary"),
            "concurrency": entry.get("concurrency"), "claim_class": entry.get("claim_class"),
            "protocol_class": entry.get("protocol_class"), "archive_id": entry.get("archive_id"),
            "simulated": bool(entry.get("simulated"))}


def screens_summary(entries: Entries, findings: Findings) -> KindSummary:
    """ABBA screens: a verdict row per screen not superseded (one invalid by a blocking finding: withheld)."""
    shown = [e for e in entries if is_valid(e) or (e.get("invalid_rules") and not e.get("superseded_by"))]
    return KindSummary("screens", "ABBA screen", "ABBA screens", tuple(e.get("screen") for e in entries),
                       verdicts=tuple(_verdict(e) for e in shown))


def _sweep_numbers(entry: Mapping[str, Any]) -> list[dict[str, Any]]:
    knee = entry.get("knee") or {}
    if not finite(knee.get("goodput_median_req_s")) or not finite(knee.get("arrival_rate_req_s")):
        return []
    detail = f"{archive_note(entry)}; offered {float(knee['arrival_rate_req_s']):g} req/s; " \
             f"SLO {slo_text(entry.get('slo'))}"
    return [_number(entry, "goodput at the knee", float(knee["goodput_median_req_s"]), "req/s", detail)]


def sweeps_summary(entries: Entries, findings: Findings) -> KindSummary:
    """Rate sweeps: per valid sweep its goodput at the knee (req/s) with the offered rate and the SLO."""
    return KindSummary("sweeps", "rate sweep", "rate sweeps", tuple(e.get("campaign") for e in entries),
                       key_numbers=tuple(n for e in entries if is_valid(e) for n in _sweep_numbers(e)))


def matched_summary(entries: Entries, findings: Findings) -> KindSummary:
    """Matched AR/SD runs: counted and named (their figures are in their section)."""
    return KindSummary("matched", "matched AR/SD run", "matched AR/SD runs", tuple(e.get("name") for e in entries))


def imports_summary(entries: Entries, findings: Findings) -> KindSummary:
    """Imported peer results: counted in the description only (the card counts them by data origin)."""
    return KindSummary("imports", "imported peer result", "imported peer results", (),
                       note=" (external claims, listed under Imported results)", on_card=False)
