"""Merging ledgers of several workspaces (hosts) into one (edge module: files).

A union keyed by archive id: an archive whose ``runs`` file the target lacks is copied with all its
files (every archive table and its findings), all or nothing per archive; one the target has is left as
it is. Governance files are copied by name (their names are unique per append). Resume state is then
re-applied as ingest applies it: a copied archive that resumed another leaves its marker and supersedes
the other when the target has it; a copied archive that the target knows was resumed is superseded.
Merging the same workspace again copies nothing, and merging several in any order gives the same files.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path

import pyarrow as pa

from harness.errors import LedgerError
from harness.interrupts import critical
from harness.store.ledger import (
    archive_rows,
    commit_files,
    ingested,
    locked,
    recover,
    resume_files,
    successor_of,
    supersede,
)
from harness.store.ledger_layout import (
    ARCHIVE_TABLES,
    GOVERNANCE_TABLES,
    PER_ARCHIVE,
    ledger_dir,
    table_dir,
    table_files,
)


@dataclass
class MergeResult:
    """What one merge copied: archive ids, governance files per table, archives already present."""

    archives: list[str] = field(default_factory=list)
    governance: dict[str, int] = field(default_factory=dict)
    present: int = 0


def merge_workspace(workspace: Path, other: Path) -> MergeResult:
    """Merge ``other``'s ledgers into ``workspace``'s (module docstring). A schema-2 ``other`` is
    migrated in place first. Raises ``LedgerError`` when ``other`` has no ledgers or is this workspace."""
    src = ledger_dir(other)
    if not src.is_dir():
        raise LedgerError(f"{other}: no ledgers/ directory to merge",
                          hint="give the workspace directory that holds ledgers/ (e.g. a copy from another host)")
    if src.resolve() == ledger_dir(workspace).resolve():
        raise LedgerError(f"{other} is this workspace", hint="merge another host's workspace")
    recover(other)
    out = MergeResult()
    with critical(), locked(ledger_dir(workspace)):
        for runs_file in table_files(table_dir(other, "runs")):
            aid = runs_file.stem
            if ingested(workspace, aid):
                out.present += 1
                continue
            _copy_archive(workspace, other, aid)
            out.archives.append(aid)
        for table in GOVERNANCE_TABLES:
            files = {f"{table}/{p.name}": p.read_bytes() for p in table_files(table_dir(other, table))
                     if not (table_dir(workspace, table) / p.name).exists()}
            commit_files(workspace, files)
            if files:
                out.governance[table] = len(files)
    return out


def _copy_archive(workspace: Path, other: Path, aid: str) -> None:
    """Copy one archive's files from ``other`` with resume state re-applied (lock held)."""
    successor = successor_of(workspace, aid)
    files: dict[str, pa.Table | bytes] = {}
    resumed_from: str | None = None
    for table in PER_ARCHIVE:
        t = archive_rows(other, table, aid)
        if t is None:
            continue
        if table == "runs" and t.num_rows:
            resumed_from = t.column("resumed_from")[0].as_py()
        if successor is not None and table in ARCHIVE_TABLES:
            t = supersede(t, aid, successor)
        files[f"{table}/{aid}.parquet"] = t
    files.update(resume_files(workspace, aid, resumed_from))
    commit_files(workspace, files)
