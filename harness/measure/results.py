"""From raw records to wave, round and cell results (pure).

:class:`WaveResult`, :class:`RoundResult` and :class:`CellResult` are the row models of the ``waves``,
``rounds`` and ``cells`` tables (``harness.measure.rows`` derives the ledger schemas from them): their
field names are the archive's and the ledger's column names, units in the name.

Table 2 of the report: prefill (P) and resident decode (D) cells are medians of three round rates;
the HTTP column aggregates every complete measured wave of the cell (sum tokens / sum durations).
Warmup waves never enter a figure. A round's status comes from the run ("ok", "failed",
"incomplete"); only "ok" rounds make a cell "complete", but every round is kept and shown.
"""

from __future__ import annotations

import math
from collections import defaultdict
from collections.abc import Mapping, Sequence
from dataclasses import asdict, dataclass, field, replace
from typing import Any

import numpy as np
import pyarrow as pa

from harness.ids import round_of
from harness.load.openai import count_exactness
from harness.measure import coldness as cold
from harness.measure import latency as lat
from harness.measure import metrics as m
from harness.measure.table_model import TableModel
from harness.records import RequestRecord

__all__ = [
    "CampaignResults", "CellResult", "CycleRow", "cell_latency_at", "compute_results", "results_json", "results_tables",
    "run_count_methods", "waves_table",
]

RESULTS_SCHEMA_VERSION = 2  # 2: the row models' names (archive format 3)


@dataclass(frozen=True)
class WaveResult:
    """One wave: its identity, request counts and the three metric windows."""

    wave_id: str
    cell_id: str
    round_index: int
    wave_index: int
    phase: str
    workload: str
    concurrency: int
    n_requests: int
    n_failed: int
    resident_tokens: int
    resident_seconds: float
    resident_output_tok_s: float
    http_tokens: int
    http_seconds: float
    http_output_tok_s: float
    prefill_tokens: int
    prefill_seconds: float
    prefill_input_tok_s: float
    cache_violations: int
    cached_unknown: int
    case_ids: tuple[str, ...]
    lag_p50_s: float
    lag_p99_s: float
    errors: tuple[str, ...] = ()
    latency: dict[str, float] = field(default_factory=dict)  # harness.measure.latency.columns
    count_method: str = ""  # how output tokens were counted (count_summary)


def round_key(wave_id: str) -> str:
    """The round id a measured wave belongs to (``harness.ids.round_of``: its wave id without the
    ``.wNNN`` suffix; a malformed id raises ArchiveError)."""
    return round_of(wave_id)


def wave_result(records: Sequence[RequestRecord]) -> WaveResult:
    """Compute one wave's windows from its records (all of one ``wave_id``)."""
    r0 = records[0]
    res = m.resident_window(records)
    http = m.http_window(records)
    pre = m.prefill_window(records)
    lag = m.receive_lag_seconds(records)
    violations = sum(1 for r in records if r.ok and (r.cached_tokens or 0) > 0)
    unknown = sum(1 for r in records if r.ok and r.cached_tokens is None)
    errors = tuple(sorted({r.error for r in records if r.error})[:5])
    return WaveResult(
        wave_id=r0.wave_id, cell_id=r0.cell_id, round_index=r0.round_index, wave_index=r0.wave_index,
        phase=r0.phase, workload=r0.workload, concurrency=r0.concurrency, n_requests=len(records),
        n_failed=sum(1 for r in records if not r.ok),
        resident_tokens=res.tokens, resident_seconds=res.seconds, resident_output_tok_s=res.rate,
        http_tokens=http.tokens, http_seconds=http.seconds, http_output_tok_s=http.rate,
        prefill_tokens=pre.tokens, prefill_seconds=pre.seconds, prefill_input_tok_s=pre.rate,
        cache_violations=violations if r0.workload == "prefill" else 0,
        cached_unknown=unknown if r0.workload == "prefill" else 0,
        case_ids=tuple(r.case_id for r in records),
        lag_p50_s=float(np.percentile(lag, 50)) if lag.size else math.nan,
        lag_p99_s=float(np.percentile(lag, 99)) if lag.size else math.nan,
        errors=errors,
    )


