"""A rate sweep end to end on the simulator: plan -> archive -> ledgers -> findings (harness.run.sweep)."""

from __future__ import annotations

import json
from pathlib import Path

import pyarrow.parquet as pq
from ledger_helpers import ledger_table
from testkit import only_archive, run_dsv4h, tiny_sweep_spec

from harness.report.sweep import build_sweep_report
from harness.store.archive import open_archive


def sweep_archive_cells(archive: Path) -> list[dict[str, object]]:
    """The archive's own sweep_cells.parquet rows (format 4: named as the ledger table, with the
    sweep_cells row model's names)."""
    rows: list[dict[str, object]] = pq.read_table(archive / "sweep_cells.parquet").to_pylist()
    return rows


def test_sweep_runs_end_to_end_on_the_simulator(tmp_path: Path) -> None:
    spec = tiny_sweep_spec(tmp_path)
    ws = tmp_path / "ws"
    run_dsv4h("sweep", "run", str(spec), "-w", str(ws))
    archive = only_archive(ws)
    arrivals = json.loads((archive / "arrivals.json").read_text())
    assert [(r["rate"], r["round_index"]) for r in arrivals["rounds"]][:4] == [(4.0, -1), (4.0, 0), (4.0, 1),
                                                                              (4.0, 2)]
    sched = [json.loads(x) for x in (archive / "schedule.jsonl").read_text().splitlines()]
    assert len(sched) == 2 * (2 + 3 * 8) and all("planned_ns" in s and "client_lag_s" in s for s in sched)
    assert not (ws / "ledgers" / "cells").exists() and not (ws / "ledgers" / "rounds").exists()  # never formal
    cells = ledger_table(ws, "sweep_cells").to_pylist()
    assert sorted(c["arrival_rate_req_s"] for c in cells) == [4.0, 8.0]  # a sweep's `rate`, with its unit
    assert {c["protocol_class"] for c in cells} == {"rate-sweep"}
    assert all(c["rounds_ok"] == 3 and c["goodput_median_req_s"] > 0 for c in cells)
    assert all(c["extra"] is None for c in cells)  # every sweep column is in the canonical schema
    assert all(r["extra"] is None for r in ledger_table(ws, "sweep_rounds").to_pylist())
    assert all(c["arrival_rate_req_s"] in (4.0, 8.0) for c in sweep_archive_cells(archive))  # the archive's names
    assert not (archive / "cells.parquet").exists() and (archive / "sweep_rounds.parquet").is_file()  # format 4
    # every record carries its request's identity: its corpus entry and its slot in its round's plan
    corpus_sha = json.loads((archive / "corpora.json").read_text())["sweep"]["manifest_sha256"]
    records = open_archive(archive).records()
    assert len(records) == len(sched) and {r.corpus_sha256 for r in records} == {corpus_sha}
    assert all(r.rid.endswith(f"-{r.request_index}") and r.case_id for r in records)
    keys = {r.identity.request_key for r in records}
    assert len(keys) == len(records) and f"{records[0].wave_id}#0" in keys
    sweep = json.loads((archive / "sweep.json").read_text())
    assert sweep["knee"]["arrival_rate_req_s"] in (4.0, 8.0)
    md = build_sweep_report(ws, tmp_path / "report").read_text()
    assert "knee:" in md and "SIMULATED" in md and (tmp_path / "report" / f"sweep-{archive.name}.svg").is_file()
