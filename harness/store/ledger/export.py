"""``dsv4h ledger export --parquet DIR``: each ledger table's current rows as one plain Parquet file
(edge module: files), for tools that do not read Delta Lake.

``DIR/<table>.parquet`` per table (every table; one with no rows is an empty file of its schema):
the rows ``harness.ledger.read`` gives (committed archives only; each row once, as the table's
current Delta version holds it), in the canonical schema (wall times ``timestamp[ns, UTC]``). Each
file is written whole under a temporary name and renamed, so a reader never sees half of one.
"""

from __future__ import annotations

from pathlib import Path

from harness.errors import LedgerError
from harness.formats import atomic_write_table
from harness.store.ledger.core import read_table
from harness.store.ledger.layout import SCHEMAS, TABLES

__all__ = ["export_parquet"]


def export_parquet(workspace: Path, dest: Path) -> dict[str, int]:
    """Write ``dest/<table>.parquet`` for every ledger table (module docstring); rows per table."""
    try:
        dest.mkdir(parents=True, exist_ok=True)
    except OSError as exc:
        raise LedgerError(f"{dest}: cannot create the export directory ({exc.strerror or exc})",
                          hint="give a writable directory") from None
    out: dict[str, int] = {}
    for table in TABLES:
        t = read_table(workspace, table)
        t = SCHEMAS[table].empty_table() if t is None else t
        atomic_write_table(dest / f"{table}.parquet", t)
        out[table] = t.num_rows
    return out
