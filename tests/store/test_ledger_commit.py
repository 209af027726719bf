"""Ledger appends are Delta transactions: an archive is shown all or nothing, whatever interrupts its
ingest, lands once however often or by however many processes it is ingested, and processes appending
at once lose nothing (issue 29); a resumed archive's rows are superseded so ``valid`` never counts a
cell twice, in any ingest order (issue 14)."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import numpy as np
import pyarrow as pa
import pytest
from ledger_helpers import ledger_df
from testkit import run_block

from harness import interrupts
from harness.evidence.findings import Finding
from harness.evidence.io import apply_findings
from harness.records import RequestRecord
from harness.store.archive import ArchiveWriter, open_archive
from harness.store.ledger import ARCHIVE_TABLES, ingest_archive, ingested_ids, read_table
from harness.store.ledger import delta as dl

TABLES_OF_ONE = ("cells", "rounds", "waves", "requests", "runs")


def make(ws: Path, campaign: str = "m", resumed_from: str | None = None, median: float = 100.0) -> Path:
    w = ArchiveWriter(ws)
    w.write_wave([RequestRecord(rid=f"{campaign}-{median}", send_ns=0, done_ns=10, event_ns=np.array([1]),
                                event_tokens=np.array([1]), wave_id="c1.r0.w000", cell_id="c1")])
    w.write_table("cells.parquet", pa.Table.from_pylist([{"cell_id": "c1", "median_tok_s": median},
                                                         {"cell_id": "c2", "median_tok_s": median / 2}]))
    w.write_table("rounds.parquet",
                  pa.Table.from_pylist([{"round_id": "c1.r0", "cell_id": "c1", "rate_tok_s": median}]))
    w.write_table("waves.parquet", pa.Table.from_pylist([{"wave_id": "c1.r0.w000", "phase": "measured"}]))
    return w.finalize(status="complete" if resumed_from else "partial",
                      run=run_block(campaign=campaign, resumed_from=resumed_from, plan_id="p"))


def archive_ids(ws: Path, table: str) -> list[str]:
    t = read_table(ws, table)
    return [] if t is None else sorted(set(t.column("archive_id").to_pylist()))


class Stop(BaseException):
    pass


class Plan(list[tuple[str, int]]):
    """Fault points to interrupt: (point, n) raises ``Stop`` the n-th time the point is reached
    after the plan was armed."""

    counts: dict[str, int]

    def append(self, item: tuple[str, int]) -> None:
        self.counts.clear()
        super().append(item)


@pytest.fixture
def fault_at() -> Iterator[Plan]:
    plan = Plan()
    plan.counts = {}

    def hook(name: str) -> None:
        plan.counts[name] = plan.counts.get(name, 0) + 1
        if (name, plan.counts[name]) in plan:
            raise Stop(name)

    interrupts.set_fault_hook(hook)
    yield plan
    interrupts.set_fault_hook(None)


def counts(ws: Path, table: str, raw: bool = False) -> dict[str, int]:
    """Rows per archive of a table: as readers see it, or (``raw``) as the Delta table holds it."""
    t = dl.read(ws, table) if raw else read_table(ws, table)
    if t is None:
        return {}
    df = t.select(["archive_id"]).to_pandas()
    return {str(k): int(v) for k, v in df.archive_id.value_counts().items()}


def test_interrupted_part_way_shows_nothing_and_a_retry_completes_it(tmp_path: Path, fault_at: Plan) -> None:
    first = open_archive(make(tmp_path, "first"))
    ingest_archive(tmp_path, first)
    before = {t: archive_ids(tmp_path, t) for t in TABLES_OF_ONE}
    second = open_archive(make(tmp_path, "second"))
    fault_at.append(("ledger:appended", 3))  # three tables appended, then the process is interrupted
    with pytest.raises(Stop):
        ingest_archive(tmp_path, second)
    assert {t: archive_ids(tmp_path, t) for t in TABLES_OF_ONE} == before  # no runs row: not shown
    assert second.archive_id not in ingested_ids(tmp_path)
    assert sum(second.archive_id in counts(tmp_path, t, raw=True) for t in TABLES_OF_ONE) >= 1  # but stored
    assert ingest_archive(tmp_path, second)["runs"] == 1  # a retry completes it
    for t in TABLES_OF_ONE:  # every table has each archive exactly once
        assert counts(tmp_path, t) == counts(tmp_path, t, raw=True), t
        assert set(counts(tmp_path, t)) == {first.archive_id, second.archive_id}, t
    assert counts(tmp_path, "cells")[second.archive_id] == 2
    assert ingest_archive(tmp_path, second) == {}


def test_killed_mid_ingest_by_sigkill(tmp_path: Path) -> None:
    path = make(tmp_path, "k")
    env = dict(os.environ, DSV4H_FAULT="ledger:appended:SIGKILL")
    code = ("import sys; from pathlib import Path; from harness.store.archive import open_archive; "
            "from harness.store.ledger import ingest_archive; "
            "ingest_archive(Path(sys.argv[1]), open_archive(Path(sys.argv[2])))")
    proc = subprocess.run([sys.executable, "-c", code, str(tmp_path), str(path)], env=env, check=False,
                          capture_output=True, timeout=120)
    assert proc.returncode == -signal.SIGKILL
    assert ingested_ids(tmp_path) == set()  # killed after its first table: not in the ledger
    assert read_table(tmp_path, "cells") is None
    assert ingest_archive(tmp_path, open_archive(path))["runs"] == 1
    for t in TABLES_OF_ONE:
        assert archive_ids(tmp_path, t) == [path.name], t
        assert counts(tmp_path, t, raw=True) == counts(tmp_path, t), t


INGEST = ("import sys, time; from pathlib import Path; from harness.store.archive import open_archive; "
          "from harness.store.ledger import ingest_archive\n"
          "while time.time() < float(sys.argv[1]): time.sleep(0.001)\n"
          "for p in sys.argv[3:]: ingest_archive(Path(sys.argv[2]), open_archive(Path(p)))")


def _at_once(ws: Path, groups: list[list[Path]]) -> None:
    """One process per group, all starting their ingests at the same instant."""
    start = str(time.time() + 3.0)
    procs = [subprocess.Popen([sys.executable, "-c", INGEST, start, str(ws), *map(str, g)],
                              stdout=subprocess.PIPE, stderr=subprocess.PIPE) for g in groups]
    for p in procs:
        _, err = p.communicate(timeout=300)
        assert p.returncode == 0, err.decode()[-2000:]


def test_two_processes_appending_at_once_lose_nothing(tmp_path: Path) -> None:
    a = [make(tmp_path, f"a{i}", median=100.0 + i) for i in range(4)]
    b = [make(tmp_path, f"b{i}", median=200.0 + i) for i in range(4)]
    _at_once(tmp_path, [a, b])
    ids = {p.name for p in a + b}
    assert ingested_ids(tmp_path) == ids
    for t in TABLES_OF_ONE:
        assert set(counts(tmp_path, t)) == ids, t
        assert counts(tmp_path, t, raw=True) == counts(tmp_path, t), t
    assert all(n == 2 for n in counts(tmp_path, "cells").values())
    versions = [h["operation"] for h in dl.history(tmp_path, "cells")]
    assert versions.count("WRITE") == 8  # one transaction per archive, none lost


def test_the_same_archive_ingested_by_two_processes_at_once_lands_once(tmp_path: Path) -> None:
    path = make(tmp_path, "same")
    _at_once(tmp_path, [[path], [path]])
    for t in TABLES_OF_ONE:
        assert counts(tmp_path, t, raw=True) == {path.name: 2 if t == "cells" else 1}, t


def test_resume_supersedes_the_old_archive_in_either_ingest_order(tmp_path: Path) -> None:
    for order in ("old-first", "new-first"):
        ws = tmp_path / order
        old = make(ws, "m", median=100.0)
        new = make(ws, "m", resumed_from=old.name, median=101.0)
        pair = [old, new] if order == "old-first" else [new, old]
        for p in pair:
            ingest_archive(ws, open_archive(p))
        for table in ("cells", "rounds", "waves", "requests", "runs"):
            df = ledger_df(ws, table)
            mine = df[df.archive_id == old.name]
            assert not mine.valid.any(), (order, table)
            assert (mine.superseded_by == new.name).all(), (order, table)
            assert df[df.archive_id == new.name].valid.all(), (order, table)
            assert df[df.archive_id == new.name].superseded_by.isna().all()
        cells = ledger_df(ws, "cells")
        valid = cells[cells.valid]  # the README's notebook filter
        assert sorted(valid.cell_id) == ["c1", "c2"], order  # each cell once
        assert set(valid.archive_id) == {new.name}


def test_evidence_check_of_a_superseded_archive_keeps_it_invalid(tmp_path: Path) -> None:
    old = make(tmp_path, "m")
    new = make(tmp_path, "m", resumed_from=old.name)
    ingest_archive(tmp_path, open_archive(old))
    ingest_archive(tmp_path, open_archive(new))
    apply_findings(tmp_path, old.name, [Finding(rule="x", severity="info", message="m", remedy="r", rows=())])
    cells = ledger_df(tmp_path, "cells")
    assert not cells[cells.archive_id == old.name].valid.any()
    assert set(ARCHIVE_TABLES) >= {"cells", "runs"}
