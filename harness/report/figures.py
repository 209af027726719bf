"""Report figures from a snapshot (matplotlib, Agg; no pyplot global state).

Every function takes one snapshot entry (plain JSON data, see :mod:`harness.report.snapshot`) and
returns a :class:`FigureResult`: the ``matplotlib.figure.Figure``, the artists that carry data
(so tests can read the plotted values back), a caption and an alt text. :func:`render_figure`
writes PNG (fixed DPI), SVG and PDF bytes deterministically: fonts embedded (TrueType in PDF, text
as paths in SVG), fixed SVG hash salt, no dates or tool versions in the metadata.

Figures (numbers follow the technical report):

- :func:`formal_matrix_figure` (Figure 5): prefill and decode panels over a base-2 concurrency
  axis; three-round medians as lines, every round as a small point, the observed range (min-max)
  as a vertical bar, whole-wave HTTP rates as grey diamonds.
- :func:`abba_figure` (Figures 6/7): legs A1, B1, B2, A2 in order, each wave a dot, the leg median
  a bar; ratio, drift and spread annotated; expanded (not from zero) y axis.
- :func:`sweep_figure`: a rate sweep's latency against achieved throughput, goodput knee marked.
- :func:`memory_figure`: GPU memory samples over time per device (peak observed in samples).
- :func:`timeline_figure`: one wave's requests as bars from send to end, first/last token marked,
  resident window shaded (:mod:`harness.report.timeline_figure`); the report draws at most
  ``snapshot['timelines']`` of them (harness.report.timelines.MAX_TIMELINES).
- :func:`historical_figure` (Figure 2 style): historical milestones as bars, one panel per claim
  class, metric and unit; labelled "historical, not a controlled series".

Anything simulated carries a "SIMULATED" watermark and title suffix. A point the snapshot marks
invalid (a formal cell or a sweep rate with ``valid: false`` and ``invalid_rules``: a blocking evidence
finding) is drawn distinctly: a large red ``x`` apart from the valid series (never joined by its line,
its rounds and range not drawn), labelled ``INVALID (rules): not a result``, and the caption names it; a
withheld ABBA verdict reads ``withheld (rules)`` in the annotation.
"""

from __future__ import annotations

import io
import math
from collections.abc import Callable, Iterator, Mapping, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import Any

import matplotlib as mpl
from matplotlib.figure import Figure

from harness.kinds import KINDS, resolve
from harness.report.snapshot.freeze import section_entries
from harness.report.timeline_figure import draw_timeline, timeline_alt, timeline_caption, timeline_size, timeline_stem

__all__ = ["render_figure", "timeline_figure"]

DPI = 150
FORMATS = ("png", "svg", "pdf")
LEG_ORDER = ("A1", "B1", "B2", "A2")
CONTROL_COLOR = "#1f5fa8"
CANDIDATE_COLOR = "#c2571a"
PREFILL_COLOR = "#2e7d32"
DECODE_COLOR = "#1f5fa8"
HTTP_COLOR = "0.55"
INVALID_COLOR = "#b00020"

RC: dict[str, Any] = {
    "font.family": "DejaVu Sans",
    "font.size": 8.5,
    "axes.titlesize": 9.5,
    "axes.labelsize": 8.5,
    "legend.fontsize": 7.5,
    "axes.spines.top": False,
    "axes.spines.right": False,
    "svg.fonttype": "path",
    "svg.hashsalt": "dsv4h-report",
    "pdf.fonttype": 42,
    "ps.fonttype": 42,
    "pdf.compression": 6,
    "figure.dpi": DPI,
    "savefig.dpi": DPI,
    "axes.unicode_minus": False,
    "axes.grid": True,
    "grid.color": "0.92",
    "grid.linewidth": 0.6,
    "axes.axisbelow": True,
}

_METADATA: dict[str, dict[str, Any]] = {
    "png": {"Software": None},
    "svg": {"Date": None, "Creator": None},
    "pdf": {"CreationDate": None, "ModDate": None, "Creator": None, "Producer": None},
}


@contextmanager
def style() -> Iterator[None]:
    """The report's matplotlib settings (also needed while saving: SVG/PDF font handling)."""
    rc: Any = RC
    with mpl.rc_context(rc):
        yield


