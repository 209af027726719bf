"""Ledger layout (issue 15.4, issue 17; schema 5, issue 29): one Delta table per ledger table, one
transaction per archive, one canonical schema per table (typed timestamps, rates named with units),
ingest and evidence writing only the archive's own rows."""

from __future__ import annotations

import json
from datetime import UTC, datetime
from pathlib import Path

import duckdb
import numpy as np
import polars as pl
import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from deltalake import DeltaTable
from ledger_helpers import ledger_df
from testkit import run_block

from harness.evidence.findings import Finding
from harness.evidence.io import apply_findings
from harness.governance.io import freeze_file, table_rows
from harness.records import RequestRecord
from harness.store import archive as archive_module
from harness.store.archive import ArchiveWriter, open_archive
from harness.store.archive_legacy import upgrade_table
from harness.store.ledger import delta as dl
from harness.store.ledger import ingest_archive, read_table
from harness.store.ledger.layout import SCHEMAS, WALL, canonical

TABLES_OF_ONE = ("cells", "rounds", "waves", "requests", "runs")


def make(ws: Path, campaign: str = "m", resumed_from: str | None = None, median: float = 100.0,
         wall: str = "2026-11-30T01:02:03+0000", anchor: bool = False, first_names: bool = False) -> Path:
    """A hand-made archive: one request, two cells (one with an unknown column), a round, a wave, under
    the row models' names (``first_names``: the names archives of format 1/2 used)."""
    n = {k: k for k in ("median_tok_s", "round_tok_s", "http_output_tok_s", "rate_tok_s", "resident_output_tok_s")}
    if first_names:
        n = dict(zip(n, ("median", "round_rates", "http_rate", "rate", "resident_rate"), strict=True))
    w = ArchiveWriter(ws)
    w.write_wave([RequestRecord(rid=f"{campaign}-{median}", send_ns=5, done_ns=10, event_ns=np.array([7]),
                                event_tokens=np.array([1]), wave_id="c1.r0.w000", cell_id="c1")])
    if anchor:
        w.append_event({"event": "run-start", "wall_ns": 1_764_464_523_000_000_000, "perf_counter_ns": 1})
    w.write_table("cells.parquet", pa.Table.from_pylist([
        {"cell_id": "c1", n["median_tok_s"]: median, n["round_tok_s"]: [median], n["http_output_tok_s"]: median / 2,
         "concurrency": 8.0, "new_thing": "kept"},
        {"cell_id": "c2", n["median_tok_s"]: median / 2, n["round_tok_s"]: []}]))
    w.write_table("rounds.parquet", pa.Table.from_pylist([{"round_id": "c1.r0", "cell_id": "c1",
                                                           n["rate_tok_s"]: median, "ttft_n": 4.0}]))
    w.write_table("waves.parquet", pa.Table.from_pylist([{"wave_id": "c1.r0.w000", "phase": "measured",
                                                          n["resident_output_tok_s"]: median}]))
    return w.finalize(status="complete" if resumed_from else "partial",
                      run=run_block(campaign=campaign, resumed_from=resumed_from, plan_id="p", created_wall=wall))


def test_one_delta_table_per_ledger_table_and_one_data_file_per_archive(tmp_path: Path) -> None:
    a = make(tmp_path, "a")
    b = make(tmp_path, "b")
    for p in (a, b):
        ingest_archive(tmp_path, open_archive(p))
    led = tmp_path / "ledgers"
    for table in TABLES_OF_ONE:
        dt = DeltaTable(str(led / "delta" / table))
        assert len(dt.file_uris()) == 2, table  # one transaction, one data file, per archive
        ids = {pq.read_table(f, columns=["archive_id"]).column("archive_id")[0].as_py() for f in dt.file_uris()}
        assert ids == {a.name, b.name}, table
    assert not list(led.glob("*.parquet")) and not (led / "cells").exists()  # nothing outside the Delta tables
    assert (led / ".schema").read_text().strip() == "6"


