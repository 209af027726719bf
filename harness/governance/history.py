"""Freeze-before-reveal and historical entries (pure).

A prediction or analysis plan is frozen (SHA-256, size, wall time) before the results exist; a
reveal passes only when the file is unchanged since a freeze that precedes the results archive's
creation (``reveal_decision``). Historical entries keep their own labels (rule 4).
"""

from __future__ import annotations

import math
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Literal

from pydantic import Field, field_validator

from harness.formats import Strict, parse_wall
from harness.governance.base import SLUG
from harness.hashing import sha256_json

# --- freeze-before-reveal ----------------------------------------------------------------------


RevealOutcome = Literal["passed", "changed since freeze", "never frozen", "frozen after the results"]


@dataclass(frozen=True)
class RevealDecision:
    """A reveal's verdict; ``freeze`` is the matching freeze row (if any)."""

    outcome: RevealOutcome
    reason: str
    freeze: Mapping[str, Any] | None = None

    @property
    def passed(self) -> bool:
        """True when the reveal may proceed."""
        return self.outcome == "passed"


def freezes_of(rows: Sequence[Mapping[str, Any]]) -> list[Mapping[str, Any]]:
    """Only the freeze rows of the ``freezes`` table (reveals are logged there too)."""
    return [r for r in rows if r.get("action") == "freeze"]


def existing_freeze(rows: Sequence[Mapping[str, Any]], sha256: str) -> Mapping[str, Any] | None:
    """The earliest freeze of this content (any path), or None."""
    hits = [r for r in freezes_of(rows) if r.get("sha256") == sha256]
    return min(hits, key=lambda r: parse_wall(str(r["at"]))) if hits else None


def reveal_decision(rows: Sequence[Mapping[str, Any]], path: str, sha256: str, results_created: str) -> RevealDecision:
    """Freeze-before-reveal: pass when this content was frozen strictly before ``results_created``.

    ``results_created`` is the results archive's ``created_wall`` (second resolution): a freeze in
    the same second as the run start is not "before" it (the rule errs towards refusing).
    """
    match = existing_freeze(rows, sha256)
    if match is None:
        same_path = [r for r in freezes_of(rows) if r.get("path") == path]
        if same_path:
            last = same_path[-1]
            return RevealDecision("changed since freeze",
                                  f"{path} has SHA-256 {sha256[:16]}..., but the freeze of {last['at']!s} recorded "
                                  f"{str(last['sha256'])[:16]}...: the file changed after it was frozen", last)
        return RevealDecision("never frozen", f"no freeze of {path} (SHA-256 {sha256[:16]}...) exists")
    frozen, created = parse_wall(str(match["at"])), parse_wall(results_created)
    if frozen < created:
        return RevealDecision("passed", f"frozen {match['at']}, before the results were created {results_created}",
                              match)
    return RevealDecision("frozen after the results",
                          f"frozen {match['at']}, not before the results were created {results_created}", match)


def plan_status(rows: Sequence[Mapping[str, Any]], path: str, sha256: str,
                run_started: str | None = None) -> dict[str, Any]:
    """An analysis plan's status: ``preregistered`` when its current content was frozen (strictly
    before ``run_started``, the run's ``created_wall``, when given), otherwise ``exploratory`` with
    the reason (never frozen, changed since its freeze, or frozen after the run started)."""
    match = existing_freeze(rows, sha256)
    if match is not None:
        if run_started is not None and not parse_wall(str(match["at"])) < parse_wall(run_started):
            return {"frozen": True, "sha256": sha256, "frozen_at": match["at"], "label": "exploratory",
                    "reason": f"frozen at {match['at']}, not before the run started {run_started}"}
        return {"frozen": True, "sha256": sha256, "frozen_at": match["at"], "label": "preregistered",
                "reason": f"content frozen at {match['at']}"}
    same_path = [r for r in freezes_of(rows) if r.get("path") == path]
    reason = (f"changed since its freeze at {same_path[-1]['at']}" if same_path
              else "never frozen (run 'dsv4h freeze FILE' before the results exist)")
    return {"frozen": False, "sha256": sha256, "frozen_at": None, "label": "exploratory", "reason": reason}


