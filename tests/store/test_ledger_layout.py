"""Ledger schema 3 (issue 15.4, issue 17): one directory per table, one file per archive, one canonical
schema per table (typed timestamps, rates named with units), ingest and evidence touching only the
archive's own files."""

from __future__ import annotations

import json
from datetime import UTC, datetime
from pathlib import Path

import duckdb
import numpy as np
import pandas as pd
import polars as pl
import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from testkit import run_block

from harness.evidence.findings import Finding
from harness.evidence.io import apply_findings
from harness.governance.io import freeze_file, table_rows
from harness.records import RequestRecord
from harness.store import archive as archive_module
from harness.store.archive import ArchiveWriter, open_archive
from harness.store.archive_legacy import upgrade_table
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


def test_one_directory_per_table_and_one_file_per_archive(tmp_path: Path) -> None:
    a = make(tmp_path, "a")
    b = make(tmp_path, "b")
    for p in (a, b):
        ingest_archive(tmp_path, open_archive(p))
    led = tmp_path / "ledgers"
    for table in TABLES_OF_ONE:
        assert sorted(f.name for f in (led / table).glob("*.parquet")) == sorted([f"{a.name}.parquet",
                                                                                  f"{b.name}.parquet"]), table
    assert not list(led.glob("*.parquet"))  # no single-file tables: a glob cannot mix tables


def test_every_file_of_a_table_has_the_canonical_schema_and_globs_read(tmp_path: Path) -> None:
    for k in range(3):
        ingest_archive(tmp_path, open_archive(make(tmp_path, f"m{k}", median=100.0 + k, anchor=k == 1)))
    apply_findings(tmp_path, open_archive(make(tmp_path, "x")).archive_id, [])  # findings of a non-ingested id
    for table in (*TABLES_OF_ONE, "findings"):
        files = sorted((tmp_path / "ledgers" / table).glob("*.parquet"))
        assert files, table
        for f in files:
            schema = pq.read_schema(f)
            assert schema.equals(SCHEMAS[table]), (table, f.name)
            assert schema.metadata[b"dsv4h.ledger_schema_version"] == b"4"
            assert schema.metadata[b"dsv4h.table"] == table.encode()
        glob = str(tmp_path / "ledgers" / table / "*.parquet")
        rel = duckdb.sql(f"SELECT count(*) FROM '{glob}'")
        assert rel is not None and pl.read_parquet(glob).height == rel.fetchall()[0][0]
    cells = pl.read_parquet(str(tmp_path / "ledgers" / "cells" / "*.parquet"))
    assert cells.schema["created_wall"] == pl.Datetime("ns", "UTC")
    assert cells.schema["concurrency"] == pl.Int64 and cells.schema["ledger_schema_version"] == pl.Int64
    assert sorted(cells.filter(pl.col("cell_id") == "c1")["median_tok_s"].to_list()) == [100.0, 101.0, 102.0]


@pytest.mark.parametrize("first_names", [False, True])
def test_rates_carry_units_and_archives_keep_their_names(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                                         first_names: bool) -> None:
    if first_names:  # an archive of format 2, under its first names, is read under the row models' names
        monkeypatch.setattr(archive_module, "ARCHIVE_FORMAT_VERSION", 2)
    path = make(tmp_path, median=88.5, first_names=first_names)
    assert open_archive(path).format_version == (2 if first_names else 3)
    ingest_archive(tmp_path, open_archive(path))
    table = read_table(tmp_path, "cells")
    assert table is not None
    cells = {r["cell_id"]: r for r in table.to_pylist()}
    assert cells["c1"]["median_tok_s"] == 88.5 and cells["c1"]["http_output_tok_s"] == 44.25
    assert cells["c1"]["round_tok_s"] == [88.5] and cells["c1"]["concurrency"] == 8
    assert "median" not in table.column_names and "http_rate" not in table.column_names
    assert json.loads(cells["c1"]["extra"]) == {"new_thing": "kept"}  # nothing outside the schema is lost
    assert cells["c2"]["extra"] is None
    rounds = pd.read_parquet(tmp_path / "ledgers" / "rounds")
    assert rounds.rate_tok_s.tolist() == [88.5] and rounds.ttft_n.tolist() == [4]
    assert pd.read_parquet(tmp_path / "ledgers" / "waves").resident_output_tok_s.tolist() == [88.5]
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
    req = pd.read_parquet(tmp_path / "ledgers" / "requests")
    assert str(req.anchor_wall.iloc[0]) == "2025-11-30 01:02:03+00:00"  # wall_ns 1764464523 s
    assert (req.send_ns == 5).all() and req.send_ns.dtype == "int64"
    plan = tmp_path / "plan.md"
    plan.write_text("prediction\n")
    freeze_file(plan, tmp_path, now=datetime(2026, 11, 30, 4, 5, 6, 789, tzinfo=UTC))
    (f,) = (tmp_path / "ledgers" / "freezes").glob("*.parquet")
    assert pq.read_schema(f).field("at").type == WALL
    assert table_rows(tmp_path, "freezes")[0]["at"] == "2026-11-30T04:05:06.000789+00:00"  # rules compare text


