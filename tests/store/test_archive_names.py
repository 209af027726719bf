"""Archive format 4 (harness.store.archive): every result table is stored as its ledger table,
``<table>.parquet``, so the ingest renames nothing; an archive of format 3, written under the older
names (a sweep's ``cells.parquet``, an SLA search's ``probes.parquet`` ...), still verifies and
ingests to the same ledger rows (harness.store.archive_legacy.legacy_file)."""

from __future__ import annotations

from pathlib import Path
from typing import Any, cast

import numpy as np
import pyarrow as pa
import pytest
from testkit import run_block

from harness.inputs.spec import SlaSpec, SweepSpec
from harness.kinds import KINDS
from harness.records import RequestRecord
from harness.run.rate_rounds import write_rate_tables
from harness.store import archive as archive_module
from harness.store.archive import ArchiveWriter, open_archive, verify_archive
from harness.store.ledger import ingest_archive, read_table
from harness.store.view import ArchiveView

EXTRA = {"campaign": "names", "claim_class": "native-ar", "protocol_class": "rate-sweep"}
SWEEP_CELL = {"cell_id": "sweep-2rps", "workload": "sweep", "arrival_rate_req_s": 2.0, "rounds_ok": 1,
              "rounds_planned": 1, "concurrency": 0, "goodput_median_req_s": 1.75}
SWEEP_ROUND = {"round_id": "sweep-2rps.r0", "cell_id": "sweep-2rps", "round_index": 0, "arrival_rate_req_s": 2.0,
               "status": "ok", "goodput_req_s": 1.75}
SLA_PROBE = {"probe_index": 0, "arrival_rate_req_s": 2.0, "cell_id": "sweep-2rps", "passed": True}
# the names a format 3 archive held the tables under -> the names of format 4
OLD = {"rate-sweep": {"cells.parquet": "sweep_cells.parquet", "rounds.parquet": "sweep_rounds.parquet"},
       "sla-search": {"cells.parquet": "sla_cells.parquet", "rounds.parquet": "sla_rounds.parquet",
                      "probes.parquet": "sla_probes.parquet"}}
TABLES: dict[str, dict[str, list[dict[str, Any]]]] = {
    "rate-sweep": {"sweep_cells.parquet": [SWEEP_CELL], "sweep_rounds.parquet": [SWEEP_ROUND]},
    "sla-search": {"sla_cells.parquet": [SWEEP_CELL], "sla_rounds.parquet": [SWEEP_ROUND],
                   "sla_probes.parquet": [SLA_PROBE]}}


def test_every_kind_names_its_result_files_as_its_ledger_tables() -> None:
    assert KINDS["rate-sweep"].files == ("sweep_cells.parquet", "sweep_rounds.parquet")
    assert KINDS["sla-search"].files == ("sla_rounds.parquet", "sla_probes.parquet", "sla_cells.parquet")
    assert KINDS["abba"].files == ("waves.parquet", "acceptance.parquet", "comparisons.parquet", "legs.parquet")
    assert KINDS["matched-sd"].ledger_tables == ("waves", "acceptance", "matched_sd")
    assert KINDS["trace-replay"].files == ("replay_runs.parquet",)
    assert (KINDS["sla-search"].cells, KINDS["sla-search"].rounds) == ("sla_cells", "sla_rounds")


@pytest.mark.parametrize(("model", "cells", "rounds"), [(SweepSpec, "sweep_cells", "sweep_rounds"),
                                                       (SlaSpec, "sla_cells", "sla_rounds")])
def test_a_sweep_and_an_sla_search_write_their_tables_under_the_ledger_names(
        tmp_path: Path, model: type[SweepSpec] | type[SlaSpec], cells: str, rounds: str) -> None:
    # only what the writer reads (name, claim class; the kind and protocol class are the defaults)
    spec = cast(Any, model).model_construct(name="names", claim_class="native-ar")
    w = ArchiveWriter(tmp_path / "ws")
    write_rate_tables(w, spec, [SWEEP_CELL], [SWEEP_ROUND])
    assert sorted(p.name for p in w.dir.glob("*.parquet")) == [f"{cells}.parquet", f"{rounds}.parquet"]
    w.close()


