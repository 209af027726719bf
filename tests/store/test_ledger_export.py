"""The notebook path (issue 37 item 5): a plain Parquet read of a Delta table directory fails, naming
the marker, where it would count the files a compaction or supersede replaced twice; the Delta reads
give each row once; ``dsv4h ledger export --parquet DIR`` writes each table's current rows as one plain
Parquet file."""

from __future__ import annotations

from pathlib import Path

import pandas as pd
import polars as pl
import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from deltalake import DeltaTable
from test_ledger_commit import make
from testkit import run_cli

import harness.ledger as hl
from harness.store.archive import open_archive
from harness.store.ledger import TABLES, ingest_archive, read_table
from harness.store.ledger import delta as dl


def _resumed_pair(ws: Path) -> tuple[Path, Path]:
    old = make(ws, "m", median=100.0)
    new = make(ws, "m", resumed_from=old.name, median=101.0)
    for p in (old, new):
        ingest_archive(ws, open_archive(p))
    return old, new


def test_a_plain_parquet_read_of_a_table_directory_fails_naming_the_marker_after_optimize(tmp_path: Path) -> None:
    _resumed_pair(tmp_path)
    dl.optimize(tmp_path)
    cells = dl.table_path(tmp_path, "cells")
    with pytest.raises(pa.ArrowInvalid, match=dl.PLAIN_READ_MARKER):
        pd.read_parquet(cells)
    assert len(hl.read(tmp_path, "cells")) == 4  # two archives of two cells, each row once
    assert len(DeltaTable(str(cells)).to_pandas()) == 4
    assert pl.read_delta(str(cells)).height == 4
    # what the marker stops: the directory's Parquet files hold the rows the supersede update and the
    # compaction replaced as well: two appends of 2 rows, the update's rewrite of the older 2, the
    # compacted file of all 4
    files = [p for p in cells.glob("*.parquet") if p.name != dl.PLAIN_READ_MARKER]
    assert sum(pq.read_metadata(p).num_rows for p in files) == 10


def test_every_new_table_directory_holds_the_marker(tmp_path: Path) -> None:
    ingest_archive(tmp_path, open_archive(make(tmp_path, "a")))
    for table in TABLES:
        marker = dl.table_path(tmp_path, table) / dl.PLAIN_READ_MARKER
        assert marker.read_bytes() == dl.PLAIN_READ_TEXT, table


def test_ledger_export_writes_each_tables_current_rows_once(tmp_path: Path) -> None:
    _, new = _resumed_pair(tmp_path / "ws")
    out = tmp_path / "out"
    code, stdout, err = run_cli("ledger", "export", "--parquet", str(out), "-w", str(tmp_path / "ws"))
    assert code == 0, err
    assert sorted(p.name for p in out.iterdir()) == sorted(f"{t}.parquet" for t in TABLES)
    cells = pd.read_parquet(out / "cells.parquet")
    assert len(cells) == 4 and sorted(cells[cells.valid].archive_id) == [new.name, new.name]
    want = read_table(tmp_path / "ws", "cells")
    assert want is not None and pq.read_table(out / "cells.parquet").equals(want)
    assert pq.read_table(out / "gates.parquet").num_rows == 0  # an empty table: its schema, no rows
    assert f"{out / 'cells.parquet'}: 4 row(s)" in stdout


def test_help_names_the_reads_that_are_right() -> None:
    for argv in (("--help",), ("ledger", "--help")):
        code, out, _ = run_cli(*argv)
        text = " ".join(out.replace("│", " ").split())
        assert code == 0
        for name in ("harness.ledger.read", "read_delta", "delta_scan", "export --parquet"):
            assert name in text, (argv, name)
        assert "open them with pandas.read_parquet" not in text
    code, out, _ = run_cli("ledger", "export", "--help")
    assert code == 0 and "Example: dsv4h ledger export --parquet" in out


def test_optimize_gives_a_table_made_before_the_marker_its_marker(tmp_path: Path) -> None:
    ingest_archive(tmp_path, open_archive(make(tmp_path, "a")))
    cells = dl.table_path(tmp_path, "cells")
    (cells / dl.PLAIN_READ_MARKER).unlink()  # as a table made before 2026-12-04 is
    assert len(pd.read_parquet(cells)) == 2
    dl.optimize(tmp_path)
    with pytest.raises(pa.ArrowInvalid, match=dl.PLAIN_READ_MARKER):
        pd.read_parquet(cells)
