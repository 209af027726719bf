"""Merging several hosts' workspaces (their verified archives ingested, a union keyed by archive id,
idempotent, order-free) and the one-time migration of schema-2 single-file ledgers (harness.run.merge,
harness.store.ledger.merge, harness.store.ledger.migrate). Hostile other-host directories:
test_merge_hostile.py."""

from __future__ import annotations

import hashlib
from datetime import UTC, datetime
from pathlib import Path

import numpy as np
import pandas as pd
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq
import pytest
from testkit import run_block

import harness.ledger as hl
from harness.errors import LedgerError
from harness.governance.io import freeze_file, table_rows
from harness.records import RequestRecord
from harness.run.merge import merge_workspace
from harness.store.archive import ArchiveWriter, open_archive, open_verified
from harness.store.ledger import ensure_current, ingest_archive, ingested_ids, read_table, successor_of
from harness.store.ledger.layout import SCHEMAS, WALL

TABLES_OF_ONE = ("cells", "rounds", "waves", "requests", "runs")


def make(ws: Path, campaign: str = "m", resumed_from: str | None = None, median: float = 100.0,
         carried: Path | None = None) -> Path:
    """A small archive the evidence rules find nothing blocking in (merge re-runs them); ``carried``:
    the archive it resumes, whose records it writes first (as a resume does)."""
    w = ArchiveWriter(ws)
    if carried is not None:
        w.write_wave(open_archive(carried).records())
    w.write_wave([RequestRecord(rid=f"{campaign}-{median}", send_ns=0, done_ns=10, event_ns=np.array([1]),
                                event_tokens=np.array([1]), wave_id="c1.r0.w000", cell_id="c1")])
    w.write_table("cells.parquet", pa.Table.from_pylist([{"cell_id": "c1", "median_tok_s": median, "status": "ok",
                                                          "rounds_required": 1, "round_status": ["ok"]}]))
    w.write_table("rounds.parquet", pa.Table.from_pylist([{"round_id": "c1.r0", "cell_id": "c1", "rate_tok_s": median,
                                                           "status": "ok"}]))
    w.write_table("waves.parquet", pa.Table.from_pylist([{"wave_id": "c1.r0.w000", "phase": "measured"}]))
    return w.finalize(status="complete" if resumed_from else "partial",
                      run=run_block(campaign=campaign, resumed_from=resumed_from, plan_id="p", labels=["simulated"]))


def files(ws: Path) -> dict[str, bytes]:
    led = ws / "ledgers"
    return {str(p.relative_to(led)): p.read_bytes() for p in led.rglob("*")
            if p.is_file() and not p.name.startswith(".lock")}


def state(ws: Path) -> dict[tuple[str, str], set[tuple[bool, str | None]]]:
    """(table, archive id) -> {(valid, superseded_by)} over every archive table."""
    out: dict[tuple[str, str], set[tuple[bool, str | None]]] = {}
    for table in TABLES_OF_ONE:
        t = read_table(ws, table)
        assert t is not None
        for r in t.select(["archive_id", "valid", "superseded_by"]).to_pylist():
            out.setdefault((table, r["archive_id"]), set()).add((r["valid"], r["superseded_by"]))
    return out


def test_merge_is_a_union_by_archive_id_and_idempotent(tmp_path: Path) -> None:
    host_a, host_b, here = tmp_path / "a", tmp_path / "b", tmp_path / "here"
    a1, a2 = make(host_a, "a1"), make(host_a, "a2")
    b1 = make(host_b, "b1")
    for ws, p in ((host_a, a1), (host_a, a2), (host_b, b1), (here, make(here, "h"))):
        ingest_archive(ws, open_archive(p))
    plan = tmp_path / "plan.md"
    plan.write_text("x\n")
    freeze_file(plan, host_a, now=datetime(2026, 11, 30, tzinfo=UTC))
    first = merge_workspace(here, host_a)
    assert sorted(first.archives) == sorted([a1.name, a2.name]) and first.governance == {"freezes": 1}
    assert first.refusals == []
    merge_workspace(here, host_b)
    once = files(here)
    again = merge_workspace(here, host_a)
    assert again.archives == [] and again.present == 2 and again.governance == {} and again.refusals == []
    merge_workspace(here, host_b)
    assert files(here) == once  # merging again changes nothing, byte for byte
    runs = read_table(here, "runs")
    assert runs is not None and runs.num_rows == 4
    assert [r["action"] for r in table_rows(here, "freezes")] == ["freeze"]
    for p in (a1, a2):  # the host's archives are ingested here: copied whole, rows re-derived from them
        assert open_verified(here / "archives" / p.name).manifest == open_archive(p).manifest
        for table in ("cells", "rounds", "waves", "requests"):
            mine, theirs = read_table(here, table), read_table(host_a, table)
            assert mine is not None and theirs is not None
            pick = pc.equal(mine.column("archive_id"), p.name)
            assert mine.filter(pick).equals(theirs.filter(pc.equal(theirs.column("archive_id"), p.name))), table


