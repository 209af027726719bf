"""Cold, restarted and warm TTFT in the report (harness.report.ttft_classes, the formal section's table)
and the cold marks of the wave timelines (harness.measure.timeline, harness.report.timeline_figure)."""

from __future__ import annotations

import math

import numpy as np
import pytest

from harness.measure.coldness import CELL_COLUMNS
from harness.measure.timeline import wave_timeline
from harness.records import RequestRecord
from harness.report.figures import timeline_figure
from harness.report.timeline_figure import timeline_caption
from harness.report.ttft_classes import ttft_class_rows

MS = 1_000_000


def cell(workload: str, c: int, **cols: float) -> dict[str, object]:
    base: dict[str, object] = {k: (0 if k.endswith("_n") else None) for k in CELL_COLUMNS}
    return {"workload": workload, "concurrency": c, **base, **cols}


def test_rows_in_ms_prefill_first_and_old_cells_skipped() -> None:
    entry = {"cells": [cell("decode", 4, ttft_cold_n=1, ttft_cold_p50_s=0.5, ttft_cold_max_s=0.5, ttft_warm_n=12,
                            ttft_warm_p50_s=0.01, ttft_warm_p90_s=0.012, ttft_warm_p99_s=0.02),
                       cell("prefill", 2, ttft_restarted_n=1, ttft_restarted_p50_s=0.25, ttft_restarted_max_s=0.25,
                            ttft_warm_p50_s=math.nan),
                       {"workload": "decode", "concurrency": 1, "ttft_p50_s": 0.01}]}  # an archive before the columns
    rows = ttft_class_rows(entry)
    assert [(r["workload"], r["concurrency"]) for r in rows] == [("prefill", 2), ("decode", 4)]
    pre, dec = rows
    assert pre["restarted_n"] == 1 and pre["restarted_p50"] == pytest.approx(250.0) and pre["cold_n"] == 0
    assert pre["cold_p50"] is None and pre["warm_p50"] is None  # NaN and missing are shown as none
    assert dec["cold_p50"] == pytest.approx(500.0) and dec["warm_n"] == 12 and dec["warm_p99"] == pytest.approx(20.0)


def _rec(rid: str, send_ms: int, first_ms: int) -> RequestRecord:
    return RequestRecord(rid=rid, send_ns=send_ms * MS, done_ns=(first_ms + 5) * MS,
                         event_ns=np.array([first_ms * MS, (first_ms + 5) * MS], dtype=np.int64),
                         event_tokens=np.array([1, 2], dtype=np.int32), wave_id="w", cell_id="c", concurrency=2)


def test_timeline_rows_carry_their_class_and_the_figure_marks_them() -> None:
    recs = [_rec("a", 0, 500), _rec("b", 1, 500), _rec("c", 2, 505)]
    plain = wave_timeline(recs).to_json()
    assert all("ttft_class" not in r for r in plain["rows"])  # unclassified: the JSON is as before
    t = wave_timeline(recs, {"a": "cold", "c": "restarted"})
    assert [r.ttft_class for r in t.rows] == ["cold", "warm", "restarted"]
    entry = t.to_json() | {"archive_id": "0123456789abcdef", "simulated": True}
    res = timeline_figure(entry)
    cold, restarted = res.artists["cold"], res.artists["restarted"]
    assert list(zip(cold.get_xdata(), cold.get_ydata(), strict=True)) == [pytest.approx((0.5, 0))]
    # seconds since the wave's first send
    assert list(zip(restarted.get_xdata(), restarted.get_ydata(), strict=True)) == [pytest.approx((0.505, 2))]
    caption = timeline_caption(entry)
    assert "1 cold request(s) marked" in caption and "1 restarted request(s) marked" in caption
    assert "cold" not in timeline_figure(plain | {"archive_id": "0123456789abcdef"}).artists
