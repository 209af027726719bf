"""Rate-sweep measures: goodput under SLOs, the achieved schedule, per-rate cells, the knee (pure).

**Goodput** (as sglang.bench_serving's ``--goodput``): requests that completed without error *and*
met every given SLO, divided by the round's duration (first planned send to last response end), in
requests/s. The SLO latencies use the peers' definitions so a number compares with theirs: TTFT
``f_i - s_i``, TPOT ``(d_i - f_i) / (N_i - 1)`` (``variant="bench-serving"`` of
:mod:`harness.measure.latency`; a one-token answer has no TPOT and passes that SLO), E2E ``d_i - s_i``.

**Achieved schedule**: per request, the planned send (round start + planned offset) against the actual
send ``s_i`` of its record; ``lag = s_i - planned``. A round *kept its schedule* when the p99 lag is at
most the tolerance; a max-concurrency cap that holds a request back shows up as lag too (and says so).

**Knee**: among the *steady* rates, the one with the highest goodput (the lowest such rate on ties);
past it, a higher offered rate no longer brings more requests that meet the SLOs. A rate is steady when
it has an ok round, none of its ok rounds is over-saturated (``saturated_rounds`` 0,
harness.measure.saturation: its goodput is a transient, not a steady state) and its client kept the
schedule (``schedule_kept``: a rate the client did not offer measures the client), and no round of it
was invalid for load (the simulator or the client fell behind: ``late``, from
:func:`harness.measure.unit_load.late_cells`). A cell without those columns counts as steady. When a
rate of higher goodput was left out for that, :func:`knee_of` says so (``note``); without a steady rate
the knee is withheld (None, with the reason).
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from harness.measure import latency
from harness.measure.table_model import TableModel
from harness.records import RequestRecord

NS = 1e9


@dataclass(frozen=True)
class Slo:
    """Latency objectives in seconds (None: not constrained)."""

    ttft_s: float | None = None
    tpot_s: float | None = None
    e2e_s: float | None = None

    def to_json(self) -> dict[str, float | None]:
        """The SLO as recorded beside the goodput."""
        return {"ttft_s": self.ttft_s, "tpot_s": self.tpot_s, "e2e_s": self.e2e_s}

    @property
    def empty(self) -> bool:
        """True when no objective is set (goodput is then the completed-request rate)."""
        return self.ttft_s is None and self.tpot_s is None and self.e2e_s is None


def meets(r: RequestRecord, slo: Slo) -> bool:
    """True when ``r`` succeeded with >= 1 token and met every objective of ``slo``."""
    f = r.first_token_ns
    if not r.ok or f is None:
        return False
    if slo.ttft_s is not None and (f - r.send_ns) / NS > slo.ttft_s:
        return False
    if slo.e2e_s is not None and (r.done_ns - r.send_ns) / NS > slo.e2e_s:
        return False
    n = r.n_tokens
    return not (slo.tpot_s is not None and n > 1 and (r.done_ns - f) / NS / (n - 1) > slo.tpot_s)


def span_s(records: Sequence[RequestRecord], start_ns: int | None = None) -> float:
    """Seconds from ``start_ns`` (default: the first send) to the last response end."""
    if not records:
        return math.nan
    s = min(r.send_ns for r in records) if start_ns is None else start_ns
    return (max(r.done_ns for r in records) - s) / NS


def goodput(records: Sequence[RequestRecord], slo: Slo, start_ns: int | None = None) -> float:
    """Requests/s that met every objective (module docstring)."""
    dur = span_s(records, start_ns)
    if not records or not dur > 0:
        return math.nan
    return sum(meets(r, slo) for r in records) / dur


def schedule(planned_ns: Sequence[int], records: Sequence[RequestRecord]) -> list[dict[str, Any]]:
    """One row per request: rid, planned and actual send (client monotonic ns) and the lag in seconds."""
    if len(planned_ns) != len(records):
        raise ValueError(f"{len(planned_ns)} planned sends for {len(records)} records")
    return [{"rid": r.rid, "planned_ns": int(p), "send_ns": int(r.send_ns), "lag_s": (r.send_ns - p) / NS}
            for p, r in zip(planned_ns, records, strict=True)]


def schedule_summary(rows: Sequence[Mapping[str, Any]], tolerance_s: float) -> dict[str, float | int | bool]:
    """``lag_p50_s lag_p99_s lag_max_s late`` (requests later than the tolerance) and ``schedule_kept``."""
    lags = np.asarray([float(r["lag_s"]) for r in rows], dtype=np.float64)
    if lags.size == 0:
        return {"lag_p50_s": math.nan, "lag_p99_s": math.nan, "lag_max_s": math.nan, "late": 0,
                "schedule_kept": True}
    p50, p99 = np.percentile(lags, [50, 99])
    return {"lag_p50_s": float(p50), "lag_p99_s": float(p99), "lag_max_s": float(lags.max()),
            "late": int((lags > tolerance_s).sum()), "schedule_kept": bool(p99 <= tolerance_s)}


def rate_row(records: Sequence[RequestRecord], *, start_ns: int, slo: Slo) -> dict[str, float | int]:
    """Throughput and latency of one round (or a pooled cell) at one rate."""
    ok = [r for r in records if r.ok]
    dur = span_s(records, start_ns)
    out_tok = sum(r.n_tokens for r in ok)
    in_tok = sum(int(r.prompt_tokens or r.input_len) for r in ok)
    row: dict[str, float | int] = {
        "n_requests": len(records), "n_ok": len(ok), "n_failed": len(records) - len(ok),
        "duration_s": dur,
        "request_throughput_req_s": len(ok) / dur if dur > 0 else math.nan,
        "output_throughput_tok_s": out_tok / dur if dur > 0 else math.nan,
        "input_throughput_tok_s": in_tok / dur if dur > 0 else math.nan,
        "goodput_req_s": goodput(records, slo, start_ns),
        "slo_met": sum(meets(r, slo) for r in records),
    }
    row.update(latency.columns(records))
    return row


def _best(rows: Sequence[Mapping[str, Any]]) -> dict[str, Any] | None:
    """The row of the highest finite goodput, lowest rate on ties; None if none."""
    g = "goodput_median_req_s"
    good = [r for r in rows if isinstance(r.get(g), (int, float)) and math.isfinite(float(r[g]))]
    if not good:
        return None
    best = max(float(r[g]) for r in good)
    return dict(min((r for r in good if float(r[g]) == best), key=lambda r: float(r["arrival_rate_req_s"])))


def unsteady(row: Mapping[str, Any], late: Mapping[str, str] | None = None) -> str | None:
    """Why a ``sweep_cells`` row is no steady state (module docstring), or None when it is one;
    ``late``: cell id -> why a round of it was invalid for load."""
    if late and row.get("cell_id") is not None and str(row["cell_id"]) in late:
        return late[str(row["cell_id"])]
    if row.get("rounds_ok") is not None and int(row["rounds_ok"]) == 0:
        return "no ok round"
    if row.get("saturated_rounds") is not None and int(row["saturated_rounds"]) > 0:
        return f"{int(row['saturated_rounds'])} over-saturated round(s)"
    if row.get("schedule_kept") is False:
        return "schedule not kept"
    return None


@dataclass(frozen=True)
class Knee:
    """The knee's row (None: withheld) and a note: why a rate of higher goodput was left out, or why
    the knee is withheld (None when neither applies)."""

    row: dict[str, Any] | None
    note: str | None


def knee_of(rows: Sequence[Mapping[str, Any]], late: Mapping[str, str] | None = None) -> Knee:
    """The knee of ``sweep_cells`` rows (module docstring): the best goodput among steady rates;
    ``late``: cell id -> why a round of that cell was invalid for load (such a cell is not steady)."""
    overall = _best(rows)
    steady = _best([r for r in rows if unsteady(r, late) is None])
    if overall is None or steady == overall:
        return Knee(steady, None)
    at = f"{float(overall['arrival_rate_req_s']):g} req/s"
    why = f"the highest goodput, at {at}, is not a steady state ({unsteady(overall, late)})"
    if steady is None:
        return Knee(None, f"withheld: no steady rate; {why}")
    return Knee(steady, f"{why}; the knee is the best steady rate")


def knee(rows: Sequence[Mapping[str, Any]]) -> dict[str, Any] | None:
    """The knee's row (``sweep_cells`` rows: ``arrival_rate_req_s``, ``goodput_median_req_s`` and,
    when present, ``rounds_ok`` / ``saturated_rounds`` / ``schedule_kept``): :func:`knee_of`'s row."""
    return knee_of(rows).row
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
    probe_id: str | None = None  # an SLA search's round: its measurement (harness.ids.probe_id); null in a sweep
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


TABLES: dict[str, TableModel] = {
    "sweep_cells": TableModel(SweepCellRow, latency=True, row_keys=("cell_id",)),
    "sweep_rounds": TableModel(SweepRoundRow, latency=True, row_keys=("round_id",)),
}
"""A rate sweep's ledger tables (its descriptor's ``row_models``)."""
