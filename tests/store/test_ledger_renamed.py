"""Ledger schema 6 (issue 37 item 8): a percent change is ``change_pct`` (not ``ratio_pct``) and a
matched run's step times are seconds (``t_ar_s``, not ``t_ar_ms``). Older archives' rows are renamed
and converted on the way in; a schema-5 ledger reads under the new names and ``dsv4h ledger migrate``
rewrites it once, keeping every row and the archives' transactions."""

from __future__ import annotations

import shutil
from pathlib import Path

import pyarrow as pa
import pytest
from deltalake import DeltaTable, write_deltalake
from testkit import run_cli

from harness.store.archive import open_archive
from harness.store.ledger import delta as dl
from harness.store.ledger import ingest_archive, is_current, read_table
from harness.store.ledger.layout import SCHEMAS, canonical
from harness.store.ledger.migrate import SCHEMA_MARKER, schema_version

GPU = Path(__file__).resolve().parents[1] / "fixtures" / "gpu-archives"
SCREEN = "e2c3efe4b4f4e37e"
# the screen's comparison.parquet (format 2) holds ratio_pct / http_ratio_pct
CHANGE, HTTP_CHANGE = -7.1642810610195955, -7.2814836548555695


def _screen_ledger(tmp_path: Path) -> Path:
    ws = tmp_path / "ws"
    shutil.copytree(GPU / SCREEN, ws / "archives" / SCREEN)
    assert ingest_archive(ws, open_archive(ws / "archives" / SCREEN))
    return ws


def test_the_schemas_name_a_change_a_change_and_times_in_seconds() -> None:
    comp, matched = SCHEMAS["comparisons"].names, SCHEMAS["matched_sd"].names
    assert {"change_pct", "http_change_pct"} <= set(comp) and not {"ratio_pct", "http_ratio_pct"} & set(comp)
    assert {"change_pct", "t_ar_s", "t_sd_s", "t_sd_implied_s"} <= set(matched)
    assert not {"ratio_pct", "t_ar_ms", "t_sd_ms", "t_sd_implied_ms"} & set(matched)


def test_old_matched_rows_are_converted_to_seconds_not_kept_aside() -> None:
    old = pa.table({"run": ["m"], "concurrency": [4], "ratio_pct": [25.0], "t_ar_ms": [40.0], "t_sd_ms": [50.0],
                    "t_sd_implied_ms": [48.0]})
    row = canonical("matched_sd", old).to_pylist()[0]
    assert (row["change_pct"], row["t_ar_s"], row["t_sd_s"]) == (25.0, 0.04, 0.05)
    assert row["t_sd_implied_s"] == pytest.approx(0.048) and row["extra"] is None


def test_an_old_archives_ratio_pct_is_ingested_as_change_pct(tmp_path: Path) -> None:
    row = read_table(_screen_ledger(tmp_path), "comparisons").to_pylist()[0]  # type: ignore[union-attr]
    assert (row["change_pct"], row["http_change_pct"]) == (CHANGE, HTTP_CHANGE)
    assert row["extra"] is None or "ratio_pct" not in row["extra"]


def _as_schema5(ws: Path) -> None:
    """The ledger as a schema-5 writer left it: the comparisons table under the old column names."""
    path = dl.table_path(ws, "comparisons")
    t = DeltaTable(str(path)).to_pyarrow_table()
    t = t.rename_columns([{"change_pct": "ratio_pct", "http_change_pct": "http_ratio_pct"}.get(c, c)
                          for c in t.column_names])
    write_deltalake(str(path), t, mode="overwrite", schema_mode="overwrite")
    (ws / "ledgers" / SCHEMA_MARKER).write_text("5\n")


def test_a_schema5_ledger_reads_under_the_new_names_and_migrate_rewrites_it(tmp_path: Path) -> None:
    ws = _screen_ledger(tmp_path)
    _as_schema5(ws)
    assert schema_version(ws / "ledgers") == 5 and not is_current(ws)
    row = read_table(ws, "comparisons").to_pylist()[0]  # type: ignore[union-attr]
    assert (row["change_pct"], row["http_change_pct"]) == (CHANGE, HTTP_CHANGE)  # read, nothing written
    assert "ratio_pct" in DeltaTable(str(dl.table_path(ws, "comparisons"))).schema().to_arrow().names
    code, out, err = run_cli("ledger", "migrate", "-w", str(ws))
    assert code == 0, err
    assert "schema 5 -> schema 6" in out and "comparisons 1" in out
    assert is_current(ws) and schema_version(ws / "ledgers") == 6
    raw = DeltaTable(str(dl.table_path(ws, "comparisons"))).to_pyarrow_table()
    assert "ratio_pct" not in raw.column_names and raw.num_rows == 1
    assert raw.column("change_pct").to_pylist() == [CHANGE]
    assert ingest_archive(ws, open_archive(ws / "archives" / SCREEN)) == {}  # its transaction kept: once
    assert read_table(ws, "comparisons").num_rows == 1  # type: ignore[union-attr]
    code, out, _ = run_cli("ledger", "migrate", "-w", str(ws))
    assert code == 0 and "already schema 6" in out


def test_an_old_archives_files_read_under_the_new_names(tmp_path: Path) -> None:
    # format 2: comparison.json's result and comparison.parquet both said ratio_pct
    archive = open_archive(GPU / SCREEN)
    result = archive.json("comparison.json")["result"]
    assert (result["change_pct"], result["http_change_pct"]) == (CHANGE, HTTP_CHANGE)
    assert "ratio_pct" not in result and "http_ratio_pct" not in result
    row = archive.table("comparisons.parquet").to_pylist()[0]
    assert (row["change_pct"], row["http_change_pct"]) == (CHANGE, HTTP_CHANGE) and "ratio_pct" not in row


def test_an_old_matched_summary_reads_in_seconds() -> None:
    from harness.store.archive_legacy import upgrade_result_json

    old = {"result": {"ratio_pct": 12.5, "t_ar_ms": 40.0, "t_sd_s": 0.05, "t_sd_ms": 99.0}, "legs": []}
    got = upgrade_result_json("matched.json", old)
    assert got["result"] == {"change_pct": 12.5, "t_ar_s": 0.04, "t_sd_s": 0.05}  # a new name present wins
    assert upgrade_result_json("results.json", old) is old


def test_an_old_snapshot_and_gate_read_under_the_new_names() -> None:
    import json

    from harness.governance.gates import GateSpec
    from harness.report.snapshot import load_snapshot, snapshot_bytes

    gate = GateSpec.model_validate({"name": "g", "quantity": "abba.ratio_pct", "op": ">=", "threshold": 1,
                                    "unit": "%"})
    assert gate.quantity == "abba.change_pct"
    snap = json.loads(snapshot_bytes(_empty_snapshot()))
    snap |= {"snapshot_format_version": 10, "screens": [{"ratio_pct": 3.5, "http_ratio_pct": 3.0}],
             "speculative": {"matched": [{"ratio_pct": -2.0}], "acceptance": []}}
    got = load_snapshot(json.dumps(snap).encode(), "old.json")
    assert got["screens"] == [{"change_pct": 3.5, "http_change_pct": 3.0}]
    assert got["speculative"]["matched"] == [{"change_pct": -2.0}]


def _empty_snapshot() -> dict[str, object]:
    from harness.report.snapshot.io import _REQUIRED_KEYS, SNAPSHOT_FORMAT, SNAPSHOT_FORMAT_VERSION

    return {k: [] for k in _REQUIRED_KEYS} | {"format": SNAPSHOT_FORMAT,
                                              "snapshot_format_version": SNAPSHOT_FORMAT_VERSION}
