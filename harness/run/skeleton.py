"""The one run skeleton every runner goes through (edge module): formal matrices, ABBA screens, rate
sweeps and quick screens, and the recovery of what a killed run left.

:func:`drive` runs a runner's measuring body and then ends the run the same way for every kind:

1. the body runs; a stopping signal (``KeyboardInterrupt``: SIGINT, and SIGTERM/SIGHUP routed to
   it) ends it with status ``partial``, a :class:`~harness.errors.DsvError` with ``failed``, a write
   that fails (``OSError``, e.g. a full disk) with ``failed`` and an error naming the partial
   directory; anything else is a bug: what was started is cleaned up and the traceback kept;
2. unless interrupted, the runner's after-measurement checks run (sentinels; a Ctrl-C skips them);
3. one critical section, the only one of the run's end: clean up (services stopped, memory samples
   stored), :func:`record_end` (the ``interrupted``/``failed`` and ``run-end`` events), then the
   runner's finalize, which writes its result tables and calls :func:`finish` (finalize the archive,
   run the evidence rules, ingest its rows with their validity decided). A signal that arrives
   meanwhile is held: the outcome's error then says the run ended after its archive and ledger rows
   were complete, with the signal's exit status.

:func:`finish` opens no critical section of its own: it must run inside one (``drive``'s, or the
recovery's :func:`finish_alone`), so sections never nest.
"""

from __future__ import annotations

import signal
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Protocol, TypeVar

from harness.errors import ArchiveError, DsvError, RunInterrupted
from harness.evidence.findings import Finding
from harness.evidence.io import check_archive, ingest_checked, verdict_of_view
from harness.evidence.verdict import Verdict
from harness.interrupts import critical, fault_point, in_critical, received
from harness.store.archive import Archive, ArchiveWriter
from harness.store.finished import FinishedArchive, load_finished, view_after_finalize
from harness.store.runblock import RunBlock

__all__ = ["settle"]


class Outcome(Protocol):
    """What every runner's finalize returns: at least the error that ended the run (settable) and
    the id of the archive it finalized."""

    error: DsvError | None

    @property
    def archive_id(self) -> str: ...


OutcomeT = TypeVar("OutcomeT", bound=Outcome)


def drive(writer: ArchiveWriter, body: Callable[[], None], *, kept: str | Callable[[], str], what: str,
          clean_up: Callable[[], None], finalize: Callable[[str, DsvError | None], OutcomeT],
          after: Callable[[], None] | None = None,
          failed: Callable[[DsvError], DsvError] | None = None) -> OutcomeT:
    """Run ``body`` and end the run (module docstring). ``kept``: what an interrupt keeps, in its
    error message ("every finished wave is kept"; a callable is asked when the signal came);
    ``what``: the run's noun ("run", "screen", "sweep"); ``failed`` may rewrite a ``DsvError`` the
    body raised (e.g. name the failed leg); ``after``: checks after measurement (skipped when
    interrupted). Returns ``finalize``'s outcome."""
    status = "complete"
    error: DsvError | None = None
    try:
        body()
    except KeyboardInterrupt:
        status, error = "partial", interrupted_error(kept if isinstance(kept, str) else kept())
    except DsvError as exc:
        status, error = "failed", failed(exc) if failed is not None else exc
    except OSError as exc:  # a full disk: what was written is kept; finalizing is tried below
        status, error = "failed", storage_error(exc, writer.dir)
    except BaseException:  # a bug: stop what was started, keep the traceback
        clean_up()
        raise
    if after is not None and status != "partial":
        after()
    with critical(deliver=False) as held:
        clean_up()
        record_end(writer, status, error)
        out = finalize(status, error)
    if held.signal is not None and out.error is None:
        out.error = interrupted_error(f"the {what} ended after it was finalized: archive {out.archive_id} "
                                      "and its ledger rows are complete", signum=held.signal)
    return out


