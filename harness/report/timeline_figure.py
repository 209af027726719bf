"""Drawing of one wave's timeline (one horizontal bar per request), from plain JSON data.

The entry is :meth:`harness.measure.timeline.Timeline.to_json` plus ``archive_id`` and ``simulated``
(the report snapshot's ``timelines`` entries, or what ``dsv4h archive timeline`` builds), and
optionally ``invalid_rules``: the rules by which the archive's verdict invalidates the wave (its wave,
round or cell); a non-empty list titles the figure INVALID with them, in red, and says so in the
caption and alt text (never silently). Times are
seconds since the wave's first send. :func:`harness.report.figures.timeline_figure` wraps
:func:`draw_timeline` in the report's style; this module imports nothing of the report so that the
figures module can import it.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from typing import Any

from matplotlib.figure import Figure
from matplotlib.patches import Patch

OK_COLOR = "#1f5fa8"
FAILED_COLOR = "#b00020"
RESIDENT_COLOR = "#2e7d32"
HTTP_COLOR = "0.45"
COLD_MARKS = {"cold": ("*", "#e65100", "cold (first of its shape on its service start)"),
              "restarted": ("P", "#6a1b9a", "restarted (first of its shape after a restart)")}
MAX_ERROR_LABELS = 8  # more failed bars than this get one "+N more" note, not a label each

__all__ = ["draw_timeline", "invalid_mark", "timeline_alt", "timeline_caption", "timeline_size", "timeline_stem",
           "timeline_title"]


def timeline_stem(entry: Mapping[str, Any]) -> str:
    """File stem: ``timeline-<archive id>-<wave id>`` (characters outside ``[A-Za-z0-9._-]`` as ``_``)."""
    return "timeline-" + re.sub(r"[^A-Za-z0-9._-]", "_", f"{entry.get('archive_id')}-{entry.get('wave_id')}")


def timeline_size(entry: Mapping[str, Any]) -> tuple[float, float]:
    """Figure size in inches: taller with more requests, bounded."""
    n = len(entry.get("rows") or [])
    return 9.0, min(14.0, max(3.0, 1.5 + 0.14 * n))


def invalid_mark(entry: Mapping[str, Any]) -> str:
    """``INVALID (rule, ...)`` when the entry's ``invalid_rules`` name any, else ''."""
    rules = [str(r) for r in entry.get("invalid_rules") or ()]
    return f"INVALID ({', '.join(rules)})" if rules else ""


def timeline_title(entry: Mapping[str, Any]) -> str:
    """Archive id, wave id, cell, concurrency, SIMULATED when the archive is simulated, and
    ``INVALID (rules)`` when the verdict invalidates the wave (:func:`invalid_mark`)."""
    mark = invalid_mark(entry)
    return (f"Wave timeline: archive {entry.get('archive_id')}, wave {entry.get('wave_id')}, cell "
            f"{entry.get('cell_id')}, C{entry.get('concurrency')}" + (" - SIMULATED" if entry.get("simulated") else "")
            + (f" - {mark}" if mark else ""))


