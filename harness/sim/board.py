"""The counters of a simulator cluster's processes, in one shared-memory table (edge module: shared memory).

Each process of ``harness.sim.cluster`` owns one row and rewrites it after every forward; any process
answering ``/server_info`` reads all rows, so the lateness counters it reports (``internal_states[0]``,
which the harness reads before and after each wave) cover every process, not only the one the kernel
gave the connection. Rows are plain doubles written without a lock: a reader may see a row that is one
forward old, never a value that was not written.
"""

from __future__ import annotations

from collections.abc import Mapping
from multiprocessing.context import BaseContext
from typing import Any

FIELDS = (
    "pid", "sim_decode_steps", "sim_prefill_forwards", "sim_late_steps", "sim_late_decode_steps",
    "sim_lateness_total_s", "sim_decode_lateness_total_s",
    "sim_wake_lateness_max_s", "sim_emit_lateness_max_s", "sim_generation_tokens_total",
    "num_running_reqs", "num_queue_reqs", "sim_generate_requests", "sim_prompt_tokens_total",
    "sim_cached_tokens_total",
)
_MAX = frozenset({"sim_wake_lateness_max_s", "sim_emit_lateness_max_s"})
_INT = frozenset(FIELDS) - _MAX - {"sim_lateness_total_s", "sim_decode_lateness_total_s"}


class ClusterBoard:
    """``processes`` rows of ``FIELDS`` in shared memory (pass it to the child processes at spawn)."""

    def __init__(self, processes: int, ctx: BaseContext) -> None:
        if processes < 1:
            raise ValueError("a cluster has at least one process")
        self.processes = processes
        self._cells: Any = ctx.RawArray("d", processes * len(FIELDS))

    def publish(self, slot: int, row: Mapping[str, float]) -> None:
        """Rewrite row ``slot`` (0-based) with ``row``'s values for ``FIELDS`` (missing ones: 0)."""
        n = len(FIELDS)
        self._cells[slot * n:(slot + 1) * n] = [float(row.get(k, 0.0)) for k in FIELDS]

    def rows(self) -> list[dict[str, Any]]:
        """Every process's row (``pid`` 0: not started yet)."""
        n = len(FIELDS)
        cells = self._cells[:]
        return [{k: (int(v) if k in _INT else v) for k, v in zip(FIELDS, cells[i * n:(i + 1) * n], strict=True)}
                | {"process": i} for i in range(self.processes)]

    def totals(self) -> dict[str, Any]:
        """The cluster's counters: sums over the processes (maxima for the ``_max_`` fields). Late steps
        and model time lost are summed: one server that fell behind at the same instant in every
        process would count once, so the sum is an upper bound on what one server would have lost."""
        rows = [r for r in self.rows() if r["pid"]]
        out: dict[str, Any] = {}
        for k in FIELDS[1:]:
            vals = [r[k] for r in rows]
            out[k] = (max(vals, default=0.0) if k in _MAX else sum(vals))
        out["sim_processes"] = self.processes
        out["sim_processes_started"] = len(rows)
        return out