def _snapshot(ws: Path) -> dict[str, bytes]:
    return {str(p.relative_to(ws)): p.read_bytes() for p in (ws / "ledgers").rglob("*.parquet")}


def _garble(ws: Path, keep: set[str]) -> dict[str, bytes]:
    """Overwrite every ledger file of archives not in ``keep`` with bytes no Parquet reader accepts."""
    out = {}
    for p in (ws / "ledgers").rglob("*.parquet"):
        if p.stem not in keep:
            p.write_bytes(b"not parquet: ingest must not read me")
            out[str(p.relative_to(ws))] = p.read_bytes()
    return out


def test_ingest_reads_and_writes_no_other_archive_file(tmp_path: Path) -> None:
    others = [make(tmp_path, f"o{k}", median=10.0 + k) for k in range(3)]
    for p in others:
        ingest_archive(tmp_path, open_archive(p))
    old = make(tmp_path, "old")
    ingest_archive(tmp_path, open_archive(old))
    garbled = _garble(tmp_path, keep={old.name})
    new = make(tmp_path, "old", resumed_from=old.name, median=101.0)
    added = ingest_archive(tmp_path, open_archive(new))  # would raise if it opened a garbled file
    assert added == {"cells": 2, "rounds": 1, "waves": 1, "requests": 1, "runs": 1}
    after = _snapshot(tmp_path)
    assert {k: after[k] for k in garbled} == garbled  # untouched
    cells = pq.read_table(tmp_path / "ledgers" / "cells" / f"{old.name}.parquet").to_pylist()
    assert {(c["valid"], c["superseded_by"]) for c in cells} == {(False, new.name)}  # only the resumed one rewritten
    assert (tmp_path / "ledgers" / ".resumes" / old.name).read_text() == new.name


def test_apply_findings_rewrites_only_that_archive(tmp_path: Path) -> None:
    paths = [make(tmp_path, f"a{k}") for k in range(3)]
    for p in paths:
        ingest_archive(tmp_path, open_archive(p))
    target = paths[1].name
    garbled = _garble(tmp_path, keep={target})
    blocking = Finding(rule="r", severity="blocking", message="m", remedy="x", rows=("c1.r0.w000",))
    changed = apply_findings(tmp_path, target, [blocking])
    assert changed == {"waves": 1, "requests": 1, "rounds": 1, "runs": 1}
    after = _snapshot(tmp_path)
    assert {k: after[k] for k in garbled} == garbled
    rounds = pq.read_table(tmp_path / "ledgers" / "rounds" / f"{target}.parquet").to_pylist()
    assert [r["valid"] for r in rounds] == [False]
    (finding,) = pq.read_table(tmp_path / "ledgers" / "findings" / f"{target}.parquet").to_pylist()
    assert finding["rule"] == "r" and finding["ledger_schema_version"] == 4


@pytest.mark.parametrize("table", ["nope", "cells.parquet"])
def test_unknown_tables_are_refused(tmp_path: Path, table: str) -> None:
    from harness.errors import LedgerError

    with pytest.raises(LedgerError, match="no ledger table"):
        read_table(tmp_path, table)
