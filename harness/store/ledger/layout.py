"""Where ledger files live and what every file of a table holds (pure, except :func:`table_files`).

Layout (ledger schema 4): ``<workspace>/ledgers/<table>/<key>.parquet``, one directory per table so
a glob never mixes tables. Archive tables (:data:`ARCHIVE_TABLES` and ``findings``) hold one file
per archive, ``<archive id>.parquet``; governance tables (:data:`GOVERNANCE_TABLES`) one file per
append, ``<UTC yyyymmddThhmmssffffff>-<8 hex>.parquet``, sorting in append order. Every file of a
table has the table's canonical schema (:data:`SCHEMAS`, derived from the table's row model in
``harness.measure.rows``): the same columns, in the same order, with the same types, missing values
null; integers int64, floats float64, instants int64 ns named ``*_ns``, wall-clock anchors
``timestamp[ns, UTC]``, rates named with their unit (``_tok_s``, ``_req_s``). Archives use the same
column names (format 3) and name each result file as its table (format 4: a rate sweep's
``sweep_cells.parquet`` is its ``sweep_cells`` rows; older archives are read under both by
``harness.store.archive_legacy``), so nothing is renamed on the way in. A column an archive has and
the schema does not goes, with its value, into the row's ``extra`` JSON object (nothing is dropped).
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
from harness.kinds import KINDS
from harness.measure.rows import ARCHIVE_COLUMNS, ROW_MODELS, WALL, arrow_schema
from harness.store.archive_legacy import RENAMED, renamed

# WALL re-exported: tests and notebooks name the ledger's wall-clock type here
__all__ = ["GOVERNANCE_TABLES", "LEDGER_SCHEMA_VERSION", "RENAMED", "SCHEMAS", "WALL", "canonical", "renamed"]

LEDGER_SCHEMA_VERSION = 6
EVERY_KIND_TABLES = ("runs", "requests", "energy")
"""The archive tables of every kind: its run, the records' requests and ``energy.json``'s windows."""
ARCHIVE_TABLES: tuple[str, ...] = tuple(dict.fromkeys(
    (EVERY_KIND_TABLES[0], *(t for k in KINDS.values() for t in k.ledger_tables), *EVERY_KIND_TABLES[1:])))
"""Every archive table: the runs, each kind's own ``ledger_tables`` (harness.kinds, in its order: a new
kind's tables join by its descriptor entry alone), then requests and energy."""
PER_ARCHIVE = (*ARCHIVE_TABLES, "findings")
GOVERNANCE_TABLES = ("records", "closures", "gates", "freezes", "historical")
TABLES = (*PER_ARCHIVE, *GOVERNANCE_TABLES)

_S, _I = pa.string(), pa.int64()
COMMON: list[tuple[str, pa.DataType]] = ARCHIVE_COLUMNS
SCHEMAS: dict[str, pa.Schema] = {name: arrow_schema(name) for name in TABLES}

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


def canonical(table: str, t: pa.Table) -> pa.Table:
    """``t`` (the row model's column names) as ``table``'s canonical schema: columns cast, missing
    ones null; a ``kind`` column dropped where the table has none (every archive row carries
    ``protocol_class``; only ``runs`` keeps ``kind``); any other column, or one that cannot be cast,
    goes into ``extra`` (a JSON object per row, null when empty) for tables that have it. A column
    of an older schema that schema 6 renamed is read under its new name (:func:`renamed`), and a
    column added later is filled where its row model can derive it (``TableModel.fill``)."""
    schema = SCHEMAS[table]
    t = renamed(table, t)
    model = ROW_MODELS.get(table)
    if model is not None and model.fill is not None and t.num_rows:
        t = model.fill(t)
    if "kind" in t.column_names and "kind" not in schema.names:
        t = t.drop_columns(["kind"])
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