@dataclass(frozen=True)
class RoundResult:
    """One measured round: the aggregate over its measured waves (tokens/s)."""

    round_id: str
    cell_id: str
    round_index: int
    workload: str
    concurrency: int
    status: str
    n_waves: int
    n_requests: int
    n_failed: int
    rate_tok_s: float
    tokens: int
    seconds: float
    http_output_tok_s: float
    http_tokens: int
    http_seconds: float
    cache_violations: int
    latency: dict[str, float] = field(default_factory=dict)  # over the round's measured requests
    count_method: str = ""


def round_result(round_id: str, waves: Sequence[WaveResult], status: str) -> RoundResult:
    """Aggregate a round: resident rate for decode, prefill rate for prefill; HTTP for both."""
    w0 = waves[0]
    if w0.workload == "prefill":
        tok = sum(w.prefill_tokens for w in waves if w.prefill_seconds > 0)
        sec = sum(w.prefill_seconds for w in waves if w.prefill_seconds > 0)
    else:
        tok = sum(w.resident_tokens for w in waves if w.resident_seconds > 0)
        sec = sum(w.resident_seconds for w in waves if w.resident_seconds > 0)
    htok = sum(w.http_tokens for w in waves if w.http_seconds > 0)
    hsec = sum(w.http_seconds for w in waves if w.http_seconds > 0)
    return RoundResult(
        round_id=round_id, cell_id=w0.cell_id, round_index=w0.round_index, workload=w0.workload,
        concurrency=w0.concurrency, status=status, n_waves=len(waves),
        n_requests=sum(w.n_requests for w in waves), n_failed=sum(w.n_failed for w in waves),
        rate_tok_s=tok / sec if sec > 0 else math.nan, tokens=tok, seconds=sec,
        http_output_tok_s=htok / hsec if hsec > 0 else math.nan, http_tokens=htok, http_seconds=hsec,
        cache_violations=sum(w.cache_violations for w in waves),
    )


@dataclass(frozen=True)
class CellResult:
    """A formal cell: median of its ok round rates, every round's value, observed range.

    ``status`` is ``complete`` only with ``rounds_required`` ok rounds. ``http_output_tok_s`` aggregates
    every measured wave of the cell's ok rounds. min/max are observed ranges, not confidence
    intervals.
    """

    cell_id: str
    workload: str
    concurrency: int
    status: str
    rounds_required: int
    round_tok_s: tuple[float, ...]
    round_status: tuple[str, ...]
    median_tok_s: float
    observed_min_tok_s: float
    observed_max_tok_s: float
    http_output_tok_s: float
    round_http_output_tok_s: tuple[float, ...] = field(default=())
    cache_violations: int = 0
    latency: dict[str, float] = field(default_factory=dict)  # over the measured requests of its ok rounds
    count_method: str = ""
    # TTFT by class (harness.measure.coldness, docs/coldness.md): cold and restarted over every request
    # of the cell (warmups included), warm over the measured requests of ok rounds, cold ones left out
    ttft_cold_n: int = 0
    ttft_cold_p50_s: float = math.nan
    ttft_cold_max_s: float = math.nan
    ttft_restarted_n: int = 0
    ttft_restarted_p50_s: float = math.nan
    ttft_restarted_max_s: float = math.nan
    ttft_warm_n: int = 0
    ttft_warm_p50_s: float = math.nan
    ttft_warm_p90_s: float = math.nan
    ttft_warm_p99_s: float = math.nan


def cell_result(cell_id: str, workload: str, concurrency: int, rounds: Sequence[RoundResult],
                rounds_required: int) -> CellResult:
    """Combine a cell's rounds (every round listed; only ok rounds enter the median)."""
    ok = [r for r in rounds if r.status == "ok"]
    rates = [r.rate_tok_s for r in ok]
    htok = sum(r.http_tokens for r in ok)
    hsec = sum(r.http_seconds for r in ok)
    status = "complete" if len(ok) >= rounds_required else ("partial" if ok else "missing")
    return CellResult(
        cell_id=cell_id, workload=workload, concurrency=concurrency, status=status,
        rounds_required=rounds_required,
        round_tok_s=tuple(r.rate_tok_s for r in rounds), round_status=tuple(r.status for r in rounds),
        median_tok_s=m.median_of_rounds(rates) if rates else math.nan,
        observed_min_tok_s=min(rates) if rates else math.nan, observed_max_tok_s=max(rates) if rates else math.nan,
        http_output_tok_s=htok / hsec if hsec > 0 else math.nan,
        round_http_output_tok_s=tuple(r.http_output_tok_s for r in rounds),
        cache_violations=sum(r.cache_violations for r in rounds),
    )


