"""The report's cold, restarted and warm TTFT rows (pure; docs/coldness.md).

:func:`ttft_class_rows` gives one row per formal cell whose results carry the TTFT class columns
(``harness.measure.coldness.CELL_COLUMNS``; archives made before them give none): workload,
concurrency, and per class its count and TTFT statistics in milliseconds (None where the class has no
request). Cold and restarted figures come from every request of the cell of that class (warmups
included); warm figures from the measured requests of its ok rounds without a cold or restarted one.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from typing import Any

from harness.measure.coldness import CELL_COLUMNS

__all__ = ["ttft_class_rows"]


def _ms(v: Any) -> float | None:
    return float(v) * 1000 if isinstance(v, int | float) and math.isfinite(v) else None


def _mark(cell: Mapping[str, Any]) -> str:
    rules = cell.get("invalid_rules") or []
    return f"INVALID ({', '.join(str(r) for r in rules)})" if rules else ""


def ttft_class_rows(entry: Mapping[str, Any]) -> list[dict[str, Any]]:
    """Rows of a formal snapshot entry's cells, prefill before decode, by concurrency; keys ``workload``,
    ``concurrency``, ``cold_n``, ``cold_p50``, ``cold_max``, ``restarted_n``, ``restarted_p50``,
    ``restarted_max``, ``warm_n``, ``warm_p50``, ``warm_p90``, ``warm_p99`` (ms), and ``mark``
    (``INVALID (rules)`` for a cell the snapshot marks invalid, else '')."""
    rows = []
    for c in entry.get("cells") or []:
        if not all(k in c for k in CELL_COLUMNS):
            continue
        row: dict[str, Any] = {"workload": c.get("workload"), "concurrency": c.get("concurrency"),
                               "mark": _mark(c)}
        for col in CELL_COLUMNS:
            name = col.removeprefix("ttft_").removesuffix("_s")
            row[name] = int(c[col] or 0) if col.endswith("_n") else _ms(c[col])
        rows.append(row)
    return sorted(rows, key=lambda r: (0 if r["workload"] == "prefill" else 1, int(r["concurrency"] or 0)))
