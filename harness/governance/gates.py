"""Gates (pure): a quantity computed from one archive, compared with a threshold.

The record notes' gates (e.g. a real-shape hardware gate projecting at least 0.50 ms/token, the
exact-repeat and fresh-response gates) made exact: ``gate_value`` computes the quantity from plain
archive data, ``gate_passes`` applies the operator. Reading archives is ``harness.governance.io``'s job.
"""

from __future__ import annotations

import math
from collections import defaultdict
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Literal

from pydantic import Field, field_validator

from harness.formats import Strict
from harness.governance.base import SINGLE_STREAM_LAST, SLUG, cell_value, measured_records
from harness.hashing import ids_hash16
from harness.measure import metrics as m
from harness.records import RequestRecord
from harness.service.identity.mapped_rules import library_workers

# --- gates -----------------------------------------------------------------------------------

Quantity = Literal[
    "cell.median_tok_s", "cell.http_output_tok_s", "abba.change_pct", "abba.drift_pct", "abba.spread_pct",
    "abba.ms_per_token_saved", "requests.max_cached_tokens", "requests.failed", "requests.measured",
    "requests.distinct_outputs_per_case_max", "single_stream.median_tps", "single_stream.p10_tps",
    "mapped.library_workers",
]
Op = Literal[">=", "<=", "==", ">", "<"]

FIRST_QUANTITY_NAMES = {"cell.median": "cell.median_tok_s", "cell.http_rate": "cell.http_output_tok_s",
                        "abba.ratio_pct": "abba.change_pct"}
"""Gate files written before the row models named a quantity by its current name are read under it: a
cell's first names (the ``cells`` columns ``median_tok_s``, ``http_output_tok_s``), an ABBA screen's
``abba.ratio_pct`` (a percent change, ``change_pct`` since ledger schema 6)."""


class GateSelectors(Strict):
    """Which part of the archive a gate reads. Requests are always the measured ones."""

    workload: Literal["decode", "prefill"] | None = None
    concurrency: int | None = Field(None, ge=1)
    last_token: int = Field(SINGLE_STREAM_LAST, ge=2, description="single_stream: tokens 1..last_token")
    library: str | None = Field(None, max_length=256,
                                description="mapped.library_workers: file name glob of the shared object")
    sha256: str | None = Field(None, pattern=r"^[0-9a-f]{64}$",
                               description="mapped.library_workers: the SHA-256 the mapped file must have")


class GateSpec(Strict):
    """A gate file (``campaigns/gates/*.yaml``): ``quantity op threshold`` in ``unit``."""

    name: str = Field(pattern=SLUG)
    description: str = ""
    quantity: Quantity
    op: Op
    threshold: float
    unit: str
    selectors: GateSelectors = Field(default_factory=GateSelectors)

    @field_validator("quantity", mode="before")
    @classmethod
    def _first_names(cls, v: Any) -> Any:
        return FIRST_QUANTITY_NAMES.get(v, v) if isinstance(v, str) else v

    @field_validator("threshold")
    @classmethod
    def _finite(cls, v: float) -> float:
        if math.isnan(v) or math.isinf(v):
            raise ValueError("threshold must be a finite number")
        return v


@dataclass(frozen=True)
class GateInputs:
    """One archive's content as the gate quantities read it."""

    archive_id: str
    cells: Sequence[Mapping[str, Any]] = ()
    comparison: Mapping[str, Any] | None = None
    abba_concurrency: int | None = None
    records: Sequence[RequestRecord] = ()
    services: Sequence[Mapping[str, Any]] = ()
    """``service.json``'s service records (``stack.mapped.at_start`` is read)."""


@dataclass(frozen=True)
class GateMeasure:
    """A gate quantity's value (None when it cannot be computed), its sample size and how."""

    value: float | None
    n: int
    detail: str


def ms_per_token_saved(concurrency: int, control_rate: float, candidate_rate: float) -> float:
    """Per-stream time saved per token in milliseconds: ``1000*C/control - 1000*C/candidate``.

    At an aggregate rate R (tok/s) with C resident streams each stream waits C/R seconds per token.
    """
    return 1000.0 * concurrency / control_rate - 1000.0 * concurrency / candidate_rate


