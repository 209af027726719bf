"""The rows of open-loop rounds at offered rates (pure): what a rate sweep and an SLA search's probes
compute from their rounds alike.

A measured round's ``sweep_rounds`` row (:func:`round_row`: throughput, both latency definitions,
goodput under the spec's SLOs, the schedule it kept, saturation) and one ``sweep_cells`` row per
offered rate (:func:`sweep_cells`: medians over the rate's ok rounds, its pooled latency). Rows are
built as their row models (harness.measure.rows.build: a missing identity or measure is a
``TypeError``), then flattened; both ledger tables hold no formal cells.
"""

from __future__ import annotations

import math
import statistics
from collections.abc import Sequence
from typing import Any

from harness import ids
from harness.inputs.spec import SweepSpec
from harness.measure import sweep as sw
from harness.measure.rows import build, row_dict
from harness.measure.saturation import saturation
from harness.records import RequestRecord


def cell_id(rate: float) -> str:
    """Stable id of the cell of one offered rate (``harness.ids.sweep_cell_id``)."""
    return ids.sweep_cell_id(rate)


def slo_of(spec: SweepSpec) -> sw.Slo:
    """The spec's latency objectives in seconds."""
    s = spec.slo
    return sw.Slo(*[None if v is None else v / 1000 for v in (s.ttft_ms, s.tpot_ms, s.e2e_ms)])


def round_row(spec: SweepSpec, rate: float, round_index: int, records: Sequence[RequestRecord], start_ns: int,
              sched: Sequence[dict[str, Any]], status: str) -> dict[str, Any]:
    """The ``rounds`` row of one measured round from its records, its start (monotonic ns) and its
    schedule rows (``schedule.jsonl``: ``lag_s``, ``client_lag_s``, ``cap_wait_s`` per request)."""
    tol = spec.schedule_tolerance_ms / 1000
    client_rows = [{"lag_s": r["client_lag_s"]} for r in sched]
    summ = sw.schedule_summary(client_rows, tol)
    total = sw.schedule_summary(sched, tol)
    cid = cell_id(rate)
    row = {"round_id": ids.round_id(cid, round_index), "cell_id": cid, "round_index": round_index,
           "arrival_rate_req_s": rate, "status": status}
    row |= sw.rate_row(records, start_ns=start_ns, slo=slo_of(spec))
    row |= {f"client_{k}": v for k, v in summ.items()} | {
        "send_lag_p99_s": total["lag_p99_s"],
        "capped_requests": sum(1 for r in sched if float(r.get("cap_wait_s", 0.0)) > 0)}
    row |= saturation(records).columns()
    return row_dict(build("sweep_rounds", row))


def sweep_cells(spec: SweepSpec, rounds: Sequence[dict[str, Any]], by_rate: dict[float, list[RequestRecord]],
                starts: dict[float, list[int]]) -> list[dict[str, Any]]:
    """One row per rate of ``spec.rate_list`` that has rounds, in that order: medians of the round
    values plus the rate's pooled latency."""
    out: list[dict[str, Any]] = []
    for rate in spec.rate_list:
        rows = [r for r in rounds if r["arrival_rate_req_s"] == rate]
        if not rows:
            continue
        ok = [r for r in rows if r["status"] == "ok"]
        cell: dict[str, Any] = {"cell_id": cell_id(rate), "workload": "sweep", "arrival_rate_req_s": rate,
                                "rounds_ok": len(ok), "rounds_planned": spec.rounds,
                                "concurrency": spec.arrivals.max_concurrency or 0}
        for key, unit in (("request_throughput", "req_s"), ("output_throughput", "tok_s"),
                          ("input_throughput", "tok_s"), ("goodput", "req_s")):
            vals = [float(r[f"{key}_{unit}"]) for r in ok if not math.isnan(float(r[f"{key}_{unit}"]))]
            cell[f"{key}_median_{unit}"] = statistics.median(vals) if vals else math.nan
            cell[f"{key}_min_{unit}"] = min(vals) if vals else math.nan
            cell[f"{key}_max_{unit}"] = max(vals) if vals else math.nan
        recs = by_rate.get(rate, [])
        cell |= {k: v for k, v in sw.rate_row(recs, start_ns=min(starts[rate]), slo=slo_of(spec)).items()
                 if k.startswith(("ttft", "tpot", "itl", "e2e"))}
        cell["schedule_kept"] = all(bool(r["client_schedule_kept"]) for r in rows)
        cell["client_lag_p99_s"] = max(float(r["client_lag_p99_s"]) for r in rows)
        cell["saturated_rounds"] = sum(1 for r in ok if r.get("saturated") is True)
        out.append(row_dict(build("sweep_cells", cell)))
    return out
