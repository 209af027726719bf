"""The archive manifest's ``run`` block: one typed, versioned model (pure).

Every reader goes through :func:`read_run_block`; every writer builds a :class:`RunBlock`.

Run block format history (``RUN_BLOCK_VERSION``, key ``run_format``):
  1 - archive format 1 (2026-11-29): an untyped dict without ``run_format``; campaigns wrote
      ``plan_id``, ``service_starts``, ``resumed_from``, ``analysis_plan``; ABBA screens wrote
      ``failed_leg`` and ``candidate_identity_hash`` instead. Read by filling the other keys' defaults.
  2 - archive format 2 (2026-11-30): every key present (None where it does not apply), ``run_format: 2``,
      and ``count_methods`` (how output tokens were counted; format-1 blocks read with ``()``).
      Kinds ``rate-sweep`` (harness.run.sweep) and ``external`` (imported peer results,
      harness.store.peers) were added later without a format change (2026-12-01), then ``quick-bench``
      (``dsv4h bench``, harness.run.quick; protocol class ``quick-bench``, never formal) (2026-12-02),
      then ``sla-search`` (harness.run.sla; protocol class ``sla-search``) (2026-12-02).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from pydantic import Field, field_validator

from harness.errors import ArchiveError
from harness.formats import Strict, parse_model
from harness.kinds import KINDS
from harness.service.identity.origin import backends_of, run_is_simulated

__all__ = ["RunBlock", "read_run_block"]

RUN_BLOCK_VERSION = 2


class RunBlock(Strict):
    """What a run was: its campaign, claim and protocol class, service and outcome."""

    run_format: int = RUN_BLOCK_VERSION
    campaign: str
    kind: str = Field(description="the run's kind: a key of the kind descriptor (harness.kinds.KINDS)")
    claim_class: str
    protocol_class: str
    backend: str = Field(description="'sim', 'sglang', 'vllm', 'attach', or 'a+b' for a mixed screen")
    service_name: str
    created_wall: str = Field(description="ISO wall-clock time of the run's start (the wall anchor)")
    run_token: str
    labels: tuple[str, ...] = ()
    error: str | None = None
    oracles_failed: int = 0
    identity_hash: str = ""
    direction: str | None = None
    # formal matrices
    plan_id: str | None = None
    service_starts: int | None = None
    resumed_from: str | None = None
    analysis_plan: dict[str, Any] | None = None
    # ABBA screens
    failed_leg: str | None = None
    candidate_identity_hash: str | None = None
    # how output tokens were counted in the measured requests (harness.load.openai)
    count_methods: tuple[str, ...] = ()

    @field_validator("kind")
    @classmethod
    def _known_kind(cls, value: str) -> str:
        if value not in KINDS:
            raise ValueError(f"kind {value!r} is not a kind this dsv4h knows ({', '.join(KINDS)})")
        return value

    @property
    def simulated(self) -> bool:
        """True when a backend of the run is the built-in simulator or it is labelled ``simulated``
        (``harness.service.identity.origin.run_is_simulated``; the services are not in the block)."""
        return run_is_simulated(backends_of(self.backend), self.labels)

    def to_json(self) -> dict[str, Any]:
        """The block as stored in the manifest."""
        return self.model_dump(mode="json")


def read_run_block(manifest: Mapping[str, Any], source: str = "manifest.json") -> RunBlock:
    """The typed run block of a manifest of any supported version (ArchiveError if malformed)."""
    raw = manifest.get("run")
    if not isinstance(raw, dict):
        raise ArchiveError(f"{source}: no 'run' block", hint="the archive's manifest is damaged; verify it")
    version = raw.get("run_format", 1)
    if version not in (1, RUN_BLOCK_VERSION):
        raise ArchiveError(f"{source}: run block format {version!r} is not supported (this dsv4h reads 1-2)",
                           hint="upgrade dsv4h")
    data = dict(raw)
    data["run_format"] = RUN_BLOCK_VERSION
    if version == 1:
        data.setdefault("labels", [])
        data.setdefault("identity_hash", "")
        data.setdefault("service_name", "")
        data.setdefault("run_token", "")
    return parse_model(RunBlock, data, f"{source} run block", what="invalid run block", error=ArchiveError)
