"""``request_timings`` (vectorised, used by the ledgers) equals the record-level definitions."""

from __future__ import annotations

import numpy as np
from hypothesis import given, settings
from hypothesis import strategies as st

from harness.measure.metrics import request_timings
from harness.records import RequestRecord, records_to_table


@st.composite
def records(draw: st.DrawFn) -> RequestRecord:
    n = draw(st.integers(0, 12))
    steps = draw(st.lists(st.integers(0, 3), min_size=n, max_size=n))
    gaps = draw(st.lists(st.integers(0, 50), min_size=n, max_size=n))
    send = draw(st.integers(0, 1000))
    return RequestRecord(rid=draw(st.text(max_size=4)), send_ns=send,
                         done_ns=send + int(np.sum(gaps)) + draw(st.integers(0, 9)),
                         event_ns=send + np.cumsum(np.array(gaps, dtype=np.int64)),
                         event_tokens=np.cumsum(np.array(steps, dtype=np.int32)).astype(np.int32),
                         error=draw(st.none() | st.just("boom")))


@settings(max_examples=200, deadline=None)
@given(st.lists(records(), max_size=8))
def test_vectorised_timings_equal_record_level(recs: list[RequestRecord]) -> None:
    t = request_timings(records_to_table(recs))
    for i, r in enumerate(recs):
        f, e = r.first_token_ns, r.last_token_ns
        assert t.first_ns[i] == (-1 if f is None else f)
        assert t.last_ns[i] == (-1 if e is None else e)
        assert t.n_events[i] == r.event_ns.size
        k = int(np.searchsorted(r.event_tokens, 1, side="left"))
        assert t.first_tokens[i] == (int(r.event_tokens[k]) if f is not None else 0)
        assert t.n_tokens[i] == (int(r.event_tokens[-1]) if r.event_tokens.size else 0)
        assert t.e2e_s[i] == (r.done_ns - r.send_ns) / 1e9
        if f is None:
            assert np.isnan(t.ttft_s[i])
        else:
            assert t.ttft_s[i] == (f - r.send_ns) / 1e9


def test_known_answer_multi_token_events() -> None:
    # counts 0, 2, 2, 5: f = the 2-token event at 20 ns, e = the event that reached 5 at 40 ns
    r = RequestRecord(rid="a", send_ns=5, done_ns=55, event_ns=np.array([10, 20, 30, 40], dtype=np.int64),
                      event_tokens=np.array([0, 2, 2, 5], dtype=np.int32))
    t = request_timings(records_to_table([r, RequestRecord(rid="b", send_ns=0, done_ns=3)]))
    assert list(t.first_ns) == [20, -1] and list(t.last_ns) == [40, -1]
    assert list(t.n_tokens) == [5, 0] and list(t.n_events) == [4, 0] and list(t.first_tokens) == [2, 0]
    assert t.ttft_s[0] == 15e-9 and np.isnan(t.ttft_s[1])


def test_public_alias_keeps_the_documented_names() -> None:
    import harness.metrics as public
    from harness.measure import metrics

    for name in ("resident_decode_rate", "http_output_rate", "prefill_rate", "request_timings"):
        assert getattr(public, name) is getattr(metrics, name)