def test_a_resumed_pair_on_two_hosts_merges_the_same_in_either_order(tmp_path: Path) -> None:
    host_old, host_new = tmp_path / "old", tmp_path / "new"
    old = make(host_old, "m", median=100.0)
    new = make(host_new, "m", resumed_from=old.name, median=101.0, carried=old)
    ingest_archive(host_old, open_archive(old))
    ingest_archive(host_new, open_archive(new))
    states = []
    for order in ((host_old, host_new), (host_new, host_old)):
        here = tmp_path / f"here-{order[0].name}-first"
        for other in order:
            merge_workspace(here, other)
        states.append(state(here))
        cells = hl.read(here, "cells")
        assert cells[cells.valid].archive_id.tolist() == [new.name]  # each cell counted once
    assert states[0] == states[1]
    for table in TABLES_OF_ONE:
        assert states[0][(table, old.name)] == {(False, new.name)}, table
        assert states[0][(table, new.name)] == {(True, None)}, table


def test_merge_refuses_a_directory_without_ledgers_and_itself(tmp_path: Path) -> None:
    ingest_archive(tmp_path, open_archive(make(tmp_path)))
    with pytest.raises(LedgerError, match="no ledgers/ directory"):
        merge_workspace(tmp_path, tmp_path / "nowhere")
    with pytest.raises(LedgerError, match="is this workspace"):
        merge_workspace(tmp_path, tmp_path)


def schema2_ledger(ws: Path, old_id: str = "a" * 16, new_id: str = "b" * 16) -> None:
    """A schema-2 ledger as dsv4h wrote it before: one file per table, old column names, text times."""
    led = ws / "ledgers"
    led.mkdir(parents=True)
    common = [{"archive_id": aid, "ledger_schema_version": 2, "campaign": "m", "kind": "formal-matrix",
               "claim_class": "native-ar", "protocol_class": "formal", "backend": "sim", "data_origin": "simulated",
               "archive_status": "complete", "created_wall": wall, "identity_hash": "", "valid": aid == new_id,
               "superseded_by": None if aid == new_id else new_id}
              for aid, wall in ((old_id, "2026-11-29T10:00:00+0000"), (new_id, "2026-11-29T11:00:00+0000"))]
    pq.write_table(pa.Table.from_pylist([c | {"cell_id": "c1", "median": 100.0 + i, "http_rate": 50.0,
                                              "round_rates": [100.0 + i], "ttft_n": 3.0}
                                         for i, c in enumerate(common)]), led / "cells.parquet")
    pq.write_table(pa.Table.from_pylist([c | {"plan_id": "p", "service": "sim", "n_cells": 1, "archive_path": "x",
                                              "resumed_from": None if c["archive_id"] == old_id else old_id}
                                         for c in common]), led / "runs.parquet")
    pq.write_table(pa.Table.from_pylist([{"archive_id": old_id, "rule": "r", "severity": "info", "message": "m",
                                          "remedy": "x", "rows": "[]"}]), led / "findings.parquet")
    pq.write_table(pa.Table.from_pylist([{"direction": "d", "action": "close", "evidence_archive_id": old_id,
                                          "reason": "no", "at": "2026-11-29T12:00:00.000001+00:00",
                                          "closing_archive_id": old_id, "source": "cli",
                                          "ledger_schema_version": 2}]), led / "closures.parquet")


def every_file(ws: Path) -> dict[str, str]:
    """Every path under ``ledgers/`` (lock file and directories included) with the SHA-256 of its bytes."""
    led = ws / "ledgers"
    return {str(p.relative_to(led)): hashlib.sha256(p.read_bytes()).hexdigest() if p.is_file() else "dir"
            for p in sorted(led.rglob("*"))}


