"""Where ledger files live and what every file of a table holds (pure, except :func:`table_files`).

Layout (ledger schema 3): ``<workspace>/ledgers/<table>/<key>.parquet``, one directory per table so
a glob never mixes tables. Archive tables (:data:`ARCHIVE_TABLES` and ``findings``) hold one file
per archive, ``<archive id>.parquet``; governance tables (:data:`GOVERNANCE_TABLES`) one file per
append, ``<UTC yyyymmddThhmmssffffff>-<8 hex>.parquet``, sorting in append order. Every file of a
table has the table's canonical schema (:data:`SCHEMAS`): the same columns, in the same order, with
the same types, missing values null; integers int64, floats float64, instants int64 ns named
``*_ns``, wall-clock anchors ``timestamp[ns, UTC]``, rates named with their unit (``_tok_s``,
``_req_s``). Archives keep their own column names; :data:`RENAMES` is the one mapping from them to
the ledger's. A column an archive has and the schema does not goes, with its value, into the row's
``extra`` JSON object (nothing is dropped).
"""

from __future__ import annotations

import json
import secrets
from collections.abc import Iterable, Mapping
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.compute as pc

from harness.formats import json_safe, parse_wall

LEDGER_SCHEMA_VERSION = 3
ARCHIVE_TABLES = ("runs", "cells", "rounds", "waves", "requests", "comparisons")
PER_ARCHIVE = (*ARCHIVE_TABLES, "findings")
GOVERNANCE_TABLES = ("records", "closures", "gates", "freezes", "historical")
TABLES = (*PER_ARCHIVE, *GOVERNANCE_TABLES)

_S, _F, _I, _B = pa.string(), pa.float64(), pa.int64(), pa.bool_()
WALL = pa.timestamp("ns", tz="UTC")
_LS, _LF = pa.list_(_S), pa.list_(_F)


def _lat() -> list[tuple[str, pa.DataType]]:
    out: list[tuple[str, pa.DataType]] = []
    for metric in ("ttft", "itl", "tpot", "e2e", "itl_bench", "tpot_bench"):
        out += [(f"{metric}_{s}_s", _F) for s in ("p50", "p90", "p99", "mean", "max")] + [(f"{metric}_n", _I)]
    return out


COMMON: list[tuple[str, pa.DataType]] = [
    ("archive_id", _S), ("ledger_schema_version", _I), ("campaign", _S), ("kind", _S), ("claim_class", _S),
    ("protocol_class", _S), ("backend", _S), ("data_origin", _S), ("archive_status", _S), ("created_wall", WALL),
    ("identity_hash", _S), ("valid", _B), ("superseded_by", _S),
]
_SWEEP_THROUGHPUT = [(f"{q}_{s}_{u}", _F) for q, u in (("request_throughput", "req_s"), ("output_throughput", "tok_s"),
                                                       ("input_throughput", "tok_s"), ("goodput", "req_s"))
                     for s in ("median", "min", "max")]
