"""Each kind's view in the report's templates, from the frozen snapshot (pure).

A kind names its view as ``KindInfo.report_view`` (:data:`harness.kinds.KINDS`); ``render.kind_context``
puts it in the templates' context under the first part of the kind's ``report_section`` and the kind's
template partial (``reports/templates/kinds/<kind>.<format>.j2``) shows it. Every view takes the snapshot
and its findings by archive id, and returns the section's entries; :func:`entries_view` is the view of a
kind that declares none (its entries labelled, with their findings). Formal cells, rounds and latency rows
carry ``mark`` (``INVALID (rules)``, :func:`harness.report.summary.invalid_mark`).
"""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping, Sequence
from typing import Any

from harness.report import figures as figs
from harness.report.snapshot.freeze import section_entries
from harness.report.summary import invalid_mark, superseded_text, verdict_text
from harness.report.ttft_classes import ttft_class_rows
from harness.report.views import speculative_view

ByArchive = Mapping[str, Sequence[Mapping[str, Any]]]
KindView = Callable[[Mapping[str, Any], ByArchive], Any]
"""(snapshot, findings by archive id) -> the section's entries as the kind's template shows them."""


def _cell_findings(cell_id: str, findings: Sequence[Mapping[str, Any]]) -> list[Mapping[str, Any]]:
    return [f for f in findings if any(r == cell_id or str(r).startswith(cell_id + ".") for r in f["rows"])]


def _cell_view(c: Mapping[str, Any] | None, findings: Sequence[Mapping[str, Any]],
               rounds_of: Mapping[tuple[str, int], Mapping[str, Any]]) -> dict[str, Any] | None:
    if c is None:
        return None
    cid = str(c.get("cell_id"))
    mine = _cell_findings(cid, findings)
    statuses = list(c.get("round_status") or [])
    rates = list(c.get("round_tok_s") or [])
    https = list(c.get("round_http_output_tok_s") or [])
    rounds = [{"value": v, "status": statuses[i] if i < len(statuses) else "?",
               "http": https[i] if i < len(https) else None,
               "mark": invalid_mark(rounds_of.get((cid, i)) or {})} for i, v in enumerate(rates)]
    mark = invalid_mark(c)
    blocked = bool(c.get("invalid_rules")) if "invalid_rules" in c else any(f["severity"] == "blocking" for f in mine)
    return {**c, "rounds_view": rounds, "findings": mine, "blocked": blocked, "mark": mark}


def pd_rows(entry: Mapping[str, Any], findings: Sequence[Mapping[str, Any]]) -> list[dict[str, Any]]:
    """Table 2 rows of one formal archive: per concurrency, the prefill and decode cells (or None)
    with their rounds (each with its ``mark``), findings, a ``blocked`` flag (a blocking finding
    invalidates the cell: its ``invalid_rules``; before format 10: a blocking finding names the cell or
    one of its rounds/waves) and its ``mark`` (``INVALID (rules)``, :func:`harness.report.summary.invalid_mark`)."""
    by = {(c.get("workload"), int(c.get("concurrency") or 0)): c for c in entry.get("cells") or []}
    rounds_of = {(str(r.get("cell_id")), int(r.get("round_index") or 0)): r for r in entry.get("rounds") or []}
    tiers = sorted({k[1] for k in by})
    return [{"concurrency": t, "prefill": _cell_view(by.get(("prefill", t)), findings, rounds_of),
             "decode": _cell_view(by.get(("decode", t)), findings, rounds_of)} for t in tiers]


def count_note(entry: Mapping[str, Any]) -> str:
    """How the matrix's output tokens were counted, e.g. ``server-cumulative (exact)`` (pure); "" for
    archives made before counts were recorded."""
    from harness.load.openai import count_exactness

    methods = sorted({str(m).removeprefix("mixed: ") for c in entry.get("cells") or []
                      if (m := c.get("count_method"))})
    parts = sorted({p for m in methods for p in m.split("+")})
    return ", ".join(f"{p} ({count_exactness(p)})" for p in parts)


def latency_rows(entry: Mapping[str, Any]) -> list[dict[str, Any]]:
    """Decode cells with latency: concurrency, n, ``mark`` (``INVALID (rules)`` for an invalid cell) and
    TTFT/TPOT/ITL/E2E p50, p90, p99, max in ms (pure)."""
    rows = []
    for c in entry.get("cells") or []:
        lat = c.get("latency") or {}
        if c.get("workload") != "decode" or not lat.get("ttft_n"):
            continue
        row: dict[str, Any] = {"concurrency": c.get("concurrency"), "n": int(lat["ttft_n"]), "mark": invalid_mark(c)}
        for metric in ("ttft", "tpot", "itl", "e2e"):
            for stat in ("p50", "p90", "p99", "max"):
                v = lat.get(f"{metric}_{stat}_s")
                row[f"{metric}_{stat}"] = v * 1000 if isinstance(v, int | float) and math.isfinite(v) else None
        rows.append(row)
    return sorted(rows, key=lambda r: int(r["concurrency"] or 0))


