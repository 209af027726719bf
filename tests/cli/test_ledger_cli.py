"""``dsv4h ledger merge`` and ``dsv4h ledger migrate`` (harness/cli/ledger_cmd.py)."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from ledger_helpers import ledger_table
from testkit import run_block, run_cli

from harness.records import RequestRecord
from harness.store.archive import ArchiveWriter, open_archive
from harness.store.ledger import ingest_archive


def make(ws: Path, campaign: str) -> Path:
    w = ArchiveWriter(ws)
    w.write_wave([RequestRecord(rid=campaign, send_ns=0, done_ns=10, event_ns=np.array([1]),
                                event_tokens=np.array([1]), wave_id="c1.r0.w000", cell_id="c1")])
    w.write_table("cells.parquet", pa.Table.from_pylist([{"cell_id": "c1", "median_tok_s": 9.5}]))
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
    assert ledger_table(here, "cells").num_rows == 2
    code, _, err = run_cli("ledger", "merge", str(tmp_path / "missing"), "-w", str(here))
    assert code == 6 and "does not exist" in err


def test_migrate_moves_a_schema2_ledger_aside(tmp_path: Path) -> None:
    led = tmp_path / "ledgers"
    led.mkdir()
    pq.write_table(pa.Table.from_pylist([{"archive_id": "a" * 16, "cell_id": "c1", "median": 1.5,
                                          "created_wall": "2026-11-29T10:00:00+0000", "valid": True}]),
                   led / "cells.parquet")
    pq.write_table(pa.Table.from_pylist([{"archive_id": "a" * 16, "campaign": "c", "valid": True,
                                          "created_wall": "2026-11-29T10:00:00+0000"}]), led / "runs.parquet")
    code, out, err = run_cli("ledger", "migrate", "-w", str(tmp_path))
    assert code == 0, err
    assert "schema 2 -> schema 6 Delta tables; rows moved: cells 1, runs 1" in " ".join(out.split())
    (backup,) = (led / ".parquet-backup").iterdir()
    assert (backup / "cells.parquet").is_file() and not (led / "cells.parquet").exists()
    assert ledger_table(tmp_path, "cells").column("median_tok_s").to_pylist() == [1.5]  # renamed (schema 2)
    code, out, _ = run_cli("ledger", "migrate", "-w", str(tmp_path))
    assert code == 0 and "nothing to migrate" in " ".join(out.split())


def _tables(text: str) -> dict[str, list[str]]:
    """``ledger show`` output split into its tables: title's first words -> the table's lines."""
    out: dict[str, list[str]] = {}
    current = ""
    for line in text.splitlines():
        if line.startswith(("cells: ", "rounds: ", "sweep_cells: ", "sweep_rounds: ")) and "rows, last" not in line:
            current = " ".join(line.split()[:3])
        out.setdefault(current, []).append(line)
    return out


def test_ledger_show_prints_one_table_per_kind_with_its_own_rates(tmp_path: Path) -> None:
    from synthetic_archives import write_formal_archive, write_sweep_archive

    formal = write_formal_archive(tmp_path, tiers=(1, 2))
    sweep = write_sweep_archive(tmp_path)
    for a in (formal, sweep):
        ingest_archive(tmp_path, a)
    code, out, err = run_cli("ledger", "show", "-w", str(tmp_path), "-n", "0")
    assert code == 0, err
    assert "e+" not in out and "nan" not in out.lower()
    tables = _tables(out)
    decode, prefill = tables["cells: decode (resident"], tables["cells: prefill (input"]
    assert any("resident tok/s" in line for line in decode) and any("HTTP output" in line for line in decode)
    assert [line.split()[:5] for line in decode if line.startswith(formal.archive_id)] == [
        [formal.archive_id, "1", "complete", "88.67", "86.78"], [formal.archive_id, "2", "complete", "107.1", "102.8"]]
    assert not any("HTTP" in line for line in prefill)  # a prefill cell's rate is its input rate
    assert [line.split()[:6] for line in prefill if line.startswith(formal.archive_id)] == [
        [formal.archive_id, "1", "complete", "7,001", "6,970", "7,021"],
        [formal.archive_id, "2", "complete", "9,172", "9,152", "9,192"]]
    assert not any(t.startswith("cells: rate sweep") for t in tables)  # a sweep's cells are sweep cells
    code, out, err = run_cli("ledger", "show", "-w", str(tmp_path), "-t", "sweep_cells", "-n", "0")
    assert code == 0, err
    tables = _tables(out)
    (title,) = [t for t in tables if t.startswith("sweep_cells: rate sweep")]
    assert f"sweep_cells: rate sweep {sweep.archive_id} (synthetic-sweep), 3 rows" in " ".join(out.split())
    rows = [line.split() for line in tables[title] if line.split()[:1] in (["2"], ["4"], ["8"])]
    # rate, status, out tok/s, req/s, goodput, TTFT/TPOT/ITL/E2E p50 ms, valid
    assert rows[2] == ["8", "3/3", "ok", "800", "5.00", "1.51", "2,658", "71.2", "—", "13,978", "True"]
    assert [r[0] for r in rows] == ["2", "4", "8"]


def test_ledger_show_columns_and_rounds_use_the_listing_format(tmp_path: Path) -> None:
    from synthetic_archives import write_sweep_archive

    sweep = write_sweep_archive(tmp_path)
    ingest_archive(tmp_path, sweep)
    code, out, err = run_cli("ledger", "show", "-w", str(tmp_path), "-t", "rounds", "-n", "0")
    assert code == 0 and "is empty" in out, err  # a sweep's rounds are sweep rounds
    code, out, err = run_cli("ledger", "show", "-w", str(tmp_path), "-t", "sweep_rounds", "-n", "0")
    assert code == 0, err
    rows = [line.split() for line in out.splitlines() if line.split()[:2] in (["8", "0"], ["2", "1"])]
    assert [r[:5] for r in rows] == [["2", "1", "ok", "—", "2.00"], ["8", "0", "ok", "—", "5.00"]]
    code, out, err = run_cli("ledger", "show", "-w", str(tmp_path), "-t", "sweep_cells",
                             "-c", "archive_id,arrival_rate_req_s,ttft_p50_s", "-n", "1")
    assert code == 0, err
    assert out.splitlines()[-1].split() == [sweep.archive_id, "8", "2.66"]


def test_kind_tables_split_waves_and_give_prefill_its_input_rate() -> None:
    from harness.cli.ledger_cmd import kind_tables

    rows = [{"archive_id": "a", "wave_id": "prefill-c02.r0.w000", "workload": "prefill", "protocol_class": "formal",
             "prefill_input_tok_s": 7102.0, "http_output_tok_s": 0.87},
            {"archive_id": "a", "wave_id": "decode-c02.r0.w000", "workload": "decode", "protocol_class": "formal",
             "resident_output_tok_s": 375.3, "http_output_tok_s": 341.8},
            {"archive_id": "s", "workload": "sweep", "protocol_class": "rate-sweep", "campaign": "sw", "rounds_ok": 2,
             "rounds_planned": 3, "schedule_kept": False}]
    out = kind_tables("waves", rows)
    assert [t for t, _, _ in out] == ["waves: decode (resident and HTTP output tok/s), 1 row",
                                      "waves: prefill (input tok/s), 1 row", "waves: rate sweep s (sw), 1 row"]
    prefill_cols = [c.key for c in out[1][1]]
    assert "prefill_input_tok_s" in prefill_cols and "http_output_tok_s" not in prefill_cols
    (title, _, (cell,)), = [x for x in kind_tables("sweep_cells", rows[2:]) if "sweep" in x[0]]
    assert title == "sweep_cells: rate sweep s (sw), 1 row" and cell["status"] == "2/3 ok; schedule NOT kept"


def test_history_times_are_iso_utc_to_the_millisecond() -> None:
    from harness.cli.ledger_cmd import _utc_ms

    assert _utc_ms(1796349211123) == "2026-12-04T01:53:31.123Z"
    assert _utc_ms(1796349211999) == "2026-12-04T01:53:31.999Z"  # no float rounding down a millisecond
    assert _utc_ms(None) is None


def test_findings_read_at_80_columns(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    from synthetic_archives import write_formal_archive
    from typer.testing import CliRunner

    from harness.cli import _register, app
    from harness.evidence.findings import Finding
    from harness.evidence.io import apply_findings

    a = write_formal_archive(tmp_path, tiers=(1,))
    ingest_archive(tmp_path, a)
    message = ("cell decode-c01-0123456789ab has 1 ok rounds of 3 required, and the two rounds that failed "
               "are kept in the archive and excluded from every median")
    remedy = "resume the campaign to complete it"
    apply_findings(tmp_path, a.archive_id, [
        Finding("formal-rounds", "blocking", message, remedy, a.archive_id,
                tuple(f"decode-c01-0123456789ab.r{k}" for k in range(6))),
        Finding("simulated-context", "info", "simulated data, labelled", "none needed", a.archive_id, scope="run")])
    from harness.cli.common import console

    _register()
    # the shared console took its width when it was made (COLUMNS of the process then); this test's 80
    monkeypatch.setattr(console, "width", 80)
    result = CliRunner().invoke(app, ["ledger", "show", "--table", "findings", "-w", str(tmp_path)],
                                env={"COLUMNS": "80"}, terminal_width=80)
    assert result.exit_code == 0, result.output
    lines = result.stdout.splitlines()
    assert all(len(line) <= 80 for line in lines), result.stdout
    # one block per finding: severity and rule with the whole archive id on the block's first line
    assert any(line.split()[:4] == ["blocking", "formal-rounds", "archive", a.archive_id] for line in lines), lines
    assert any(line.split()[:3] == ["info", "simulated-context", "archive"] and "(the whole run)" in line
               for line in lines)
    text = " ".join(line.strip() for line in lines)
    assert message in text and f"remedy: {remedy}" in text  # the message reads as one sentence, wrapped
    assert "rows: decode-c01-0123456789ab.r0, decode-c01-0123456789ab.r1, decode-c01-0123456789ab.r2, " \
        "decode-c01-0123456789ab.r3 (+2)" in text