_FIELDS: dict[str, list[tuple[str, pa.DataType]]] = {
    "runs": [*COMMON, ("plan_id", _S), ("service", _S), ("n_cells", _I), ("archive_path", _S), ("resumed_from", _S)],
    "cells": [
        ("cell_id", _S), ("workload", _S), ("concurrency", _I), ("status", _S), ("rounds_required", _I),
        ("round_tok_s", _LF), ("round_status", _LS), ("median_tok_s", _F), ("observed_min_tok_s", _F),
        ("observed_max_tok_s", _F), ("http_output_tok_s", _F), ("round_http_output_tok_s", _LF),
        ("cache_violations", _I), ("count_method", _S),
        ("arrival_rate_req_s", _F), ("rounds_ok", _I), ("rounds_planned", _I), *_SWEEP_THROUGHPUT,
        ("schedule_kept", _B), ("client_lag_p99_s", _F), *_lat(), ("extra", _S), *COMMON,
    ],
    "rounds": [
        ("round_id", _S), ("cell_id", _S), ("round_index", _I), ("workload", _S), ("concurrency", _I), ("status", _S),
        ("n_waves", _I), ("n_requests", _I), ("n_failed", _I), ("rate_tok_s", _F), ("tokens", _I), ("seconds", _F),
        ("http_output_tok_s", _F), ("http_tokens", _I), ("http_seconds", _F), ("cache_violations", _I),
        ("count_method", _S),
        ("arrival_rate_req_s", _F), ("n_ok", _I), ("duration_s", _F), ("request_throughput_req_s", _F),
        ("output_throughput_tok_s", _F), ("input_throughput_tok_s", _F), ("goodput_req_s", _F), ("slo_met", _I),
        ("client_lag_p50_s", _F), ("client_lag_p99_s", _F), ("client_lag_max_s", _F), ("client_late", _I),
        ("client_schedule_kept", _B), ("send_lag_p99_s", _F), ("capped_requests", _I),
        *_lat(), ("extra", _S), *COMMON,
    ],
    "waves": [
        ("wave_id", _S), ("cell_id", _S), ("round_index", _I), ("wave_index", _I), ("phase", _S), ("workload", _S),
        ("concurrency", _I), ("n_requests", _I), ("n_failed", _I), ("resident_tokens", _I),
        ("resident_seconds", _F), ("resident_output_tok_s", _F), ("http_tokens", _I), ("http_seconds", _F),
        ("http_output_tok_s", _F), ("prefill_tokens", _I), ("prefill_seconds", _F), ("prefill_input_tok_s", _F),
        ("cache_violations", _I), ("cached_unknown", _I), ("case_ids", _LS), ("lag_p50_s", _F), ("lag_p99_s", _F),
        ("errors", _LS), ("count_method", _S), *_lat(), ("extra", _S), *COMMON,
    ],
    "requests": [
        ("rid", _S), ("cell_id", _S), ("wave_id", _S), ("round_index", _I), ("wave_index", _I), ("phase", _S),
        ("workload", _S), ("case_id", _S), ("input_hash", _S), ("input_len", _I), ("concurrency", _I),
        ("prompt_tokens", _I), ("cached_tokens", _I), ("completion_tokens", _I), ("finish_reason", _S),
        ("http_status", _I), ("error", _S), ("count_method", _S), ("send_ns", _I), ("first_token_ns", _I),
        ("last_token_ns", _I), ("done_ns", _I), ("anchor_wall", WALL), ("anchor_perf_ns", _I),
        ("first_event_tokens", _I), ("n_tokens", _I), ("n_events", _I), ("ttft_s", _F), ("e2e_s", _F), ("ok", _B),
        ("output_hash16", _S), ("extra", _S), *COMMON,
    ],
    "comparisons": [
        ("screen", _S), ("boundary", _S), ("concurrency", _I), ("waves_per_leg", _I), ("a1_median_tok_s", _F),
        ("b1_median_tok_s", _F), ("b2_median_tok_s", _F), ("a2_median_tok_s", _F), ("control_mean_tok_s", _F),
        ("candidate_mean_tok_s", _F), ("ratio_pct", _F), ("drift_pct", _F), ("spread_pct", _F),
        ("http_ratio_pct", _F), ("separated", _B), ("verdict", _S), ("reason", _S), ("outputs_compared", _I),
        ("outputs_identical_all_legs", _I), ("outputs_differing", _I), ("outputs_identical_across_arms", _I),
        ("b2_shares_b1_service", _B), ("declared_change", _S), ("undeclared_differences", _I),
        ("allow_identity_change", _B), ("status", _S), ("extra", _S), *COMMON,
    ],
    "findings": [("archive_id", _S), ("rule", _S), ("severity", _S), ("message", _S), ("remedy", _S),
                 ("rows", _S), ("ledger_schema_version", _I)],
    "records": [
        ("record_id", _S), ("name", _S), ("scope", _S), ("description", _S), ("metric", _S), ("unit", _S),
        ("concurrency", _I), ("claim_class", _S), ("protocol_class", _S), ("data_origin", _S), ("candidate", _S),
        ("value", _F), ("suite_ids", _LS), ("suite_values", _LF), ("control_ids", _LS), ("control_values", _LF),
        ("declared_change", _LS), ("gates", _LS), ("previous_record_id", _S), ("previous_value", _F),
        ("over_previous_pct", _F), ("over_control_pct", _F), ("proposal_file", _S), ("proposal_sha256", _S),
        ("recorded_at", WALL), ("content", _S), ("ledger_schema_version", _I),
    ],
    "closures": [("direction", _S), ("action", _S), ("evidence_archive_id", _S), ("reason", _S), ("at", WALL),
                 ("closing_archive_id", _S), ("source", _S), ("ledger_schema_version", _I)],
    "gates": [
        ("gate", _S), ("description", _S), ("quantity", _S), ("op", _S), ("threshold", _F), ("unit", _S),
        ("selectors", _S), ("archive_id", _S), ("candidate", _S), ("value", _F), ("n", _I), ("passed", _B),
        ("detail", _S), ("checked_at", WALL), ("gate_file", _S), ("gate_sha256", _S), ("claim_class", _S),
        ("protocol_class", _S), ("data_origin", _S), ("ledger_schema_version", _I),
    ],
    "freezes": [
        ("action", _S), ("path", _S), ("sha256", _S), ("bytes", _I), ("at", WALL), ("outcome", _S), ("passed", _B),
        ("reason", _S), ("freeze_at", WALL), ("results_archive_id", _S), ("results_created_wall", WALL),
        ("ledger_schema_version", _I),
    ],
    "historical": [
        ("entry_id", _S), ("source", _S), ("published_date", _S), ("measured_date", _S), ("protocol_label", _S),
        ("claim_class", _S), ("protocol_class", _S), ("metric", _S), ("concurrency", _I), ("value", _F),
        ("range_max", _F), ("unit", _S), ("tp", _I), ("label", _S), ("not_claims", _LS), ("quote", _S),
        ("section", _S), ("locator", _S), ("experiment", _S), ("leg", _S), ("historical", _B), ("data_origin", _S),
        ("content_sha256", _S), ("import_file", _S), ("import_sha256", _S), ("imported_at", WALL),
        ("ledger_schema_version", _I),
    ],
}
SCHEMAS: dict[str, pa.Schema] = {name: pa.schema(fields) for name, fields in _FIELDS.items()}

