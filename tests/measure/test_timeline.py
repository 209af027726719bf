"""Known answers of harness.measure.timeline: rows relative to the wave's first send, windows."""

from __future__ import annotations

import numpy as np
import pytest

from harness.measure.timeline import first_measured_waves, group_waves, wave_timeline
from harness.records import RequestRecord

S = 1_000_000_000  # one second in ns


def _rec(rid: str, send: float, events: list[tuple[float, int]], done: float, *, error: str | None = None,
         wave: str = "w1", cell: str = "decode-c02", phase: str = "measured") -> RequestRecord:
    return RequestRecord(rid=rid, send_ns=int(send * S), done_ns=int(done * S),
                         event_ns=np.array([int(t * S) for t, _ in events], dtype=np.int64),
                         event_tokens=np.array([n for _, n in events], dtype=np.int32),
                         error=error, wave_id=wave, cell_id=cell, phase=phase, case_id=f"case-{rid}",
                         concurrency=3)


def _wave() -> list[RequestRecord]:
    return [
        _rec("r1", 1.2, [(1.8, 2), (2.5, 4), (3.5, 6)], 3.6),
        _rec("r0", 1.0, [(1.5, 1), (2.0, 3), (3.0, 5), (3.05, 5)], 3.1),
        _rec("r2", 1.1, [(1.6, 1)], 2.0, error="http 500"),
    ]


def test_rows_are_sorted_by_send_and_relative_to_the_first_send() -> None:
    t = wave_timeline(_wave())
    assert [r.rid for r in t.rows] == ["r0", "r2", "r1"]
    assert t.origin_ns == 1 * S
    r0, r2, r1 = t.rows
    # r0: last token is the event that raised the count to 5 (3.0 s), not the later repeat at 3.05 s
    assert (r0.send_s, r0.first_token_s, r0.last_token_s, r0.done_s) == pytest.approx((0.0, 0.5, 2.0, 2.1))
    assert (r1.send_s, r1.first_token_s, r1.last_token_s, r1.done_s) == pytest.approx((0.2, 0.8, 2.5, 2.6))
    assert (r2.send_s, r2.first_token_s, r2.last_token_s, r2.done_s) == pytest.approx((0.1, 0.6, 0.6, 1.0))
    assert (r0.ok, r0.error, r0.n_tokens, r0.case_id) == (True, None, 5, "case-r0")
    assert (r2.ok, r2.error, r2.n_tokens) == (False, "http 500", 1)
    assert t.n_failed == 1
    assert (t.wave_id, t.cell_id, t.phase, t.concurrency) == ("w1", "decode-c02", "measured", 3)


def test_windows_come_from_the_successful_requests() -> None:
    t = wave_timeline(_wave())
    # resident: t_s = max f over ok (r1 at 1.8 s), t_e = min e over ok (r0 at 3.0 s)
    assert t.resident == pytest.approx((0.8, 2.0))
    # HTTP: first ok send (r0, 1.0 s) to last ok end (r1, 3.6 s); the failed r2 is outside both
    assert t.http == pytest.approx((0.0, 2.6))


def test_no_resident_window_when_it_is_empty_and_none_at_all_when_every_request_failed() -> None:
    one_event = wave_timeline([_rec("a", 5.0, [(5.5, 4)], 5.75), _rec("b", 5.25, [(5.25, 0), (6.0, 4)], 6.5)])
    # t_s = 6.0 s (b) is after t_e = 5.5 s (a): no resident window, HTTP 0 .. 1.5 s
    assert one_event.resident is None
    assert one_event.http == pytest.approx((0.0, 1.5))
    assert one_event.rows[1].first_token_s == pytest.approx(1.0)
    failed = wave_timeline([_rec("x", 2.0, [], 2.5, error="disconnected after 0 events")])
    assert failed.resident is None and failed.http is None
    assert failed.rows[0].first_token_s is None and failed.rows[0].last_token_s is None
    assert failed.rows[0].done_s == pytest.approx(0.5)


def test_to_json_holds_the_rows_and_windows() -> None:
    j = wave_timeline(_wave()).to_json()
    assert [r["rid"] for r in j["rows"]] == ["r0", "r2", "r1"]
    assert j["rows"][1] == {"rid": "r2", "case_id": "case-r2", "send_s": pytest.approx(0.1),
                            "first_token_s": pytest.approx(0.6), "last_token_s": pytest.approx(0.6),
                            "done_s": pytest.approx(1.0), "ok": False, "error": "http 500", "n_tokens": 1}
    assert j["resident"] == pytest.approx([0.8, 2.0]) and j["http"] == pytest.approx([0.0, 2.6])


def test_empty_wave_is_refused() -> None:
    with pytest.raises(ValueError, match="at least one record"):
        wave_timeline([])


def test_first_measured_wave_of_each_cell_in_write_order() -> None:
    recs = [
        _rec("a", 0, [], 1, wave="A.warm", cell="A", phase="warmup"),
        _rec("b", 1, [], 2, wave="A.r0.w0", cell="A"),
        _rec("c", 1, [], 2, wave="A.r0.w0", cell="A"),
        _rec("d", 2, [], 3, wave="A.r0.w1", cell="A"),
        _rec("e", 3, [], 4, wave="C.warm", cell="C", phase="warmup"),
        _rec("f", 4, [], 5, wave="B.r0.w0", cell="B"),
    ]
    assert first_measured_waves(recs) == ["A.r0.w0", "B.r0.w0"]
    groups = group_waves(recs)
    assert list(groups) == ["A.warm", "A.r0.w0", "A.r0.w1", "C.warm", "B.r0.w0"]
    assert [r.rid for r in groups["A.r0.w0"]] == ["b", "c"]
