"""The one verdict of an archive (pure): validity, data origin and withheld verdicts, decided once.

The evidence rules run once per archive (at finish, and again at ``dsv4h evidence check``); their
findings are stored with the archive's ledger rows. :func:`decide` turns those findings and the
archive's wave and round rows into a :class:`Verdict`, and every surface reads validity from it:
the ledger's ``valid`` column (:func:`harness.evidence.io.marked`), the end-of-run consoles,
``archive show`` and ``archive list``, the report, every export, timelines and ``sim calibrate``.

Which rows a blocking finding concerns:

- a finding of ``scope = "run"``, or a blocking finding that names no rows, concerns the whole
  archive: every row of every table is invalid;
- otherwise the ids it names (wave, round, cell or probe ids), spread upward to the figures built
  from them: a measured wave to its round, a round to its cell when the round is ``ok`` (only ok
  rounds enter a cell's median), an SLA search's round to its measurement (``probe_id``: a probe is
  judged on all its rounds); never downward (an invalid cell keeps its rounds as they were);
- a table with one row per run (``runs``, ``comparisons``, ``matched_sd``, ``replay_runs``: no
  ``row_keys`` in :data:`harness.measure.rows.ROW_MODELS`) is invalid by any blocking finding, and a
  verdict on an invalid run is ``withheld`` (:data:`WITHHELD`) wherever it is shown or stored.

A run with a blocking finding ends with the exit status of ``dsv4h evidence check``
(:data:`BLOCKING_EXIT`, ``EvidenceError``'s).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from harness.errors import ArchiveError, EvidenceError
from harness.evidence.findings import Finding
from harness.ids import round_of
from harness.measure.rows import ROW_MODELS

WITHHELD = "withheld"
BLOCKING_EXIT = EvidenceError.exit_code


def row_keys(table: str) -> tuple[str, ...]:
    """The columns of ``table`` a finding's row ids are matched against (() for a one-row-per-run table)."""
    model = ROW_MODELS.get(table)
    return model.row_keys if model is not None else ()


def has_verdict(table: str) -> bool:
    """Whether ``table`` has a ``verdict`` column withheld on an invalid row."""
    model = ROW_MODELS.get(table)
    return model is not None and model.verdict


def _round_key(wave_id: str) -> str | None:
    try:
        return round_of(wave_id)
    except ArchiveError:  # a wave id of another shape has no round
        return None


def concerned(findings: Iterable[Finding], waves: Sequence[Mapping[str, Any]],
              rounds: Sequence[Mapping[str, Any]]) -> tuple[bool, frozenset[str]]:
    """(whole archive, row ids) the blocking ``findings`` invalidate (module docstring). ``rounds``:
    every round row of the archive (formal rounds and sweep/SLA rounds), with ``round_id``,
    ``cell_id``, ``status`` and (an SLA search's) ``probe_id``."""
    blocking = [f for f in findings if f.blocking]
    if any(f.scope == "run" or not f.rows for f in blocking):
        return True, frozenset()
    ids = {r for f in blocking for r in f.rows}
    round_of_id = {str(r["round_id"]): r for r in rounds if r.get("round_id") is not None}
    for w in waves:
        wid = str(w.get("wave_id"))
        if wid in ids and w.get("phase") == "measured":
            rid = _round_key(wid)
            if rid is not None and rid in round_of_id:
                ids.add(rid)
    for rid in [i for i in ids if i in round_of_id]:
        r = round_of_id[rid]
        if r.get("status") == "ok" and r.get("cell_id") is not None:
            ids.add(str(r["cell_id"]))
        if r.get("probe_id") is not None:  # an SLA probe's verdict is judged on every round of it
            ids.add(str(r["probe_id"]))
    return False, frozenset(ids)


@dataclass(frozen=True)
class Verdict:
    """An archive's decided evidence: its findings, which rows they invalidate, its data origin.

    ``whole``: every row is invalid; ``invalid``: the row ids invalid otherwise; ``superseded_by``:
    the archive that resumed this one (its rows are then not valid either, but nothing is withheld);
    ``source``: ``ledger`` when the findings were read from the workspace's ledger, ``rules`` when
    the rules ran now (an archive that is not in the ledger)."""

    archive_id: str
    data_origin: str
    findings: tuple[Finding, ...] = ()
    whole: bool = False
    invalid: frozenset[str] = frozenset()
    superseded_by: str | None = None
    source: str = "rules"

    @property
    def blocking(self) -> tuple[Finding, ...]:
        """The blocking findings, in order."""
        return tuple(f for f in self.findings if f.blocking)

    @property
    def simulated(self) -> bool:
        """True when the data was served by the built-in simulator."""
        return self.data_origin == "simulated"

    @property
    def run_valid(self) -> bool:
        """Whether the run as a whole counts: no blocking finding and not superseded."""
        return not self.blocking and self.superseded_by is None

    @property
    def exit_code(self) -> int:
        """The exit status a run with this verdict ends with (0, or ``evidence check``'s for a blocking finding)."""
        return BLOCKING_EXIT if self.blocking else 0

    def concerns(self, *row_ids: object) -> bool:
        """Whether a blocking finding invalidates a row named by any of ``row_ids`` (None ignored)."""
        if not self.blocking:
            return False
        return self.whole or any(r is not None and str(r) in self.invalid for r in row_ids)

    def row_valid(self, *row_ids: object) -> bool:
        """Whether a row named by ``row_ids`` (its wave, round, cell or probe id) is valid."""
        return self.superseded_by is None and not self.concerns(*row_ids)

    def rules_for(self, *row_ids: object) -> tuple[str, ...]:
        """The rules of the blocking findings that invalidate a row named by ``row_ids`` (sorted, unique)."""
        if not self.concerns(*row_ids):
            return ()
        if self.whole:
            return tuple(sorted({f.rule for f in self.blocking}))
        named = {str(r) for r in row_ids if r is not None}
        hit = {f.rule for f in self.blocking if f.scope == "run" or not f.rows or named & set(f.rows)}
        # a row invalid by spreading (its wave or round named) carries the rules of those findings
        return tuple(sorted(hit or {f.rule for f in self.blocking}))

    def shown_verdict(self, verdict: str | None) -> str | None:
        """A run's verdict as every surface shows it: :data:`WITHHELD` when a blocking finding invalidates it."""
        return WITHHELD if self.blocking and verdict is not None else verdict

    def mark(self, *row_ids: object) -> str:
        """A short mark for an invalid row (``INVALID (rule, ...)``), '' for a valid one."""
        rules = self.rules_for(*row_ids)
        return f"INVALID ({', '.join(rules)})" if rules else ""

    def to_json(self) -> dict[str, Any]:
        """The verdict as plain data (``archive list --json``, exports)."""
        return {"archive_id": self.archive_id, "data_origin": self.data_origin, "valid": self.run_valid,
                "blocking": sorted({f.rule for f in self.blocking}), "whole": self.whole,
                "invalid_rows": sorted(self.invalid), "superseded_by": self.superseded_by,
                "findings": len(self.findings), "source": self.source}


def decide(archive_id: str, data_origin: str, findings: Sequence[Finding], waves: Sequence[Mapping[str, Any]] = (),
           rounds: Sequence[Mapping[str, Any]] = (), *, superseded_by: str | None = None,
           source: str = "rules") -> Verdict:
    """The :class:`Verdict` of one archive from its findings and its wave and round rows."""
    whole, ids = concerned(findings, waves, rounds)
    return Verdict(archive_id, data_origin, tuple(findings), whole, ids, superseded_by, source)
