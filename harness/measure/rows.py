"""One row model per ledger table, named once, with units in the names (pure).

Each table's columns are declared once: a frozen dataclass per table (:data:`ROW_MODELS`) whose fields,
in order, are the table's own columns. The tables more than one kind writes are here
(:data:`COMMON_TABLES`; ``waves`` is the formal ``WaveResult``, the governance tables' models are in
:mod:`harness.measure.governance_rows`); a kind's own tables are declared in its own measure module,
named by its descriptor entry (``harness.kinds.KindInfo.row_models``: a formal matrix's
``CellResult``, ``RoundResult`` in :mod:`harness.measure.results`, a sweep's ``SweepCellRow`` /
``SweepRoundRow`` in :mod:`harness.measure.sweep` ...), so adding a kind edits no line here.
:func:`arrow_schema` derives the Arrow schema the ledger files carry
(``harness.store.ledger.layout.SCHEMAS``), and the archive's result files use the same names.
Tables of measured rows (``cells``, ``rounds``, ``waves``, ``sweep_cells``, ``sweep_rounds``) add
the flat latency columns (:data:`LATENCY_COLUMNS`, ``<metric>_<stat>_s`` and ``<metric>_n``: every
protocol's rows have them); archive tables add ``extra`` (JSON of columns outside the model) and the archive columns
(:class:`ArchiveColumns`). Units: rates ``_tok_s`` (tokens/s) or ``_req_s`` (requests/s), durations
``_s``, instants ``_ns`` (int64 ns, monotonic), wall anchors ``datetime`` (``timestamp[ns, UTC]``).
Governance rows carry ``append_key`` (UTC ``yyyymmddThhmmssffffff-<8 hex>``, increasing in append
order: their order in the table).

Protocol-specific measures live in their own tables: ``cells`` / ``rounds`` / ``waves`` are formal
matrix (and quick-bench) results, ``sweep_cells`` / ``sweep_rounds`` rate-sweep results,
``comparisons`` ABBA screens, ``matched_sd`` matched AR/SD runs, ``acceptance`` speculative counts per
wave, ``energy`` energy per measurement window, ``sla_probes`` the probes of SLA searches; so no
table has columns null by design for a whole protocol.
Every row of an archive table carries ``protocol_class``; only ``runs`` carries ``kind`` as
well (the run registry's key, ``harness.run.kinds``; one row per archive).
"""

from __future__ import annotations

import dataclasses
import types
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import Any, Union, get_args, get_origin, get_type_hints

import pyarrow as pa

from harness.kinds import KINDS, resolve
from harness.measure.governance_rows import ClosureRow, FreezeRow, GateRow, HistoricalRow, RecordRow
from harness.measure.latency import METRICS
from harness.measure.results import WaveResult
from harness.measure.table_model import TableModel

__all__ = [
    "ARCHIVE_COLUMNS",
    "COMMON_TABLES",
    "ROW_MODELS",
    "WALL",
    "RunRow",
    "arrow_schema",
    "build",
    "check_row",
    "kind_tables",
    "row_dict",
    "rows_table",
]

WALL = pa.timestamp("ns", tz="UTC")
LATENCY_METRICS = (*METRICS, "itl_bench", "tpot_bench")
LATENCY_COLUMNS: tuple[str, ...] = tuple(
    c for metric in LATENCY_METRICS
    for c in (*(f"{metric}_{s}_s" for s in ("p50", "p90", "p99", "mean", "max")), f"{metric}_n"))


@dataclass(frozen=True)
class ArchiveColumns:
    """Columns on every row of an archive table: where the row comes from and whether it counts."""

    archive_id: str | None = None
    ledger_schema_version: int | None = None
    campaign: str | None = None
    claim_class: str | None = None
    protocol_class: str | None = None
    backend: str | None = None
    data_origin: str | None = None
    archive_status: str | None = None
    created_wall: datetime | None = None
    identity_hash: str | None = None
    valid: bool | None = None
    superseded_by: str | None = None


@dataclass(frozen=True, kw_only=True)
class RunRow:
    """``runs``: one row per archive."""

    kind: str
    plan_id: str
    service: str
    n_cells: int
    archive_path: str
    resumed_from: str | None = None


@dataclass(frozen=True)
class RequestRow:
    """``requests``: one request's identity, counts and timings (``*_ns`` monotonic instants)."""

    rid: str | None = None
    cell_id: str | None = None
    wave_id: str | None = None
    round_index: int | None = None
    wave_index: int | None = None
    phase: str | None = None
    workload: str | None = None
    case_id: str | None = None
    input_hash: str | None = None
    input_len: int | None = None
    concurrency: int | None = None
    prompt_tokens: int | None = None
    cached_tokens: int | None = None
    completion_tokens: int | None = None
    finish_reason: str | None = None
    http_status: int | None = None
    error: str | None = None
    count_method: str | None = None
    send_ns: int | None = None
    first_token_ns: int | None = None
    last_token_ns: int | None = None
    done_ns: int | None = None
    anchor_wall: datetime | None = None
    anchor_perf_ns: int | None = None
    first_event_tokens: int | None = None
    n_tokens: int | None = None
    n_events: int | None = None
    ttft_s: float | None = None
    e2e_s: float | None = None
    ok: bool | None = None
    output_hash16: str | None = None


