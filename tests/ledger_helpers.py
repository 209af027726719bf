"""Reading a workspace's ledger tables in tests: the committed rows, as ``harness.ledger.read`` gives them."""

from __future__ import annotations

from pathlib import Path

import pandas as pd
import pyarrow as pa

from harness.store.ledger import read_table
from harness.store.ledger.layout import SCHEMAS


def ledger_table(workspace: Path, table: str) -> pa.Table:
    """One ledger table of ``workspace`` (empty, with its schema, when it has no row)."""
    t = read_table(Path(workspace), table)
    return SCHEMAS[table].empty_table() if t is None else t


def ledger_df(workspace: Path, table: str) -> pd.DataFrame:
    """:func:`ledger_table` as a pandas DataFrame."""
    df: pd.DataFrame = ledger_table(workspace, table).to_pandas()
    return df


def as_parquet_host(workspace: Path) -> None:
    """Rewrite ``workspace``'s ledger as a host on the older Parquet layout (schema 4) leaves it: one
    file per archive and table (governance: per append key), the marker ``.schema`` = 4, an empty
    ``.staging/`` and the lock file; the Delta tables removed. What an older dsv4h on another host
    hands to ``dsv4h ledger merge``, or what an upgrade finds."""
    import shutil

    import pyarrow.compute as pc
    import pyarrow.parquet as pq

    from harness.store.ledger.layout import GOVERNANCE_TABLES, PER_ARCHIVE, TABLES, ledger_dir

    led = ledger_dir(Path(workspace))
    tables = {t: read_table(Path(workspace), t) for t in TABLES}
    shutil.rmtree(led / "delta", ignore_errors=True)
    for table, t in tables.items():
        if t is None:
            continue
        (led / table).mkdir(parents=True, exist_ok=True)
        if table in PER_ARCHIVE:
            for aid in dict.fromkeys(t.column("archive_id").to_pylist()):
                pq.write_table(t.filter(pc.equal(t.column("archive_id"), aid)), led / table / f"{aid}.parquet")
        elif table in GOVERNANCE_TABLES:
            for key in dict.fromkeys(t.column("append_key").to_pylist()):
                pq.write_table(t.filter(pc.equal(t.column("append_key"), key)), led / table / f"{key}.parquet")
    (led / ".schema").write_text("4\n")
    (led / ".staging").mkdir(exist_ok=True)
    (led / ".lock").touch()