@dataclass
class FigureResult:
    """One figure: file stem, the figure, its data-carrying artists by name, caption and alt text."""

    stem: str
    fig: Figure
    caption: str
    alt: str
    artists: dict[str, Any] = field(default_factory=dict)


def _finite(v: Any) -> bool:
    return v is not None and isinstance(v, int | float) and math.isfinite(float(v))


def _watermark(fig: Figure) -> None:
    fig.text(0.5, 0.5, "SIMULATED", fontsize=54, color="#b00020", alpha=0.10, rotation=25, ha="center",
             va="center", zorder=0, gid="simulated-watermark")


def _invalid(row: Mapping[str, Any]) -> bool:
    """Whether a blocking evidence finding invalidates a snapshot row (``invalid_rules`` set)."""
    return bool(row.get("invalid_rules"))


def _rules_label(rows: Sequence[Mapping[str, Any]]) -> str:
    rules = sorted({str(r) for row in rows for r in row.get("invalid_rules") or []})
    return f"INVALID ({', '.join(rules)}): not a result"


def _plot_invalid(ax: Any, res: FigureResult, key: str,
                  points: Sequence[tuple[float, float, Mapping[str, Any]]]) -> None:
    """Draw invalid points (x, y, row) as large red x apart from every series, as artist ``key``."""
    if not points:
        return
    (inv,) = ax.plot([p[0] for p in points], [p[1] for p in points], ls="none", marker="x", ms=9, mew=2.2,
                     color=INVALID_COLOR, label=_rules_label([p[2] for p in points]), zorder=6)
    res.artists[key] = inv


def _new_figure(w: float, h: float) -> Figure:
    fig = Figure(figsize=(w, h), dpi=DPI)
    return fig


