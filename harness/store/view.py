"""One typed view of an archive's result files, declared once (edge module: reads files).

:data:`ARCHIVE_FILES` names every result file a dsv4h archive may hold, with its reader (``json``: a
document, ``jsonl``: one JSON object a line, ``parquet``: a table) and what it is; a result table is
named as the ledger table it becomes (``sweep_cells.parquet``; archive format 4), and one of an older
archive is read under that name too (:meth:`harness.store.archive.Archive.table`; the names such
archives wrote are declared as well, for what they hold). An
:class:`ArchiveView` reads each file on first use only, through its declared reader, and keeps it; a
name that is not declared is refused (``KeyError``), so every reader of an archive (ledger ingest,
evidence, report, export, ``archive show``, timelines) asks for the same files the same way. The
records (``records/part-*.parquet``) and the manifest stay with :class:`~harness.store.archive.Archive`
and :class:`~harness.store.finished.FinishedArchive`.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any, Literal

import pyarrow as pa

from harness.errors import ArchiveError
from harness.kinds import kind_of_run, table_file
from harness.store.archive import Archive

__all__ = ["ArchiveView", "verdict_rows"]

Reader = Literal["json", "jsonl", "parquet"]


@dataclass(frozen=True)
class ArchiveFile:
    """One declared archive file: its reader and what it holds."""

    reader: Reader
    about: str


_FILES: tuple[tuple[str, Reader, str], ...] = (
    ("spec.json", "json", "the spec as loaded (every kind)"),
    ("service.json", "json", "every service start: profile, server_info, process, stack"),
    ("corpora.json", "json", "the frozen corpora used, with their hashes"),
    ("oracles.json", "json", "oracle sentinels run before and after measurement"),
    ("identity_check.json", "json", "the served configuration read from the server against the profile"),
    ("environment.json", "json", "the client host: Python, packages, dsv4h's own tree"),
    ("governance.json", "json", "the direction and closures checked before the run"),
    ("results.json", "json", "formal matrix results (cells, rounds) as computed at finish"),
    ("cells.parquet", "parquet", "a formal matrix's cells (format < 4: a sweep's or SLA search's cells too)"),
    ("rounds.parquet", "parquet", "a formal matrix's rounds (format < 4: a sweep's or SLA search's rounds too)"),
    ("waves.parquet", "parquet", "waves: measured and warmup waves, a screen's leg waves"),
    ("acceptance.parquet", "parquet", "speculative counts per measured wave"),
    ("comparison.json", "json", "an ABBA screen's comparison and verdict"),
    ("comparisons.parquet", "parquet", "an ABBA screen's comparisons row"),
    ("comparison.parquet", "parquet", "format < 4: an ABBA screen's comparisons.parquet"),
    ("legs.parquet", "parquet", "a screen's or matched run's legs"),
    ("matched.json", "json", "a matched AR/SD run's result and break-even verdict"),
    ("matched_sd.parquet", "parquet", "a matched AR/SD run's matched_sd row"),
    ("matched.parquet", "parquet", "format < 4: a matched AR/SD run's matched_sd.parquet"),
    ("cycles.json", "json", "a speculative server's cycle time per formal cell"),
    ("cycles.parquet", "parquet", "a speculative server's cycle time per formal cell (ledger table cycles)"),
    ("sweep.json", "json", "a rate sweep's cells, rounds and knee"),
    ("sweep_cells.parquet", "parquet", "a rate sweep's cells, one per offered rate"),
    ("sweep_rounds.parquet", "parquet", "a rate sweep's rounds"),
    ("schedule.jsonl", "jsonl", "planned and actual send times of an open-loop run"),
    ("arrivals.jsonl", "jsonl", "an SLA search's probed arrival plans"),
    ("arrivals.json", "json", "a trace replay's arrival plan"),
    ("sla.json", "json", "an SLA search's probes and bracket"),
    ("sla_cells.parquet", "parquet", "an SLA search's cells, one per probed rate (no ledger table)"),
    ("sla_rounds.parquet", "parquet", "an SLA search's rounds"),
    ("sla_probes.parquet", "parquet", "an SLA search's probes"),
    ("probes.parquet", "parquet", "format < 4: an SLA search's sla_probes.parquet"),
    ("replay.json", "json", "a trace replay's result"),
    ("replay_runs.parquet", "parquet", "a trace replay's replay_runs row"),
    ("replay.parquet", "parquet", "format < 4: a trace replay's replay_runs.parquet"),
    ("cache.jsonl", "jsonl", "a trace replay's expected and reported cached tokens per request"),
    ("quick.json", "json", "a quick screen's summary"),
    ("external.json", "json", "an imported peer result: tool, server, figures, origin"),
    ("external.parquet", "parquet", "an imported peer result's per-request rows"),
    ("energy.json", "json", "energy per measurement window"),
    ("power.parquet", "parquet", "power samples"),
    ("memory.json", "json", "GPU memory sampler summary"),
    ("memory.parquet", "parquet", "GPU memory samples"),
    ("coldness.json", "json", "cold, restarted and warm requests per service start"),
    ("wave_checks.jsonl", "jsonl", "the client's self-check and the simulator's late steps per measured unit"),
    ("server_metrics.jsonl", "jsonl", "server /metrics readings at window edges"),
    ("events.jsonl", "jsonl", "the run's events (run-start with the wall anchor, waves, rounds, run-end)"),
)
ARCHIVE_FILES: Mapping[str, ArchiveFile] = {name: ArchiveFile(reader, about) for name, reader, about in _FILES}
"""Every declared archive result file (module docstring)."""


@dataclass
class ArchiveView:
    """An archive's declared result files, each read on first use (module docstring)."""

    archive: Archive
    _cache: dict[str, Any] = field(default_factory=dict, repr=False)

    def has(self, name: str) -> bool:
        """Whether the archive holds declared file ``name``."""
        _declared(name)
        return self.archive.has(name)

    def _read(self, name: str) -> Any:
        if name not in self._cache:
            spec = _declared(name)
            if not self.archive.has(name):
                self._cache[name] = None
            elif spec.reader == "json":
                self._cache[name] = self.archive.json(name)
            elif spec.reader == "parquet":
                self._cache[name] = self.archive.table(name)
            else:
                self._cache[name] = _jsonl(self.archive, name)
        return self._cache[name]

    def doc(self, name: str, default: Any = None) -> Any:
        """A ``json`` file's document (``default`` when the archive has none)."""
        _reader(name, "json")
        value = self._read(name)
        return default if value is None else value

    def table(self, name: str) -> pa.Table | None:
        """A ``parquet`` file's table (None when the archive has none)."""
        _reader(name, "parquet")
        value: pa.Table | None = self._read(name)
        return value

    def rows(self, name: str, columns: tuple[str, ...] | None = None) -> list[dict[str, Any]]:
        """A ``parquet`` file's rows as dicts ([] when the archive has none); only ``columns`` (those
        the table has) when given."""
        t = self.table(name)
        if t is None:
            return []
        if columns is not None:
            t = t.select([c for c in columns if c in t.column_names])
        return list(t.to_pylist())

    def lines(self, name: str) -> list[dict[str, Any]]:
        """A ``jsonl`` file's objects ([] when the archive has none)."""
        _reader(name, "jsonl")
        value: list[dict[str, Any]] | None = self._read(name)
        return [] if value is None else value

    def kind_rows(self, part: Literal["cells", "rounds"],
                  columns: tuple[str, ...] | None = None) -> list[dict[str, Any]]:
        """The rows of the archive kind's cells or rounds table (``harness.kinds.KindInfo.cells`` /
        ``rounds``: a formal matrix's ``cells``, a sweep's ``sweep_cells`` ...); [] for a kind
        without one, or an archive of a kind this dsv4h does not know."""
        run = self.archive.run
        info = kind_of_run(run.kind, run.protocol_class)
        table = "" if info is None else info.cells if part == "cells" else info.rounds
        return self.rows(table_file(table), columns) if table else []

    def services(self) -> list[dict[str, Any]]:
        """``service.json``'s service starts ([] when absent)."""
        return list(self.doc("service.json", {}).get("services", []))