def check_schema2_cells(cells: pa.Table | None) -> None:
    """The schema-2 fixture's cells in the canonical schema (read in memory or after migrating)."""
    assert cells is not None
    df = cells.to_pandas()
    assert df.median_tok_s.tolist() == [100.0, 101.0] and df.http_output_tok_s.tolist() == [50.0, 50.0]
    assert df.ttft_n.tolist() == [3, 3] and (df.ledger_schema_version == 6).all()
    assert cells.schema.field("created_wall").type == WALL
    assert df.created_wall.iloc[0] == pd.Timestamp("2026-11-29T10:00:00Z")
    assert df.valid.tolist() == [False, True] and cells.column("superseded_by").to_pylist() == ["b" * 16, None]


@pytest.mark.parametrize("version", [2, 1])
def test_reading_an_old_ledger_never_rewrites_it(tmp_path: Path, version: int) -> None:
    schema2_ledger(tmp_path)
    if version == 1:  # schema 1: no superseded_by column (read as null)
        t = pq.read_table(tmp_path / "ledgers" / "runs.parquet")
        pq.write_table(t.drop_columns(["superseded_by"]), tmp_path / "ledgers" / "runs.parquet")
    before = every_file(tmp_path)
    check_schema2_cells(read_table(tmp_path, "cells"))  # cast at read time, in memory
    runs = read_table(tmp_path, "runs")
    assert runs is not None and runs.schema.equals(SCHEMAS["runs"])
    assert runs.column("archive_id").to_pylist() == ["a" * 16, "b" * 16]
    assert runs.column("resumed_from").to_pylist() == [None, "a" * 16]
    assert table_rows(tmp_path, "closures")[0]["at"] == "2026-11-29T12:00:00.000001+00:00"
    findings = read_table(tmp_path, "findings")
    assert findings is not None and findings.column("rule").to_pylist() == ["r"]
    assert ingested_ids(tmp_path) == {"a" * 16, "b" * 16}
    assert hl.read(tmp_path, "cells").median_tok_s.tolist() == [100.0, 101.0]  # the notebook alias too
    assert every_file(tmp_path) == before  # byte-identical: no file written, moved or created


def test_a_schema2_ledger_is_migrated_once_on_first_write(tmp_path: Path) -> None:
    schema2_ledger(tmp_path)
    assert ensure_current(tmp_path) == {"cells": 2, "runs": 2, "findings": 1, "closures": 1}  # what every write does
    cells = read_table(tmp_path, "cells")
    led = tmp_path / "ledgers"
    (backup,) = (led / ".parquet-backup").iterdir()
    assert sorted(p.name for p in backup.iterdir()) == [
        "cells.parquet", "closures.parquet", "findings.parquet", "runs.parquet"]
    assert not list(led.glob("*.parquet"))
    for table in ("cells", "runs", "findings", "closures"):
        t = read_table(tmp_path, table)
        assert t is not None and t.schema.equals(SCHEMAS[table]), table
    check_schema2_cells(cells)
    assert hl.read(tmp_path, "cells").median_tok_s.tolist() == [100.0, 101.0]
    assert successor_of(tmp_path, "a" * 16) == "b" * 16  # supersede state carried over (runs.resumed_from)
    assert table_rows(tmp_path, "closures")[0]["at"] == "2026-11-29T12:00:00.000001+00:00"
    before = files(tmp_path)
    assert ensure_current(tmp_path) == {}
    assert read_table(tmp_path, "runs") is not None and files(tmp_path) == before  # once only


def test_an_archive_of_a_migrated_ledger_counts_as_ingested(tmp_path: Path) -> None:
    new = make(tmp_path / "scratch", "m")
    schema2_ledger(tmp_path, old_id=new.name, new_id="c" * 16)
    (tmp_path / "archives").mkdir()
    moved = tmp_path / "archives" / new.name
    new.rename(moved)
    assert ingest_archive(tmp_path, open_archive(moved)) == {}  # already in the migrated ledger
    runs = read_table(tmp_path, "runs")
    assert runs is not None and set(runs.column("archive_id").to_pylist()) == {new.name, "c" * 16}