def gate_value(spec: GateSpec, data: GateInputs) -> GateMeasure:
    """Compute ``spec.quantity`` from one archive's content."""
    q, sel = spec.quantity, spec.selectors
    if q in ("cell.median_tok_s", "cell.http_output_tok_s"):
        if not data.cells:
            return GateMeasure(None, 0, "archive has no formal cells")
        if sel.workload is None or sel.concurrency is None:
            return GateMeasure(None, 0, f"{q} needs selectors workload and concurrency")
        v, n, d = cell_value(data.cells, sel.workload, sel.concurrency, q.removeprefix("cell."))
        return GateMeasure(v, n, d)
    if q.startswith("abba."):
        res = (data.comparison or {}).get("result") or {}
        if not res:
            return GateMeasure(None, 0, "archive has no ABBA comparison")
        if q == "abba.ms_per_token_saved":
            c = data.abba_concurrency
            ctl, cand = res.get("control_mean"), res.get("candidate_mean")
            if c is None or ctl is None or cand is None or not (ctl > 0 and cand > 0):
                return GateMeasure(None, 0, "comparison lacks concurrency or arm means")
            v = ms_per_token_saved(c, float(ctl), float(cand))
            return GateMeasure(v, 2, f"1000*{c}/{float(ctl):.3f} - 1000*{c}/{float(cand):.3f} (arm means, tok/s)")
        key = q.split(".", 1)[1]
        v = res.get(key)
        if v is None or math.isnan(float(v)):
            return GateMeasure(None, 0, f"comparison has no {key}")
        return GateMeasure(float(v), len(res.get("legs") or ()), f"{key} of the screen")
    if q == "mapped.library_workers":
        return _library_workers(sel, data.services)
    recs = measured_records(data.records, workload=sel.workload, concurrency=sel.concurrency)
    if q == "requests.measured":
        return GateMeasure(float(len(recs)), len(recs), "measured requests")
    if not recs:
        return GateMeasure(None, 0, "no measured requests match the selectors")
    if q == "requests.failed":
        bad = [r for r in recs if not r.ok]
        return GateMeasure(float(len(bad)), len(recs), f"{len(bad)} of {len(recs)} measured requests failed")
    if q == "requests.max_cached_tokens":
        unknown = sum(1 for r in recs if r.cached_tokens is None)
        if unknown:
            return GateMeasure(None, len(recs), f"{unknown} of {len(recs)} measured requests did not report "
                               "cached_tokens (freshness unverified)")
        mx = max(int(r.cached_tokens or 0) for r in recs)
        hit = sum(1 for r in recs if (r.cached_tokens or 0) > 0)
        return GateMeasure(float(mx), len(recs), f"{hit} of {len(recs)} measured requests had cached_tokens > 0")
    if q == "requests.distinct_outputs_per_case_max":
        by_case: dict[str, set[str]] = defaultdict(set)
        for r in recs:
            by_case[r.case_id].add(ids_hash16(r.output_ids) + ("" if r.ok else "!failed"))
        worst = max(by_case.items(), key=lambda kv: (len(kv[1]), kv[0]))
        return GateMeasure(float(len(worst[1])), len(recs),
                           f"{len(recs)} measured requests over {len(by_case)} case(s); most distinct outputs: "
                           f"case {worst[0]} ({len(worst[1])})")
    if q in ("single_stream.median_tps", "single_stream.p10_tps"):
        s = m.single_stream_decode(recs, sel.last_token)
        if s.n == 0:
            return GateMeasure(None, 0, f"no measured request reached {sel.last_token} tokens")
        v = s.median if q.endswith("median_tps") else s.p10
        return GateMeasure(v, s.n, f"tokens 1..{sel.last_token} after TTFT over {s.n} of {len(recs)} requests")
    raise AssertionError(f"unhandled quantity {q}")  # pragma: no cover - Literal is exhaustive


def _library_workers(sel: GateSelectors, services: Sequence[Mapping[str, Any]]) -> GateMeasure:
    """Worker PIDs (``harness.service.identity.mapped_rules.worker_pids``) of every service's start snapshot that map
    a file matching ``sel.library`` (with ``sel.sha256`` when given)."""
    if sel.library is None:
        return GateMeasure(None, 0, "mapped.library_workers needs selector library")
    found = [((s.get("stack") or {}).get("mapped") or {}).get("at_start") for s in services
             if isinstance(s, Mapping)]
    snaps: list[Mapping[str, Any]] = [m for m in found if isinstance(m, Mapping)]
    if not snaps:
        return GateMeasure(None, 0, "archive records no mapped libraries (stack.mapped.at_start)")
    counts = [library_workers(m, sel.library, sel.sha256) for m in snaps]
    hit, total = sum(c[0] for c in counts), sum(c[1] for c in counts)
    what = sel.library + (f" with sha256 {sel.sha256[:12]}..." if sel.sha256 else "")
    return GateMeasure(float(hit), total, f"{hit} of {total} worker processes over {len(snaps)} service(s) "
                       f"map {what} at start")


def gate_passes(op: str, value: float | None, threshold: float) -> bool:
    """``value op threshold``; a missing or NaN value never passes."""
    if value is None or math.isnan(value):
        return False
    return {">=": value >= threshold, "<=": value <= threshold, "==": value == threshold,
            ">": value > threshold, "<": value < threshold}[op]