def draw_timeline(fig: Figure, entry: Mapping[str, Any]) -> dict[str, Any]:
    """Draw the wave on ``fig``; returns the data-carrying artists: ``bars_ok`` / ``bars_failed``
    (BarContainer: left = send, width = done - send), ``first_token`` / ``last_token`` (Line2D
    markers), ``resident`` (the shaded window, when the wave has one), ``http`` (its bounds as
    lines, when it has one), ``cold`` / ``restarted`` (Line2D markers at the first token of the rows
    whose ``ttft_class`` says so, when any: docs/coldness.md), ``error_labels`` (Text of failed requests)
    and ``title``."""
    rows = list(entry.get("rows") or [])
    h = float(fig.get_figheight())
    ax = fig.add_axes((0.07, 0.55 / h, 0.9, 1 - 1.3 / h))  # margins in inches: axis label below, legend above
    art: dict[str, Any] = {}
    n = len(rows)
    ys = list(range(n))
    for key, want in (("bars_ok", True), ("bars_failed", False)):
        idx = [i for i in ys if bool(rows[i].get("ok")) is want]
        art[key] = ax.barh([ys[i] for i in idx], [float(rows[i]["done_s"]) - float(rows[i]["send_s"]) for i in idx],
                           left=[float(rows[i]["send_s"]) for i in idx], height=0.62,
                           color=OK_COLOR if want else "#f3c7ce", edgecolor=OK_COLOR if want else FAILED_COLOR,
                           linewidth=0.4, hatch=None if want else "////", alpha=0.55 if want else 0.95, zorder=2)
    for key, marker, label in (("first_token", "|", "first token"), ("last_token", "x", "last token")):
        pts = [(float(r[f"{key}_s"]), y) for r, y in zip(rows, ys, strict=True) if r.get(f"{key}_s") is not None]
        (art[key],) = ax.plot([p[0] for p in pts], [p[1] for p in pts], ls="none", marker=marker, ms=5, mew=1.1,
                              color="black", label=label, zorder=4)
    for cls, (marker, color, label) in COLD_MARKS.items():
        pts = [(float(r.get("first_token_s") if r.get("first_token_s") is not None else r["done_s"]), y)
               for r, y in zip(rows, ys, strict=True) if r.get("ttft_class") == cls]
        if pts:
            (art[cls],) = ax.plot([p[0] for p in pts], [p[1] for p in pts], ls="none", marker=marker, ms=9,
                                  color=color, label=label, zorder=5)
    if entry.get("resident"):
        t_s, t_e = (float(v) for v in entry["resident"])
        art["resident"] = ax.axvspan(t_s, t_e, color=RESIDENT_COLOR, alpha=0.13, lw=0, zorder=1,
                                     label=f"resident window {t_s:.3f}-{t_e:.3f} s")
    if entry.get("http"):
        h0, h1 = (float(v) for v in entry["http"])
        art["http"] = ax.vlines([h0, h1], -0.6, n - 0.4, colors=HTTP_COLOR, linestyles="--", lw=0.8, zorder=1,
                                label="HTTP window (first send to last end)")
    failed = [(r, y) for r, y in zip(rows, ys, strict=True) if not r.get("ok")]
    art["error_labels"] = [ax.text(float(r["done_s"]), y, f"  {r.get('rid')}: {r.get('error') or 'failed'}",
                                   va="center", ha="left", fontsize=6.5, color=FAILED_COLOR, zorder=5)
                           for r, y in failed[:MAX_ERROR_LABELS]]
    if len(failed) > MAX_ERROR_LABELS:
        ax.text(0.99, 0.01, f"+{len(failed) - MAX_ERROR_LABELS} more failed requests", transform=ax.transAxes,
                ha="right", va="bottom", fontsize=7, color=FAILED_COLOR)
    ax.set_ylim(n - 0.4, -0.6)  # first send at the top
    step = max(1, n // 16)
    ax.set_yticks(ys[::step], [str(i) for i in ys[::step]], fontsize=6.5)
    end = max((float(r["done_s"]) for r in rows), default=1.0) or 1.0
    ax.set_xlim(0, end * (1.25 if failed else 1.03))  # room for the failed requests' labels
    ax.set_xlabel("seconds since the wave's first send (client monotonic clock)")
    ax.set_ylabel("request # (by send time)")
    handles, labels = ax.get_legend_handles_labels()
    if failed:
        handles.append(Patch(facecolor="#f3c7ce", edgecolor=FAILED_COLOR, hatch="////", label="failed request"))
        labels.append("failed request")
    ax.legend(handles, labels, loc="lower center", bbox_to_anchor=(0.5, 1.01), ncol=5, frameon=False, fontsize=7)
    art["title"] = fig.suptitle(timeline_title(entry), fontsize=9.5, y=1 - 0.08 / h, va="top",
                                color=FAILED_COLOR if invalid_mark(entry) else "black")
    return art


def _invalid_note(entry: Mapping[str, Any]) -> str:
    rules = entry.get("invalid_rules") or []
    return f" INVALID ({', '.join(str(r) for r in rules)}): not a result." if rules else ""


def timeline_caption(entry: Mapping[str, Any]) -> str:
    """The figure's caption: what bars, markers and the shading are."""
    rows = entry.get("rows") or []
    bad = sum(1 for r in rows if not r.get("ok"))
    res = entry.get("resident")
    window = (f"the shaded band is the resident decode window ({float(res[0]):.3f}-{float(res[1]):.3f} s)"
              if res else "the wave has no resident decode window")
    cold = {c: sum(1 for r in rows if r.get("ttft_class") == c) for c in COLD_MARKS}
    marks = "".join(f" {n} {c} request(s) marked ({COLD_MARKS[c][0]} at the first token)." for c, n in cold.items()
                    if n)
    return (f"Wave {entry.get('wave_id')} of archive {entry.get('archive_id')}: each bar is one request from send to "
            f"end of response, | marks its first token and x its last; {window}; dashed lines bound the HTTP "
            f"window. {len(rows)} requests, {bad} failed (hatched)." + marks + _invalid_note(entry)
            + (" Simulated data." if entry.get("simulated") else ""))


def timeline_alt(entry: Mapping[str, Any]) -> str:
    """Alt text of the figure."""
    mark = invalid_mark(entry)
    return (f"Timeline of wave {entry.get('wave_id')} (cell {entry.get('cell_id')}, archive "
            f"{entry.get('archive_id')}): {len(entry.get('rows') or [])} requests as bars from send to done"
            + (f"; {mark}" if mark else ""))
