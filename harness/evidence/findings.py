"""What the evidence rules produce and read (pure): ``Finding`` and ``ArchiveData``."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any, Literal

from harness.kinds import FORMAL

Severity = Literal["blocking", "warning", "info"]
Scope = Literal["rows", "run"]


@dataclass(frozen=True, order=True)
class Finding:
    """One rule's verdict about some rows of one archive."""

    rule: str
    severity: Severity
    message: str
    remedy: str
    archive_id: str = ""
    rows: tuple[str, ...] = ()
    scope: Scope = "rows"

    @property
    def blocking(self) -> bool:
        """True when the affected rows must be marked invalid."""
        return self.severity == "blocking"


@dataclass(frozen=True)
class ArchiveData:
    """What the rules read from an archive, as plain Python data.

    ``cells``/``rounds``/``waves`` are the result-table rows (dicts); ``requests`` per-request
    summary rows (``rid, wave_id, phase, workload, cached_tokens, ok, error, round_index``, the counts
    ``prompt_tokens, completion_tokens, n_tokens, count_method`` and the reported ``spec_*`` counts);
    ``services`` the ``service.json`` entries; ``comparison`` the ABBA ``comparison.json``.
    """

    archive_id: str
    run: dict[str, Any]
    spec: dict[str, Any]
    cells: Sequence[dict[str, Any]] = ()
    rounds: Sequence[dict[str, Any]] = ()
    waves: Sequence[dict[str, Any]] = ()
    requests: Sequence[dict[str, Any]] = ()
    services: Sequence[dict[str, Any]] = ()
    comparison: dict[str, Any] | None = None
    oracles: Sequence[dict[str, Any]] | None = None
    extra: dict[str, Any] = field(default_factory=dict)

    @property
    def formal(self) -> bool:
        """True for a formal matrix archive."""
        return self.run.get("protocol_class") == FORMAL.protocol_class


def make_finding(aid: str, rule: str, sev: Severity, msg: str, remedy: str, rows: Sequence[str] = (),
       scope: Scope = "rows") -> Finding:
    """A finding with its rows sorted and de-duplicated."""
    return Finding(rule, sev, msg, remedy, aid, tuple(sorted(set(rows))), scope)
