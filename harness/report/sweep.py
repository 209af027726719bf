"""The rate-sweep report section (files): per sweep archive, latency against achieved throughput
(one point per offered rate, TTFT and TPOT p50/p99) with the goodput knee marked, and a table of every
rate's cells. Rate sweeps are their own section: never placed in a formal matrix's table or figure,
never beside an ABBA screen's legs. Simulator data is marked SIMULATED.
"""

from __future__ import annotations

import math
from pathlib import Path
from typing import Any

from matplotlib.figure import Figure

from harness.formats import atomic_write
from harness.store.archive import Archive, iter_archives


def sweep_archives(workspace: Path) -> list[Archive]:
    """Every finalized archive of kind ``rate-sweep`` in the workspace."""
    return [a for a in iter_archives(workspace) if a.run.kind == "rate-sweep" and a.has("sweep.json")]


def _figure(cells: list[dict[str, Any]], knee: dict[str, Any] | None, title: str) -> Figure:
    fig = Figure(figsize=(7.0, 4.0))
    ax = fig.add_subplot(1, 1, 1)
    x = [float(c["output_throughput_median"]) for c in cells]
    for key, label, style in (("ttft_p50_s", "TTFT p50", "o-"), ("ttft_p99_s", "TTFT p99", "o--"),
                              ("tpot_p50_s", "TPOT p50", "s-"), ("tpot_p99_s", "TPOT p99", "s--")):
        ax.plot(x, [float(c[key]) * 1e3 for c in cells], style, label=label)
    for c, xi in zip(cells, x, strict=True):
        ax.annotate(f"{c['rate']:g}/s", (xi, float(c["ttft_p50_s"]) * 1e3), fontsize=7)
    if knee is not None:
        kc = next((c for c in cells if c["rate"] == knee["rate"]), None)
        if kc is not None:
            ax.axvline(float(kc["output_throughput_median"]), color="grey", linestyle=":",
                       label=f"goodput knee ({knee['rate']:g} req/s offered)")
    ax.set_xlabel("achieved output throughput (tok/s, median of rounds)")
    ax.set_ylabel("latency (ms)")
    ax.set_title(title, fontsize=9)
    ax.legend(fontsize=7)
    return fig


def _fmt(v: Any) -> str:
    return "-" if not isinstance(v, (int, float)) or math.isnan(float(v)) else f"{float(v):.3g}"


def build_sweep_report(workspace: Path, out: Path) -> Path:
    """Write ``sweep.md`` and one SVG/PNG figure per sweep archive under ``out``; returns the Markdown file."""
    out.mkdir(parents=True, exist_ok=True)
    lines = ["# Rate sweeps (protocol class rate-sweep)", "",
             "Open-loop arrivals; each cell is the median of its rounds (min-max are observed ranges). "
             "Goodput as sglang.bench_serving's --goodput. Never combined with formal matrices or ABBA screens.",
             ""]
    for a in sweep_archives(workspace):
        data = a.json("sweep.json")
        cells, knee = data.get("cells") or [], data.get("knee")
        sim = " SIMULATED" if a.run.simulated else ""
        title = f"{a.run.campaign} ({a.archive_id}){sim}"
        lines += [f"## {title}", "", f"SLO: {data.get('slo')}; knee: "
                  + (f"{knee['rate']:g} req/s offered, goodput {_fmt(knee['goodput'])} req/s" if knee else "none"), ""]
        lines += ["| rate | req/s | out tok/s | goodput | TTFT p50 ms | TTFT p99 ms | TPOT p50 ms | schedule |",
                  "|---|---|---|---|---|---|---|---|"]
        for c in cells:
            lines.append(f"| {c['rate']:g} | {_fmt(c['request_throughput_median'])} | "
                         f"{_fmt(c['output_throughput_median'])} | {_fmt(c['goodput_median'])} | "
                         f"{_fmt(c['ttft_p50_s'] * 1e3)} | {_fmt(c['ttft_p99_s'] * 1e3)} | "
                         f"{_fmt(c['tpot_p50_s'] * 1e3)} | {'kept' if c['schedule_kept'] else 'NOT kept'} |")
        if cells:
            fig = _figure(cells, knee, title)
            for ext in ("svg", "png"):
                fig.savefig(out / f"sweep-{a.archive_id}.{ext}", format=ext)
            lines += ["", f"![latency vs throughput](sweep-{a.archive_id}.svg)", ""]
    md = out / "sweep.md"
    atomic_write(md, ("\n".join(lines) + "\n").encode())
    return md
