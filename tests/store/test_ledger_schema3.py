"""A schema-3 ledger (tests/fixtures/ledger-schema-3: a formal matrix and a rate sweep on the simulator,
written by commit af044ac) reads as the current schema in memory and moves into the Delta tables (schema
5): every row kept, every value carried, the sweep's rows in their own tables; reads never migrate."""

from __future__ import annotations

import math
import shutil
from datetime import datetime, timedelta
from pathlib import Path
from typing import Any

import pyarrow.parquet as pq
from testkit import run_cli

import harness.ledger as hl
from harness.store.ledger import append_rows, read_table
from harness.store.ledger.layout import SCHEMAS
from harness.store.ledger.migrate import SCHEMA_MARKER, schema_version

FIXTURE = Path(__file__).resolve().parents[1] / "fixtures" / "ledger-schema-3"
FORMAL, SWEEP = "1eea09325535a6ab", "898e6745fe5ce2b3"
# (schema-3 table, archive) -> (schema-4 table, rows)
EXPECTED = {
    ("cells", FORMAL): ("cells", 1), ("cells", SWEEP): ("sweep_cells", 2),
    ("rounds", FORMAL): ("rounds", 3), ("rounds", SWEEP): ("sweep_rounds", 6),
    ("waves", FORMAL): ("waves", 4), ("requests", FORMAL): ("requests", 8), ("requests", SWEEP): ("requests", 52),
    ("runs", FORMAL): ("runs", 1), ("runs", SWEEP): ("runs", 1),
    ("findings", FORMAL): ("findings", 1), ("findings", SWEEP): ("findings", 1),
}


def _workspace(tmp_path: Path) -> Path:
    ws = tmp_path / "ws"
    shutil.copytree(FIXTURE, ws / "ledgers")
    return ws


def _files(ws: Path) -> dict[str, bytes]:
    return {str(p.relative_to(ws)): p.read_bytes() for p in sorted((ws / "ledgers").rglob("*")) if p.is_file()}


def _same(a: Any, b: Any) -> bool:
    if isinstance(a, datetime) and isinstance(b, datetime):  # Delta keeps wall anchors to the microsecond
        return bool(abs(a - b) < timedelta(microseconds=1))
    if isinstance(a, float) and isinstance(b, float) and math.isnan(a) and math.isnan(b):
        return True
    if isinstance(a, list) and isinstance(b, list):
        return len(a) == len(b) and all(_same(x, y) for x, y in zip(a, b, strict=True))
    return bool(a == b)


def _check_carried(ws: Path) -> None:
    """Every schema-3 row is in its schema-4 table with every value (``kind`` only in ``runs``)."""
    for (old_table, aid), (new_table, n) in EXPECTED.items():
        old = pq.read_table(FIXTURE / old_table / f"{aid}.parquet").to_pylist()
        got = read_table(ws, new_table)
        assert got is not None, new_table
        assert got.schema.equals(SCHEMAS[new_table]), new_table
        new = [r for r in got.to_pylist() if r["archive_id"] == aid]
        assert len(old) == len(new) == n, (old_table, aid)
        for o, w in zip(old, new, strict=True):
            for col, value in o.items():
                if col == "ledger_schema_version":
                    assert w[col] == 6  # read or moved, a row is of the current schema
                elif col == "kind" and new_table != "runs":
                    assert col not in w
                elif value is not None:  # a value of the old row is in the new one, under the same name
                    assert col in w and _same(value, w[col]), (old_table, aid, col, value, w.get(col))
            assert w.get("extra") is None  # nothing left over: every old column has its place
    sweep = read_table(ws, "sweep_cells")
    assert sweep is not None and sorted(sweep.column("arrival_rate_req_s").to_pylist()) == [4.0, 8.0]
    assert sweep.column("goodput_median_req_s")[0].as_py() > 0
    cells = read_table(ws, "cells")
    assert cells is not None and cells.column("protocol_class").to_pylist() == ["formal"]
    runs = read_table(ws, "runs")
    assert runs is not None and sorted(runs.column("kind").to_pylist()) == ["formal-matrix", "rate-sweep"]


def test_a_schema3_ledger_reads_as_schema4_without_being_rewritten(tmp_path: Path) -> None:
    ws = _workspace(tmp_path)
    before = _files(ws)
    assert schema_version(ws / "ledgers") == 3
    _check_carried(ws)
    assert _files(ws) == before  # a read never migrates


def test_ledger_migrate_carries_every_row(tmp_path: Path) -> None:
    ws = _workspace(tmp_path)
    assert sorted(hl.read([ws], "sweep_cells").arrival_rate_req_s) == [4.0, 8.0]  # read in memory, not moved
    assert not (ws / "ledgers" / "delta").exists()
    code, out, err = run_cli("ledger", "migrate", "-w", str(ws))
    assert code == 0, err
    assert "schema 3 -> schema 6" in out
    assert (ws / "ledgers" / SCHEMA_MARKER).read_text().strip() == "6"
    assert not (ws / "ledgers" / "cells").exists()  # the old files are set aside, kept
    (backup,) = (ws / "ledgers" / ".parquet-backup").iterdir()
    assert (backup / "cells" / f"{SWEEP}.parquet").is_file()
    for table in ("cells", "rounds", "runs", "requests"):
        t = read_table(ws, table)
        assert t is not None and t.schema.equals(SCHEMAS[table]), table
    _check_carried(ws)
    migrated = _files(ws)
    code, out, _ = run_cli("ledger", "migrate", "-w", str(ws))
    assert code == 0 and "nothing to migrate" in out and _files(ws) == migrated
    assert sorted(hl.read([ws], "sweep_cells").arrival_rate_req_s) == [4.0, 8.0]


def test_the_first_write_migrates(tmp_path: Path) -> None:
    ws = _workspace(tmp_path)
    append_rows(ws, "closures", [{"direction": "d", "action": "close", "reason": "r",
                                  "at": "2026-12-01T00:00:00+00:00"}])
    assert schema_version(ws / "ledgers") == 6
    assert not (ws / "ledgers" / "cells").exists()
    _check_carried(ws)
