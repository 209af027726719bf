"""``dsv4h ledger merge`` and ``dsv4h ledger migrate`` (harness/cli/ledger_cmd.py)."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
from testkit import run_block, run_cli

from harness.records import RequestRecord
from harness.store.archive import ArchiveWriter, open_archive
from harness.store.ledger import ingest_archive


def make(ws: Path, campaign: str) -> Path:
    w = ArchiveWriter(ws)
    w.write_wave([RequestRecord(rid=campaign, send_ns=0, done_ns=10, event_ns=np.array([1]),
                                event_tokens=np.array([1]), wave_id="c1.r0.w000", cell_id="c1")])
    w.write_table("cells.parquet", pa.Table.from_pylist([{"cell_id": "c1", "median": 9.5}]))
    path = w.finalize(status="complete", run=run_block(campaign=campaign))
    ingest_archive(ws, open_archive(path))
    return path


def test_merge_reports_what_it_added_and_is_idempotent(tmp_path: Path) -> None:
    here, other = tmp_path / "here", tmp_path / "other"
    make(here, "h")
    make(other, "o")
    code, out, err = run_cli("ledger", "merge", str(other), "-w", str(here))
    assert code == 0, err
    assert "1 archive(s) added, 0 already present" in " ".join(out.split())  # rich may wrap the line
    code, out, err = run_cli("ledger", "merge", str(other), "-w", str(here))
    assert code == 0 and "0 archive(s) added, 1 already present" in " ".join(out.split())
    assert len(list((here / "ledgers" / "cells").glob("*.parquet"))) == 2
    code, _, err = run_cli("ledger", "merge", str(tmp_path / "missing"), "-w", str(here))
    assert code == 6 and "does not exist" in err


def test_migrate_moves_a_schema2_ledger_aside(tmp_path: Path) -> None:
    led = tmp_path / "ledgers"
    led.mkdir()
    pq.write_table(pa.Table.from_pylist([{"archive_id": "a" * 16, "cell_id": "c1", "median": 1.5,
                                          "created_wall": "2026-11-29T10:00:00+0000", "valid": True}]),
                   led / "cells.parquet")
    code, out, err = run_cli("ledger", "migrate", "-w", str(tmp_path))
    assert code == 0, err
    assert "migrated cells" in " ".join(out.split()) and (led / ".schema2-backup" / "cells.parquet").is_file()
    assert pq.read_table(led / "cells" / f"{'a' * 16}.parquet").column("median_tok_s").to_pylist() == [1.5]
    code, out, _ = run_cli("ledger", "migrate", "-w", str(tmp_path))
    assert code == 0 and "nothing to migrate" in " ".join(out.split())