def formal_matrix_figure(entry: Mapping[str, Any]) -> FigureResult:
    """Figure 5: one formal matrix archive (``snapshot['formal'][i]``).

    Artists: ``{prefill,decode}_median`` (Line2D: x = concurrency, y = three-round median),
    ``{prefill,decode}_rounds`` (Line2D markers: every finite ok round rate, cells in concurrency
    order, rounds in order), ``{..}_rounds_excluded`` (rounds not ok, when any), ``{..}_range``
    (LineCollection: observed min-max per cell), ``decode_http`` (Line2D: whole-wave HTTP output
    tok/s per cell), ``{..}_invalid`` (Line2D markers: the medians of cells a blocking finding
    invalidates, when any; those cells are in no other artist).
    """
    sim = bool(entry.get("simulated"))
    aid = str(entry["archive_id"])
    with style():
        fig = _new_figure(10.0, 4.2)
        axes = fig.subplots(1, 2)
        res = FigureResult(f"formal-{aid}", fig, "", "")
        tiers: set[int] = set()
        invalid_cells: list[Mapping[str, Any]] = []
        for ax, wl in zip(axes, ("prefill", "decode"), strict=True):
            every = sorted((c for c in entry.get("cells") or [] if c.get("workload") == wl),
                           key=lambda c: int(c.get("concurrency") or 0))
            invalid_cells += (bad_cells := [c for c in every if _invalid(c)])
            cells = [c for c in every if not _invalid(c)]
            color, unit = (PREFILL_COLOR, "input tok/s") if wl == "prefill" else (DECODE_COLOR, "output tok/s")
            ax.set_title(f"{'Prefill' if wl == 'prefill' else 'Resident decode'} ({unit})")
            ax.set_xscale("log", base=2)
            ax.set_xlabel("client concurrency C (base-2 axis)")
            ax.set_ylabel(f"{'prefill input' if wl == 'prefill' else 'output'} tok/s")
            if not every:
                ax.text(0.5, 0.5, f"no {wl} cells in this archive", transform=ax.transAxes, ha="center",
                        va="center", color="0.4")
                continue
            tiers.update(int(c["concurrency"]) for c in every)
            _plot_invalid(ax, res, f"{wl}_invalid", [(float(c["concurrency"]), float(c["median_tok_s"]), c)
                                                     for c in bad_cells if _finite(c.get("median_tok_s"))])
            mx = [int(c["concurrency"]) for c in cells if _finite(c.get("median_tok_s"))]
            my = [float(c["median_tok_s"]) for c in cells if _finite(c.get("median_tok_s"))]
            (line,) = ax.plot(mx, my, "-", color=color, lw=1.6, marker="o", ms=4.5,
                              label="three-round median", zorder=3)
            res.artists[f"{wl}_median"] = line
            ok: tuple[list[int], list[float]] = ([], [])
            bad: tuple[list[int], list[float]] = ([], [])
            for c in cells:
                statuses = list(c.get("round_status") or [])
                for k, v in enumerate(c.get("round_tok_s") or []):
                    if _finite(v):
                        dest = ok if (statuses[k] if k < len(statuses) else "ok") == "ok" else bad
                        dest[0].append(int(c["concurrency"]))
                        dest[1].append(float(v))
            (pts,) = ax.plot(ok[0], ok[1], ls="none", marker="o", ms=2.4, color="black", alpha=0.75,
                             label="each round", zorder=4)
            res.artists[f"{wl}_rounds"] = pts
            if bad[0]:
                (xpts,) = ax.plot(bad[0], bad[1], ls="none", marker="x", ms=5, color="#b00020",
                                  label="round not ok (kept, excluded from median)", zorder=5)
                res.artists[f"{wl}_rounds_excluded"] = xpts
            lo = [c for c in cells if _finite(c.get("observed_min_tok_s")) and _finite(c.get("observed_max_tok_s"))]
            rng = ax.vlines([int(c["concurrency"]) for c in lo], [float(c["observed_min_tok_s"]) for c in lo],
                            [float(c["observed_max_tok_s"]) for c in lo], colors=color, lw=5, alpha=0.28,
                            label="observed range (min-max of rounds)", zorder=2)
            res.artists[f"{wl}_range"] = rng
            if wl == "decode":
                hx = [int(c["concurrency"]) for c in cells if _finite(c.get("http_output_tok_s"))]
                hy = [float(c["http_output_tok_s"]) for c in cells if _finite(c.get("http_output_tok_s"))]
                (http,) = ax.plot(hx, hy, ls="none", marker="D", ms=4, color=HTTP_COLOR,
                                  label="whole-wave HTTP output (not resident)", zorder=3)
                res.artists["decode_http"] = http
            ax.set_ylim(bottom=0)
            ticks = sorted(int(c["concurrency"]) for c in every)
            ax.set_xticks(ticks, [str(t) for t in ticks])
            ax.minorticks_off()
            if len(ticks) == 1:
                ax.set_xlim(ticks[0] / 1.5, ticks[0] * 1.5)
            ax.legend(loc="lower right" if wl == "prefill" else "upper left", frameon=False)
        title = (f"Formal P/D matrix: {entry.get('campaign')} ({entry.get('claim_class')}), archive {aid}"
                 + (" - SIMULATED" if sim else ""))
        fig.suptitle(title, fontsize=10)
        if sim:
            _watermark(fig)
        fig.subplots_adjust(left=0.07, right=0.985, bottom=0.13, top=0.85, wspace=0.2)
    res.caption = ("Formal matrix: lines are three-round medians, small points every round, bars the observed "
                   "range (min-max, not a confidence interval); grey diamonds are whole-wave HTTP output rates, "
                   "a different metric from resident decode." + _invalid_note(invalid_cells)
                   + (" Simulated data." if sim else ""))
    res.alt = (f"Formal matrix of archive {aid}: prefill input tok/s and resident decode output tok/s against "
               f"concurrency {', '.join(str(t) for t in sorted(tiers))}")
    return res


def _invalid_note(rows: Sequence[Mapping[str, Any]], what: str = "cell") -> str:
    """The caption's note on the invalid points drawn as red x (none: '')."""
    if not rows:
        return ""
    names = ", ".join(f"{r.get('workload', '')} C{r.get('concurrency')}".strip() if what == "cell"
                      else f"{float(r.get('arrival_rate_req_s') or 0):g} req/s" for r in rows)
    return f" Red x: {what}s {names} are {_rules_label(rows)}; they are left out of the lines."


def _verdict_text(entry: Mapping[str, Any]) -> str:
    if entry.get("verdict") == "withheld":
        rules = ", ".join(str(r) for r in entry.get("invalid_rules") or [])
        return f"withheld ({rules})" if rules else "withheld"
    return str(entry.get("verdict"))