@dataclass(frozen=True)
class AcceptanceRow:
    """``acceptance``: one measured wave's speculative counts summed over its requests (``cell_id``:
    the formal cell, or the leg of a screen or matched run), as its server reported them
    (``source``: ``sglang-meta-info``, ``vllm-request-metrics``, ``vllm-metrics-delta``, or ``stream``:
    only the stream's events, for a server that reports no counts); tokens per step bonus included,
    acceptance rate bonus excluded (docs/speculative.md). ``tokens_per_event_hist[i]``: the wave's
    token-carrying events after each request's first (prefill) one that carried i tokens; index 0 unused."""

    wave_id: str | None = None
    cell_id: str | None = None
    concurrency: int | None = None
    source: str | None = None
    requests_reporting: int | None = None
    requests: int | None = None
    verify_steps: int | None = None
    drafts_proposed: int | None = None
    drafts_accepted: int | None = None
    completion_tokens: int | None = None
    tokens_per_step: float | None = None
    acceptance_rate: float | None = None
    sglang_accept_length: float | None = None
    stream_events: int | None = None
    tokens_per_event_hist: list[int] | None = None


@dataclass(frozen=True, kw_only=True)
class EnergyRow:
    """``energy``: one measurement window's energy over every sampled device (``energy.json``;
    harness.run.energy): ``window_kind`` ``resident`` (a measured wave's resident window: formal
    matrices, ABBA screens, matched runs; ``cell_id`` the cell or the leg) or ``round`` (a sweep
    round from its planned start to its last response, ``round_id`` and ``arrival_rate_req_s`` set);
    ``window_s`` s, ``energy_j`` J, ``mean_power_w`` W, ``output_tokens_per_j`` tokens/J,
    ``j_per_output_token`` J/token; ``method`` ``energy-counter`` or ``power-integral`` (null, with
    ``reason``, when the samples do not bracket the window); ``source`` the power source (``sim``:
    the simulator's model, never a measurement), ``resolution_s`` its sampling interval,
    ``service_index`` which service's sampler (0-based, start order)."""

    wave_id: str | None = None
    cell_id: str | None = None
    round_id: str | None = None
    concurrency: int | None = None
    arrival_rate_req_s: float | None = None
    window_kind: str
    service_index: int
    start_ns: int
    end_ns: int
    window_s: float | None = None
    output_tokens: int | None = None
    energy_j: float | None = None
    mean_power_w: float | None = None
    output_tokens_per_j: float | None = None
    j_per_output_token: float | None = None
    method: str | None = None
    source: str | None = None
    resolution_s: float | None = None
    devices: int | None = None
    reason: str | None = None


@dataclass(frozen=True)
class FindingRow:
    """``findings``: one evidence finding of one archive."""

    archive_id: str | None = None
    rule: str | None = None
    severity: str | None = None
    message: str | None = None
    remedy: str | None = None
    rows: str | None = None
    ledger_schema_version: int | None = None
    scope: str | None = None  # "rows" or "run" (null in rows written before the verdict module)


COMMON_TABLES: dict[str, TableModel] = {
    "runs": TableModel(RunRow),
    "waves": TableModel(WaveResult, latency=True, row_keys=("wave_id",)),  # formal, screen and matched waves
    "requests": TableModel(RequestRow, row_keys=("wave_id",)),
    "acceptance": TableModel(AcceptanceRow, row_keys=("wave_id",)),
    "energy": TableModel(EnergyRow, row_keys=("wave_id", "round_id")),
    "findings": TableModel(FindingRow, archive=False),
    "records": TableModel(RecordRow, archive=False),
    "closures": TableModel(ClosureRow, archive=False),
    "gates": TableModel(GateRow, archive=False),
    "freezes": TableModel(FreezeRow, archive=False),
    "historical": TableModel(HistoricalRow, archive=False),
}
"""The tables more than one kind writes (runs, waves, requests, acceptance, energy, findings, governance)."""


def kind_tables() -> dict[str, dict[str, TableModel]]:
    """Per kind, the tables its descriptor entry declares (``KindInfo.row_models``, resolved: the
    kind's own measure module), for the kinds that declare any."""
    return {k.name: dict(resolve(k.row_models)) for k in KINDS.values() if k.row_models}


ROW_MODELS: dict[str, TableModel] = COMMON_TABLES | {t: m for tables in kind_tables().values()
                                                     for t, m in tables.items()}