def test_every_table_has_the_canonical_schema_and_reads_through_arrow(tmp_path: Path) -> None:
    for k in range(3):
        ingest_archive(tmp_path, open_archive(make(tmp_path, f"m{k}", median=100.0 + k, anchor=k == 1)))
    for table in (*TABLES_OF_ONE, "findings"):
        dt = DeltaTable(str(dl.table_path(tmp_path, table)))
        assert pa.schema(dt.schema().to_arrow()).names == SCHEMAS[table].names, table
        t = read_table(tmp_path, table)
        if table != "findings":
            assert t is not None and t.schema.equals(SCHEMAS[table]), table
        arrow = dt.to_pyarrow_dataset()
        rel = duckdb.sql("SELECT count(*) FROM arrow")
        assert rel is not None and pl.scan_pyarrow_dataset(arrow).collect().height == rel.fetchall()[0][0]
    cells = read_table(tmp_path, "cells")
    assert cells is not None and cells.schema.field("created_wall").type == WALL
    assert cells.schema.field("concurrency").type == pa.int64()
    assert sorted(r["median_tok_s"] for r in cells.to_pylist() if r["cell_id"] == "c1") == [100.0, 101.0, 102.0]
    assert set(cells.column("ledger_schema_version").to_pylist()) == {6}


@pytest.mark.parametrize("first_names", [False, True])
def test_rates_carry_units_and_archives_keep_their_names(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                                         first_names: bool) -> None:
    if first_names:  # an archive of format 2, under its first names, is read under the row models' names
        monkeypatch.setattr(archive_module, "ARCHIVE_FORMAT_VERSION", 2)
    path = make(tmp_path, median=88.5, first_names=first_names)
    assert open_archive(path).format_version == (2 if first_names else 6)
    ingest_archive(tmp_path, open_archive(path))
    table = read_table(tmp_path, "cells")
    assert table is not None
    cells = {r["cell_id"]: r for r in table.to_pylist()}
    assert cells["c1"]["median_tok_s"] == 88.5 and cells["c1"]["http_output_tok_s"] == 44.25
    assert cells["c1"]["round_tok_s"] == [88.5] and cells["c1"]["concurrency"] == 8
    assert "median" not in table.column_names and "http_rate" not in table.column_names
    assert json.loads(cells["c1"]["extra"]) == {"new_thing": "kept"}  # nothing outside the schema is lost
    assert cells["c2"]["extra"] is None
    rounds = ledger_df(tmp_path, "rounds")
    assert rounds.rate_tok_s.tolist() == [88.5] and rounds.ttft_n.tolist() == [4]
    assert ledger_df(tmp_path, "waves").resident_output_tok_s.tolist() == [88.5]
    names = pq.read_schema(path / "cells.parquet").names  # the archive is unchanged
    assert ("median" in names) == first_names and ("median_tok_s" in names) != first_names


def test_a_sweep_rate_is_its_arrival_rate() -> None:
    t = pa.table({"round_id": ["s.r0"], "rate": [4.0], "goodput": [3.5], "output_throughput": [900.0]})
    # an archive of format 1/2 named both "rate"; the legacy reader tells them apart by protocol class
    sweep = canonical("sweep_rounds", upgrade_table("rounds.parquet", t, "rate-sweep")).to_pylist()[0]
    assert (sweep["arrival_rate_req_s"], sweep["goodput_req_s"], sweep["output_throughput_tok_s"]) == (4.0, 3.5, 900.0)
    assert "rate_tok_s" not in sweep and sweep["extra"] is None  # a sweep round has no tok/s rate column
    formal_t = upgrade_table("rounds.parquet", t.select(["round_id", "rate"]), "formal")
    formal = canonical("rounds", formal_t).to_pylist()[0]
    assert formal["rate_tok_s"] == 4.0 and "arrival_rate_req_s" not in formal and formal["extra"] is None


