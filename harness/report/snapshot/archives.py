"""The archive side of a report snapshot: which archives a report selects, and what it reads from each.

Contract (pure): :func:`select_archives` applies a :class:`~harness.report.config.Selection` to archive
manifests and returns the selected ids; :class:`ArchiveContent` is what :mod:`harness.report.collect`
reads from one verified archive and hands to :func:`harness.report.snapshot.freeze.freeze`;
:func:`is_simulated` says whether any of that data comes from the built-in simulator.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from datetime import date
from typing import Any

from harness.errors import ArchiveError
from harness.evidence.verdict import Verdict
from harness.report.config import Selection
from harness.service.identity.origin import backends_of, run_is_simulated
from harness.store.runblock import RunBlock, read_run_block

__all__ = ["ArchiveContent", "is_simulated", "select_archives"]


@dataclass(frozen=True)
class ArchiveContent:
    """What the report reads from one verified archive (``None`` = the file is absent).

    ``manifest_sha256`` is the SHA-256 of the archive's ``manifest.json`` bytes. ``memory`` holds
    the rows of ``memory.parquet`` (``t_ns``/``t_monotonic_ns``, ``wall``/``wall_iso``, ``device``,
    ``used_bytes``, ``total_bytes``). ``findings`` holds Finding-shaped dicts (``rule``,
    ``severity``, ``message``, ``remedy``, ``archive_id``, ``rows``), or ``None`` when the evidence
    module is not available. ``sweep`` is a rate sweep's ``sweep.json``; ``environment`` is
    ``environment.json`` (where the run ran); ``external`` an import's ``external.json``. ``matched`` is a
    matched AR/SD run's ``matched.json`` and ``matched_legs`` the rows of its ``legs.parquet`` (read only
    beside ``matched.json``); ``acceptance`` the rows of ``acceptance.parquet`` (one per measured wave
    with speculative counts, any run kind); ``energy`` the archive's ``energy.json`` (energy per
    measurement window, any run kind). ``verdict`` is the archive's decided evidence
    (:class:`harness.evidence.verdict.Verdict`: ``harness.evidence.io.archive_verdict``, or decided from
    an injected ``findings`` list by :func:`harness.evidence.verdict.decide`); ``None`` when the
    evidence module is unavailable or findings are skipped: freeze then decides one from ``findings``
    (no findings: every row valid unless a resumed run superseded the archive).
    """

    archive_id: str
    manifest: Mapping[str, Any]
    manifest_sha256: str
    results: Mapping[str, Any] | None = None
    comparison: Mapping[str, Any] | None = None
    service: Mapping[str, Any] | None = None
    corpora: Mapping[str, Any] | None = None
    spec: Mapping[str, Any] | None = None
    identity_check: Mapping[str, Any] | None = None
    oracles: Any = None
    memory: Sequence[Mapping[str, Any]] | None = None
    findings: Sequence[Mapping[str, Any]] | None = None
    sweep: Mapping[str, Any] | None = None
    environment: Mapping[str, Any] | None = None
    external: Mapping[str, Any] | None = None  # an import's external.json (harness.report.snapshot.imports)
    matched: Mapping[str, Any] | None = None
    matched_legs: Sequence[Mapping[str, Any]] | None = None
    acceptance: Sequence[Mapping[str, Any]] | None = None
    energy: Mapping[str, Any] | None = None  # energy.json (harness.run.energy), any run kind
    replay: Mapping[str, Any] | None = None  # a trace replay's replay.json (harness.run.replay)
    sla: Mapping[str, Any] | None = None  # sla.json of an SLA search (harness.run.sla)
    verdict: Verdict | None = None  # the archive's one verdict (harness.evidence.verdict)


def _created_date(run: RunBlock) -> date | None:
    wall = run.created_wall
    try:
        return date.fromisoformat(wall[:10])
    except ValueError:
        return None


def select_archives(manifests: Sequence[Mapping[str, Any]], selection: Selection) -> list[str]:
    """The ids of the archives (given as manifests) that pass every filter of ``selection``, in
    input order. Each ``archive_ids`` entry must match exactly one archive by id or prefix, else
    ``ArchiveError`` naming it (missing or ambiguous)."""
    ids = [str(m.get("archive_id", "")) for m in manifests]
    explicit: set[str] | None = None
    if selection.archive_ids is not None:
        explicit = set()
        for ref in selection.archive_ids:
            found = [i for i in ids if i.startswith(ref)]
            if not found:
                raise ArchiveError(f"archive {ref} (listed in select.archive_ids) is missing from the workspace",
                                   hint="check the id with 'dsv4h archive list', or restore the archive")
            if len(found) > 1:
                raise ArchiveError(f"archive id prefix '{ref}' in select.archive_ids is ambiguous: "
                                   + ", ".join(sorted(found)), hint="give more digits of the id")
            explicit.add(found[0])
    out: list[str] = []
    for aid, man in zip(ids, manifests, strict=True):
        if explicit is not None and aid not in explicit:
            continue
        run = read_run_block(dict(man), f"archive {aid}")
        if selection.campaigns is not None and run.campaign not in selection.campaigns:
            continue
        if selection.kinds is not None and run.kind not in selection.kinds:
            continue
        if selection.statuses is not None and man.get("status") not in selection.statuses:
            continue
        if selection.labels is not None and not set(selection.labels) <= set(run.labels):
            continue
        if selection.since is not None or selection.until is not None:
            created = _created_date(run)
            if created is None:
                continue
            if selection.since is not None and created < selection.since:
                continue
            if selection.until is not None and created > selection.until:
                continue
        out.append(aid)
    return out


def is_simulated(content: ArchiveContent) -> bool:
    """True when any data of the archive comes from the built-in simulator: the verdict's decided
    ``data_origin`` when the content carries a verdict with one, else backend ``sim``, a ``simulated``
    label, or a simulated service identity."""
    if content.verdict is not None and content.verdict.data_origin:
        return content.verdict.simulated
    run = read_run_block(content.manifest, f"archive {content.archive_id}")
    return run_is_simulated(backends_of(run.backend), run.labels, (content.service or {}).get("services") or [])