def abba_figure(entry: Mapping[str, Any]) -> FigureResult:
    """Figures 6/7: one ABBA screen (``snapshot['screens'][i]``).

    Artists: ``waves_<leg>`` (Line2D markers: every wave rate of the leg, y in wave order),
    ``median_<leg>`` (LineCollection: the leg median as a horizontal bar), ``annotation`` (Text).
    """
    sim = bool(entry.get("simulated"))
    aid = str(entry["archive_id"])
    legs = {str(leg["leg"]): leg for leg in entry.get("legs") or []}
    with style():
        fig = _new_figure(8.6, 4.0)
        ax = fig.add_axes((0.09, 0.16, 0.55, 0.68))
        res = FigureResult(f"abba-{aid}", fig, "", "")
        allv: list[float] = []
        for i, name in enumerate(LEG_ORDER):
            leg = legs.get(name) or {}
            color = CONTROL_COLOR if name.startswith("A") else CANDIDATE_COLOR
            waves = [float(v) for v in leg.get("wave_rates") or [] if _finite(v)]
            allv.extend(waves)
            n = len(waves)
            offs = [0.0] if n <= 1 else [-0.14 + 0.28 * k / (n - 1) for k in range(n)]
            (dots,) = ax.plot([i + o for o in offs[:n]], waves, ls="none", marker="o", ms=5, color=color,
                              alpha=0.85, label=("each wave" if i == 0 else "_nolegend_"), zorder=3)
            res.artists[f"waves_{name}"] = dots
            if _finite(leg.get("median")):
                bar = ax.hlines([float(leg["median"])], i - 0.3, i + 0.3, colors=color, lw=2.4,
                                label=("leg median" if i == 0 else "_nolegend_"), zorder=4)
                res.artists[f"median_{name}"] = bar
        ax.set_xticks(range(4), ["A1\ncontrol", "B1\ncandidate", "B2\ncandidate", "A2\ncontrol"])
        ax.set_xlim(-0.6, 3.6)
        if allv:
            lo, hi = min(allv), max(allv)
            pad = max((hi - lo) * 0.18, abs(hi) * 0.002, 1e-6)
            ax.set_ylim(lo - pad, hi + pad)
        boundary = entry.get("boundary") or "resident"
        res.artists["ylabel"] = ax.set_ylabel(f"{boundary} output tok/s\n(expanded axis, not from zero)")
        ax.set_title(f"ABBA screen {entry.get('screen')}: C{entry.get('concurrency')}, {boundary} boundary"
                     + (" - SIMULATED" if sim else ""))
        for key, color, name in (("control_mean", CONTROL_COLOR, "control mean"),
                                 ("candidate_mean", CANDIDATE_COLOR, "candidate mean")):
            if _finite(entry.get(key)):
                res.artists[key] = ax.axhline(float(entry[key]), color=color, ls="--", lw=0.8, alpha=0.6,
                                              label=f"{name} of arm medians", zorder=1)
        fig.legend(*ax.get_legend_handles_labels(), loc="lower left", bbox_to_anchor=(0.66, 0.12), frameon=False,
                   fontsize=7)

        def pct(v: Any) -> str:
            return f"{float(v):+.3f}%" if _finite(v) else "n/a"

        out = entry.get("outputs") or {}
        text = "\n".join([
            "Screen, not a formal cell",
            "",
            f"candidate/control: {pct(entry.get('change_pct'))}",
            "  (mean of arm medians)",
            f"return-control drift A2/A1: {pct(entry.get('drift_pct'))}",
            f"candidate spread B2/B1: {pct(entry.get('spread_pct'))}",
            f"every candidate wave beats every\n  control wave: {'yes' if entry.get('separated') else 'no'}",
            f"identical completions: {out.get('identical_all_legs', 'n/a')} of {out.get('compared', 'n/a')}",
            f"verdict: {_verdict_text(entry)}",
            "",
            "Percentages from other experiments",
            "must not be added or multiplied.",
        ])
        res.artists["annotation"] = fig.text(0.67, 0.86, text, va="top", ha="left", fontsize=7.8,
                                             family="DejaVu Sans")
        fig.text(0.67, 0.06, f"archive {aid}", fontsize=7, color="0.4")
        if sim:
            _watermark(fig)
    res.caption = (f"ABBA screen {entry.get('screen')} (archive {aid}): each dot is one wave, bars are leg "
                   f"medians; the y axis is expanded and does not start at zero. Candidate/control "
                   f"{pct(entry.get('change_pct'))}, drift {pct(entry.get('drift_pct'))}."
                   + (" Simulated data." if sim else ""))
    res.alt = (f"ABBA screen {entry.get('screen')}: wave rates of legs A1, B1, B2, A2 with leg medians; "
               f"candidate/control {pct(entry.get('change_pct'))}")
    return res