def verdict_rows(archive: Archive) -> tuple[list[dict[str, Any]], list[dict[str, Any]]]:
    """What a verdict is decided over (``harness.evidence.verdict.decide``): the archive's wave rows
    (``wave_id``, ``phase``) and its kind's round rows (``round_id``, ``cell_id``, ``status`` and, where
    the table has it, ``probe_id``)."""
    view = ArchiveView(archive)
    return (view.rows("waves.parquet", ("wave_id", "phase")),
            view.kind_rows("rounds", ("round_id", "cell_id", "status", "probe_id")))


def _jsonl(archive: Archive, name: str) -> list[dict[str, Any]]:
    """The objects of one JSON-lines file; ``ArchiveError`` naming the file and line for a line that is
    not a JSON object (a torn or forged line), never a traceback."""
    out: list[dict[str, Any]] = []
    text = (archive.path / name).read_text(encoding="utf-8", errors="replace")
    for n, line in enumerate(text.splitlines(), start=1):
        if not line.strip():
            continue
        try:
            obj = json.loads(line)
        except (ValueError, RecursionError):
            obj = None
        if not isinstance(obj, dict):
            raise ArchiveError(f"{archive.path / name}: line {n} is not a JSON object",
                               hint="the archive's file is damaged; restore it from a copy or re-run")
        out.append(obj)
    return out


def _declared(name: str) -> ArchiveFile:
    spec = ARCHIVE_FILES.get(name)
    if spec is None:
        raise KeyError(f"{name!r} is not a declared archive file (harness.store.view.ARCHIVE_FILES)")
    return spec


def _reader(name: str, reader: Reader) -> None:
    got = _declared(name).reader
    if got != reader:
        raise KeyError(f"{name!r} is a {got} file, not {reader}")
