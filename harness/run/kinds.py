"""Running and recovering the run kinds (edge module): the kind descriptor's entries resolved.

:data:`harness.kinds.KINDS` (pure, base layer) is the one descriptor of every kind; this module gives
the ``run`` stage's view of it: per kind its protocol class, its runner (a callable taking the
:class:`~harness.inputs.spec.LoadedSpec`, the workspace, a progress reporter and the
:class:`RunOptions`; ``None`` for kinds not started from a spec), its archive result files, its
recovery function (partial directory -> finalized archive) and its report section. Runners and
recoveries are imported when first asked for, so no runner module is imported by another's;
:func:`kind_entry` reads the descriptor at each call, so a kind registered after import runs too.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any, cast

from harness.errors import ArchiveError, SpecError
from harness.inputs.spec import LoadedSpec
from harness.kinds import KINDS as DESCRIPTORS
from harness.kinds import KindInfo, resolve
from harness.run.events import Reporter
from harness.run.options import RunOptions, check_options
from harness.run.partial import Recover
from harness.run.skeleton import Finished
from harness.store.archive import ArchiveWriter

Runner = Callable[[LoadedSpec, Path, Reporter, RunOptions], Any]


__all__ = ["KINDS", "Kind", "RunOptions", "Runner", "check_options", "kind_entry", "protocol_class",
           "refuse_external_recovery", "run_loaded"]


@dataclass(frozen=True)
class Kind:
    """One run kind as the run stage uses it (module docstring): its descriptor resolved."""

    info: KindInfo

    @property
    def name(self) -> str:
        """The kind's name."""
        return self.info.name

    @property
    def protocol_class(self) -> str:
        """Its protocol class."""
        return self.info.protocol_class

    @property
    def tables(self) -> tuple[str, ...]:
        """Its archive result files, by stem."""
        return self.info.tables

    @property
    def report_section(self) -> str:
        """The report-snapshot section that shows it."""
        return self.info.report_section

    @property
    def command(self) -> str:
        """The command that starts it."""
        return self.info.command

    @property
    def runner(self) -> Runner | None:
        """Its runner (None: not started from a spec)."""
        return None if self.info.run is None else cast(Runner, resolve(self.info.run))

    @property
    def recover(self) -> Recover:
        """Its recovery: a partial directory -> the finalized archive."""
        return cast(Recover, resolve(self.info.recover or "harness.run.kinds:refuse_external_recovery"))


def refuse_external_recovery(workspace: Path, writer: ArchiveWriter, spec: dict[str, Any]) -> Finished:
    """An import's partial is recovered from its import marker, never as a run."""
    raise ArchiveError(f"{writer.dir}: a partial of kind external is recovered from its import marker",
                       hint="run 'dsv4h archive recover' (it reads import.json)")


KINDS: dict[str, Kind] = {name: Kind(info) for name, info in DESCRIPTORS.items()}


def kind_entry(kind: str) -> Kind:
    """The run stage's entry of ``kind``; ``ArchiveError`` for a kind this dsv4h does not know (a
    partial of it is left as it is rather than recovered as another kind)."""
    entry = KINDS.get(kind)
    if entry is not None and entry.info is DESCRIPTORS.get(kind):
        return entry
    info = DESCRIPTORS.get(kind)  # a kind registered (or replaced) in the descriptor since import
    if info is None:
        raise ArchiveError(f"kind {kind!r} is not a kind this dsv4h knows ({', '.join(DESCRIPTORS)})",
                           hint="recover it with the dsv4h version that wrote it")
    return Kind(info)


def protocol_class(kind: str) -> str:
    """The protocol class of ``kind`` (the one mapping)."""
    return kind_entry(kind).protocol_class


def run_loaded(loaded: LoadedSpec, workspace: Path, reporter: Reporter, options: RunOptions | None = None) -> Any:
    """Run a loaded spec through its kind's runner (``dsv4h campaign run``, ``sweep run`` and ``abba``)."""
    entry = kind_entry(loaded.kind)
    if entry.runner is None:
        raise SpecError(f"kind {loaded.kind} is not run from a spec", hint=f"use '{entry.command}'")
    return entry.runner(loaded, workspace, reporter, options or RunOptions())