GIB = float(1 << 30)


def memory_figure(entry: Mapping[str, Any]) -> FigureResult:
    """GPU memory samples of one archive (``snapshot['memory'][i]``) over time, one line per device.

    Artists: ``device_<n>`` (Line2D: x = seconds since the archive's first sample, y = used GiB).
    """
    sim = bool(entry.get("simulated"))
    aid = str(entry["archive_id"])
    with style():
        fig = _new_figure(8.0, 3.4)
        ax = fig.subplots()
        res = FigureResult(f"memory-{aid}", fig, "", "")
        cmap = mpl.colormaps["tab10"]
        for k, dev in enumerate(entry.get("devices") or []):
            pairs = [(t / 1e9, u / GIB) for t, u in zip(dev.get("t_ns") or [], dev.get("used_bytes") or [],
                                                         strict=True) if u is not None]
            color = cmap(k % 10)
            peak = dev.get("peak_used_bytes")
            label = f"device {dev['device']}" + (f" (peak observed {peak / GIB:.2f} GiB)" if peak is not None
                                                 else "")
            (line,) = ax.plot([p[0] for p in pairs], [p[1] for p in pairs], "-", marker=".", ms=2.5, lw=1.0,
                              color=color, label=label)
            res.artists[f"device_{dev['device']}"] = line
            if dev.get("total_bytes"):
                ax.axhline(float(dev["total_bytes"]) / GIB, color=color, ls=":", lw=0.8)
        ax.set_xlabel("seconds since the first sample")
        ax.set_ylabel("used GiB (dotted: device total)")
        ax.set_ylim(bottom=0)
        ax.set_title(f"GPU memory samples, archive {aid} (peak observed in samples)"
                     + (" - SIMULATED" if sim else ""))
        ax.legend(loc="lower right", frameon=False, fontsize=7)
        if sim:
            _watermark(fig)
        fig.subplots_adjust(left=0.08, right=0.98, bottom=0.15, top=0.9)
    res.caption = ("GPU memory samples over time per device; a peak is the largest value observed in the samples "
                   "at the sampling interval, not an allocator peak.")
    res.alt = f"GPU memory used over time per device for archive {aid}"
    return res


def _wrap(text: str, width: int = 46, lines: int = 3) -> str:
    words, out, cur = text.split(), [], ""
    for w in words:
        if cur and len(cur) + 1 + len(w) > width:
            out.append(cur)
            cur = w
        else:
            cur = f"{cur} {w}" if cur else w
    if cur:
        out.append(cur)
    if len(out) > lines:
        out = [*out[:lines - 1], out[lines - 1][: width - 3] + "..."]
    return "\n".join(out)