@dataclass(frozen=True)
class Finished:
    """A finalized archive, the ledger rows it added, the evidence findings about it and the
    :class:`~harness.evidence.verdict.Verdict` they decide (what every surface shows)."""

    archive: Archive
    ledger_rows: dict[str, int]
    findings: list[Finding]
    interrupted: int | None = None  # a stopping signal held while finishing (the archive is complete)
    verdict: Verdict | None = None

    @property
    def archive_id(self) -> str:
        """The finalized archive's id."""
        return self.archive.archive_id


def finish(writer: ArchiveWriter, workspace: Path, status: str, run: RunBlock) -> Finished:
    """Finalize the archive, append it to the ledgers, run every evidence rule and mark the rows
    its blocking findings concern. One pass: the records are read once (the table the writer already
    read back, else one read) into one :class:`FinishedArchive` that ingest and evidence share, and
    nothing is re-hashed (finalize has just hashed every file). The caller holds the critical section
    (``RuntimeError`` otherwise: a signal must not cut finalize and ingest apart); a process killed
    part-way leaves what ``harness.run.recover`` rolls forward."""
    if not in_critical():
        raise RuntimeError("finish() runs inside the run's critical section (drive or finish_alone)")
    path = writer.finalize(status=status, run=run)
    fault_point("finish:finalized")
    return _settle(workspace, view_after_finalize(writer, path))


def finish_alone(step: Callable[[], Finished]) -> Finished:
    """Run a finishing ``step`` (one that calls :func:`finish`) as one critical section of its own,
    for callers outside :func:`drive` (recovery); a signal held meanwhile is reported in
    ``Finished.interrupted``."""
    with critical(deliver=False) as held:
        done = step()
    if held.signal is None:
        return done
    return Finished(done.archive, done.ledger_rows, done.findings, held.signal, done.verdict)


def settle(workspace: Path, path: Path) -> Finished:
    """Run the evidence rules on a finalized archive already on disk and append its rows to the
    ledgers, those its blocking findings concern invalid (the part of :func:`finish` after the
    archive exists): every file verified once, the records read once, one critical section."""
    view = load_finished(path)
    with critical():
        return _settle(workspace, view)


def _settle(workspace: Path, view: FinishedArchive) -> Finished:
    """Ingest and evidence over one view (the caller holds the critical section)."""
    findings = check_archive(view)
    rows = ingest_checked(workspace, view, findings)  # rows written once, their validity already decided
    fault_point("finish:ingested")
    return Finished(view.archive, rows, findings, verdict=verdict_of_view(view, findings))


def interrupted_error(what: str, signum: int | None = None) -> RunInterrupted:
    """The error of a run a stopping signal ended, with the signal's conventional exit status."""
    sig = signum if signum is not None else received()
    name = signal.Signals(sig).name if sig is not None else "SIGINT"
    err = RunInterrupted(f"interrupted ({name}); {what}")
    err.exit_code = 128 + int(sig) if sig is not None else 130
    return err


def storage_error(exc: OSError, partial: Path) -> ArchiveError:
    """A failed write of the run's own files (e.g. a full disk) as an error naming where the data is."""
    return ArchiveError(f"cannot write the run's files: {exc.strerror or exc} ({exc.filename or partial})",
                        hint=f"free space or fix permissions; the waves written so far are kept in {partial}; "
                        "'dsv4h archive recover' finalizes them once writing works again")


def record_end(writer: ArchiveWriter, status: str, error: DsvError | None) -> None:
    """Append the events every run ends with, before it is finalized: ``interrupted`` (a stopping
    signal ended it; with the exit status) or ``failed`` (an error ended it), then ``run-end`` (status
    and error). A write that fails (a full disk) is skipped: finalizing is tried next regardless."""
    t_ns = time.perf_counter_ns()
    try:
        if isinstance(error, RunInterrupted):
            writer.append_event({"event": "interrupted", "t_ns": t_ns, "exit_status": error.exit_code})
        elif error is not None and status == "failed":
            writer.append_event({"event": "failed", "error": error.message, "t_ns": t_ns})
        writer.append_event({"event": "run-end", "status": status, "t_ns": t_ns,
                             "error": error.message if error else None})
    except OSError:
        return
