"""Trace-replay specs (``kind: trace-replay``, protocol class ``trace-replay``): a Mooncake-format trace
replayed open loop over the frozen corpus imported from it (pure, reads YAML).

A replay is its own protocol class, never formal: its requests are the trace's (each one's prompt the
corpus case of its line, ``max_new_tokens`` the line's ``output_length`` with ``ignore_eos``), sent at
the trace's timestamps divided by ``speed``, at most ``max_concurrency`` in flight when given. The
achieved schedule and the prefix-cache hits against those the trace implies are checked
(docs/replay.md).

Example::

    name: mooncake-replay
    kind: trace-replay
    claim_class: native-ar
    service: profiles/sim-control.yaml
    corpus: ../corpora/mc-small           # dsv4h corpus import-trace trace.jsonl --name mc-small
    trace: ../tests/fixtures/traces/mooncake-small.jsonl
    speed: 2                               # twice as fast as recorded
    max_concurrency: 32
"""

from __future__ import annotations

from pathlib import Path
from typing import Any, Literal

from pydantic import Field

from harness.inputs.spec.base import MAX_CONCURRENCY, MAX_SECONDS, SpecPaths
from harness.inputs.spec.service import OneServiceSpec


class ReplaySpec(OneServiceSpec):
    """A trace replay (``kind: trace-replay``)."""

    kind: Literal["trace-replay"] = Field("trace-replay", description="spec kind")
    protocol_class: Literal["trace-replay"] = Field("trace-replay", description="evidence protocol class (fixed "
                                                    "by the kind)")
    corpus: str = Field(min_length=1, max_length=4096, description="frozen corpus imported from the trace "
                        "('dsv4h corpus import-trace')")
    trace: str = Field(min_length=1, max_length=4096, description="the Mooncake JSONL trace the corpus was "
                       "imported from (its timestamps are the schedule; its SHA-256 must match the corpus)")
    speed: float = Field(1.0, gt=0, le=1e6, allow_inf_nan=False,
                         description="replay speed: send offset = trace timestamp / speed (ratio)")
    max_concurrency: int | None = Field(None, ge=1, le=MAX_CONCURRENCY,
                                        description="at most this many requests in flight; later ones wait (count)")
    lateness_tolerance_ms: float = Field(50.0, gt=0, le=60_000, allow_inf_nan=False,
                                         description="a request the client sent later than this after its "
                                         "scheduled time is late; any late request is a finding (ms)")
    cached_tolerance_pct: float = Field(5.0, ge=0, le=100, allow_inf_nan=False,
                                        description="reported cached prompt tokens may differ from those the "
                                        "trace implies by this share of the implied total (percent)")
    request_timeout_s: float = Field(600.0, gt=0, le=MAX_SECONDS, allow_inf_nan=False,
                                     description="longest silence tolerated while reading a response (seconds)")
    def spec_paths(self, base: Path) -> SpecPaths:
        """The imported corpus (workload ``replay``), its ``trace`` file and the oracles."""
        return self.corpus_paths(base, replay=self.corpus, trace=self.trace)


    @property
    def analysis_plan(self) -> None:
        """Replays name no analysis plan (the run skeleton asks)."""
        return None


def replay_definition(spec: ReplaySpec) -> dict[str, Any]:
    """What the schedule depends on (hashed into the plan id)."""
    return {"speed": spec.speed, "max_concurrency": spec.max_concurrency}
