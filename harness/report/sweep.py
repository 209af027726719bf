"""The rate-sweep section on its own (``dsv4h sweep report``; edge module: reads archives, writes files).

Per sweep archive: latency against achieved throughput (one point per offered rate, TTFT and TPOT
p50/p99) with the goodput knee marked, and a table of every rate's cells. The same section, from the
same snapshot entry (:func:`harness.report.snapshot.sections.sweep_entry`) and figure
(:func:`harness.report.figures.sweep_figure`), is part of ``dsv4h report build``. Rate sweeps are their
own section: never placed in a formal matrix's table or figure, never beside an ABBA screen's legs.
Simulator data is marked SIMULATED.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from harness.formats import atomic_write, finite_float, fixed_point
from harness.report.figures import render_figure, sweep_figure
from harness.report.snapshot.archives import ArchiveContent
from harness.report.snapshot.sections import sweep_entry
from harness.store.archive import Archive, iter_archives
from harness.store.view import ArchiveView

__all__ = ["build_sweep_report"]


def sweep_archives(workspace: Path) -> list[Archive]:
    """Every finalized archive of kind ``rate-sweep`` in the workspace."""
    return [a for a in iter_archives(workspace) if a.run.kind == "rate-sweep" and ArchiveView(a).has("sweep.json")]


def archive_sweep_entry(a: Archive, workspace: Path | None = None) -> dict[str, Any] | None:
    """The snapshot entry of one sweep archive (as ``dsv4h report build`` freezes it), its rates and its
    knee marked by the archive's one verdict (``harness.evidence.io.archive_verdict`` of ``workspace``:
    the findings stored in its ledger, else the rules run now; none when the evidence module is absent)."""
    run = a.run
    base = {"campaign": run.campaign, "claim_class": run.claim_class, "protocol_class": run.protocol_class,
            "status": a.status, "simulated": run.simulated, "created_wall": run.created_wall}
    try:
        from harness.evidence.io import archive_verdict
    except ImportError:  # pragma: no cover - the evidence module is part of the package
        verdict = None
    else:
        verdict = archive_verdict(workspace, a)
    return sweep_entry(ArchiveContent(a.archive_id, a.manifest, "", sweep=ArchiveView(a).doc("sweep.json"),
                                    verdict=verdict),
                       base, verdict)


def _fmt(v: Any, scale: float = 1.0, decimals: int | None = None) -> str:
    """A number in fixed point (never an exponent); "-" when missing."""
    return fixed_point(v, decimals, scale=scale, missing="-")


def _ms(v: Any) -> str:
    """Seconds as milliseconds: one place below 100 ms, none from there (``1,280``, ``23.7``)."""
    x = abs(finite_float(v, 1e3))
    return _fmt(v, 1e3, 0 if x >= 100 else 1 if x >= 1 else None)


def slo_text(slo: Any) -> str:
    """The recorded SLO (seconds, ``{"ttft_s": 1.0, "tpot_s": 0.05, "e2e_s": None}``) as ``TTFT <= 1000
    ms, TPOT <= 50 ms``; ``none`` when no objective is set (goodput is then the completed-request rate)."""
    names = (("ttft_s", "TTFT"), ("tpot_s", "TPOT"), ("e2e_s", "E2E"))
    values = [(name, finite_float(slo.get(key), 1e3)) for key, name in names] if isinstance(slo, Mapping) else []
    parts = [f"{name} <= {_fmt(round(x, 6))} ms" for name, x in values if math.isfinite(x)]
    return ", ".join(parts) or "none"


def sweep_markdown(entry: Mapping[str, Any], figure: str | None) -> list[str]:
    """The Markdown lines of one sweep entry: heading, SLO and knee (withheld on an invalid run), the
    per-rate table (a rate a blocking finding invalidates marked ``INVALID (rules)``), the figure."""
    knee = entry.get("knee")
    title = f"{entry['campaign']} ({entry['archive_id']})" + (" SIMULATED" if entry.get("simulated") else "")
    rules = ", ".join(entry.get("invalid_rules") or [])
    knee_text = f"withheld ({rules}): the run is INVALID" if rules else (
        f"{_fmt(knee.get('arrival_rate_req_s'))} req/s offered, goodput "
        f"{_fmt(knee.get('goodput_median_req_s'), decimals=2)} req/s" if knee else "none")
    lines = [f"## {title}", "", f"SLO: {slo_text(entry.get('slo'))}; knee: " + knee_text, "",
             "| rate | req/s | out tok/s | goodput | TTFT p50 ms | TTFT p99 ms | TPOT p50 ms | E2E p50 ms | schedule "
             "| over-saturated rounds |",
             "|---|---|---|---|---|---|---|---|---|---|"]
    for c in entry.get("cells") or []:
        mark = f" INVALID ({', '.join(c['invalid_rules'])})" if c.get("invalid_rules") else ""
        lines.append(f"| {_fmt(c.get('arrival_rate_req_s'))}{mark} | "
                     f"{_fmt(c.get('request_throughput_median_req_s'), decimals=2)} | "
                     f"{_fmt(c.get('output_throughput_median_tok_s'))} | "
                     f"{_fmt(c.get('goodput_median_req_s'), decimals=2)} | "
                     f"{_ms(c.get('ttft_p50_s'))} | {_ms(c.get('ttft_p99_s'))} | {_ms(c.get('tpot_p50_s'))} | "
                     f"{_ms(c.get('e2e_p50_s'))} | {'kept' if c.get('schedule_kept') else 'NOT kept'} | "
                     f"{'-' if c.get('saturated_rounds') is None else c.get('saturated_rounds')} |")
    stop = entry.get("stopped")
    if isinstance(stop, dict):
        lines += ["", f"Stopped at {_fmt(stop.get('at_rate_req_s'))} req/s (over-saturated, stop_at_saturation); "
                      f"not run: {', '.join(_fmt(r) for r in stop.get('not_run') or []) or 'none'} req/s."]
    if figure:
        lines += ["", f"![latency vs throughput]({figure})", ""]
    return lines


def build_sweep_report(workspace: Path, out: Path) -> Path:
    """Write ``sweep.md`` and one SVG/PNG figure per sweep archive under ``out``; returns the Markdown file."""
    out.mkdir(parents=True, exist_ok=True)
    lines = ["# Rate sweeps (protocol class rate-sweep)", "",
             "Open-loop arrivals; each cell is the median of its rounds (min-max are observed ranges). "
             "Goodput as sglang.bench_serving's --goodput. Never combined with formal matrices or ABBA screens.",
             ""]
    for a in sweep_archives(workspace):
        entry = archive_sweep_entry(a, workspace)
        if entry is None:
            continue
        figure = None
        if entry["cells"]:
            data = render_figure(sweep_figure(entry), ("svg", "png"))
            for ext, blob in data.items():
                atomic_write(out / f"sweep-{a.archive_id}.{ext}", blob)
            figure = f"sweep-{a.archive_id}.svg"
        lines += sweep_markdown(entry, figure)
    md = out / "sweep.md"
    atomic_write(md, ("\n".join(lines) + "\n").encode())
    return md
