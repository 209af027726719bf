"""Cold, restarted and warm classes and their TTFT columns (harness.measure.coldness), literal numbers."""

from __future__ import annotations

import math

import numpy as np
import pytest

from harness.measure import coldness as C
from harness.records import RequestRecord

MS = 1_000_000


def rec(rid: str, send_ms: int, ttft_ms: int, *, run: str = "run1", c: int = 1, n: int = 512, phase: str = "measured",
        wave: str = "w", cell: str = "cell", error: str | None = None) -> RequestRecord:
    first = send_ms + ttft_ms
    return RequestRecord(rid=rid, send_ns=send_ms * MS, done_ns=(first + 10) * MS,
                         event_ns=np.array([first * MS, (first + 10) * MS], dtype=np.int64),
                         event_tokens=np.array([1, 2], dtype=np.int32), run_id=run, concurrency=c, input_len=n,
                         phase=phase, wave_id=wave, cell_id=cell, error=error)


def start(index: int, ident: str, run: str = "run1", ready_ms: int | None = 0) -> C.ServiceStart:
    return C.ServiceStart(index, ident, run, None if ready_ms is None else ready_ms * MS)


def test_shape_key_buckets_and_tiers() -> None:
    key = C.ShapeKey((1024, 4096), (1, 2, 4, 8))
    assert key.shape(512, 1) == (0, 1)
    assert key.shape(1024, 3) == (0, 4)  # an edge is the top of its bucket
    assert key.shape(1025, 8) == (1, 8)
    assert key.shape(9000, 12) == (2, 12)  # beyond the last edge and the last tier
    assert C.ShapeKey().shape(9000, 3) == (0, 3)


def test_first_of_each_shape_per_start_is_cold_then_warm() -> None:
    key = C.ShapeKey((1024,), ())
    recs = [rec("b", 20, 50), rec("a", 10, 500), rec("c", 30, 5, n=2000), rec("d", 40, 5, c=2), rec("e", 50, 5, n=2000)]
    got = C.classify(recs, [start(1, "X")], key)
    # send order: a (cold, 500 ms), b warm, c a new length bucket (cold), d a new concurrency (cold), e warm
    assert got == {"a": "cold", "b": "warm", "c": "cold", "d": "cold", "e": "warm"}


def test_a_restart_of_the_same_identity_is_restarted_another_identity_is_cold() -> None:
    key = C.ShapeKey()
    starts = [start(1, "X", ready_ms=0), start(2, "Y", ready_ms=100), start(3, "X", ready_ms=200)]
    recs = [rec("a1", 10, 400), rec("a2", 20, 5), rec("b1", 110, 400), rec("b2", 120, 5),
            rec("c1", 210, 390), rec("c2", 220, 5), rec("c3", 230, 5, c=4)]
    got = C.classify(recs, starts, key)
    assert got == {"a1": "cold", "a2": "warm", "b1": "cold", "b2": "warm",
                   "c1": "restarted", "c2": "warm", "c3": "cold"}  # c3: a shape X never served


def test_unknown_identity_is_never_a_restart_and_runs_without_starts_are_one_each() -> None:
    recs = [rec("a", 0, 400, run="r1"), rec("b", 10, 5, run="r1"), rec("c", 0, 400, run="r2")]
    assert C.classify(recs, (), C.ShapeKey()) == {"a": "cold", "b": "warm", "c": "cold"}
    starts = [start(1, "", run="r1"), start(2, "", run="r2")]
    assert C.classify(recs, starts, C.ShapeKey())["c"] == "cold"


def test_starts_of_maps_events_to_the_last_services_and_earlier_runs_to_the_first() -> None:
    services = [{"name": "s", "start_index": 1}, {"name": "s", "start_index": 2}]
    starts = C.starts_of(services, [5 * MS], "run2", ["run1"])
    assert [(s.index, s.run_id, s.ready_ns) for s in starts] == [(1, "run1", None), (2, "run2", 5 * MS)]
    assert starts[0].identity == starts[1].identity != ""  # same fingerprint: the same identity
    events: list[dict[str, object]] = [{"event": "run-start"}, {"event": "service-ready", "t_ns": 5 * MS}]
    recs = [rec("old", 0, 5, run="run1"), rec("new", 10, 5, run="run2")]
    assert C.archive_starts(recs, services, events, "run2") == starts
    assert C.classify(recs, starts, C.ShapeKey()) == {"old": "cold", "new": "restarted"}


def test_cell_columns_keep_cold_apart_from_warm() -> None:
    recs = [rec("w0", 0, 500, phase="warmup"), rec("m1", 1000, 10), rec("m2", 1100, 20), rec("m3", 1200, 30),
            rec("m4", 1300, 40)]
    classes: dict[str, C.TtftClass] = {"w0": "cold", "m1": "warm", "m2": "warm", "m3": "restarted", "m4": "warm"}
    cols = C.cell_columns(recs, recs[1:], classes)
    assert list(cols) == list(C.CELL_COLUMNS)
    assert cols["ttft_cold_n"] == 1 and cols["ttft_cold_p50_s"] == pytest.approx(0.5)
    assert cols["ttft_cold_max_s"] == pytest.approx(0.5)
    assert cols["ttft_restarted_n"] == 1 and cols["ttft_restarted_p50_s"] == pytest.approx(0.03)
    assert cols["ttft_warm_n"] == 3  # m1, m2, m4; the restarted m3 is left out
    assert cols["ttft_warm_p50_s"] == pytest.approx(0.02)
    assert cols["ttft_warm_p90_s"] == pytest.approx(0.02 + 0.8 * 0.02)  # linear interpolation of 10, 20, 40 ms
    assert cols["ttft_warm_p99_s"] == pytest.approx(0.02 + 0.98 * 0.02)
    empty = C.cell_columns([], [], {})
    assert empty["ttft_cold_n"] == 0 and math.isnan(empty["ttft_warm_p50_s"])


def test_failed_requests_are_classified_but_have_no_ttft() -> None:
    recs = [rec("a", 0, 500, error="boom"), rec("b", 10, 5)]
    classes = C.classify(recs, [start(1, "X")], C.ShapeKey())
    assert classes == {"a": "cold", "b": "warm"}
    assert C.cell_columns(recs, recs, classes)["ttft_cold_n"] == 0


def test_wave_counts_and_doc() -> None:
    recs = [rec("a", 0, 500, wave="w1", phase="warmup"), rec("b", 10, 5, wave="w2"),
            rec("c", 20, 400, wave="w2", n=5000)]
    key = C.ShapeKey((1024,))
    starts = [start(1, "X")]
    classes = C.classify(recs, starts, key)
    counts = C.wave_counts(recs, classes)
    assert [(w.wave_id, w.phase, w.cold, w.restarted) for w in counts] == [
        ("w1", "warmup", 1, 0), ("w2", "measured", 1, 0)]
    doc = C.coldness_doc(recs, starts, key, classes)
    assert doc["counts"] == {"cold": 2, "restarted": 0, "warm": 1}
    assert [(r["rid"], r["ttft_s"]) for r in doc["requests"]] == [("a", 0.5), ("c", 0.4)]
    assert doc["shape_key"] == {"input_len_edges": [1024], "batch_tiers": []}
