"""The live tally of a wave in flight: literal streams, the recorded window's definition, merging."""

from __future__ import annotations

import math
from types import SimpleNamespace

import numpy as np

from harness.load.live import FIELDS, LiveTally, LiveWave, merge
from harness.measure.metrics import resident_window
from harness.records import RequestRecord

S = 1_000_000_000


def dec(ns: list[int], counts: list[int]) -> SimpleNamespace:
    """A decoder's live lists (the tally reads nothing else of it)."""
    return SimpleNamespace(event_ns=ns, event_tokens=counts, n_events=len(ns))


def test_window_closed_until_every_request_has_its_first_token() -> None:
    t = LiveWave([dec([100, 200, 300], [1, 2, 3]), dec([], [])]).update([False, False])
    assert (t.n, t.tokens, t.first, t.done, t.in_flight) == (2, 3, 1, 0, 2)
    assert t.resident_s == 0.0 and math.isnan(t.rate)


def test_window_runs_from_the_last_first_token_to_the_latest_event_while_none_ended() -> None:
    # request a: first token at 1.0 s, then one every 0.5 s; b: first (2 tokens) at 1.5 s, then 2 per second
    a = dec([S, S + S // 2, 2 * S, 2 * S + S // 2, 3 * S], [1, 2, 3, 4, 5])
    b = dec([S + S // 2, 2 * S + S // 2], [2, 4])
    wave = LiveWave([a, b])
    t = wave.update([False, False])
    # t_s = max f = 1.5 s, where a had 2 and b 2 tokens; the latest event is a's at 3.0 s: 5 + 4 - 4
    assert (t.start_ns, t.end_ns, t.window_tokens) == (S + S // 2, 3 * S, 5)
    assert t.resident_s == 1.5 and abs(t.rate - 5 / 1.5) < 1e-12 and (t.tokens, t.first) == (9, 2)
    b.event_ns.append(3 * S + S // 2)                            # the streams go on: the window grows
    b.event_tokens.append(6)
    t = wave.update([False, False])
    assert (t.end_ns, t.window_tokens, t.resident_s) == (3 * S + S // 2, 7, 2.0)


def test_an_ended_request_stops_the_window_at_its_last_increase() -> None:
    a, b = dec([10, 20, 30], [1, 2, 3]), dec([15, 20, 25], [1, 2, 2])   # b ended; its last increase at 20
    wave = LiveWave([a, b])
    t = wave.update([False, True])
    assert (t.start_ns, t.end_ns, t.window_tokens, t.done) == (15, 20, 2, 1)  # a +1, b +1 in (15, 20]
    a.event_ns.append(40)
    a.event_tokens.append(4)
    assert wave.update([False, True]) == LiveTally(2, 6, 2, 1, 15, 20, 2)   # a runs on, the window does not


def test_empty_window_and_events_without_counts() -> None:
    assert LiveWave([dec([10], [1]), dec([10], [1])]).update([False, False]).window_tokens == 0  # end == t_s
    t = LiveWave([SimpleNamespace(n_events=7), dec([5, 6], [1, 2])]).update([False, False])  # no live counts
    assert (t.tokens, t.first, t.resident_s) == (9, 2, 0.0)


def test_finished_streams_agree_with_the_recorded_window() -> None:
    rng = np.random.default_rng(3)
    decs, recs = [], []
    for i in range(4):
        ns = np.cumsum(rng.integers(5_000_000, 20_000_000, size=30)) + i * 3_000_000
        counts = np.cumsum(rng.integers(1, 3, size=30))
        decs.append(dec(ns.tolist(), counts.tolist()))
        recs.append(RequestRecord(rid=f"r{i}", send_ns=0, done_ns=int(ns[-1]) + 1, event_ns=ns.astype(np.int64),
                                  event_tokens=counts.astype(np.int32)))
    live, rec = LiveWave(decs).update([True] * 4), resident_window(recs)
    assert rec.contributes
    assert (live.window_tokens, live.start_ns, live.end_ns) == (rec.tokens, rec.start_ns, rec.end_ns)


def test_merge_sums_counts_and_local_rates_over_the_common_window() -> None:
    a = LiveTally(n=4, tokens=400, first=4, done=0, start_ns=1_000, end_ns=3_000, window_tokens=200)
    b = LiveTally(n=4, tokens=300, first=4, done=1, start_ns=2_000, end_ns=4_000, window_tokens=100)
    m = merge([a, b])
    assert (m.n, m.tokens, m.first, m.done) == (8, 700, 8, 1)
    # common window 2,000..3,000 ns; rates 0.1 + 0.05 tokens/ns -> 150 tokens in it
    assert (m.start_ns, m.end_ns, m.window_tokens) == (2_000, 3_000, 150)
    closed = merge([a, LiveTally(n=4, tokens=3, first=3)])
    assert (closed.tokens, closed.first, closed.resident_s) == (403, 7, 0.0)
    assert len(a.values()) == len(FIELDS) and LiveTally(*a.values()) == a