@dataclass(frozen=True)
class CampaignResults:
    """Everything computed from one run's records."""

    waves: tuple[WaveResult, ...]
    rounds: tuple[RoundResult, ...]
    cells: tuple[CellResult, ...]


def compute_results(
    records: Sequence[RequestRecord],
    round_status: Mapping[str, str],
    cells: Sequence[tuple[str, str, int, int]],
    classes: Mapping[str, cold.TtftClass] | None = None,
) -> CampaignResults:
    """Results of a run. ``cells`` lists (cell_id, workload, concurrency, rounds_required) in plan
    order; ``round_status`` maps round ids (``<cell>.r<k>[.a<n>]``) to their status. Measured
    waves of a round missing from ``round_status`` count as ``incomplete``. ``classes``: each request's
    TTFT class (:func:`harness.measure.coldness.classify`); None classifies with one start of unknown
    identity per run and the default shape key (one length bucket x the concurrency)."""
    if classes is None:
        classes = cold.classify(records, (), cold.ShapeKey())
    by_wave: dict[str, list[RequestRecord]] = defaultdict(list)
    for r in records:
        by_wave[r.wave_id].append(r)
    waves = [replace(wave_result(v), latency=lat.columns(v), count_method=count_summary(v)) for v in by_wave.values()]
    measured: dict[str, list[WaveResult]] = defaultdict(list)
    for w in waves:
        if w.phase == "measured":
            measured[round_key(w.wave_id)].append(w)
    round_records: dict[str, list[RequestRecord]] = defaultdict(list)
    for r in records:
        if r.phase == "measured":
            round_records[round_key(r.wave_id)].append(r)
    rounds = [
        replace(round_result(rid, sorted(ws, key=lambda w: w.wave_index), round_status.get(rid, "incomplete")),
                latency=lat.columns(round_records[rid]), count_method=count_summary(round_records[rid]))
        for rid, ws in measured.items()
    ]
    by_cell: dict[str, list[RoundResult]] = defaultdict(list)
    for rr in rounds:
        by_cell[rr.cell_id].append(rr)
    cell_records: dict[str, list[RequestRecord]] = defaultdict(list)
    for r in records:
        cell_records[r.cell_id].append(r)
    cell_results = []
    for cid, wl, c, req in cells:
        ok_recs = [r for rr in by_cell.get(cid, []) if rr.status == "ok" for r in round_records[rr.round_id]]
        cell = cell_result(cid, wl, c, sorted(by_cell.get(cid, []), key=lambda r: r.round_index), req)
        cell_results.append(_with_classes(_with_requests(cell, ok_recs), cell_records.get(cid, []), ok_recs, classes))
    rounds.sort(key=lambda r: (r.cell_id, r.round_index))
    return CampaignResults(tuple(waves), tuple(rounds), tuple(cell_results))


def cell_latency_at(records: Sequence[RequestRecord], round_status: Mapping[str, str],
                    ps: Sequence[float]) -> dict[str, dict[str, float]]:
    """Per cell id, the latency columns at percentiles ``ps`` (:func:`harness.measure.latency.columns_at`)
    over the measured requests of its ok rounds, the population :func:`compute_results` uses for the
    stored p50/p90/p99; ``round_status`` maps round ids to their status (others do not count)."""
    by_cell: dict[str, list[RequestRecord]] = defaultdict(list)
    for r in records:
        if r.phase == "measured" and round_status.get(round_key(r.wave_id)) == "ok":
            by_cell[r.cell_id].append(r)
    return {cid: lat.columns_at(recs, ps) for cid, recs in by_cell.items()}


def count_summary(records: Sequence[RequestRecord]) -> str:
    """How the records' output tokens were counted: the one method, or ``mixed: a+b`` (sorted)."""
    methods = sorted({r.count_method for r in records})
    if not methods:
        return ""
    return methods[0] if len(methods) == 1 else "mixed: " + "+".join(methods)