def _archive(ws: Path, kind: str, names: dict[str, str] | None) -> Path:
    """A hand-made archive of ``kind`` (one record, its result tables); ``names``: format 3, each table
    written under its older name (new name -> old name)."""
    w = ArchiveWriter(ws)
    w.write_wave([RequestRecord(rid="r0", send_ns=5, done_ns=10, event_ns=np.array([7]), event_tokens=np.array([1]),
                                wave_id="sweep-2rps.r0.w000", cell_id="sweep-2rps")])
    extra = EXTRA | {"protocol_class": kind}
    for name, rows in TABLES[kind].items():
        w.write_table((names or {}).get(name, name), pa.Table.from_pylist([r | extra for r in rows]))
    return w.finalize(status="complete", run=run_block(kind=kind, protocol_class=kind, campaign="names"))


def _ledger(ws: Path, table: str) -> list[dict[str, Any]]:
    t = read_table(ws, table)
    assert t is not None, table
    drop = ("archive_id", "archive_path")
    return [{k: v for k, v in r.items() if k not in drop} for r in t.to_pylist()]


@pytest.mark.parametrize("kind", ["rate-sweep", "sla-search"])
def test_an_archive_of_format_3_reads_and_ingests_as_a_current_one(tmp_path: Path, kind: str,
                                                                     monkeypatch: pytest.MonkeyPatch) -> None:
    new = _archive(tmp_path / "new", kind, None)
    with monkeypatch.context() as m:
        m.setattr(archive_module, "ARCHIVE_FORMAT_VERSION", 3)
        old = _archive(tmp_path / "old", kind, {v: k for k, v in OLD[kind].items()})
    assert open_archive(new).format_version == 6 and open_archive(old).format_version == 3
    assert {p.name for p in old.glob("*.parquet")} == set(OLD[kind])  # the old archive is as written
    assert {p.name for p in new.glob("*.parquet")} == set(OLD[kind].values())
    assert verify_archive(old) == [] and verify_archive(new) == []  # its manifest still matches its files
    old_view, new_view = ArchiveView(open_archive(old)), ArchiveView(open_archive(new))
    for name in OLD[kind].values():
        assert old_view.has(name) and old_view.rows(name) == new_view.rows(name), name
    assert old_view.kind_rows("cells") == new_view.kind_rows("cells") == [SWEEP_CELL | EXTRA | {"protocol_class": kind}]
    assert [r["round_id"] for r in old_view.kind_rows("rounds")] == ["sweep-2rps.r0"]
    added_new = ingest_archive(tmp_path / "new", open_archive(new))
    added_old = ingest_archive(tmp_path / "old", open_archive(old))
    assert added_old == added_new
    tables = list(KINDS[kind].ledger_tables)
    assert set(tables) <= set(added_new) and "cells" not in added_new and "rounds" not in added_new
    for table in (*tables, "runs"):
        assert _ledger(tmp_path / "old", table) == _ledger(tmp_path / "new", table), table
    assert _ledger(tmp_path / "new", tables[0])[0]["arrival_rate_req_s"] == 2.0
    assert verify_archive(old) == []  # ingest never rewrites an archive


def test_a_real_format_2_screen_reads_its_comparison_under_the_ledger_name() -> None:
    fixture = Path(__file__).resolve().parents[1] / "fixtures" / "gpu-archives" / "e2c3efe4b4f4e37e"
    view = ArchiveView(open_archive(fixture))
    assert open_archive(fixture).format_version == 2 and not (fixture / "comparisons.parquet").exists()
    assert view.has("comparisons.parquet")
    assert view.rows("comparisons.parquet") == view.rows("comparison.parquet") != []
