"""What campaign and ABBA runs share (edge module): progress reporting, the event loop, GPU
memory sampling, the /metrics residency witness and the governance check before a run."""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from dataclasses import asdict
from pathlib import Path
from typing import Any, Protocol

from harness import metrics as m
from harness.archive import ArchiveWriter
from harness.execution import MetricsWitness, witness_summary
from harness.records import RequestRecord
from harness.service.memory import MemorySampler
from harness.spec import AbbaSpec, CampaignSpec, ServiceProfile


class Reporter(Protocol):
    """Receives progress events (``kind`` plus fields); the CLI renders them."""

    def __call__(self, kind: str, **data: Any) -> None: ...


def silent(kind: str, **data: Any) -> None:
    return None


def record_witness(writer: ArchiveWriter, witness: MetricsWitness, recs: list[RequestRecord], wave_id: str,
                   concurrency: int) -> None:
    """Append what /metrics reported during the wave's resident window to ``server_metrics.jsonl``."""
    samples = witness.take()
    if not witness.available and not samples:
        return
    win = m.resident_window(recs)
    writer.append_jsonl("server_metrics.jsonl", witness_summary(wave_id, concurrency, win.start_ns, win.end_ns,
                                                                samples) | {"phase": recs[0].phase if recs else ""})


def start_memory_sampler(profile: ServiceProfile) -> MemorySampler | None:
    """Sample GPU memory every ``memory_sample_interval_s`` while the service runs (GPU backends)."""
    if not profile.checks_gpus:
        return None
    sampler = MemorySampler(interval_s=profile.memory_sample_interval_s, source=profile.gpu_owners_source)
    sampler.start()
    return sampler


def write_memory(writer: ArchiveWriter, sampler: MemorySampler) -> None:
    """Store the samples (``memory.parquet``) and their summary ("peak observed in samples")."""
    samples = sampler.samples()
    if samples:
        writer.write_table("memory.parquet", sampler.table())
    writer.write_json("memory.json", {
        "summary": [asdict(s) for s in sampler.summary()], "interval_s": sampler.interval_s,
        "errors": sampler.errors[:20], "error_count": sampler.error_count,
        "note": "peak observed in samples, not an allocator peak"})


def loop_factory() -> Callable[[], asyncio.AbstractEventLoop]:
    try:
        import uvloop

        return uvloop.new_event_loop
    except ImportError:  # pragma: no cover - uvloop is a dependency on Linux
        return asyncio.new_event_loop


def check_governance(spec: CampaignSpec | AbbaSpec, workspace: Path, source: str) -> dict[str, Any]:
    """Refuse a run that tests a closed direction without new evidence (before any service starts);
    returns what is recorded in the archive's ``governance.json``."""
    from harness.governance_io import check_direction

    out: dict[str, Any] = {}
    if spec.direction is not None:
        out["direction"] = check_direction(workspace, spec.direction, spec.reopen.evidence if spec.reopen else None,
                                           spec.reopen.reason if spec.reopen else None, source=source)
    return out