def run_count_methods(records: Sequence[RequestRecord]) -> tuple[tuple[str, ...], list[str]]:
    """The count methods of a run's measured records (sorted) and the labels they call for:
    ``approximate-counts`` when any measured token count is not exact (harness.load.openai)."""
    methods = tuple(sorted({r.count_method for r in records if r.phase == "measured"}))
    approximate = any(count_exactness(m) == "approximate" for m in methods)
    return methods, (["approximate-counts"] if approximate else [])


def _with_requests(cell: CellResult, records: Sequence[RequestRecord]) -> CellResult:
    return replace(cell, latency=lat.columns(records), count_method=count_summary(records))


def _with_classes(cell: CellResult, cell_records: Sequence[RequestRecord], measured: Sequence[RequestRecord],
                  classes: Mapping[str, cold.TtftClass]) -> CellResult:
    cols: dict[str, Any] = {k: int(v) if k.endswith("_n") else v
                            for k, v in cold.cell_columns(cell_records, measured, classes).items()}
    return replace(cell, **cols)


def _table(rows: Sequence[Any], extra: Mapping[str, Any]) -> pa.Table:
    dicts = []
    for row in rows:
        d = asdict(row)
        for k, v in d.items():
            if isinstance(v, tuple):
                d[k] = list(v)
        d.update(d.pop("latency", None) or {})
        d.update(extra)
        dicts.append(d)
    return pa.Table.from_pylist(dicts)


def results_tables(res: CampaignResults, extra: Mapping[str, Any]) -> dict[str, pa.Table]:
    """Arrow tables ``waves``, ``rounds``, ``cells`` with ``extra`` columns on every row."""
    return {
        "waves": _table(res.waves, extra),
        "rounds": _table(res.rounds, extra),
        "cells": _table(res.cells, extra),
    }


def results_json(res: CampaignResults) -> dict[str, Any]:
    """The JSON summary stored as ``results.json`` (every value the P/D table shows)."""
    return {
        "results_schema_version": RESULTS_SCHEMA_VERSION,
        "cells": [asdict(c) for c in res.cells],
        "rounds": [asdict(r) for r in res.rounds],
    }


def waves_table(records: Sequence[RequestRecord], extra: Mapping[str, Any]) -> pa.Table | None:
    """The ``waves`` table of records grouped by wave id (first-seen order); None without records."""
    by_wave: dict[str, list[RequestRecord]] = {}
    for r in records:
        by_wave.setdefault(r.wave_id, []).append(r)
    if not by_wave:
        return None
    return _table([replace(wave_result(v), latency=lat.columns(v), count_method=count_summary(v))
                   for v in by_wave.values()], extra)


@dataclass(frozen=True, kw_only=True)
class CycleRow:
    """``cycles``: one formal cell of a speculative server, its cycle within the resident windows
    (``harness.measure.acceptance.cell_cycles``, docs/speculative.md "Cycle time"; also ``cycles.json``):
    tokens per verify step and acceptance (the cell's summed counts, ``source`` as in ``acceptance``),
    ``t_sd_stream_s`` the cycle time T_SD from the stream (s), ``verify_steps_per_s_per_request``
    (1 / T_SD), ``t_sd_implied_s`` = C x a / R (s) from the resident rate ``resident_rate_tok_s``, and
    whether useful throughput C x a / T_SD agrees with it (``reconciled``, ``reconcile_rel``)."""

    cell_id: str
    concurrency: int
    source: str | None = None
    tokens_per_step: float | None = None
    acceptance_rate: float | None = None
    t_sd_stream_s: float | None = None
    verify_steps_per_s_per_request: float | None = None
    t_sd_implied_s: float | None = None
    resident_rate_tok_s: float | None = None
    reconciled: bool | None = None
    reconcile_rel: float | None = None
    step_samples: int | None = None


TABLES: dict[str, TableModel] = {
    "cells": TableModel(CellResult, latency=True, row_keys=("cell_id",)),
    "rounds": TableModel(RoundResult, latency=True, row_keys=("round_id",)),
    "cycles": TableModel(CycleRow, row_keys=("cell_id",)),
}
"""A formal matrix's own ledger tables (its descriptor's ``row_models``; its ``waves``, which screens
and matched runs write too, are among ``harness.measure.rows.COMMON_TABLES``)."""
