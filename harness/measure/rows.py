"""One row model per ledger table, named once, with units in the names (pure).

Each table's columns are declared once: a frozen dataclass per table (:data:`ROW_MODELS`) whose fields,
in order, are the table's own columns (the formal results ``CellResult``, ``RoundResult`` and
``WaveResult`` of :mod:`harness.measure.results` are the row models of ``cells``, ``rounds`` and
``waves``; the governance tables' are in :mod:`harness.measure.governance_rows`; the others are
here); :func:`arrow_schema` derives the Arrow schema the ledger files carry
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
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any, Union, get_args, get_origin, get_type_hints

import pyarrow as pa

from harness.measure.governance_rows import ClosureRow, FreezeRow, GateRow, HistoricalRow, RecordRow
from harness.measure.latency import METRICS
from harness.measure.results import CellResult, RoundResult, WaveResult

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


@dataclass(frozen=True, kw_only=True)
class SweepRoundRow:
    """``sweep_rounds``: one measured round of one offered rate of a rate sweep."""

    round_id: str
    cell_id: str
    round_index: int
    arrival_rate_req_s: float
    status: str
    n_requests: int
    n_ok: int
    n_failed: int
    duration_s: float
    request_throughput_req_s: float
    output_throughput_tok_s: float
    input_throughput_tok_s: float
    goodput_req_s: float | None = None
    slo_met: int | None = None
    client_lag_p50_s: float | None = None
    client_lag_p99_s: float | None = None
    client_lag_max_s: float | None = None
    client_late: int | None = None
    client_schedule_kept: bool | None = None
    send_lag_p99_s: float | None = None
    capped_requests: int | None = None
    inflight_slope_req_per_s: float | None = None
    inflight_slope_se_req_per_s: float | None = None
    ttft_slope_s_per_s: float | None = None
    ttft_slope_se_s_per_s: float | None = None
    saturated: bool | None = None
    latency: dict[str, float | int | None] = field(default_factory=dict)  # LATENCY_COLUMNS, flat in the table


@dataclass(frozen=True, kw_only=True)
class SweepCellRow:
    """``sweep_cells``: one offered rate of a rate sweep, medians (and ranges) of its ok rounds."""

    cell_id: str
    workload: str
    concurrency: int
    arrival_rate_req_s: float
    rounds_ok: int
    rounds_planned: int
    request_throughput_median_req_s: float | None = None
    request_throughput_min_req_s: float | None = None
    request_throughput_max_req_s: float | None = None
    output_throughput_median_tok_s: float | None = None
    output_throughput_min_tok_s: float | None = None
    output_throughput_max_tok_s: float | None = None
    input_throughput_median_tok_s: float | None = None
    input_throughput_min_tok_s: float | None = None
    input_throughput_max_tok_s: float | None = None
    goodput_median_req_s: float | None = None
    goodput_min_req_s: float | None = None
    goodput_max_req_s: float | None = None
    schedule_kept: bool | None = None
    client_lag_p99_s: float | None = None
    saturated_rounds: int | None = None
    latency: dict[str, float | int | None] = field(default_factory=dict)  # LATENCY_COLUMNS, flat in the table


@dataclass(frozen=True, kw_only=True)
class SlaProbeRow:
    """``sla_probes``: one probe of an SLA search (harness.measure.sla): its offered rate, the worst
    measured round's p99 of each metric (s) beside its declared limit (s; null: not declared),
    ``passed`` under the search's rule, ``reasons`` it failed, its rounds, whether every round kept
    its schedule, and ``bracket_end`` (``highest-passing``, ``lowest-failing`` or null)."""

    probe_index: int
    cell_id: str | None = None
    arrival_rate_req_s: float
    passed: bool
    reasons: list[str]
    rounds_ok: int
    rounds_planned: int
    schedule_kept: bool
    ttft_p99_worst_s: float | None = None
    tpot_bench_p99_worst_s: float | None = None
    e2e_p99_worst_s: float | None = None
    ttft_limit_s: float | None = None
    tpot_limit_s: float | None = None
    e2e_limit_s: float | None = None
    request_throughput_median_req_s: float | None = None
    goodput_median_req_s: float | None = None
    bracket_end: str | None = None


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


@dataclass(frozen=True, kw_only=True)
class ComparisonRow:
    """``comparisons``: one ABBA screen's legs (tokens/s) and verdict."""

    screen: str
    boundary: str | None = None
    concurrency: int
    waves_per_leg: int
    a1_median_tok_s: float | None = None
    b1_median_tok_s: float | None = None
    b2_median_tok_s: float | None = None
    a2_median_tok_s: float | None = None
    control_mean_tok_s: float | None = None
    candidate_mean_tok_s: float | None = None
    ratio_pct: float | None = None
    drift_pct: float | None = None
    spread_pct: float | None = None
    http_ratio_pct: float | None = None
    separated: bool | None = None
    verdict: str
    reason: str | None = None
    outputs_compared: int | None = None
    outputs_identical_all_legs: int | None = None
    outputs_differing: int | None = None
    outputs_identical_across_arms: int | None = None
    b2_shares_b1_service: bool | None = None
    declared_change: str | None = None
    undeclared_differences: int | None = None
    allow_identity_change: bool | None = None
    status: str
    verdict_as_measured: str | None = None  # ``verdict`` is ``withheld`` when a blocking finding invalidates the run