# Archive column -> ledger column, per (table, run kind); "*" applies to every kind, a kind's own
# entry overrides it (a rate sweep's ``rate`` is its arrival rate, a formal round's its tok/s).
RENAMES: dict[tuple[str, str], dict[str, str]] = {
    ("cells", "*"): {"median": "median_tok_s", "observed_min": "observed_min_tok_s",
                     "observed_max": "observed_max_tok_s", "http_rate": "http_output_tok_s",
                     "round_rates": "round_tok_s", "round_http_rates": "round_http_output_tok_s"},
    ("cells", "rate-sweep"): {"rate": "arrival_rate_req_s"} | {
        c.rsplit("_", 2)[0]: c for c, _ in _SWEEP_THROUGHPUT},
    ("rounds", "*"): {"rate": "rate_tok_s", "http_rate": "http_output_tok_s"},
    ("rounds", "rate-sweep"): {"rate": "arrival_rate_req_s", "request_throughput": "request_throughput_req_s",
                               "output_throughput": "output_throughput_tok_s",
                               "input_throughput": "input_throughput_tok_s", "goodput": "goodput_req_s"},
    ("waves", "*"): {"resident_rate": "resident_output_tok_s", "http_rate": "http_output_tok_s",
                     "prefill_rate": "prefill_input_tok_s"},
    ("requests", "*"): {"anchor_wall_ns": "anchor_wall"},
    ("comparisons", "*"): {f"{leg}_median": f"{leg}_median_tok_s" for leg in ("a1", "b1", "b2", "a2")} | {
        "control_mean": "control_mean_tok_s", "candidate_mean": "candidate_mean_tok_s"},
}


def renames(table: str, kind: str | None) -> dict[str, str]:
    """The archive-to-ledger column renames of ``table`` for runs of ``kind``."""
    return RENAMES.get((table, "*"), {}) | RENAMES.get((table, kind or ""), {})


def ledger_dir(workspace: Path) -> Path:
    """Where the ledgers of a workspace live."""
    return workspace / "ledgers"


def table_dir(workspace: Path, table: str) -> Path:
    """The directory of one ledger table."""
    return ledger_dir(workspace) / table


def archive_file(workspace: Path, table: str, archive_id: str) -> Path:
    """The file holding one archive's rows of an archive table."""
    return table_dir(workspace, table) / f"{archive_id}.parquet"


def append_key(now: datetime | None = None) -> str:
    """A new governance file name stem: UTC time to the microsecond, then 8 random hex digits."""
    t = (now or datetime.now(UTC)).astimezone(UTC)
    return f"{t.strftime('%Y%m%dT%H%M%S%f')}-{secrets.token_hex(4)}"


def table_files(directory: Path) -> list[Path]:
    """The Parquet files of a table directory, sorted by name ([] when it does not exist)."""
    if not directory.is_dir():
        return []
    return sorted(p for p in directory.iterdir() if p.suffix == ".parquet" and not p.name.startswith((".", "_")))


def file_metadata(table: str) -> dict[bytes, bytes]:
    """The key-value metadata every ledger file carries."""
    return {b"dsv4h.ledger_schema_version": str(LEDGER_SCHEMA_VERSION).encode(), b"dsv4h.table": table.encode()}


