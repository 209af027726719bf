"""Figures carry the snapshot's values, label what they must, and save deterministically."""

from __future__ import annotations

import math
import re
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from report_helpers import make_workspace

from harness.report import figures as F
from harness.report.collect import collect
from harness.report.config import ReportConfig


@pytest.fixture(scope="module")
def snap(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
    ws = tmp_path_factory.mktemp("fig-ws")
    make_workspace(ws)
    return collect(ws, ReportConfig(), findings_fn=False)


def _xy(artist: Any) -> tuple[list[float], list[float]]:
    return [float(x) for x in artist.get_xdata()], [float(y) for y in artist.get_ydata()]


def test_formal_figure_plots_medians_rounds_ranges_and_http(snap: dict[str, Any]) -> None:
    entry = snap["formal"][0]
    res = F.formal_matrix_figure(entry)
    for wl in ("prefill", "decode"):
        cells = sorted((c for c in entry["cells"] if c["workload"] == wl), key=lambda c: c["concurrency"])
        assert _xy(res.artists[f"{wl}_median"]) == ([c["concurrency"] for c in cells],
                                                    [c["median_tok_s"] for c in cells])
        ok = [(c["concurrency"], v) for c in cells for v, s in zip(c["round_tok_s"], c["round_status"], strict=True)
              if s == "ok"]
        assert list(zip(*_xy(res.artists[f"{wl}_rounds"]), strict=True)) == ok
        segs = res.artists[f"{wl}_range"].get_segments()
        assert [(s[0][0], s[0][1], s[1][1]) for s in segs] == [
            (c["concurrency"], c["observed_min_tok_s"], c["observed_max_tok_s"]) for c in cells]
        assert "observed range" in res.artists[f"{wl}_range"].get_label()
    # the failed round (decode C4 round 1) is drawn apart, never in the ok points
    bad = [(c["concurrency"], v) for c in entry["cells"] if c["workload"] == "decode"
           for v, s in zip(c["round_tok_s"], c["round_status"], strict=True) if s != "ok"]
    assert bad and list(zip(*_xy(res.artists["decode_rounds_excluded"]), strict=True)) == bad
    dec = sorted((c for c in entry["cells"] if c["workload"] == "decode"), key=lambda c: c["concurrency"])
    _, hy = _xy(res.artists["decode_http"])
    assert hy == [c["http_output_tok_s"] for c in dec] and res.artists["decode_http"].get_color() == F.HTTP_COLOR
    ax = res.fig.axes[1]
    assert ax.get_xscale() == "log" and getattr(ax.xaxis.get_transform(), "base", None) == 2
    assert ax.spines["left"].get_visible() and ax.spines["bottom"].get_visible()
    assert not ax.spines["top"].get_visible() and not ax.spines["right"].get_visible()
    texts = [t.get_text() for t in res.fig.texts]
    assert "SIMULATED" in texts and "SIMULATED" in res.fig.get_suptitle()


def test_abba_figure_waves_medians_and_expanded_axis(snap: dict[str, Any]) -> None:
    entry = snap["screens"][0]
    res = F.abba_figure(entry)
    ax = res.fig.axes[0]
    assert [t.get_text().split("\n")[0] for t in ax.get_xticklabels()] == ["A1", "B1", "B2", "A2"]
    for i, leg in enumerate(entry["legs"]):
        x, y = _xy(res.artists[f"waves_{leg['leg']}"])
        assert y == leg["wave_rates"] and all(abs(v - i) < 0.5 for v in x)
        seg = res.artists[f"median_{leg['leg']}"].get_segments()[0]
        assert seg[0][1] == seg[1][1] == leg["median"]
    assert "expanded axis" in res.artists["ylabel"].get_text()
    lo, _ = ax.get_ylim()
    assert lo > 0.5 * min(v for leg in entry["legs"] for v in leg["wave_rates"])  # not from zero
    note = res.artists["annotation"].get_text()
    assert f"{entry['change_pct']:+.3f}%" in note and f"{entry['drift_pct']:+.3f}%" in note
    assert "not a formal cell" in note


def test_memory_and_historical_figures(snap: dict[str, Any]) -> None:
    mem = snap["memory"][0]
    res = F.memory_figure(mem)
    for dev in mem["devices"]:
        x, y = _xy(res.artists[f"device_{dev['device']}"])
        assert x == [t / 1e9 for t in dev["t_ns"]]
        assert np.allclose(y, [u / F.GIB for u in dev["used_bytes"]])
    assert "peak observed in samples" in res.fig.axes[0].get_title()
    groups = snap["historical_figure"]
    assert [g["metric"] for g in groups] == ["single_request_output"]  # the formal entry is a table row only
    hist = F.historical_figure(snap["historical"], groups)
    assert hist is not None
    assert "historical, not a controlled series" in hist.fig.get_suptitle()
    assert "historical, not a controlled series" in hist.fig.axes[0].get_title()
    milestones = [h for h in snap["historical"] if h["metric"] == "single_request_output"]
    assert hist.artists["entries_0"] == [h["entry_id"] for h in milestones]
    bars = hist.artists["panel_0"]
    assert [b.get_width() for b in bars] == [h["value"] for h in milestones]
    ys = [b.get_y() for b in bars]
    assert ys == sorted(ys, reverse=True)  # first entry on top
    ax = hist.fig.axes[0]
    pos_label = sorted(zip(ax.get_yticks(), (t.get_text() for t in ax.get_yticklabels()), strict=True), reverse=True)
    assert [lab for _, lab in pos_label] == [h["label"] for h in milestones]  # top to bottom in ledger order
    assert "(published range)" in " ".join(t.get_text() for t in hist.fig.axes[0].texts)
    assert F.historical_figure([{"entry_id": "a", "value": 1.0}], []) is None


def test_render_figure_is_deterministic_with_embedded_fonts(snap: dict[str, Any]) -> None:
    a = F.render_figure(F.abba_figure(snap["screens"][0]))
    b = F.render_figure(F.abba_figure(snap["screens"][0]))
    assert a == b
    assert a["png"].startswith(b"\x89PNG") and b"Software" not in a["png"][:4096]
    svg = a["svg"].decode()
    assert "<text" not in svg and "<path" in svg  # text drawn as paths: no font needed to view it
    assert "<dc:date>" not in svg and "Matplotlib v" not in svg
    pdf = a["pdf"]
    assert b"/FontFile2" in pdf and b"CreationDate" not in pdf  # TrueType embedded, no timestamp
    m = re.search(rb'width="([0-9.]+)pt"', a["svg"])
    assert m is not None and math.isclose(float(m.group(1)), 8.6 * 72, rel_tol=0.01)


def test_snapshot_figures_order(snap: dict[str, Any], tmp_path: Path) -> None:
    stems = [f.stem for f in F.snapshot_figures(snap)]
    assert stems[:2] == [f"formal-{e['archive_id']}" for e in snap["formal"]]
    assert stems[2] == f"abba-{snap['screens'][0]['archive_id']}"
    assert stems[3] == f"sweep-{snap['sweeps'][0]['archive_id']}"
    assert stems[4].startswith("memory-") and stems[-1] == "historical"


def test_sweep_figure_plots_latency_against_throughput_with_the_knee(snap: dict[str, Any]) -> None:
    entry = snap["sweeps"][0]
    res = F.sweep_figure(entry)
    # synthetic sweep: served = min(rate, 5) req/s, 160 output tokens each; TTFT p50 = 0.2 + 0.6 (rate/5)^3 s
    x, y = _xy(res.artists["ttft_p50_s"])
    assert x == [320.0, 640.0, 800.0]
    assert y == pytest.approx([238.4, 507.2, 2657.6])
    assert _xy(res.artists["ttft_p99_s"])[1] == pytest.approx([286.08, 608.64, 3189.12])
    assert entry["knee"]["arrival_rate_req_s"] == 4.0 and _xy(res.artists["knee"])[0] == [640.0, 640.0]
    assert res.stem == f"sweep-{entry['archive_id']}" and "SIMULATED" in res.fig.axes[0].get_title()