@dataclass(frozen=True)
class MatchedSdRow:
    """``matched_sd``: one matched AR/SD run (harness.measure.matched): both arms' rates (tokens/s),
    the speculative arm's tokens per step and acceptance, step times (ms), the break-even verdict and
    the greedy outputs compared with the first AR leg."""

    run: str | None = None
    order: str | None = None
    concurrency: int | None = None
    ar_rate_tok_s: float | None = None
    sd_rate_tok_s: float | None = None
    ratio_pct: float | None = None
    http_ratio_pct: float | None = None
    ar_drift_pct: float | None = None
    sd_spread_pct: float | None = None
    tokens_per_step: float | None = None
    acceptance_rate: float | None = None
    spec_source: str | None = None
    t_ar_ms: float | None = None
    t_sd_ms: float | None = None
    t_sd_implied_ms: float | None = None
    t_sd_over_t_ar: float | None = None
    reconcile_rel: float | None = None
    reconciled: bool | None = None
    verdict: str | None = None
    reason: str | None = None
    outputs_compared: int | None = None
    outputs_identical: int | None = None
    outputs_differing: int | None = None
    sd_claim: str | None = None
    status: str | None = None
    verdict_as_measured: str | None = None  # ``verdict`` is ``withheld`` when a blocking finding invalidates the run


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


@dataclass(frozen=True, kw_only=True)
class ReplayRunRow:
    """``replay_runs``: one trace replay (harness.measure.replay): the trace, the replay speed, throughput,
    the achieved schedule (lateness = actual send - scheduled send, seconds; ``client_`` without the time
    the concurrency cap held a request) and prompt tokens found cached against those the trace implies."""

    replay_id: str
    status: str
    trace_sha256: str
    block_size_tokens: int
    speed: float
    max_concurrency: int | None = None
    trace_span_s: float | None = None
    n_requests: int
    n_ok: int
    n_failed: int
    duration_s: float
    request_throughput_req_s: float | None = None
    output_throughput_tok_s: float | None = None
    input_throughput_tok_s: float | None = None
    lateness_p50_s: float | None = None
    lateness_p99_s: float | None = None
    lateness_max_s: float | None = None
    client_lateness_p99_s: float | None = None
    client_lateness_max_s: float | None = None
    late_requests: int | None = None
    lateness_tolerance_s: float | None = None
    schedule_kept: bool | None = None
    capped_requests: int | None = None
    prompt_tokens: int | None = None
    expected_cached_tokens: int | None = None
    reported_cached_tokens: int | None = None
    cached_reported_requests: int | None = None
    cached_mismatch_requests: int | None = None
    expected_hit_ratio: float | None = None
    reported_hit_ratio: float | None = None
    cached_tolerance_pct: float | None = None
    cached_agree: bool | None = None
    inflight_slope_req_per_s: float | None = None
    inflight_slope_se_req_per_s: float | None = None
    ttft_slope_s_per_s: float | None = None
    ttft_slope_se_s_per_s: float | None = None
    saturated: bool | None = None
    latency: dict[str, float | int | None] = field(default_factory=dict)  # LATENCY_COLUMNS, flat in the table


@dataclass(frozen=True)
class TableModel:
    """A ledger table: its row model, and whether its rows carry latency, ``extra`` and the archive columns.

    ``row_keys``: the columns naming the units an evidence finding can concern (a wave, round, cell or
    probe id: a row is concerned when any of them is named); empty for a table with one row per run
    (any blocking finding concerns it) and for governance tables. ``verdict``: the table has a
    ``verdict`` column that is withheld on an invalid row (``verdict_as_measured`` keeps what was
    measured)."""

    model: type
    latency: bool = False
    archive: bool = True
    row_keys: tuple[str, ...] = ()
    verdict: bool = False


ROW_MODELS: dict[str, TableModel] = {
    "runs": TableModel(RunRow),
    "cells": TableModel(CellResult, latency=True, row_keys=("cell_id",)),
    "rounds": TableModel(RoundResult, latency=True, row_keys=("round_id",)),
    "waves": TableModel(WaveResult, latency=True, row_keys=("wave_id",)),
    "sweep_cells": TableModel(SweepCellRow, latency=True, row_keys=("cell_id",)),
    "sweep_rounds": TableModel(SweepRoundRow, latency=True, row_keys=("round_id",)),
    "requests": TableModel(RequestRow, row_keys=("wave_id",)),
    "comparisons": TableModel(ComparisonRow, verdict=True),
    "matched_sd": TableModel(MatchedSdRow, verdict=True),
    "acceptance": TableModel(AcceptanceRow, row_keys=("wave_id",)),
    "energy": TableModel(EnergyRow, row_keys=("wave_id", "round_id")),
    "replay_runs": TableModel(ReplayRunRow, latency=True),
    "sla_probes": TableModel(SlaProbeRow, row_keys=("cell_id",)),
    "sla_rounds": TableModel(SweepRoundRow, latency=True, row_keys=("round_id",)),
    "findings": TableModel(FindingRow, archive=False),
    "records": TableModel(RecordRow, archive=False),
    "closures": TableModel(ClosureRow, archive=False),
    "gates": TableModel(GateRow, archive=False),
    "freezes": TableModel(FreezeRow, archive=False),
    "historical": TableModel(HistoricalRow, archive=False),
}

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
