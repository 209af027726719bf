"""Raw per-request records: one frozen record per streamed request, with an Arrow schema.

A record is the unit of evidence: every figure dsv4h prints or stores is computed from these.
All ``*_ns`` values come from one monotonic clock (``time.perf_counter_ns()``) on the client;
``emit_ns`` values come from the simulator's own monotonic clock (same host, same clock source)
and exist only when the server is the built-in simulator.

Record schema history (``RECORD_SCHEMA_VERSION``):
  1 - first version (2026-11-29).
  2 - ``final_text``: the text of the last streamed event, for ID/text integrity checks
      (2026-11-29). Version-1 tables read back with ``final_text = None``.
  3 - ``count_method``: where the token counts came from (``server-cumulative``, ``usage-per-chunk``,
      ``token-ids``, ``chunks-reconciled``, ``retokenized``, ``chunks``; see harness.load.openai)
      (2026-11-30). Older tables read back with ``count_method = "unknown"``.
  4 - speculative decoding as reported by the server, per request (issue 26; harness.load.spec):
      ``spec_steps`` (verify steps), ``spec_proposed`` (draft tokens proposed), ``spec_accepted``
      (draft tokens accepted, bonus token excluded), ``spec_source`` (``sglang-meta-info`` or
      ``vllm-request-metrics``) and ``spec_histogram`` (index i: verify steps that accepted i drafts)
      (2026-12-02). All None / empty when the server reported none; older tables read back so.
  5 - the request's full identity (``harness.ids.RequestIdentity``): ``request_index`` (its place in
      the wave, round plan or trace that sent it: the ``i`` of its rid) and ``corpus_sha256`` (the
      manifest hash of the frozen corpus its ``case_id`` comes from), so a record names its prompt
      and its slot without parsing its rid (2026-12-04). Older tables read back with
      ``request_index = -1`` and ``corpus_sha256 = ""`` (unknown).
"""

from __future__ import annotations

import dataclasses
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
import numpy.typing as npt
import pyarrow as pa
import pyarrow.parquet as pq

from harness.ids import RequestIdentity

__all__ = ["RECORD_SCHEMA", "RequestRecord", "records_to_table", "table_to_records"]

RECORD_SCHEMA_VERSION = 5

I64 = npt.NDArray[np.int64]
I32 = npt.NDArray[np.int32]

_EMPTY_I64: I64 = np.zeros(0, dtype=np.int64)
_EMPTY_I32: I32 = np.zeros(0, dtype=np.int32)


def _i64(values: Any) -> I64:
    arr = np.asarray(values, dtype=np.int64)
    arr.setflags(write=False)
    return arr


def _i32(values: Any) -> I32:
    arr = np.asarray(values, dtype=np.int32)
    arr.setflags(write=False)
    return arr