def wall_or_null(value: Any) -> datetime | None:
    """A ledger wall-time cell: :func:`harness.formats.parse_wall` (offset required), None for
    None/empty text and for a value it refuses (a time without an offset, or not a time)."""
    if value is None or value == "":
        return None
    try:
        return parse_wall(value)
    except (ValueError, TypeError, OverflowError, OSError):
        return None


def iso(value: Any) -> Any:
    """A ledger timestamp back as the ISO text the governance rules compare (``...+00:00``)."""
    if isinstance(value, datetime):
        return value.astimezone(UTC).isoformat(timespec="microseconds")
    return value


def _wall_column(col: pa.ChunkedArray | pa.Array) -> pa.Array:
    if pa.types.is_timestamp(col.type):
        return pc.cast(col, WALL)
    if pa.types.is_integer(col.type):
        return pc.cast(pc.cast(col, pa.int64()), WALL)
    values = col.to_pylist()
    cache: dict[Any, datetime | None] = {}
    return pa.array([cache.setdefault(v, wall_or_null(v)) if v is not None else None for v in values], type=WALL)


def _cast(col: pa.ChunkedArray, to: pa.DataType) -> pa.ChunkedArray | pa.Array:
    """``col`` as type ``to``; raises ``pa.ArrowException`` (``TypeError``/``ValueError`` from values
    pyarrow cannot convert) when a value cannot be represented in ``to``."""
    if col.type == to:
        return col
    if to == WALL:
        return _wall_column(col)
    if pa.types.is_integer(to) and pa.types.is_floating(col.type):
        col = pc.if_else(pc.is_nan(col), pa.scalar(None, col.type), col)
    return pc.cast(col, to)


def canonical(table: str, t: pa.Table, kind: str | None = None) -> pa.Table:
    """``t`` (archive column names, or ledger names) as ``table``'s canonical schema: columns renamed
    (:func:`renames`), cast, missing ones null; any other column, or one that cannot be cast, goes into
    ``extra`` (a JSON object per row, null when empty) for tables that have it."""
    schema = SCHEMAS[table]
    names = renames(table, kind)
    t = t.rename_columns([names.get(c, c) if names.get(c, c) not in t.column_names else c for c in t.column_names])
    cols: list[pa.ChunkedArray | pa.Array] = []
    leftover = [c for c in t.column_names if c not in schema.names and c != "extra"]
    for f in schema:
        if f.name == "extra":
            cols.append(pa.nulls(t.num_rows, _S))  # filled below
            continue
        if f.name not in t.column_names:
            cols.append(pa.nulls(t.num_rows, f.type))
            continue
        try:
            cols.append(_cast(t.column(f.name), f.type))
        except (pa.ArrowException, TypeError, ValueError):  # kept whole in ``extra`` instead
            cols.append(pa.nulls(t.num_rows, f.type))
            leftover.append(f.name)
    if "extra" in schema.names:
        cols[schema.names.index("extra")] = _extra(t, leftover)
    # every row written now is of the current schema (a migrated row included)
    cols[schema.names.index("ledger_schema_version")] = pa.array([LEDGER_SCHEMA_VERSION] * t.num_rows, _I)
    return pa.Table.from_arrays(cols, schema=schema.with_metadata(file_metadata(table)))


def _extra(t: pa.Table, names: Iterable[str]) -> pa.Array:
    names = list(names)
    prior = t.column("extra").to_pylist() if "extra" in t.column_names else [None] * t.num_rows
    if not names:
        return pa.array(prior, _S)
    values = {n: t.column(n).to_pylist() for n in names}
    out: list[str | None] = []
    for i in range(t.num_rows):
        row = json.loads(str(prior[i])) if prior[i] else {}
        row |= {n: json_safe(values[n][i]) for n in names if values[n][i] is not None}
        out.append(json.dumps(row, sort_keys=True, default=str) if row else None)
    return pa.array(out, _S)


def with_common(table: pa.Table, common: Mapping[str, Any]) -> pa.Table:
    """``table`` with every ``common`` key as a constant column (replacing one of that name)."""
    types = dict(COMMON)
    for key, value in common.items():
        if key in table.column_names:
            table = table.drop_columns([key])
        typ = types.get(key)
        n = table.num_rows
        if typ is None:
            col = pa.nulls(n, _S) if value is None else pa.array([value] * n)
        else:
            col = pa.array([wall_or_null(value) if typ == WALL else value] * n, type=typ)
        table = table.append_column(key, col)
    return table
