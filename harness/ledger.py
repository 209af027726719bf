"""Public notebook access to dsv4h ledgers: ``harness.ledger.read``, ``open_dataset`` and ``open_delta``.

Ledgers are Delta Lake tables, one per ledger table (``ledgers/delta/<table>/``; columns and units in
``ledgers/README.md``), so pandas, polars, pyarrow and DuckDB read one through Delta
(``deltalake.DeltaTable(dir).to_pandas()``, ``polars.read_delta``, DuckDB ``delta_scan``), never as
plain Parquet: a Delta directory also holds files that earlier versions replaced, so such a read
would count rows twice and fails on the marker file every table directory holds; ``dsv4h ledger
export --parquet DIR`` writes plain Parquet files. These helpers add what one table cannot: several
workspaces at once (hosts that each ran part of a campaign), with an archive present in more than
one of them counted once (its first copy in the order given), as ``dsv4h ledger merge`` would; only
committed archives' rows (those with a ``runs`` row); and an older ledger (the Parquet layout of
schemas 2-4) read as it is, in memory, never migrated by a read. Nothing inside the package imports
this module.

    >>> import harness.ledger as hl                                       # doctest: +SKIP
    >>> cells = hl.read(["host-a", "host-b"], "cells")                   # doctest: +SKIP
    >>> cells[cells.valid].groupby("cell_id").median_tok_s.median()       # doctest: +SKIP
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING

import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.dataset as ds

from harness.errors import LedgerError
from harness.store.ledger import read_table
from harness.store.ledger.delta import DELTA_DIR
from harness.store.ledger.layout import GOVERNANCE_TABLES, SCHEMAS, TABLES

if TYPE_CHECKING:
    import pandas as pd

__all__ = ["SCHEMAS", "TABLES", "open_dataset", "open_delta", "read", "read_table"]



def _workspace(path: Path, table: str) -> Path:
    """The workspace a workspace, ``ledgers`` directory or table directory stands for."""
    if path.name in TABLES and path.parent.name == DELTA_DIR and path.parent.parent.name == "ledgers":
        return path.parent.parent.parent
    if path.name in TABLES and path.parent.name == "ledgers":
        if path.name != table:
            raise LedgerError(f"{path} is the '{path.name}' table, not '{table}'", hint="give the workspace instead")
        return path.parent.parent
    if path.name == "ledgers":
        return path.parent
    if path.name in TABLES:
        raise LedgerError(f"{path} is the '{path.name}' table, not '{table}'", hint="give the workspace instead")
    return path


def _union(paths: str | Path | Sequence[str | Path], table: str) -> pa.Table:
    if table not in TABLES:
        raise LedgerError(f"no ledger table '{table}'", hint=f"choose one of: {', '.join(TABLES)}")
    items = [paths] if isinstance(paths, (str, Path)) else list(paths)
    parts: list[pa.Table] = []
    seen: set[str] = set()
    for item in items:
        t = read_table(_workspace(Path(item), table), table)
        if t is None:
            continue
        t = t.select(SCHEMAS[table].names).cast(SCHEMAS[table])
        if table not in GOVERNANCE_TABLES and "archive_id" in t.column_names:
            ids = pc.cast(t.column("archive_id"), pa.string())
            t = t.filter(pc.invert(pc.fill_null(pc.is_in(ids, pa.array(sorted(seen), pa.string())), False)))
            seen |= {str(a) for a in t.column("archive_id").to_pylist()}
        parts.append(t)
    if not parts:
        return SCHEMAS[table].empty_table()
    return pa.concat_tables(parts)


def open_dataset(paths: str | Path | Sequence[str | Path], table: str = "cells") -> ds.Dataset:
    """``table`` over one or several workspaces / ledger dirs / table dirs as a pyarrow Dataset with
    the table's canonical schema (empty when no path has the table): an archive present under several
    paths counts once (the union ``dsv4h ledger merge`` makes); only committed archives' rows."""
    return ds.dataset(_union(paths, table))


def read(paths: str | Path | Sequence[str | Path], table: str = "cells") -> pd.DataFrame:
    """``open_dataset(paths, table)`` as a pandas DataFrame."""
    df: pd.DataFrame = _union(paths, table).to_pandas()
    return df


def open_delta(workspace: str | Path, table: str = "cells", as_of: int | None = None) -> ds.Dataset:
    """``table`` of one workspace's Delta table (``ledgers/delta/<table>``) as a pyarrow Dataset, at its
    latest version or version ``as_of`` (``dsv4h ledger history`` lists them); ``LedgerError`` when it
    has none. This is the table as stored (a part-written archive's rows included; ``read`` leaves
    those out)."""
    from harness.store.ledger import delta

    found = delta.dataset(Path(workspace), table, as_of)
    if found is None:
        raise LedgerError(f"{delta.table_path(Path(workspace), table)}: no Delta table",
                          hint="nothing was ingested into this workspace yet (or run 'dsv4h ledger migrate')")
    return found