def historical_figure(entries: Sequence[Mapping[str, Any]],
                      groups: Sequence[Mapping[str, Any]]) -> FigureResult | None:
    """Figure 2 style milestones from historical ledger rows (``snapshot['historical']``), one
    horizontal-bar panel per group of ``snapshot['historical_figure']`` (claim class, metric, unit),
    one bar per entry in ledger order, labelled with its label; a published range (``range_max``)
    is drawn as a line to its upper end. Bars are independent milestones, never a series. Returns
    ``None`` when there is no group.

    Artists: ``panel_<k>`` (BarContainer: bar widths = entry values, top to bottom in ledger order),
    ``entries_<k>`` (list of the plotted entry ids).
    """
    by_id = {str(e.get("entry_id")): e for e in entries}
    panels = []
    for g in groups:
        rows = [by_id[i] for i in g.get("entry_ids") or [] if i in by_id and _finite(by_id[i].get("value"))]
        if rows:
            panels.append((g, rows))
    if not panels:
        return None
    heights = [0.9 + 0.42 * len(rows) for _, rows in panels]
    with style():
        fig = Figure(figsize=(9.0, 0.9 + sum(heights)), dpi=DPI, layout="constrained")
        axes = fig.subplots(len(panels), 1, squeeze=False, gridspec_kw={"height_ratios": heights})[:, 0]
        res = FigureResult("historical", fig, "", "")
        for k, (ax, (g, rows)) in enumerate(zip(axes, panels, strict=True)):
            ys = list(range(len(rows)))[::-1]
            vals = [float(r["value"]) for r in rows]
            bars = ax.barh(ys, vals, height=0.6, color="#8c7aa9", edgecolor="#5b4a78", linewidth=0.6,
                           label="historical entry (its own protocol)")
            res.artists[f"panel_{k}"] = bars
            res.artists[f"entries_{k}"] = [str(r.get("entry_id")) for r in rows]
            top = max(vals + [float(r["range_max"]) for r in rows if _finite(r.get("range_max"))])
            for y, r, v in zip(ys, rows, vals, strict=True):
                end = float(r["range_max"]) if _finite(r.get("range_max")) else v
                text = f"{v:g}"
                if end != v:
                    ax.plot([v, end], [y, y], color="#5b4a78", lw=2.2, solid_capstyle="butt")
                    text = f"{v:g}-{end:g} (published range)"
                if r.get("measured_date"):
                    text += f"  [measured {r['measured_date']}]"
                elif r.get("published_date"):
                    text += f"  [published {r['published_date']}]"
                ax.text(max(v, end) + top * 0.01, y, text, va="center", fontsize=6.8, color="0.2")
            names = [str(r.get("label") or r.get("entry_id") or "") for r in rows]
            names = [f"{n} ({r.get('entry_id')})" if names.count(n) > 1 else n
                     for n, r in zip(names, rows, strict=True)]
            ax.set_yticks(ys, [_wrap(n) for n in names], fontsize=6.8)
            ax.set_xlim(0, top * 1.35)
            ax.grid(axis="y", visible=False)
            unit = str(g.get("unit") or "")
            ax.set_xlabel(f"{g.get('metric')}" + (f" ({unit})" if unit else ""))
            ax.set_title(f"{g.get('metric')}, claim class {g.get('claim_class')}: historical, not a controlled series",
                         fontsize=8.5)
        fig.suptitle("Historical milestones (historical, not a controlled series; not current results)",
                     fontsize=10)
    res.caption = ("Historical milestones: each bar is one ledger entry with its own original protocol label "
                   "(listed in the table below); the bars are not a controlled series and are never compared "
                   "with current cells.")
    res.alt = "Historical milestones as horizontal bars, one panel per metric"
    return res



LATENCY_SERIES = (("ttft", "TTFT", "#6a1b9a"), ("tpot", "TPOT", DECODE_COLOR), ("itl", "ITL (per token)", "#00838f"))


def has_latency(entry: Mapping[str, Any]) -> bool:
    """Whether a formal entry's decode cells carry latency percentiles."""
    return any((c.get("latency") or {}).get("ttft_n") for c in entry.get("cells") or []
               if c.get("workload") == "decode")


def latency_figure(entry: Mapping[str, Any]) -> FigureResult:
    """Latency of a formal matrix's decode cells against concurrency (``snapshot['formal'][i]``).

    Artists ``{ttft,tpot,itl}_p50`` and ``{..}_p99`` (Line2D, milliseconds, x = concurrency)."""
    sim = bool(entry.get("simulated"))
    aid = str(entry["archive_id"])
    cells = sorted((c for c in entry.get("cells") or [] if c.get("workload") == "decode"
                    and (c.get("latency") or {}).get("ttft_n")), key=lambda c: int(c.get("concurrency") or 0))
    with style():
        fig = _new_figure(10.0, 3.8)
        axes = fig.subplots(1, len(LATENCY_SERIES))
        res = FigureResult(f"latency-{aid}", fig, "", "")
        for ax, (key, label, color) in zip(axes, LATENCY_SERIES, strict=True):
            ax.set_title(f"{label} (ms)")
            ax.set_xscale("log", base=2)
            ax.set_xlabel("client concurrency C (base-2 axis)")
            for stat, ls in (("p50", "-"), ("p99", "--")):
                pts = [(int(c["concurrency"]), float(c["latency"][f"{key}_{stat}_s"]) * 1000) for c in cells
                       if _finite((c.get("latency") or {}).get(f"{key}_{stat}_s"))]
                (line,) = ax.plot([x for x, _ in pts], [y for _, y in pts], ls, color=color, marker="o", ms=3.5,
                                  label=stat)
                res.artists[f"{key}_{stat}"] = line
            ticks = [int(c["concurrency"]) for c in cells]
            if ticks:
                ax.set_xticks(ticks, [str(t) for t in ticks])
                ax.minorticks_off()
                if len(ticks) == 1:
                    ax.set_xlim(ticks[0] / 1.5, ticks[0] * 1.5)
            ax.set_ylim(bottom=0)
            ax.legend(loc="upper left", frameon=False)
        fig.suptitle(f"Latency: {entry.get('campaign')} decode cells, archive {aid}" + (" - SIMULATED" if sim else ""),
                     fontsize=10)
        if sim:
            _watermark(fig)
        fig.subplots_adjust(left=0.06, right=0.985, bottom=0.15, top=0.82, wspace=0.25)
    res.caption = ("Latency percentiles of every measured request of each decode cell (p50 solid, p99 dashed; "
                   "dsv4h definitions: TPOT over tokens after the first event, ITL per token)."
                   + (" Simulated data." if sim else ""))
    res.alt = f"Latency p50 and p99 (TTFT, TPOT, ITL) against concurrency for archive {aid}"
    return res

