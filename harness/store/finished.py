"""One in-memory view of a finished archive, shared by the ledgers and the evidence rules (edge module:
files).

Finishing a run reads its records once: :class:`FinishedArchive` holds the archive's manifest, its raw
records table (read once, or handed over by the writer that streamed them) and the per-request rows
computed from it once (:func:`request_rows`); ``harness.store.ledger.ingest_archive`` and
``harness.evidence.io.check_archive`` both take it. Verification happens once per view:
:func:`view_after_finalize` trusts the manifest the writer has just written (it hashed every file
inside the same critical section), :func:`load_finished` re-hashes every file of an archive already
on disk (``open_verified``) before anything of it is read.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Mapping
from dataclasses import dataclass
from functools import cached_property
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.compute as pc

from harness.measure.metrics import flat_list_column, request_timings
from harness.store.archive import Archive, ArchiveWriter, open_archive, open_verified
from harness.store.runblock import RunBlock
from harness.store.view import ArchiveView

__all__ = ["FinishedArchive", "load_finished", "view_after_finalize", "view_of"]


def request_rows(records: pa.Table, anchor: Mapping[str, Any] | None = None) -> pa.Table:
    """Per-request summary rows from a raw-record table (no per-event arrays): the four instants
    (``send_ns``, ``first_token_ns``, ``last_token_ns``, ``done_ns``: client monotonic int64 ns, -1 when
    absent), latencies in seconds, token counts, count method, output hash, and the run's wall-clock
    anchor (``anchor_wall``, ns since the epoch, and ``anchor_perf_ns``: one wall time and the
    monotonic reading taken with it) so a notebook can place every instant on the wall clock and
    recompute every rate and latency from this table alone. Vectorised over the flattened event
    arrays (harness.measure.metrics)."""
    n = records.num_rows
    t = request_timings(records)
    ooff, oids = flat_list_column(records.column("output_ids"))
    oids32 = oids.astype("<i4", copy=False)
    hashes = [
        hashlib.sha256(oids32[ooff[i]:ooff[i + 1]].tobytes()).hexdigest()[:16] if ooff[i + 1] > ooff[i] else None
        for i in range(n)
    ]
    errors = records.column("error")
    keep = ["rid", "cell_id", "wave_id", "round_index", "wave_index", "phase", "workload", "case_id",
            "input_hash", "input_len", "concurrency", "prompt_tokens", "cached_tokens", "completion_tokens",
            "finish_reason", "http_status", "error", "count_method"]
    out = records.select([c for c in keep if c in records.column_names])
    anchor = anchor or {}
    extra = {
        "send_ns": pa.array(t.send_ns, type=pa.int64()),
        "first_token_ns": pa.array(t.first_ns, type=pa.int64()),
        "last_token_ns": pa.array(t.last_ns, type=pa.int64()),
        "done_ns": pa.array(t.done_ns, type=pa.int64()),
        "anchor_wall": pa.array([anchor.get("wall_ns")] * n, type=pa.int64()),  # ns since the epoch, UTC
        "anchor_perf_ns": pa.array([anchor.get("perf_counter_ns")] * n, type=pa.int64()),
        "first_event_tokens": pa.array(t.first_tokens),
        "n_tokens": pa.array(t.n_tokens),
        "n_events": pa.array(t.n_events),
        "ttft_s": pa.array(t.ttft_s, type=pa.float64()),
        "e2e_s": pa.array(t.e2e_s, type=pa.float64()),
        "ok": pc.is_null(errors),
        "output_hash16": pa.array(hashes, type=pa.string()),
    }
    for name, col in extra.items():
        out = out.append_column(name, col)
    return out


def run_anchor(archive: Archive) -> dict[str, Any]:
    """The run's wall-clock anchor (the ``run-start`` event of ``events.jsonl``); {} when absent."""
    path = archive.path / "events.jsonl"
    if not path.is_file():
        return {}
    for line in path.read_text(encoding="utf-8").splitlines():
        try:
            event = json.loads(line)
        except ValueError:
            continue
        if isinstance(event, dict) and event.get("event") == "run-start":
            return {k: event.get(k) for k in ("wall_ns", "perf_counter_ns", "wall_iso")}
    return {}


@dataclass(frozen=True)
class FinishedArchive:
    """A verified, finalized archive with its records read once (``records``) and its per-request
    rows computed once (``requests``, None when it has no record)."""

    archive: Archive
    records: pa.Table

    @property
    def path(self) -> Path:
        return self.archive.path

    @property
    def archive_id(self) -> str:
        return self.archive.archive_id

    @property
    def status(self) -> str:
        return self.archive.status

    @property
    def manifest(self) -> dict[str, Any]:
        return self.archive.manifest

    @cached_property
    def run(self) -> RunBlock:
        """The typed run block (parsed once)."""
        return self.archive.run

    @cached_property
    def files(self) -> ArchiveView:
        """The archive's declared result files, each read on first use (:mod:`harness.store.view`)."""
        return ArchiveView(self.archive)

    @cached_property
    def anchor(self) -> dict[str, Any]:
        """The run's wall-clock anchor (:func:`run_anchor`)."""
        return run_anchor(self.archive)

    @cached_property
    def requests(self) -> pa.Table | None:
        """:func:`request_rows` of the records with the run's anchor, computed on first use only."""
        return request_rows(self.records, self.anchor) if self.records.num_rows else None


def view_after_finalize(writer: ArchiveWriter, path: Path) -> FinishedArchive:
    """The view of the archive ``writer`` has just finalized at ``path``: its manifest (the one the
    writer wrote after hashing every file, not re-hashed) and the records the writer streamed (read
    at most once: the table it already read back, else one read now)."""
    return FinishedArchive(open_archive(path), writer.records_table())


def view_of(archive: Archive | FinishedArchive) -> FinishedArchive:
    """The view of an archive the caller opened (and verified when it needs to): its records read once;
    a view is returned as it is."""
    return archive if isinstance(archive, FinishedArchive) else FinishedArchive(archive, archive.records_table())


def load_finished(archive: Archive | Path) -> FinishedArchive:
    """The view of an archive already on disk: every file re-hashed once (``ArchiveError`` naming each
    changed, missing or extra file), then its records read once."""
    return view_of(open_verified(archive.path if isinstance(archive, Archive) else archive))
