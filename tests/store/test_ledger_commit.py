"""Ledger appends are all-or-nothing per archive, whatever interrupts them; a resumed archive's rows
are superseded so ``valid`` never counts a cell twice, in any ingest order (issue 14)."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import numpy as np
import pandas as pd
import pyarrow as pa
import pytest
from testkit import run_block

from harness import interrupts
from harness.evidence.findings import Finding
from harness.evidence.io import apply_findings
from harness.records import RequestRecord
from harness.store.archive import ArchiveWriter, open_archive
from harness.store.ledger import ARCHIVE_TABLES, JOURNAL, ingest_archive, ingested_ids, read_table

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


def test_interrupted_before_the_journal_changes_nothing(tmp_path: Path, fault_at: Plan) -> None:
    first = open_archive(make(tmp_path, "first"))
    ingest_archive(tmp_path, first)
    before = {t: archive_ids(tmp_path, t) for t in TABLES_OF_ONE}
    second = open_archive(make(tmp_path, "second"))
    fault_at.append(("ledger:staged", 3))  # three tables staged, then the process is interrupted
    with pytest.raises(Stop):
        ingest_archive(tmp_path, second)
    assert {t: archive_ids(tmp_path, t) for t in TABLES_OF_ONE} == before
    assert not list((tmp_path / "ledgers" / ".staging").iterdir())  # staged files removed
    assert ingest_archive(tmp_path, second)["runs"] == 1  # and a retry ingests it whole


@pytest.mark.parametrize("point", [("ledger:journal-written", 1), ("ledger:renamed", 2)])
def test_interrupted_after_the_journal_is_finished_by_the_next_reader(
        tmp_path: Path, fault_at: Plan, point: tuple[str, int]) -> None:
    a = open_archive(make(tmp_path, "a"))
    fault_at.append(point)
    with pytest.raises(Stop):
        ingest_archive(tmp_path, a)
    assert (tmp_path / "ledgers" / JOURNAL).exists()
    # any reader completes the commit first: every table has the archive, exactly once
    for t in TABLES_OF_ONE:
        assert archive_ids(tmp_path, t) == [a.archive_id], t
    assert not (tmp_path / "ledgers" / JOURNAL).exists()
    assert ingest_archive(tmp_path, a) == {}


def test_killed_mid_commit_by_sigkill(tmp_path: Path) -> None:
    path = make(tmp_path, "k")
    env = dict(os.environ, DSV4H_FAULT="ledger:renamed:SIGKILL")
    code = ("import sys; from pathlib import Path; from harness.store.archive import open_archive; "
            "from harness.store.ledger import ingest_archive; "
            "ingest_archive(Path(sys.argv[1]), open_archive(Path(sys.argv[2])))")
    proc = subprocess.run([sys.executable, "-c", code, str(tmp_path), str(path)], env=env, check=False,
                          capture_output=True, timeout=60)
    assert proc.returncode == -signal.SIGKILL
    assert (tmp_path / "ledgers" / JOURNAL).exists()  # killed between two renames
    assert ingested_ids(tmp_path) == {path.name}
    for t in TABLES_OF_ONE:
        assert archive_ids(tmp_path, t) == [path.name], t


def test_resume_supersedes_the_old_archive_in_either_ingest_order(tmp_path: Path) -> None:
    for order in ("old-first", "new-first"):
        ws = tmp_path / order
        old = make(ws, "m", median=100.0)
        new = make(ws, "m", resumed_from=old.name, median=101.0)
        pair = [old, new] if order == "old-first" else [new, old]
        for p in pair:
            ingest_archive(ws, open_archive(p))
        for table in ("cells", "rounds", "waves", "requests", "runs"):
            df = pd.read_parquet(ws / "ledgers" / table)
            mine = df[df.archive_id == old.name]
            assert not mine.valid.any(), (order, table)
            assert (mine.superseded_by == new.name).all(), (order, table)
            assert df[df.archive_id == new.name].valid.all(), (order, table)
            assert df[df.archive_id == new.name].superseded_by.isna().all()
        cells = pd.read_parquet(ws / "ledgers" / "cells")
        valid = cells[cells.valid]  # the README's notebook filter
        assert sorted(valid.cell_id) == ["c1", "c2"], order  # each cell once
        assert set(valid.archive_id) == {new.name}


def test_evidence_check_of_a_superseded_archive_keeps_it_invalid(tmp_path: Path) -> None:
    old = make(tmp_path, "m")
    new = make(tmp_path, "m", resumed_from=old.name)
    ingest_archive(tmp_path, open_archive(old))
    ingest_archive(tmp_path, open_archive(new))
    apply_findings(tmp_path, old.name, [Finding(rule="x", severity="info", message="m", remedy="r", rows=())])
    cells = pd.read_parquet(tmp_path / "ledgers" / "cells")
    assert not cells[cells.archive_id == old.name].valid.any()
    assert set(ARCHIVE_TABLES) >= {"cells", "runs"}