SWEEP_SERIES = (("ttft_p50_s", "TTFT p50", "o-"), ("ttft_p99_s", "TTFT p99", "o--"),
                ("tpot_p50_s", "TPOT p50", "s-"), ("tpot_p99_s", "TPOT p99", "s--"))


def sweep_figure(entry: Mapping[str, Any]) -> FigureResult:
    """A rate sweep (``snapshot['sweeps'][i]``): latency against achieved output throughput, one point
    per offered rate, with the goodput knee marked.

    Artists ``ttft_p50_s``, ``ttft_p99_s``, ``tpot_p50_s``, ``tpot_p99_s`` (Line2D: x = median output
    tok/s of the rate's rounds, y = latency in ms), ``knee`` (the vertical line, when there is a knee and
    the run is valid) and ``invalid`` (Line2D markers at the TTFT p50 of rates a blocking finding
    invalidates, when any; those rates are in no other series)."""
    sim = bool(entry.get("simulated"))
    aid = str(entry["archive_id"])
    every = [c for c in entry.get("cells") or [] if _finite(c.get("output_throughput_median_tok_s"))]
    bad = [c for c in every if _invalid(c)]
    cells = [c for c in every if not _invalid(c)]
    knee = (entry.get("knee") or {}) if not entry.get("invalid_rules") else {}
    with style():
        fig = _new_figure(7.0, 4.0)
        ax = fig.add_subplot(1, 1, 1)
        res = FigureResult(f"sweep-{aid}", fig, "", "")
        for key, label, fmt in SWEEP_SERIES:
            pts = [(float(c["output_throughput_median_tok_s"]), float(c[key]) * 1000)
                   for c in cells if _finite(c.get(key))]
            (line,) = ax.plot([x for x, _ in pts], [y for _, y in pts], fmt, ms=3.5, label=label)
            res.artists[key] = line
        for c in cells:
            if _finite(c.get("ttft_p50_s")):
                ax.annotate(f"{float(c['arrival_rate_req_s']):g}/s", (float(c["output_throughput_median_tok_s"]),
                                                        float(c["ttft_p50_s"]) * 1000), fontsize=7)
        _plot_invalid(ax, res, "invalid", [(float(c["output_throughput_median_tok_s"]),
                                            float(c["ttft_p50_s"]) * 1000, c)
                                           for c in bad if _finite(c.get("ttft_p50_s"))])
        at: Any = knee.get("arrival_rate_req_s")
        kc = next((c for c in cells if _finite(at) and c.get("arrival_rate_req_s") == at), None)
        if kc is not None:
            res.artists["knee"] = ax.axvline(float(kc["output_throughput_median_tok_s"]), color="grey", linestyle=":",
                                             label=f"goodput knee ({float(at):g} req/s offered)")
        ax.set_xlabel("achieved output throughput (tok/s, median of rounds)")
        ax.set_ylabel("latency (ms)")
        ax.set_ylim(bottom=0)
        ax.set_title(f"Rate sweep {entry.get('campaign')}, archive {aid}" + (" - SIMULATED" if sim else ""))
        ax.legend(loc="upper left", frameon=False)
        if sim:
            _watermark(fig)
        fig.subplots_adjust(left=0.1, right=0.97, bottom=0.13, top=0.9)
    res.caption = ("Open-loop rate sweep: TTFT and TPOT p50/p99 of each offered rate against its achieved output "
                   "throughput; the dotted line marks the goodput knee. A sweep is never a formal cell."
                   + _invalid_note(bad, "rate") + (" Simulated data." if sim else ""))
    res.alt = f"Latency against achieved throughput per offered rate for rate sweep archive {aid}"
    return res