# --- historical evidence ------------------------------------------------------------------------

HistoricalClaim = Literal["native-ar", "speculative-full-target", "speculative-approximate"]
HistoricalProtocol = Literal["formal", "abba-screen", "historical-other"]


class HistoricalEntry(Strict):
    """One result measured elsewhere, with its own labels (rule 4).

    ``value`` is the number as published (``range_max`` when the text gives a range
    ``value``-``range_max``); ``quote`` is the text it comes from, verbatim; ``not_claims`` says
    what the entry does NOT establish. ``experiment`` groups entries of one experiment (an ABBA
    screen's legs and ratio); ``leg`` names an ABBA leg (A1, B1, B2, A2) or an arm statistic.
    """

    entry_id: str = Field(pattern=SLUG)
    source: str = Field(min_length=1)
    published_date: str = Field(pattern=r"^\d{4}-\d{2}-\d{2}$")
    measured_date: str | None = None
    protocol_label: str = Field(min_length=1)
    claim_class: HistoricalClaim
    protocol_class: HistoricalProtocol
    metric: str = Field(min_length=1)
    concurrency: int | None = Field(None, ge=1)
    value: float
    range_max: float | None = None
    unit: str = Field(min_length=1)
    tp: int | None = Field(None, ge=1)
    label: str = Field(min_length=1)
    not_claims: list[str] = Field(min_length=1)
    quote: str = Field(min_length=1)
    section: str = ""
    locator: str = ""
    experiment: str | None = None
    leg: str | None = None

    @field_validator("value")
    @classmethod
    def _finite(cls, v: float) -> float:
        if math.isnan(v) or math.isinf(v):
            raise ValueError("value must be a finite number")
        return v


class HistoricalFile(Strict):
    """A historical-evidence file: ``defaults`` merged under every entry, then ``entries``
    (``anchors`` only holds YAML anchors that entries merge with ``<<: *name``)."""

    document: dict[str, Any] = Field(default_factory=dict, description="free-form description of the source")
    anchors: dict[str, Any] = Field(default_factory=dict, description="YAML anchors reused by entries; not imported")
    defaults: dict[str, Any] = Field(default_factory=dict)
    entries: list[dict[str, Any]] = Field(min_length=1)


def entry_content_sha(entry: HistoricalEntry) -> str:
    """SHA-256 of an entry's canonical JSON (what idempotent re-imports compare)."""
    return sha256_json(entry.model_dump(mode="json"))


@dataclass(frozen=True)
class HistoricalPlan:
    """What an import would do: entries to add, ids already present unchanged, ids that conflict."""

    add: tuple[HistoricalEntry, ...]
    unchanged: tuple[str, ...]
    conflicts: tuple[str, ...] = field(default=())


def plan_historical_import(entries: Sequence[HistoricalEntry],
                           existing: Mapping[str, str]) -> HistoricalPlan:
    """Idempotent import by ``entry_id``: ``existing`` maps ids already in the ledger to their
    content SHA-256. New ids are added, same content is skipped, changed content is a conflict.
    Duplicate ids inside ``entries`` are conflicts too."""
    add: list[HistoricalEntry] = []
    unchanged: list[str] = []
    conflicts: list[str] = []
    seen: set[str] = set()
    for e in entries:
        if e.entry_id in seen:
            conflicts.append(f"{e.entry_id}: appears more than once in the file")
            continue
        seen.add(e.entry_id)
        sha = entry_content_sha(e)
        if e.entry_id not in existing:
            add.append(e)
        elif existing[e.entry_id] == sha:
            unchanged.append(e.entry_id)
        else:
            conflicts.append(f"{e.entry_id}: already imported with different content (historical rows are never "
                             "rewritten)")
    return HistoricalPlan(tuple(add), tuple(unchanged), tuple(conflicts))


def normalize_text(text: str) -> str:
    """Collapse whitespace (for checking that a quote occurs in its source text)."""
    return re.sub(r"\s+", " ", text).strip()
