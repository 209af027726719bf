"""``harness.ledger``: the notebook module reads one table over several workspaces, an archive present
in more than one counted once, from a workspace, a ledgers directory or a Delta table directory."""

from __future__ import annotations

import shutil
from pathlib import Path

import pyarrow as pa
import pytest
from testkit import run_block

import harness.ledger as hl
from harness.errors import LedgerError
from harness.store.archive import ArchiveWriter, open_archive
from harness.store.ledger import ingest_archive
from harness.store.ledger.layout import SCHEMAS


def make(ws: Path, campaign: str, median: float) -> str:
    w = ArchiveWriter(ws)
    w.write_table("cells.parquet",
                  pa.Table.from_pylist([{"cell_id": "c1", "workload": "decode", "median_tok_s": median}]))
    path = w.finalize(status="complete", run=run_block(campaign=campaign))
    ingest_archive(ws, open_archive(path))
    return path.name


def test_open_dataset_unions_hosts_by_archive_id(tmp_path: Path) -> None:
    a, b = tmp_path / "a", tmp_path / "b"
    ida = make(a, "x", 10.0)
    idb = make(b, "y", 30.0)
    shutil.copytree(a / "archives" / ida, b / "archives" / ida)  # b also holds a's archive
    ingest_archive(b, open_archive(b / "archives" / ida))
    dset = hl.open_dataset([a, b], "cells")
    assert dset.schema.equals(SCHEMAS["cells"])
    t = dset.to_table()
    assert sorted(t.column("archive_id").to_pylist()) == sorted([ida, idb])  # a's archive once
    df = hl.read([a / "ledgers", b / "ledgers" / "delta" / "cells"], "cells")
    assert df.groupby("workload").median_tok_s.median().to_dict() == {"decode": 20.0}
    assert hl.read(a, "runs").archive_id.tolist() == [ida]
    assert hl.open_dataset(tmp_path / "empty", "cells").to_table().num_rows == 0


def test_unknown_table_is_refused(tmp_path: Path) -> None:
    with pytest.raises(LedgerError, match="no ledger table"):
        hl.open_dataset(tmp_path, "cells.parquet")
