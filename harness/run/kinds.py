"""The one registry of run kinds (edge module: its entries run and recover runs).

Each kind a spec or a command can produce maps to its protocol class (the one mapping kind ->
protocol class), its runner (a callable taking the :class:`~harness.inputs.spec.LoadedSpec`, the
workspace, a progress reporter and the :class:`RunOptions`; ``None`` for kinds not started from a
spec), the result tables it writes into its archive, its recovery function (partial directory ->
finalized archive, :mod:`harness.run.partial`) and the report-snapshot section that shows it.

=============  ==============  ====================  ==================================  ==========
kind           protocol class  runner                result tables                       report
=============  ==============  ====================  ==================================  ==========
formal-matrix  formal          run.campaign          waves, rounds, cells                formal
abba           abba-screen     run.abba              waves, legs, comparison             screens
rate-sweep     rate-sweep      run.sweep             cells, rounds                       sweeps
matched-sd     matched-sd      run.matched           waves, legs, matched, acceptance    speculative
trace-replay   trace-replay    run.replay            replay                              replays
quick-bench    quick-bench     (dsv4h bench)         (quick.json only)                   archives
external       external        (dsv4h import)        external                            imports
sla-search     sla-search      run.sla               cells, rounds, probes               sla
=============  ==============  ====================  ==================================  ==========
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from harness.errors import ArchiveError, SpecError
from harness.inputs.spec import LoadedSpec
from harness.run.abba import recover_abba, run_abba
from harness.run.campaign import recover_matrix, run_matrix
from harness.run.events import Reporter
from harness.run.matched import recover_matched, run_matched
from harness.run.partial import Recover
from harness.run.quick import recover_quick
from harness.run.replay import recover_replay, run_replay_loaded
from harness.run.skeleton import Finished
from harness.run.sla import recover_sla, run_sla_loaded
from harness.run.sweep import recover_sweep, run_sweep_loaded
from harness.store.archive import ArchiveWriter


@dataclass(frozen=True)
class RunOptions:
    """Command-line options a runner may take: ``resume`` (a partial/failed archive to continue) and
    ``workers`` (client worker processes: N or ``auto``); a kind that takes neither refuses them."""

    resume: Path | None = None
    workers: int | str | None = None

    @property
    def empty(self) -> bool:
        """True when no option is given."""
        return self.resume is None and self.workers is None


Runner = Callable[[LoadedSpec, Path, Reporter, RunOptions], Any]


def _no_recovery(kind: str) -> Recover:
    def refuse(workspace: Path, writer: ArchiveWriter, spec: dict[str, Any]) -> Finished:
        raise ArchiveError(f"{writer.dir}: a partial of kind {kind} is recovered from its import marker",
                           hint="run 'dsv4h archive recover' (it reads import.json)")
    return refuse


def _matrix(loaded: LoadedSpec, workspace: Path, reporter: Reporter, options: RunOptions) -> Any:
    return run_matrix(loaded, workspace, reporter=reporter, resume=options.resume, workers=options.workers)


def _abba(loaded: LoadedSpec, workspace: Path, reporter: Reporter, options: RunOptions) -> Any:
    check_options(loaded, options)
    return run_abba(loaded, workspace, reporter=reporter)


def _matched(loaded: LoadedSpec, workspace: Path, reporter: Reporter, options: RunOptions) -> Any:
    check_options(loaded, options)
    return run_matched(loaded, workspace, reporter=reporter)


def _sweep(loaded: LoadedSpec, workspace: Path, reporter: Reporter, options: RunOptions) -> Any:
    check_options(loaded, options)
    return run_sweep_loaded(loaded, workspace, reporter=reporter)


def _replay(loaded: LoadedSpec, workspace: Path, reporter: Reporter, options: RunOptions) -> Any:
    check_options(loaded, options)
    return run_replay_loaded(loaded, workspace, reporter=reporter)


def _sla(loaded: LoadedSpec, workspace: Path, reporter: Reporter, options: RunOptions) -> Any:
    check_options(loaded, options)
    return run_sla_loaded(loaded, workspace, reporter=reporter)


_NO_OPTIONS = {"abba": "drop them: an ABBA screen's legs must be contiguous, so it is run again, never resumed",
               "matched-sd": "drop them: a matched run's legs must be contiguous, so it is run again, never resumed",
               "rate-sweep": "drop them: a rate sweep runs its planned arrival schedule as 'dsv4h sweep run'",
               "trace-replay": "drop them: a trace replay runs its trace's schedule once, never resumed",
               "sla-search": "drop them: an SLA search's probes depend on each other, so it is run again"}


def check_options(loaded: LoadedSpec, options: RunOptions) -> None:
    """Refuse options the spec's kind does not take (``SpecError``), before anything runs."""
    hint = _NO_OPTIONS.get(loaded.kind)
    if hint is not None and not options.empty:
        raise SpecError(f"{loaded.source or 'the spec'}: kind {loaded.kind} takes neither --resume nor --workers",
                        hint=hint)


@dataclass(frozen=True)
class Kind:
    """One run kind (module docstring)."""

    name: str
    protocol_class: str
    runner: Runner | None
    tables: tuple[str, ...]
    recover: Recover
    report_section: str
    command: str  # the command that starts it


KINDS: dict[str, Kind] = {k.name: k for k in (
    Kind("formal-matrix", "formal", _matrix, ("waves", "rounds", "cells"), recover_matrix, "formal",
         "dsv4h campaign run"),
    Kind("abba", "abba-screen", _abba, ("waves", "legs", "comparison"), recover_abba, "screens", "dsv4h abba"),
    Kind("rate-sweep", "rate-sweep", _sweep, ("cells", "rounds"), recover_sweep, "sweeps", "dsv4h sweep run"),
    Kind("matched-sd", "matched-sd", _matched, ("waves", "legs", "matched", "acceptance"), recover_matched,
         "speculative", "dsv4h campaign run"),
    Kind("trace-replay", "trace-replay", _replay, ("replay",), recover_replay, "replays", "dsv4h campaign run"),
    Kind("sla-search", "sla-search", _sla, ("cells", "rounds", "probes"), recover_sla, "sla", "dsv4h sla run"),
    Kind("quick-bench", "quick-bench", None, (), recover_quick, "archives", "dsv4h bench"),
    Kind("external", "external", None, ("external",), _no_recovery("external"), "imports", "dsv4h import"),
)}


def kind_entry(kind: str) -> Kind:
    """The registry entry of ``kind``; ``ArchiveError`` for a kind this dsv4h does not know (a partial
    of it is left as it is rather than recovered as another kind)."""
    entry = KINDS.get(kind)
    if entry is None:
        raise ArchiveError(f"kind {kind!r} is not a kind this dsv4h knows ({', '.join(KINDS)})",
                           hint="recover it with the dsv4h version that wrote it")
    return entry


def protocol_class(kind: str) -> str:
    """The protocol class of ``kind`` (the one mapping)."""
    return kind_entry(kind).protocol_class


def run_loaded(loaded: LoadedSpec, workspace: Path, reporter: Reporter, options: RunOptions = RunOptions()) -> Any:
    """Run a loaded spec through its kind's runner (``dsv4h campaign run``, ``sweep run`` and ``abba``)."""
    entry = kind_entry(loaded.kind)
    if entry.runner is None:
        raise SpecError(f"kind {loaded.kind} is not run from a spec", hint=f"use '{entry.command}'")
    return entry.runner(loaded, workspace, reporter, options)
