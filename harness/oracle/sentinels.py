"""Oracle sentinels around measurement (edge module): run fixed-input oracles on a live service
before and after it is measured, and keep every result for the archive (``oracles.json``)."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import asdict
from pathlib import Path
from typing import Any

from harness.oracle.live import check_oracle
from harness.oracle.model import Oracle, load_oracle
from harness.service.launch.manager import RunningService

__all__ = ["load_sentinels", "run_sentinels"]


def load_sentinels(paths: Sequence[Path]) -> list[Oracle]:
    """Load the spec's oracle files (SpecError names a malformed one) before anything starts."""
    return [load_oracle(p) for p in paths]


def run_sentinels(svc: RunningService, oracles: Sequence[Oracle], when: str, label: str, *,
                  timeout_s: float | None = None) -> list[dict[str, Any]]:
    """Check every oracle on ``svc``; one archive row per check (passed or not, never raised).
    ``timeout_s``: the run's silence bound for each check (default: the oracle module's)."""
    rows = []
    pid = svc.process.pid if svc.process else None
    extra: dict[str, Any] = {} if timeout_s is None else {"timeout_s": timeout_s}
    for o in oracles:
        r = check_oracle(svc.url, o, protocol=svc.profile.wire_protocol, model=svc.profile.identity.served_model_name,
                         **extra)
        d = asdict(r)
        d["got_ids"] = list(r.got_ids)
        rows.append(d | {"service": label, "service_pid": pid, "when": when,
                         "output_hash16": r.got_hash16})
    return rows