"""Every ledger table's model: :data:`COMMON_TABLES` and each kind's own (module docstring)."""

_SCALARS: dict[Any, pa.DataType] = {str: pa.string(), float: pa.float64(), int: pa.int64(), bool: pa.bool_(),
                                    datetime: WALL}


def arrow_type(annotation: Any) -> pa.DataType:
    """The Arrow type of a row-model field annotation (``X | None``: nullable ``X``; ``list[X]`` and
    ``tuple[X, ...]``: a list of ``X``)."""
    if get_origin(annotation) in (Union, types.UnionType):
        (annotation,) = [a for a in get_args(annotation) if a is not type(None)]
    if get_origin(annotation) in (list, tuple):
        return pa.list_(arrow_type(get_args(annotation)[0]))
    return _SCALARS[annotation]


def model_fields(model: type) -> list[tuple[str, pa.DataType]]:
    """(name, Arrow type) of each column field of a row-model dataclass, in order (a ``latency``
    mapping field stands for the flat :data:`LATENCY_COLUMNS`, added by :func:`table_fields`)."""
    hints = get_type_hints(model)
    return [(f.name, arrow_type(hints[f.name])) for f in dataclasses.fields(model) if f.name != "latency"]


def columns(table: str) -> tuple[str, ...]:
    """Every column name of ``table``."""
    return tuple(name for name, _ in table_fields(table))


def check_row(table: str, row: Mapping[str, Any]) -> dict[str, Any]:
    """``row`` as a plain dict, refused (``ValueError`` naming them) when it has keys that are no
    column of ``table``: a runner's row literal can only use the row model's names."""
    unknown = sorted(set(row) - set(columns(table)))
    if unknown:
        raise ValueError(f"{table} row: no column(s) {', '.join(unknown)} in its row model")
    return dict(row)


def build(table: str, row: Mapping[str, Any]) -> Any:
    """The row-model instance of ``table`` holding ``row`` (its own columns by name; a latency table's
    flat :data:`LATENCY_COLUMNS` go to the model's ``latency`` mapping). ``ValueError`` naming the
    keys that are no column of the model (an archive column is added at write, :func:`rows_table`);
    ``TypeError`` when a required field (a row's identity, a measure it always has) is missing: a
    row is built whole or not at all."""
    spec = ROW_MODELS[table]
    names = {f.name for f in dataclasses.fields(spec.model)}
    latency = set(LATENCY_COLUMNS) if spec.latency else set()
    unknown = sorted(set(row) - names - latency - {"latency"})
    if unknown:
        raise ValueError(f"{table} row: no column(s) {', '.join(unknown)} in its row model")
    own = {k: v for k, v in row.items() if k in names and k != "latency"}
    if "latency" in names:
        own["latency"] = dict(row.get("latency") or {}) | {k: v for k, v in row.items() if k in latency}
    return spec.model(**own)


def row_dict(row: Any) -> dict[str, Any]:
    """A row-model instance as the flat dict its archive file and JSON summary hold: every field in
    the model's order, then its latency columns."""
    out = {f.name: getattr(row, f.name) for f in dataclasses.fields(row) if f.name != "latency"}
    out.update(getattr(row, "latency", None) or {})
    return out


def rows_table(table: str, rows: Sequence[Any], extra: Mapping[str, Any] | None = None) -> pa.Table:
    """Row-model instances (or their :func:`row_dict`) as an archive result table: the model's own
    columns (and latency columns) with the model's Arrow types, then ``extra`` (the run's campaign,
    claim class, protocol class) as constant columns."""
    spec = ROW_MODELS[table]
    fields = _result_fields(spec)
    dicts = [r if isinstance(r, Mapping) else row_dict(r) for r in rows]
    t = pa.Table.from_pylist(dicts, schema=pa.schema(fields))
    for key, value in (extra or {}).items():
        t = t.append_column(key, pa.array([value] * t.num_rows))
    return t


ARCHIVE_COLUMNS: list[tuple[str, pa.DataType]] = model_fields(ArchiveColumns)


def _result_fields(spec: TableModel) -> list[tuple[str, pa.DataType]]:
    """A table's own columns then, for a latency table, the latency columns (what a row holds)."""
    out = model_fields(spec.model)
    if spec.latency:
        out += [(c, pa.int64() if c.endswith("_n") else pa.float64()) for c in LATENCY_COLUMNS]
    return out


def table_fields(table: str) -> list[tuple[str, pa.DataType]]:
    """Every column of ``table``, in file order: its own, latency, ``extra``, the archive columns."""
    spec = ROW_MODELS[table]
    out = _result_fields(spec)
    if spec.archive:
        out += [("extra", pa.string()), *ARCHIVE_COLUMNS]
    return out


def arrow_schema(table: str) -> pa.Schema:
    """The Arrow schema of ``table``, derived from its row model."""
    return pa.schema(table_fields(table))