def _ms(seconds: Any) -> float | None:
    """Seconds as milliseconds (None stays None)."""
    return None if not isinstance(seconds, int | float) else float(seconds) * 1000


def labelled(entry: Mapping[str, Any]) -> dict[str, Any]:
    """``entry`` whose shown status says ``SUPERSEDED by <id>, not a result`` when a resumed run
    superseded its archive, ``INVALID (rules), not a result`` when it is marked invalid (every template
    prints the status beside the archive's tables and in the archive list), with ``mark``
    (:func:`harness.report.summary.invalid_mark`) and ``verdict_shown``
    (:func:`harness.report.summary.verdict_text`: ``withheld (rules)`` for a withheld verdict)."""
    out = dict(entry)
    if entry.get("superseded_by"):
        out["status"] = f"{entry.get('status')}; SUPERSEDED by {entry['superseded_by']}, not a result"
    elif superseded_text(entry):
        out["status"] = f"{entry.get('status')}; {invalid_mark(entry) or 'INVALID'}, not a result"
    out["mark"] = invalid_mark(entry)
    out["verdict_shown"] = verdict_text(entry)
    return out


def _entries(snapshot: Mapping[str, Any], section: str) -> list[dict[str, Any]]:
    return [labelled(e) for e in section_entries(snapshot, section)]


def entries_view(section: str) -> KindView:
    """The view of a kind without its own: its section's entries labelled (:func:`labelled`), each with
    its archive's ``findings``."""

    def view(snapshot: Mapping[str, Any], by_archive: ByArchive) -> list[dict[str, Any]]:
        return [{**e, "findings": list(by_archive.get(e["archive_id"], []))} for e in _entries(snapshot, section)]

    return view


def formal_view(snapshot: Mapping[str, Any], by_archive: ByArchive) -> list[dict[str, Any]]:
    """Formal matrices: Table 2 rows, latency and TTFT-class rows, the count note and figure stems."""
    return [{**e, "rows": pd_rows(e, by_archive.get(e["archive_id"], [])),
             "findings": by_archive.get(e["archive_id"], []), "figure": f"formal-{e['archive_id']}",
             "latency_rows": latency_rows(e), "ttft_class_rows": ttft_class_rows(e), "counts": count_note(e),
             "latency_figure": f"latency-{e['archive_id']}" if figs.has_latency(e) else None}
            for e in _entries(snapshot, "formal")]


def screens_view(snapshot: Mapping[str, Any], by_archive: ByArchive) -> list[dict[str, Any]]:
    """ABBA screens, with their findings and figure stem."""
    return [{**e, "findings": by_archive.get(e["archive_id"], []), "figure": f"abba-{e['archive_id']}"}
            for e in _entries(snapshot, "screens")]


def sweeps_view(snapshot: Mapping[str, Any], by_archive: ByArchive) -> list[dict[str, Any]]:
    """Rate sweeps, with their findings and figure stem."""
    return [{**e, "findings": by_archive.get(e["archive_id"], []), "figure": f"sweep-{e['archive_id']}"}
            for e in _entries(snapshot, "sweeps")]


def replays_view(snapshot: Mapping[str, Any], by_archive: ByArchive) -> list[dict[str, Any]]:
    """Trace replays, with their findings and lateness, tolerance and TTFT p50 in ms."""
    return [{**e, "findings": by_archive.get(e["archive_id"], []),
             "lateness_max_ms": _ms(e.get("client_lateness_max_s")),
             "tolerance_ms": _ms(e.get("lateness_tolerance_s")), "ttft_p50_ms": _ms(e.get("ttft_p50_s"))}
            for e in _entries(snapshot, "replays")]


def sla_view(snapshot: Mapping[str, Any], by_archive: ByArchive) -> list[dict[str, Any]]:
    """SLA searches, with their findings."""
    return [{**e, "findings": by_archive.get(e["archive_id"], [])} for e in _entries(snapshot, "sla")]


def matched_view(snapshot: Mapping[str, Any], by_archive: ByArchive) -> dict[str, Any]:
    """The speculative-decoding section (matched runs and every archive's acceptance counts:
    :func:`harness.report.views.speculative_view`)."""
    return speculative_view(snapshot)


def imports_view(snapshot: Mapping[str, Any], by_archive: ByArchive) -> list[dict[str, Any]]:
    """Imported results, as frozen."""
    return list(snapshot.get("imports") or [])
