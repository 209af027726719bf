"""Archive transactions expire (docs/ledger-format.md, "What an ingest reads"; issue 29 item 3): every
archive table carries ``delta.setTransactionRetentionDuration``, an archive's transaction carries its
time, and an archive whose transaction is gone is found by its rows, so an ingest reads the last
weeks' transactions rather than one per archive ever ingested, and never adds an archive twice."""

from __future__ import annotations

import json
import time
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pyarrow as pa
import pytest
from deltalake import DeltaTable, write_deltalake
from synthetic_archives import write_formal_archive

from harness.store.ledger import TABLES, ingest_archive, read_table
from harness.store.ledger import delta as dl
from harness.store.ledger.layout import PER_ARCHIVE


def _wall(days_ago: float) -> str:
    return (datetime.now(UTC) - timedelta(days=days_ago)).strftime("%Y-%m-%dT%H:%M:%S+0000")


def _txn_times(ws: Path, table: str, app_id: str) -> list[int]:
    log = dl.table_path(ws, table) / "_delta_log"
    out = []
    for entry in sorted(log.glob("*.json")):
        for line in entry.read_text().splitlines():
            txn = json.loads(line).get("txn")
            if txn and txn["appId"] == app_id:
                out.append(int(txn["lastUpdated"]))
    return out


def _expire_now(ws: Path) -> None:
    """Every archive table's transactions made to expire: its retention set to one second, waited out."""
    for table in PER_ARCHIVE:
        dt = dl.open_table(ws, table)
        if dt is not None:
            dt.alter.set_table_properties({dl.TXN_PROPERTY: "interval 1 seconds"})
    time.sleep(1.5)


def _no_row_reads(monkeypatch: pytest.MonkeyPatch) -> None:
    def refuse(*_: object, **__: object) -> None:
        raise AssertionError("an archive's rows were read")

    monkeypatch.setattr(DeltaTable, "to_pyarrow_dataset", refuse)


def test_archive_tables_expire_their_transactions_and_governance_tables_have_none(tmp_path: Path) -> None:
    ws = tmp_path / "ws"
    a = write_formal_archive(ws, tiers=(1,), created_wall=_wall(1))
    before = int(time.time() * 1000)
    ingest_archive(ws, a)
    for table in TABLES:
        dt = dl.open_table(ws, table)
        assert dt is not None
        config = dt.metadata().configuration
        if table in PER_ARCHIVE:
            assert config[dl.TXN_PROPERTY] == f"interval {dl.TXN_RETENTION_DAYS} days", table
        else:
            assert dl.TXN_PROPERTY not in config, table
    [stamp] = _txn_times(ws, "runs", a.archive_id)
    assert before - 1000 <= stamp <= int(time.time() * 1000) + 1000  # stamped at the ingest, in ms


def test_an_old_archive_whose_transaction_expired_is_found_by_its_rows(tmp_path: Path) -> None:
    ws = tmp_path / "ws"
    a = write_formal_archive(ws, tiers=(1, 2), created_wall=_wall(dl.TXN_RETENTION_DAYS + 10))
    added = ingest_archive(ws, a)
    assert added["cells"] == 4
    _expire_now(ws)
    runs = dl.open_table(ws, "runs")
    assert runs is not None and runs.transaction_version(a.archive_id) is None  # gone from the snapshot
    assert dl.has_archive(runs, a.archive_id, datetime.now(UTC) - timedelta(days=40))  # by its row
    assert ingest_archive(ws, a) == {}  # not added twice
    cells = read_table(ws, "cells")
    assert cells is not None and cells.column("archive_id").to_pylist().count(a.archive_id) == 4


