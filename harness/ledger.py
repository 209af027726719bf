"""Public notebook access to dsv4h ledgers: ``harness.ledger.open_dataset`` and ``harness.ledger.read``.

Ledgers are Parquet files, one directory per table (``ledgers/<table>/*.parquet``, every file of a
table with the same schema; columns and units in ``ledgers/README.md``), so pandas, DuckDB and polars
read a table's directory or glob directly. These helpers add what a glob cannot: several workspaces at
once (hosts that each ran part of a campaign), with an archive present in more than one of them counted
once (its first copy in the order given), as ``dsv4h ledger merge`` would. Nothing inside the package
imports this module.

    >>> import harness.ledger as hl                                       # doctest: +SKIP
    >>> cells = hl.read(["host-a", "host-b"], "cells")                   # doctest: +SKIP
    >>> cells[cells.valid].groupby("cell_id").median_tok_s.median()       # doctest: +SKIP
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING

import pyarrow.dataset as ds

from harness.errors import LedgerError
from harness.store.ledger import recover
from harness.store.ledger.layout import (
    GOVERNANCE_TABLES,
    LEDGER_SCHEMA_VERSION,
    PER_ARCHIVE,
    SCHEMAS,
    TABLES,
    table_files,
)
from harness.store.ledger.migrate import schema_version

if TYPE_CHECKING:
    import pandas as pd

__all__ = ["SCHEMAS", "TABLES", "open_dataset", "open_delta", "read", "table_paths"]


def _table_dir(path: Path, table: str) -> Path:
    """The table directory a workspace, ledger directory or table directory stands for."""
    if (path / "ledgers").is_dir():
        recover(path)
        if (path / "ledgers" / f"{table}.parquet").is_file():  # a read never migrates (first write does)
            raise LedgerError(f"{path / 'ledgers'} is a schema-2 ledger (one file per table), not migrated yet",
                              hint=f"run 'dsv4h ledger migrate -w {path}' once, or read it with "
                              "harness.store.ledger.read_table (cast in memory)")
        if table in PER_ARCHIVE and schema_version(path / "ledgers") < LEDGER_SCHEMA_VERSION:
            raise LedgerError(f"{path / 'ledgers'} is a schema-{schema_version(path / 'ledgers')} ledger (a rate "
                              "sweep's rows still in cells/rounds), not migrated yet",
                              hint=f"run 'dsv4h ledger migrate -w {path}' once, or read it with "
                              "harness.store.ledger.read_table (cast in memory)")
        return path / "ledgers" / table
    if path.name == table and path.parent.name == "ledgers":
        return path
    if path.name == "ledgers" or (path / table).is_dir():
        return path / table
    if path.name in TABLES:
        raise LedgerError(f"{path} is the '{path.name}' table, not '{table}'", hint="give the workspace instead")
    return path / "ledgers" / table


def table_paths(paths: str | Path | Sequence[str | Path], table: str = "cells") -> list[Path]:
    """The files of ``table`` across ``paths`` (workspaces, ``ledgers`` directories or table
    directories), an archive's file taken from the first path that has it (governance files, one per
    append, by name likewise)."""
    if table not in TABLES:
        raise LedgerError(f"no ledger table '{table}'", hint=f"choose one of: {', '.join(TABLES)}")
    items = [paths] if isinstance(paths, (str, Path)) else list(paths)
    seen: dict[str, Path] = {}
    for item in items:
        for f in table_files(_table_dir(Path(item), table)):
            seen.setdefault(f.name, f)
    files = list(seen.values())
    return sorted(files, key=lambda p: p.name) if table in GOVERNANCE_TABLES else files


def open_dataset(paths: str | Path | Sequence[str | Path], table: str = "cells") -> ds.Dataset:
    """``table`` over one or several workspaces / ledger dirs / table dirs as a pyarrow Dataset with
    the table's canonical schema (an empty dataset when no path has the table). Archive files present
    under several paths count once (the union ``dsv4h ledger merge`` makes). A workspace given whole
    first finishes an interrupted commit (``harness.store.ledger.recover``); a schema-2 or schema-3 ledger
    is refused (``LedgerError``: run ``dsv4h ledger migrate``), never migrated by a read."""
    files = table_paths(paths, table)
    return ds.dataset([str(f) for f in files], schema=SCHEMAS[table], format="parquet")


def read(paths: str | Path | Sequence[str | Path], table: str = "cells") -> pd.DataFrame:
    """``open_dataset(paths, table)`` as a pandas DataFrame."""
    df: pd.DataFrame = open_dataset(paths, table).to_table().to_pandas()
    return df


def open_delta(workspace: str | Path, table: str = "cells", as_of: int | None = None) -> ds.Dataset:
    """``table`` of one workspace's Delta tables (``ledgers/delta/<table>``, written by ``dsv4h ledger
    migrate --delta`` and kept in step by every later write) as a pyarrow Dataset, at its latest version
    or version ``as_of`` (``dsv4h ledger history`` lists them); ``LedgerError`` when it has none."""
    from harness.store.ledger import delta

    found = delta.dataset(Path(workspace), table, as_of)
    if found is None:
        raise LedgerError(f"{delta.table_path(Path(workspace), table)}: no Delta table",
                          hint=f"run 'dsv4h ledger migrate --delta -w {workspace}' once")
    return found