def test_wall_anchors_are_utc_timestamps(tmp_path: Path) -> None:
    ingest_archive(tmp_path, open_archive(make(tmp_path, wall="2026-11-30T01:02:03+0000", anchor=True)))
    runs = read_table(tmp_path, "runs")
    assert runs is not None and runs.schema.field("created_wall").type == WALL
    assert runs.column("created_wall")[0].as_py() == datetime(2026, 11, 30, 1, 2, 3, tzinfo=UTC)
    req = ledger_df(tmp_path, "requests")
    assert str(req.anchor_wall.iloc[0]) == "2025-11-30 01:02:03+00:00"  # wall_ns 1764464523 s
    assert (req.send_ns == 5).all() and req.send_ns.dtype == "int64"
    plan = tmp_path / "plan.md"
    plan.write_text("prediction\n")
    freeze_file(plan, tmp_path, now=datetime(2026, 11, 30, 4, 5, 6, 789, tzinfo=UTC))
    freezes = read_table(tmp_path, "freezes")
    assert freezes is not None and freezes.schema.field("at").type == WALL
    assert table_rows(tmp_path, "freezes")[0]["at"] == "2026-11-30T04:05:06.000789+00:00"  # rules compare text


def _data_files(ws: Path) -> dict[str, bytes]:
    """Every data file of every Delta table (Delta never rewrites one: a change adds files)."""
    return {str(p.relative_to(ws)): p.read_bytes() for p in (ws / "ledgers" / "delta").rglob("*.parquet")
            if "_delta_log" not in p.parts}


def _archives_of(ws: Path, names: set[str]) -> set[str]:
    ids: set[str] = set()
    for rel in names:
        ids |= {str(a) for a in pq.read_table(ws / rel, columns=["archive_id"]).column("archive_id").to_pylist()}
    return ids


def test_ingest_writes_only_its_own_rows_and_the_resumed_archives(tmp_path: Path) -> None:
    others = [make(tmp_path, f"o{k}", median=10.0 + k) for k in range(3)]
    for p in others:
        ingest_archive(tmp_path, open_archive(p))
    old = make(tmp_path, "old")
    ingest_archive(tmp_path, open_archive(old))
    before = _data_files(tmp_path)
    new = make(tmp_path, "old", resumed_from=old.name, median=101.0)
    added = ingest_archive(tmp_path, open_archive(new))
    assert added == {"cells": 2, "rounds": 1, "waves": 1, "requests": 1, "runs": 1}
    after = _data_files(tmp_path)
    assert {k: after[k] for k in before} == before  # no data file rewritten
    assert _archives_of(tmp_path, set(after) - set(before)) == {old.name, new.name}  # only theirs written
    cells = [c for c in (read_table(tmp_path, "cells") or pa.table({})).to_pylist() if c["archive_id"] == old.name]
    assert {(c["valid"], c["superseded_by"]) for c in cells} == {(False, new.name)}
    assert not (tmp_path / "ledgers" / ".resumes").exists()  # the successor is found in runs, no marker


def test_apply_findings_rewrites_only_that_archive(tmp_path: Path) -> None:
    paths = [make(tmp_path, f"a{k}") for k in range(3)]
    for p in paths:
        ingest_archive(tmp_path, open_archive(p))
    target = paths[1].name
    before = _data_files(tmp_path)
    blocking = Finding(rule="r", severity="blocking", message="m", remedy="x", rows=("c1.r0.w000",))
    changed = apply_findings(tmp_path, target, [blocking])
    assert changed == {"waves": 1, "requests": 1, "rounds": 1, "runs": 1}
    after = _data_files(tmp_path)
    assert {k: after[k] for k in before} == before
    assert _archives_of(tmp_path, set(after) - set(before)) == {target}
    rounds = [r for r in (read_table(tmp_path, "rounds") or pa.table({})).to_pylist() if r["archive_id"] == target]
    assert [r["valid"] for r in rounds] == [False]
    (finding,) = [f for f in (read_table(tmp_path, "findings") or pa.table({})).to_pylist()
                  if f["archive_id"] == target]
    assert finding["rule"] == "r" and finding["ledger_schema_version"] == 6


@pytest.mark.parametrize("table", ["nope", "cells.parquet"])
def test_unknown_tables_are_refused(tmp_path: Path, table: str) -> None:
    from harness.errors import LedgerError

    with pytest.raises(LedgerError, match="no ledger table"):
        read_table(tmp_path, table)
