"""The trace-replay section of a report snapshot (pure; definitions in docs/replay.md).

Contract: :func:`replay_entry` turns a trace replay's ``replay.json`` (harness.run.replay: its
``replay_runs`` row) into a ``replays`` entry: the trace (SHA-256, block size), the speed and cap, requests
ok, output throughput (tokens/s), TTFT p50 (s), the achieved schedule (client lateness max and p99 in
seconds, late requests, kept) and the prefix-cache hits (expected and reported cached prompt tokens, both
hit ratios, whether they agree within the spec's tolerance). Absent ``replay.json`` (or one without its
row) gives ``None``.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from harness.evidence.verdict import Verdict
from harness.report.snapshot.archives import ArchiveContent
from harness.report.snapshot.io import json_value
from harness.report.snapshot.validity import mark_run

__all__ = ["replay_entry"]

KEYS = ("trace_sha256", "block_size_tokens", "speed", "max_concurrency", "n_requests", "n_ok", "duration_s",
        "output_throughput_tok_s", "ttft_p50_s", "client_lateness_max_s", "client_lateness_p99_s",
        "late_requests", "lateness_tolerance_s", "schedule_kept", "prompt_tokens", "expected_cached_tokens",
        "reported_cached_tokens", "expected_hit_ratio", "reported_hit_ratio", "cached_tolerance_pct",
        "cached_agree", "cached_mismatch_requests")


def replay_snapshot_entry(c: ArchiveContent, base: Mapping[str, Any], verdict: Verdict) -> dict[str, Any] | None:
    """The trace-replay kind's snapshot entry (:func:`replay_entry`) marked by the archive's verdict."""
    rep = replay_entry(c.replay, c.archive_id, base)
    return mark_run(rep, verdict) if rep is not None else None


def replay_entry(doc: Mapping[str, Any] | None, archive_id: str, base: Mapping[str, Any]) -> dict[str, Any] | None:
    """One ``replays`` entry (module docstring); ``base`` is the archive's snapshot entry."""
    row = doc.get("row") if isinstance(doc, Mapping) else None
    if not isinstance(row, Mapping):
        return None
    return {"archive_id": archive_id, "campaign": base["campaign"], "claim_class": base["claim_class"],
            "protocol_class": base["protocol_class"], "status": base["status"], "simulated": base["simulated"],
            "created_wall": base["created_wall"]} | {k: json_value(row.get(k)) for k in KEYS}