@dataclass(frozen=True, eq=False, slots=True)
class RequestRecord:
    """One streamed request as the client saw it.

    Times are client monotonic nanoseconds. ``event_ns[k]`` is the arrival time of the k-th
    streamed data event and ``event_tokens[k]`` the server's cumulative ``completion_tokens``
    after it (one event may carry several tokens). ``error`` is ``None`` for a successful
    request; otherwise a short reason ("http 500", "disconnected after 12 events", ...), and the
    tokens it had received are kept but never counted by rate metrics. ``spec_*`` are the server's
    own speculative counts for the request (module docstring, schema 4), None / empty when it
    reported none.
    """

    rid: str
    send_ns: int
    done_ns: int
    event_ns: I64 = field(default_factory=lambda: _EMPTY_I64)
    event_tokens: I32 = field(default_factory=lambda: _EMPTY_I32)
    emit_ns: I64 = field(default_factory=lambda: _EMPTY_I64)
    output_ids: I32 = field(default_factory=lambda: _EMPTY_I32)
    prompt_tokens: int | None = None
    cached_tokens: int | None = None
    completion_tokens: int | None = None
    finish_reason: str | None = None
    http_status: int | None = None
    error: str | None = None
    output_mode: str = "unknown"
    final_text: str | None = None
    count_method: str = "unknown"
    spec_steps: int | None = None
    spec_proposed: int | None = None
    spec_accepted: int | None = None
    spec_source: str | None = None
    spec_histogram: I32 = field(default_factory=lambda: _EMPTY_I32)
    # identity of the request inside a campaign (filled by the wave driver)
    run_id: str = ""
    cell_id: str = ""
    round_index: int = -1
    wave_id: str = ""
    wave_index: int = -1
    phase: str = "measured"
    workload: str = "decode"
    case_id: str = ""
    input_hash: str = ""
    request_index: int = -1
    corpus_sha256: str = ""
    input_len: int = 0
    concurrency: int = 0
    cache_salt: str | None = None

    def __post_init__(self) -> None:
        object.__setattr__(self, "event_ns", _i64(self.event_ns))
        object.__setattr__(self, "event_tokens", _i32(self.event_tokens))
        object.__setattr__(self, "emit_ns", _i64(self.emit_ns))
        object.__setattr__(self, "output_ids", _i32(self.output_ids))
        object.__setattr__(self, "spec_histogram", _i32(self.spec_histogram))
        if self.event_ns.shape != self.event_tokens.shape:
            raise ValueError(
                f"record {self.rid}: event_ns has {self.event_ns.size} entries but event_tokens "
                f"has {self.event_tokens.size}"
            )

    @property
    def ok(self) -> bool:
        """True when the request finished without error."""
        return self.error is None

    @property
    def n_tokens(self) -> int:
        """Final cumulative output-token count seen on the stream (0 if none)."""
        return int(self.event_tokens[-1]) if self.event_tokens.size else 0

    @property
    def first_token_ns(self) -> int | None:
        """``f_i``: arrival of the first event carrying >= 1 output token."""
        # cumulative counts never decrease, so the first event with >= 1 token is a binary search
        idx = int(np.searchsorted(self.event_tokens, 1, side="left"))
        return int(self.event_ns[idx]) if idx < self.event_tokens.size else None

    @property
    def last_token_ns(self) -> int | None:
        """``e_i``: arrival of the last event that increased the output count."""
        if not self.event_tokens.size or self.event_tokens[-1] < 1:
            return None
        idx = int(np.searchsorted(self.event_tokens, self.event_tokens[-1], side="left"))
        return int(self.event_ns[idx])

    @property
    def identity(self) -> RequestIdentity:
        """Who the request was inside its run (the identity columns as one value)."""
        return RequestIdentity.of(self)

    def replace(self, **changes: Any) -> RequestRecord:
        """A copy with some fields changed."""
        return dataclasses.replace(self, **changes)

    def same_as(self, other: RequestRecord) -> bool:
        """Field-by-field equality, arrays compared by value."""
        for f in dataclasses.fields(self):
            a, b = getattr(self, f.name), getattr(other, f.name)
            if isinstance(a, np.ndarray):
                if not np.array_equal(a, b):
                    return False
            elif a != b:
                return False
        return True


_SCALARS: list[tuple[str, pa.DataType]] = [
    ("rid", pa.string()),
    ("run_id", pa.string()),
    ("cell_id", pa.string()),
    ("round_index", pa.int32()),
    ("wave_id", pa.string()),
    ("wave_index", pa.int32()),
    ("phase", pa.string()),
    ("workload", pa.string()),
    ("case_id", pa.string()),
    ("input_hash", pa.string()),
    ("request_index", pa.int32()),
    ("corpus_sha256", pa.string()),
    ("input_len", pa.int32()),
    ("concurrency", pa.int32()),
    ("cache_salt", pa.string()),
    ("send_ns", pa.int64()),
    ("done_ns", pa.int64()),
    ("prompt_tokens", pa.int32()),
    ("cached_tokens", pa.int32()),
    ("completion_tokens", pa.int32()),
    ("finish_reason", pa.string()),
    ("http_status", pa.int32()),
    ("error", pa.string()),
    ("output_mode", pa.string()),
    ("final_text", pa.string()),
    ("count_method", pa.string()),
    ("spec_steps", pa.int32()),
    ("spec_proposed", pa.int32()),
    ("spec_accepted", pa.int32()),
    ("spec_source", pa.string()),
]
_LISTS: list[tuple[str, pa.DataType]] = [
    ("event_ns", pa.int64()),
    ("event_tokens", pa.int32()),
    ("emit_ns", pa.int64()),
    ("output_ids", pa.int32()),
    ("spec_histogram", pa.int32()),
]