def test_a_recent_archive_is_decided_by_its_transaction_without_reading_rows(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    ws = tmp_path / "ws"
    first, second = (write_formal_archive(ws, tiers=(1,), seed=s, created_wall=_wall(2)) for s in (1, 2))
    ingest_archive(ws, first)
    _no_row_reads(monkeypatch)
    assert ingest_archive(ws, first) == {}  # its transaction: already in
    assert ingest_archive(ws, second)["cells"] == 2  # none, and it is recent: not in, and no row read
    runs = dl.open_table(ws, "runs")
    assert runs is not None and dl.has_archive(runs, second.archive_id)


@pytest.mark.parametrize(("days_ago", "row_read"), [(0, False), (dl.TXN_TRUSTED_DAYS - 1, False),
                                                    (dl.TXN_TRUSTED_DAYS + 1, True), (-30, True)])
def test_which_archives_get_the_row_check(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, days_ago: float,
                                          row_read: bool) -> None:
    """A missing transaction is trusted for a run that started less than TXN_TRUSTED_DAYS ago; one
    older, or dated far in the future (a host's clock off), is looked for by its rows."""
    ws = tmp_path / "ws"
    ingest_archive(ws, write_formal_archive(ws, tiers=(1,), created_wall=_wall(1)))
    runs = dl.open_table(ws, "runs")
    assert runs is not None
    reads: list[object] = []
    real = DeltaTable.to_pyarrow_dataset

    def counting(self: DeltaTable, *args: object, **kwargs: object) -> object:
        reads.append(1)
        return real(self, *args, **kwargs)  # type: ignore[arg-type]

    monkeypatch.setattr(DeltaTable, "to_pyarrow_dataset", counting)
    assert not dl.has_archive(runs, "00000000000000aa", datetime.now(UTC) - timedelta(days=days_ago))
    assert bool(reads) == row_read
    assert not dl.has_archive(runs, "00000000000000aa")  # no start known: the row check
    assert len(reads) == int(row_read) + 1


def test_a_transaction_is_stamped_no_earlier_than_the_archives_start() -> None:
    """A writer whose clock runs behind the archive's host: the stamp is the start, so the transaction
    outlives the window in which its absence is trusted."""
    ahead = datetime.now(UTC) + timedelta(days=3)
    assert dl._archive_txn("00000000000000ab", ahead).last_updated == int(ahead.timestamp() * 1000)
    before = int(time.time() * 1000)
    now = dl._archive_txn("00000000000000ab", datetime.now(UTC) - timedelta(days=3)).last_updated
    assert now is not None and before - 1 <= now <= int(time.time() * 1000) + 1  # stamped at the call


def test_a_table_made_before_expiry_gets_the_property_once(tmp_path: Path) -> None:
    path = tmp_path / "t"
    write_deltalake(str(path), pa.table({"archive_id": ["00000000000000ab"]}))
    dt = DeltaTable(str(path))
    v = dt.version()
    dl._make_expiring(dt)
    assert dt.metadata().configuration[dl.TXN_PROPERTY] == f"interval {dl.TXN_RETENTION_DAYS} days"
    assert dt.version() == v + 1
    dl._make_expiring(dt)
    assert dt.version() == v + 1  # present: nothing committed


def test_the_benchmark_runs_both_fills_at_small_sizes(tmp_path: Path) -> None:
    """benchmarks/bench_ledger_delta.py end to end at 30 and 60 archives (its figures are measured
    there, not here): recent and aged fills, every archive counted by the query."""
    import subprocess
    import sys

    bench = Path(__file__).resolve().parents[2] / "benchmarks" / "bench_ledger_delta.py"
    for aged in (False, True):
        out = tmp_path / f"bench-{aged}.json"
        args = [sys.executable, str(bench), "30", "60", "--probe", "3", "--fill-batch", "10", "--repeat", "1",
                "--out", str(out), *(["--aged"] if aged else [])]
        proc = subprocess.run(args, capture_output=True, text=True, timeout=240, check=False)
        assert proc.returncode == 0, proc.stdout[-2000:] + proc.stderr[-2000:]
        doc = json.loads(out.read_text())
        assert doc["aged"] is aged and [r["archives"] for r in doc["results"]] == [30, 60]
