"""What the governance modules share (pure): the strict model base, the slug pattern, and reading
one formal cell or the measured requests of an archive's plain data."""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from typing import Any

from harness.records import RequestRecord

SLUG = r"^[a-z0-9][a-z0-9._-]*$"
SINGLE_STREAM_LAST = 100



def cell_value(cells: Sequence[Mapping[str, Any]], workload: str, concurrency: int,
               column: str = "median_tok_s") -> tuple[float | None, int, str]:
    """The ``column`` of the one complete cell of ``workload`` at ``concurrency``.

    Returns (value, n rounds, detail); value is None when no complete cell matches.
    """
    hits = [c for c in cells if c.get("workload") == workload and int(c.get("concurrency") or 0) == concurrency]
    if not hits:
        return None, 0, f"no {workload} cell at C{concurrency}"
    if len(hits) > 1:
        return None, 0, f"{len(hits)} {workload} cells at C{concurrency} (ambiguous)"
    c = hits[0]
    if c.get("status") != "complete":
        return None, 0, f"{workload} C{concurrency} cell is {c.get('status')}, not complete"
    v = c.get(column)
    if v is None or (isinstance(v, float) and math.isnan(v)):
        return None, 0, f"{workload} C{concurrency} cell has no {column}"
    n = sum(1 for s in (c.get("round_status") or []) if s == "ok")
    return float(v), n, f"{column} of {n} ok rounds"


def measured_records(records: Sequence[RequestRecord], *, workload: str | None = None,
                     concurrency: int | None = None) -> list[RequestRecord]:
    """Records of measured waves (warmups never count), optionally of one workload/concurrency."""
    return [r for r in records if r.phase == "measured"
            and (workload is None or r.workload == workload)
            and (concurrency is None or r.concurrency == concurrency)]
