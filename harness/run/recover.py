"""Roll forward what an interrupted dsv4h left behind, so no measured wave is ever stranded (edge module).

A ``.partial-<token>`` directory whose lock is free was left by a dsv4h that ended before it
finalized (``kill -9``, a power cut, a full disk). :func:`recover_partial` turns it into an archive:

- it holds a manifest that matches every file (the run stopped between writing the manifest and
  the rename): it is renamed into place as it is;
- it holds no manifest: it is finalized now with status ``partial`` and the label ``recovered`` by
  the recovery function of the kind it recorded (``spec.json``'s ``kind``, else the run-start
  event's; :data:`harness.run.kinds.KINDS`), so every kind is recovered under its own kind and
  protocol class (each recovery beside its kind's runner: a formal matrix's results from its
  records, harness.run.campaign; an ABBA screen's records without a verdict, harness.run.abba; a
  quick screen as ``quick-bench``, harness.run.quick; a rate sweep's cells and rounds as the sweep
  computes them, harness.run.sweep; the readers they share: harness.run.partial). A partial of a
  kind this dsv4h does not know is refused. A partial of ``dsv4h import`` (it holds ``import.json``,
  ``harness.store.peers.IMPORT_MARKER``) stays what it is: kind, claim and protocol class ``external``,
  status ``partial``, labelled ``recovered``; never a measurement.

Either way the archive is then appended to the ledgers and checked by the evidence rules, as a
run's own finish does, and a formal matrix can be resumed from it like any partial archive.
:func:`recover_workspace` does this for every stranded partial of a workspace and also settles
finalized archives that never reached the ledgers (the process died between the rename and the
ledger append). A partial whose manifest does not match its files is left untouched and reported.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from harness.errors import ArchiveError, DsvError
from harness.inputs.spec import DEFAULT_KIND
from harness.kinds import EXTERNAL
from harness.run.kinds import kind_entry
from harness.run.partial import RECOVERED_ERROR, read_events, read_json_or, run_start
from harness.run.skeleton import Finished, finish, finish_alone, settle
from harness.store.archive import ArchiveWriter, Partial, iter_archives, iter_partials
from harness.store.ledger import ingested_ids
from harness.store.peers import IMPORT_MARKER, recovered_import_run

__all__ = ["RECOVERED_ERROR", "Recovered", "RecoveryReport", "read_events", "recover_partial", "recover_workspace"]


@dataclass(frozen=True)
class Recovered:
    """A partial directory rolled forward: how (``renamed`` or ``finalized``) and the result."""

    partial: Path
    how: str
    done: Finished


@dataclass
class RecoveryReport:
    """What :func:`recover_workspace` did."""

    recovered: list[Recovered] = field(default_factory=list)
    settled: list[str] = field(default_factory=list)  # finalized archives appended to the ledgers now
    live: list[Path] = field(default_factory=list)  # partials still written by a running dsv4h
    refused: list[tuple[Path, str]] = field(default_factory=list)  # left as they are, with the reason

    @property
    def empty(self) -> bool:
        """True when nothing needed doing."""
        return not (self.recovered or self.settled or self.live or self.refused)


def recorded_kind(spec: dict[str, Any], start: dict[str, Any]) -> str:
    """The kind a partial recorded: its ``spec.json``'s ``kind``, else the run-start event's, else
    ``formal-matrix`` (what a spec without ``kind`` is)."""
    return str(spec.get("kind") or start.get("kind") or DEFAULT_KIND)


def recover_partial(workspace: Path, partial: Path) -> Recovered:
    """Roll one partial directory forward (module docstring). ``ArchiveError`` when it is still
    written by a running dsv4h or its manifest does not match its files."""
    writer = ArchiveWriter.reopen(partial)  # takes the lock: refuses a live partial
    try:
        if (partial / "manifest.json").is_file():
            path = writer.publish_existing_manifest()
            return Recovered(partial, "renamed", settle(workspace, path))
        marker = read_json_or(partial, IMPORT_MARKER, None)
        if isinstance(marker, dict) and marker.get("kind") == EXTERNAL.name:  # a killed `dsv4h import`
            run = recovered_import_run(marker, writer.token, RECOVERED_ERROR)
            return Recovered(partial, "finalized", finish_alone(lambda: finish(writer, workspace, "partial", run)))
        spec = read_json_or(partial, "spec.json", {})
        spec = spec if isinstance(spec, dict) else {}
        entry = kind_entry(recorded_kind(spec, run_start(read_events(partial))))
        # one critical section around the kind's whole recovery (result tables, finalize, ledgers)
        return Recovered(partial, "finalized", finish_alone(lambda: entry.recover(workspace, writer, spec)))
    finally:
        writer.close()


def recover_workspace(workspace: Path) -> RecoveryReport:
    """Roll forward every stranded partial of ``workspace`` and settle finalized archives missing
    from the ledgers; partials still being written are only listed."""
    report = RecoveryReport()
    partials: list[Partial] = list(iter_partials(workspace))
    for p in partials:
        if p.live:
            report.live.append(p.path)
            continue
        try:
            report.recovered.append(recover_partial(workspace, p.path))
        except ArchiveError as exc:
            report.refused.append((p.path, exc.message))
    if (workspace / "ledgers").is_dir() or report.recovered:
        known = ingested_ids(workspace)
        for a in iter_archives(workspace):
            if a.archive_id not in known:
                try:
                    settle(workspace, a.path)
                    report.settled.append(a.archive_id)
                except DsvError as exc:
                    report.refused.append((a.path, exc.message))
    return report