def timeline_figure(entry: Mapping[str, Any]) -> FigureResult:
    """One wave's timeline (``snapshot['timelines'][i]``; artists: :func:`draw_timeline`)."""
    with style():
        fig = _new_figure(*timeline_size(entry))
        res = FigureResult(timeline_stem(entry), fig, timeline_caption(entry), timeline_alt(entry))
        res.artists = draw_timeline(fig, entry)
        if entry.get("simulated"):
            _watermark(fig)
    return res


FIGURE_KINDS = ("memory", "timeline", "historical")
"""The figures of no kind; a kind's figures are ``module:attribute`` drawers (``KindInfo.report_figures``)."""


def latency_figure_of(entry: Mapping[str, Any]) -> FigureResult | None:
    """:func:`latency_figure` of a formal entry whose decode cells carry latency, else None."""
    return latency_figure(entry) if has_latency(entry) else None


def figure_jobs(snapshot: Mapping[str, Any]) -> list[tuple[str, Any]]:
    """The figures of a snapshot as ``(kind, data)`` pairs: each kind's main figure (the first of its
    ``KindInfo.report_figures`` drawers, over every entry of its section) in descriptor order, memory,
    the kinds' further figures (a formal matrix's latency), wave timelines, historical. Each pair is
    plain data, so it can be drawn in another process."""

    def drawn(first: bool) -> list[tuple[str, Any]]:
        return [(ref, e) for k in KINDS.values() for ref in (k.report_figures[:1] if first else k.report_figures[1:])
                for e in section_entries(snapshot, k.report_section)]

    jobs = drawn(first=True)
    jobs += [("memory", e) for e in snapshot.get("memory") or []]
    jobs += drawn(first=False)
    jobs += [("timeline", e) for e in snapshot.get("timelines") or []]
    if snapshot.get("historical") and snapshot.get("historical_figure"):
        jobs.append(("historical", {"entries": snapshot["historical"], "groups": snapshot["historical_figure"]}))
    return jobs


def _historical_job(data: Any) -> FigureResult | None:
    return historical_figure(data["entries"], data["groups"])


def build_figure(kind: str, data: Any) -> FigureResult | None:
    """Draw one figure of :func:`figure_jobs` (``None`` when it has nothing to plot): ``kind`` is one of
    :data:`FIGURE_KINDS` or a kind's ``module:attribute`` drawer."""
    if ":" in kind:
        drawer: Callable[[Any], FigureResult | None] = resolve(kind)
        return drawer(data)
    draw: dict[str, Callable[[Any], FigureResult | None]] = {
        "memory": memory_figure, "timeline": timeline_figure, "historical": _historical_job}
    if kind not in draw:
        raise ValueError(f"unknown figure kind {kind!r}; expected one of {', '.join(FIGURE_KINDS)}")
    return draw[kind](data)


def snapshot_figures(snapshot: Mapping[str, Any]) -> list[FigureResult]:
    """Every figure of a snapshot, in report order: formal matrices, screens, memory, historical."""
    out = [build_figure(kind, data) for kind, data in figure_jobs(snapshot)]
    return [f for f in out if f is not None]


def render_figure(res: FigureResult, formats: Sequence[str] = FORMATS) -> dict[str, bytes]:
    """The figure's bytes per format (PNG at :data:`DPI`, SVG, PDF), deterministic for a given
    matplotlib version: fixed hash salt, no dates, no tool versions, fonts embedded."""
    out: dict[str, bytes] = {}
    with style():
        for fmt in formats:
            buf = io.BytesIO()
            res.fig.savefig(buf, format=fmt, dpi=DPI, metadata=_METADATA[fmt])
            out[fmt] = buf.getvalue()
    return out
