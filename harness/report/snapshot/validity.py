"""Validity of every snapshot entry and row, from the archive's one verdict (pure).

Contract: the report never decides validity itself. :func:`content_verdict` gives the
:class:`~harness.evidence.verdict.Verdict` an :class:`~harness.report.snapshot.archives.ArchiveContent`
carries (``harness.evidence.io.archive_verdict``, read by :mod:`harness.report.collect`), or, for a
content without one (the evidence module unavailable, findings skipped, a caller of
:func:`~harness.report.snapshot.freeze.freeze` with findings only), the verdict
:func:`harness.evidence.verdict.decide` gives for its ``findings`` and its result rounds; the
successor map of :func:`~harness.report.snapshot.freeze.supersessions` overrides ``superseded_by``.
The marks follow the ledger's (``harness.evidence.io.marked``):

- :func:`mark_run`: an entry with one row per run (the archive, an ABBA screen, a matched AR/SD run,
  a rate sweep's or SLA search's run, a trace replay) is ``valid`` when the run is: not superseded
  and no blocking finding;
- :func:`mark_rows`: an entry of several rows (a formal matrix, an energy entry) is ``valid`` unless
  superseded or invalid as a whole (a ``run``-scope finding, or a blocking one naming no rows);
- :func:`mark_row`: one row (a formal cell or round, a sweep rate, an SLA probe, an energy window
  group) is ``valid`` unless superseded or named (after spreading wave -> round -> cell) by a
  blocking finding;
- :func:`withhold`: a verdict on an invalid run is shown as ``withheld``; ``verdict_as_measured``
  keeps the measured one.

Each mark sets ``valid`` and ``invalid_rules`` (the sorted blocking rules that invalidate it; empty
when it is valid or only superseded); ``superseded_by`` is set on entries.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Iterable, Mapping
from typing import Any

from harness.evidence.findings import Finding
from harness.evidence.verdict import WITHHELD, Verdict, decide
from harness.report.snapshot.archives import ArchiveContent, is_simulated
from harness.store.runblock import read_run_block

__all__ = ["WITHHELD", "content_verdict", "finding_of", "mark_row", "mark_rows", "mark_run", "withhold"]


def finding_of(d: Mapping[str, Any], archive_id: str) -> Finding:
    """A Finding-shaped dict (``rule``, ``severity``, ``message``, ``remedy``, ``archive_id``, ``rows``,
    optional ``scope``) as a :class:`~harness.evidence.findings.Finding`."""
    scope = d.get("scope") if d.get("scope") in ("rows", "run") else "rows"
    return Finding(str(d.get("rule")), d.get("severity"), str(d.get("message") or ""),  # type: ignore[arg-type]
                   str(d.get("remedy") or ""), str(d.get("archive_id") or archive_id),
                   tuple(str(r) for r in d.get("rows") or ()), scope)  # type: ignore[arg-type]


def _rounds(c: ArchiveContent) -> list[Mapping[str, Any]]:
    """The round rows a content holds (formal results, a sweep's, an SLA search's probes' rounds)."""
    out: list[Mapping[str, Any]] = [r for r in (c.results or {}).get("rounds") or [] if isinstance(r, Mapping)]
    out += [r for r in (c.sweep or {}).get("rounds") or [] if isinstance(r, Mapping)]
    return out


def _origin(c: ArchiveContent) -> str:
    """The data origin of a content without a verdict, as ``harness.store.ledger.data_origin`` decides it:
    an import's own ``external.json`` origin (``unknown`` when absent), else simulated or measured."""
    if c.external is not None:
        return str(c.external.get("data_origin") or "unknown")
    if read_run_block(c.manifest, f"archive {c.archive_id}").claim_class == "external":
        return "unknown"
    return "simulated" if is_simulated(c) else "measured"


def content_verdict(c: ArchiveContent, successor: str | None = None) -> Verdict:
    """The verdict of ``c`` (module docstring); ``successor``, when given, is its ``superseded_by``."""
    verdict = c.verdict
    if verdict is None:
        origin = _origin(c)
        verdict = decide(c.archive_id, origin, [finding_of(f, c.archive_id) for f in c.findings or []],
                         (), _rounds(c))
    if successor is not None and verdict.superseded_by != successor:
        verdict = dataclasses.replace(verdict, superseded_by=successor)
    return verdict


def _rules(verdict: Verdict) -> list[str]:
    return sorted({f.rule for f in verdict.blocking})


def mark_run(entry: dict[str, Any], verdict: Verdict) -> dict[str, Any]:
    """``entry`` (one row per run) marked: ``valid`` = the run is valid, ``invalid_rules`` = every
    blocking rule, ``superseded_by``."""
    entry["valid"] = verdict.run_valid
    entry["invalid_rules"] = _rules(verdict)
    entry["superseded_by"] = verdict.superseded_by
    return entry


def mark_rows(entry: dict[str, Any], verdict: Verdict) -> dict[str, Any]:
    """``entry`` (an entry of several rows) marked: invalid only when the whole archive is (or superseded)."""
    entry["valid"] = verdict.row_valid()
    entry["invalid_rules"] = list(verdict.rules_for())
    entry["superseded_by"] = verdict.superseded_by
    return entry


def mark_row(row: dict[str, Any], verdict: Verdict, ids: Iterable[object],
             related: Iterable[object] = ()) -> dict[str, Any]:
    """``row`` marked by the row ids ``ids`` that name it (its cell, round, probe or wave id):
    ``valid`` and ``invalid_rules``. ``related`` ids (a cell's rounds) only narrow which rules are
    named for a row that ``ids`` already make invalid (a finding on a round of the cell)."""
    own = [i for i in ids if i is not None]
    row["valid"] = verdict.row_valid(*own)
    row["invalid_rules"] = list(verdict.rules_for(*own, *related)) if verdict.concerns(*own) else []
    return row


def withhold(entry: dict[str, Any], verdict: Verdict) -> dict[str, Any]:
    """``entry``'s ``verdict`` as every surface shows it (``withheld`` on a run with a blocking finding),
    the measured one kept in ``verdict_as_measured``."""
    entry["verdict_as_measured"] = entry.get("verdict")
    entry["verdict"] = verdict.shown_verdict(entry.get("verdict"))
    return entry
