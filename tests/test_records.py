"""Raw records: Arrow schema and lossless Parquet round trip."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pyarrow.parquet as pq
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from harness.ids import RequestIdentity
from harness.records import (
    RECORD_SCHEMA,
    RECORD_SCHEMA_VERSION,
    RequestRecord,
    read_records,
    records_to_table,
    table_to_records,
    write_records,
)
from harness.store.archive import read_records_table

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
        spec_steps=draw(st.none() | st.integers(0, 2**31 - 1)),
        spec_proposed=draw(st.none() | st.integers(0, 2**31 - 1)),
        spec_accepted=draw(st.none() | st.integers(0, 2**31 - 1)),
        spec_source=draw(st.none() | st.sampled_from(["sglang-meta-info", "vllm-request-metrics"])),
        spec_histogram=np.array(draw(st.lists(st.integers(0, 2**31 - 1), max_size=9)), dtype=np.int32),
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


SPEC_COLUMNS = ["spec_steps", "spec_proposed", "spec_accepted", "spec_source", "spec_histogram"]


def test_schema_4_spec_fields_round_trip(tmp_path: Path) -> None:
    r = RequestRecord(rid="a", send_ns=1, done_ns=9, event_ns=np.array([2, 3]), event_tokens=np.array([1, 4]),
                      spec_steps=4, spec_proposed=12, spec_accepted=6, spec_source="sglang-meta-info",
                      spec_histogram=np.array([1, 1, 1, 1]))
    path = tmp_path / "r.parquet"
    write_records(path, [r, RequestRecord(rid="b", send_ns=1, done_ns=2)])
    a, b = read_records(path)
    assert a.same_as(r) and (a.spec_steps, a.spec_proposed, a.spec_accepted) == (4, 12, 6)
    assert a.spec_histogram.tolist() == [1, 1, 1, 1] and a.spec_histogram.dtype == np.int32
    assert (b.spec_steps, b.spec_proposed, b.spec_accepted, b.spec_source, b.spec_histogram.size) == (None,) * 4 + (0,)
    assert RECORD_SCHEMA_VERSION == 5 and set(SPEC_COLUMNS) <= set(RECORD_SCHEMA.names)


def test_schema_3_table_reads_back_without_spec_fields(tmp_path: Path) -> None:
    r = RequestRecord(rid="a", send_ns=1, done_ns=9, event_ns=np.array([2]), event_tokens=np.array([3]),
                      count_method="server-cumulative", final_text="abc")
    t = records_to_table([r])
    old = t.drop_columns(SPEC_COLUMNS).replace_schema_metadata({"dsv4h.record_schema_version": "3"})
    path = tmp_path / "v3.parquet"
    pq.write_table(old, path)
    [back] = read_records(path)
    assert back.same_as(r) and back.count_method == "server-cumulative" and back.final_text == "abc"
    assert (back.spec_steps, back.spec_proposed, back.spec_accepted, back.spec_source) == (None,) * 4
    assert back.spec_histogram.size == 0


def test_archive_parts_of_schema_3_and_4_concatenate(tmp_path: Path) -> None:
    new = RequestRecord(rid="n", send_ns=1, done_ns=2, spec_steps=3, spec_source="vllm-request-metrics",
                        spec_histogram=np.array([0, 2, 1]))
    old = records_to_table([RequestRecord(rid="o", send_ns=1, done_ns=2)]).drop_columns(SPEC_COLUMNS)
    (tmp_path / "records").mkdir()
    pq.write_table(old, tmp_path / "records" / "part-000000.parquet")
    write_records(tmp_path / "records" / "part-000001.parquet", [new])
    o, n = table_to_records(read_records_table(tmp_path))
    assert (o.rid, o.spec_steps, o.spec_histogram.size) == ("o", None, 0)
    assert (n.rid, n.spec_steps, n.spec_source) == ("n", 3, "vllm-request-metrics")
    assert n.spec_histogram.tolist() == [0, 2, 1]


def test_a_record_carries_its_requests_identity_and_older_tables_read_back_unknown(tmp_path: Path) -> None:
    ident = RequestIdentity(run_id="R", cell_id="c1", round_index=0, wave_id="c1.r0.w000", wave_index=0,
                            case_id="k7", input_hash="ab", request_index=3, corpus_sha256="f" * 64)
    r = RequestRecord(rid="R.c1.r0.w000.003", send_ns=1, done_ns=2, **ident.fields())
    path = tmp_path / "r.parquet"
    write_records(path, [r])
    [back] = read_records(path)
    assert back.same_as(r) and back.identity == ident and back.identity.request_key == "c1.r0.w000#3"
    assert (back.request_index, back.corpus_sha256, back.case_id) == (3, "f" * 64, "k7")
    old = records_to_table([r]).drop_columns(["request_index", "corpus_sha256"]).replace_schema_metadata(
        {"dsv4h.record_schema_version": "4"})
    pq.write_table(old, path)
    [v4] = read_records(path)
    assert (v4.request_index, v4.corpus_sha256, v4.case_id, v4.wave_id) == (-1, "", "k7", "c1.r0.w000")
