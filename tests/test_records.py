"""Raw records: Arrow schema and lossless Parquet round trip."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pyarrow.parquet as pq
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from harness.records import (
    RECORD_SCHEMA,
    RECORD_SCHEMA_VERSION,
    RequestRecord,
    read_records,
    records_to_table,
    table_to_records,
    write_records,
)

ints64 = st.lists(st.integers(0, 2**62), max_size=30)


@st.composite
def records(draw: st.DrawFn) -> RequestRecord:
    n = draw(st.integers(0, 30))
    return RequestRecord(
        rid=draw(st.text(max_size=12)),
        send_ns=draw(st.integers(0, 2**62)),
        done_ns=draw(st.integers(0, 2**62)),
        event_ns=np.array(draw(st.lists(st.integers(0, 2**62), min_size=n, max_size=n)), dtype=np.int64),
        event_tokens=np.array(draw(st.lists(st.integers(0, 2**31 - 1), min_size=n, max_size=n)), dtype=np.int32),
        emit_ns=np.array(draw(ints64), dtype=np.int64),
        output_ids=np.array(draw(st.lists(st.integers(-(2**31), 2**31 - 1), max_size=40)), dtype=np.int32),
        prompt_tokens=draw(st.none() | st.integers(0, 10**6)),
        cached_tokens=draw(st.none() | st.integers(0, 10**6)),
        completion_tokens=draw(st.none() | st.integers(0, 10**6)),
        finish_reason=draw(st.none() | st.sampled_from(["stop", "length", "abort"])),
        http_status=draw(st.none() | st.integers(100, 599)),
        error=draw(st.none() | st.text(max_size=20)),
        round_index=draw(st.integers(-1, 5)),
        case_id=draw(st.text(max_size=5)),
        cache_salt=draw(st.none() | st.text(max_size=8)),
    )


@settings(max_examples=60, deadline=None)
@given(st.lists(records(), max_size=8))
def test_arrow_round_trip_is_lossless(recs: list[RequestRecord]) -> None:
    back = table_to_records(records_to_table(recs))
    assert len(back) == len(recs)
    assert all(a.same_as(b) for a, b in zip(recs, back, strict=True))


def test_parquet_round_trip_and_schema_version(tmp_path: Path) -> None:
    r = RequestRecord(rid="a", send_ns=1, done_ns=9, event_ns=np.array([2, 3]), event_tokens=np.array([1, 4]),
                      output_ids=np.array([5, 6, 7, 8]), prompt_tokens=11, finish_reason="stop")
    path = tmp_path / "r.parquet"
    write_records(path, [r, r.replace(rid="b", error="http 500")])
    back = read_records(path)
    assert back[0].same_as(r)
    assert back[1].error == "http 500" and not back[1].ok
    meta = pq.read_schema(path).metadata
    assert meta[b"dsv4h.record_schema_version"] == str(RECORD_SCHEMA_VERSION).encode()
    assert pq.read_schema(path).names == RECORD_SCHEMA.names


def test_records_are_frozen_and_arrays_read_only() -> None:
    r = RequestRecord(rid="a", send_ns=0, done_ns=1, event_ns=np.array([1]), event_tokens=np.array([1]))
    with pytest.raises(AttributeError):
        r.rid = "b"  # type: ignore[misc]
    with pytest.raises(ValueError, match="read-only"):
        r.event_ns[0] = 5


def test_mismatched_event_arrays_rejected() -> None:
    with pytest.raises(ValueError, match="event_ns has 2 entries"):
        RequestRecord(rid="a", send_ns=0, done_ns=1, event_ns=np.array([1, 2]), event_tokens=np.array([1]))


def test_empty_table() -> None:
    assert table_to_records(records_to_table([])) == []
    assert np.asarray(records_to_table([]).column("event_ns")).size == 0