RECORD_SCHEMA = pa.schema(
    [pa.field(n, t) for n, t in _SCALARS]
    + [pa.field(n, pa.list_(t)) for n, t in _LISTS],
    metadata={"dsv4h.record_schema_version": str(RECORD_SCHEMA_VERSION)},
)


def _list_array(arrays: Sequence[npt.NDArray[Any]], dtype: pa.DataType) -> pa.Array:
    lengths = np.fromiter((a.size for a in arrays), dtype=np.int64, count=len(arrays))
    offsets = np.zeros(len(arrays) + 1, dtype=np.int32 if lengths.sum() < 2**31 else np.int64)
    np.cumsum(lengths, out=offsets[1:])
    np_dtype = np.int64 if dtype == pa.int64() else np.int32
    flat: npt.NDArray[Any] = (np.concatenate(arrays).astype(np_dtype, copy=False) if arrays
                              else np.zeros(0, np_dtype))
    if offsets.dtype == np.int64:
        return pa.LargeListArray.from_arrays(pa.array(offsets), pa.array(flat, type=dtype)).cast(
            pa.list_(dtype)
        )
    return pa.ListArray.from_arrays(pa.array(offsets), pa.array(flat, type=dtype))


def records_to_table(records: Sequence[RequestRecord]) -> pa.Table:
    """Columnar Arrow table of records (schema ``RECORD_SCHEMA``), built without per-event Python work."""
    cols: dict[str, pa.Array] = {}
    for name, typ in _SCALARS:
        cols[name] = pa.array([getattr(r, name) for r in records], type=typ)
    for name, typ in _LISTS:
        cols[name] = _list_array([getattr(r, name) for r in records], typ)
    return pa.Table.from_pydict(cols, schema=RECORD_SCHEMA)


def _split(col: pa.ChunkedArray, np_dtype: type) -> list[npt.NDArray[Any]]:
    arr = col.combine_chunks() if col.num_chunks != 1 else col.chunk(0)
    if isinstance(arr, pa.ChunkedArray):  # pragma: no cover - pyarrow version differences
        arr = arr.combine_chunks()
    offsets = np.asarray(arr.offsets)
    flat: npt.NDArray[Any] = np.asarray(arr.values.to_numpy(zero_copy_only=False), dtype=np_dtype)
    base = offsets[0]
    return [flat[offsets[i] - base : offsets[i + 1] - base] for i in range(len(offsets) - 1)]


def table_to_records(table: pa.Table) -> list[RequestRecord]:
    """Inverse of ``records_to_table``; missing optional columns take their defaults."""
    n = table.num_rows
    names = set(table.column_names)
    scalars = {name: table.column(name).to_pylist() for name, _ in _SCALARS if name in names}
    lists = {
        name: _split(table.column(name), np.int64 if typ == pa.int64() else np.int32)
        for name, typ in _LISTS
        if name in names
    }
    out: list[RequestRecord] = []
    for i in range(n):
        kwargs: dict[str, Any] = {k: v[i] for k, v in scalars.items()}
        kwargs.update({k: v[i] for k, v in lists.items()})
        out.append(RequestRecord(**kwargs))
    return out


def write_records(path: Path, records: Sequence[RequestRecord]) -> None:
    """Write records to a Parquet file (zstd)."""
    pq.write_table(records_to_table(records), path, compression="zstd")


def read_records(path: Path) -> list[RequestRecord]:
    """Read records written by ``write_records`` (or any table with ``RECORD_SCHEMA`` columns)."""
    return table_to_records(pq.read_table(path))
