"""``dsv4h ledger merge`` and ``ledger migrate`` against a hostile other-host directory (issue 23, part 1).

Every case asserts (a) nothing outside the target workspace changed: a sentinel tree beside it and
the other host's directory are hashed before and after (files, modes, links); (b) the target's own
archive rows are unchanged and the only new rows are those of verified archives; (c) a clean refusal
or error naming the file and the reason.
"""

from __future__ import annotations

import hashlib
import json
import os
import shutil
import stat
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq
import pytest
from ledger_helpers import as_parquet_host
from synthetic_archives import synthetic_historical_entries, write_historical_ledger
from testkit import run_block, run_cli

from harness.errors import LedgerError
from harness.evidence.io import apply_findings, check_archive
from harness.governance.io import add_closure, check_gate, closure_states, freeze_file, reopen_direction, reveal_file
from harness.records import RequestRecord
from harness.run.merge import merge_workspace
from harness.store.archive import ArchiveWriter, open_archive
from harness.store.ledger import ingest_archive, read_table
from harness.store.ledger.layout import PER_ARCHIVE
from harness.store.ledger.merge import MergeResult

GOOD = "2026-12-01T00:00:00.000001+00:00"


def make(ws: Path, campaign: str, *, median: float = 100.0, ok_rounds: int = 1,
         resumed_from: str | None = None, ingest: bool = True, created_wall: str | None = None) -> Path:
    """A small archive, ingested into ``ws``'s ledgers with its evidence applied (as a run leaves it)
    unless ``ingest`` is false. ``ok_rounds`` below 1 makes its cell invalid (blocking ``formal-rounds``
    finding on c1)."""
    w = ArchiveWriter(ws)
    w.write_wave([RequestRecord(rid=f"{campaign}-{median}", send_ns=0, done_ns=10, event_ns=np.array([1]),
                                event_tokens=np.array([1]), wave_id="c1.r0.w000", cell_id="c1")])
    w.write_table("cells.parquet", pa.Table.from_pylist([{"cell_id": "c1", "median_tok_s": median, "status": "ok",
                                                          "rounds_required": 1,
                                                          "round_status": ["ok"] * ok_rounds}],
                                                        schema=pa.schema([("cell_id", pa.string()),
                                                                          ("median_tok_s", pa.float64()),
                                                                          ("status", pa.string()),
                                                                          ("rounds_required", pa.int64()),
                                                                          ("round_status", pa.list_(pa.string()))])))
    w.write_table("rounds.parquet", pa.Table.from_pylist([{"round_id": "c1.r0", "cell_id": "c1", "rate_tok_s": median,
                                                           "status": "ok"}]))
    w.write_table("waves.parquet", pa.Table.from_pylist([{"wave_id": "c1.r0.w000", "cell_id": "c1",
                                                          "phase": "measured"}]))
    extra = {} if created_wall is None else {"created_wall": created_wall}
    path = w.finalize(status="complete", run=run_block(campaign=campaign, plan_id="p", labels=["simulated"],
                                                       resumed_from=resumed_from, **extra))
    if ingest:
        archive = open_archive(path)
        ingest_archive(ws, archive)
        apply_findings(ws, archive.archive_id, check_archive(archive))
    return path


def tree(root: Path) -> dict[str, tuple[Any, ...]]:
    """Every entry under ``root`` (links not followed): kind, mode and content hash or link target."""
    out: dict[str, tuple[Any, ...]] = {}
    for dirpath, dirnames, filenames in os.walk(root):
        for name in [*dirnames, *filenames]:
            p = Path(dirpath) / name
            st = os.lstat(p)
            rel = p.relative_to(root).as_posix()
            if stat.S_ISLNK(st.st_mode):
                out[rel] = ("link", os.readlink(p))
            elif stat.S_ISDIR(st.st_mode):
                out[rel] = ("dir", stat.S_IMODE(st.st_mode))
            else:
                out[rel] = ("file", stat.S_IMODE(st.st_mode), hashlib.sha256(p.read_bytes()).hexdigest())
    return out


def rows_of(ws: Path, aid: str) -> dict[str, list[dict[str, Any]]]:
    """Archive ``aid``'s rows of every archive table (findings included)."""
    out: dict[str, list[dict[str, Any]]] = {}
    for table in PER_ARCHIVE:
        t = read_table(ws, table)
        if t is not None:
            out[table] = t.filter(pc.equal(t.column("archive_id"), aid)).to_pylist()
    return out


def archive_ids(ws: Path) -> set[str]:
    """Archive ids that hold any row of any archive table."""
    ids: set[str] = set()
    for table in PER_ARCHIVE:
        t = read_table(ws, table)
        if t is not None:
            ids |= {str(v) for v in t.column("archive_id").to_pylist()}
    return ids


@dataclass
class World:
    """A target workspace with one archive, another host with one archive, and a sentinel tree."""

    root: Path
    here: Path
    other: Path
    outside: Path
    mine: str
    theirs: str

    def __post_init__(self) -> None:
        self.before: dict[str, Any] = {}

    def snapshot(self) -> None:
        """Record what must not change (call once the hostile directory is built)."""
        self.before = {"outside": tree(self.outside), "other": tree(self.other), "mine": rows_of(self.here, self.mine),
                       "top": sorted(p.name for p in self.root.iterdir())}

    def merge(self) -> MergeResult:
        """Merge the other host, then check that nothing outside the target changed."""
        self.snapshot()
        res = merge_workspace(self.here, self.other)
        self.check()
        return res

    def merge_unchecked(self) -> MergeResult:
        """Merge where the target's own rows may legitimately change (a verified resume)."""
        return merge_workspace(self.here, self.other)

    def check(self, merged: set[str] | None = None) -> None:
        """(a) the sentinel tree and the other host's directory are byte-identical, nothing new beside
        them; (b) the target's own rows are unchanged and only verified archives have rows."""
        assert tree(self.outside) == self.before["outside"]
        assert tree(self.other) == self.before["other"]
        assert sorted(p.name for p in self.root.iterdir()) == self.before["top"]
        assert rows_of(self.here, self.mine) == self.before["mine"]
        on_disk = {p.name for p in (self.here / "archives").iterdir() if not p.name.startswith(".")}
        assert archive_ids(self.here) <= on_disk
        assert not [p for p in (self.here / "archives").iterdir() if p.name.startswith(".merge-")]
        if merged is not None:
            assert on_disk == {self.mine} | merged

    def ledger_file(self, table: str, name: str) -> Path:
        d = self.other / "ledgers" / table
        d.mkdir(parents=True, exist_ok=True)
        return d / name


@pytest.fixture
def world(tmp_path: Path) -> World:
    here, other, outside = tmp_path / "here", tmp_path / "other", tmp_path / "outside"
    (outside / "victim1").mkdir(parents=True)
    (outside / "victim1" / "important.txt").write_text("keep me\n")
    (outside / "victimdir").mkdir()
    (outside / "victimdir" / "a.txt").write_text("a\n")
    secret = outside / "secret.parquet"
    pq.write_table(pa.Table.from_pylist([{"direction": "d", "action": "close", "evidence_archive_id": None,
                                          "reason": "TOPSECRET-4711", "at": GOOD}]), secret)
    secret.chmod(0o600)
    mine = make(here, "mine").name
    theirs = make(other, "theirs", median=200.0).name
    as_parquet_host(other)  # a host on the older Parquet layout: its files are what the hostile cases forge
    return World(tmp_path, here, other, outside, mine, theirs)


def refusals(res: MergeResult) -> str:
    return "\n".join(map(str, res.refusals))


def test_a_clean_host_merges_without_refusals(world: World) -> None:
    res = world.merge()
    assert res.archives == [world.theirs] and res.refusals == []
    world.check(merged={world.theirs})
    cells = read_table(world.here, "cells")
    assert cells is not None
    assert sorted(cells.column("median_tok_s").to_pylist()) == [100.0, 200.0]


def test_the_other_hosts_commit_journal_is_never_replayed(world: World) -> None:
    led = world.other / "ledgers"
    (led / "payload.txt").write_text("pwn\n")
    (led / ".commit.json").write_text(json.dumps({"renames": [
        ["payload.txt", "../../outside/pwned_by_journal.txt"], ["../../outside/victim1/important.txt", "stolen.txt"]]}))
    res = world.merge()
    assert (world.outside / "victim1" / "important.txt").read_text() == "keep me\n"
    assert not (world.outside / "pwned_by_journal.txt").exists()
    assert any(r.file == str(led / ".commit.json") and "never replayed" in r.reason for r in res.refusals)
    world.check(merged={world.theirs})


def test_a_staging_symlink_of_the_other_host_is_never_touched(world: World) -> None:
    staging = world.other / "ledgers" / ".staging"
    staging.rmdir()  # the empty one the host's own commits left
    staging.symlink_to(world.outside / "victimdir", target_is_directory=True)
    res = world.merge()
    assert (world.outside / "victimdir" / "a.txt").read_text() == "a\n"
    assert res.archives == [world.theirs] and res.refusals == []
    world.check(merged={world.theirs})


def test_a_forged_runs_row_with_a_path_in_resumed_from_writes_nothing(world: World) -> None:
    runs = pq.read_table(world.other / "ledgers" / "runs" / f"{world.theirs}.parquet")
    forged = runs.set_column(runs.column_names.index("resumed_from"), "resumed_from",
                             pa.array(["../../../outside/merge_marker"]))
    pq.write_table(forged, world.other / "ledgers" / "runs" / f"{world.theirs}.parquet")
    fake = "badc0ffee0ddf00d"
    pq.write_table(forged.set_column(0, "archive_id", pa.array([fake])),
                   world.ledger_file("runs", f"{fake}.parquet"))
    res = world.merge()
    assert not (world.outside / "merge_marker").exists()
    assert not list((world.here / "ledgers").glob(".resumes/*"))
    assert f"no verified archive {fake}" in refusals(res)
    world.check(merged={world.theirs})


def test_an_archive_whose_run_block_resumes_a_path_is_refused(world: World) -> None:
    bad = make(world.other, "bad", resumed_from="../../../outside/merge_marker", ingest=False).name
    res = world.merge()
    assert not (world.outside / "merge_marker").exists()
    assert any(r.file.endswith(bad) and "not an archive id" in r.reason for r in res.refusals), refusals(res)
    assert res.archives == [world.theirs]
    world.check(merged={world.theirs})  # the refused archive's copy is removed again


def schema2_runs(led: Path, archive_id: str, resumed_from: str | None = None) -> Path:
    led.mkdir(parents=True, exist_ok=True)
    path = led / "runs.parquet"
    pq.write_table(pa.Table.from_pylist([{"archive_id": archive_id, "kind": "formal-matrix", "valid": True,
                                          "created_wall": "2026-11-29T10:00:00+0000",
                                          "resumed_from": resumed_from}]), path)
    return path


def test_a_schema2_file_of_the_other_host_is_not_migrated_there(world: World) -> None:
    path = schema2_runs(world.other / "ledgers", "../../../outside/legacy_pwn")
    res = world.merge()
    assert path.is_file() and not (world.other / "ledgers" / ".schema2-backup").exists()
    assert not (world.outside / "legacy_pwn.parquet").exists()
    assert any(r.file == str(path) and "schema-2" in r.reason for r in res.refusals)
    world.check(merged={world.theirs})


@pytest.mark.parametrize(("archive_id", "resumed_from", "what"), [
    ("../../../outside/legacy_pwn", None, "archive_id"),
    ("a" * 16, "../../outside/legacy_marker", "resumed_from"),
])
def test_migrate_refuses_a_value_that_is_not_an_archive_id(tmp_path: Path, archive_id: str,
                                                           resumed_from: str | None, what: str) -> None:
    ws, outside = tmp_path / "ws", tmp_path / "outside"
    outside.mkdir()
    (outside / "keep.txt").write_text("x\n")
    path = schema2_runs(ws / "ledgers", archive_id, resumed_from)
    before, top = tree(outside), sorted(p.name for p in tmp_path.iterdir())
    code, _, err = run_cli("ledger", "migrate", "-w", str(ws))
    assert code == 6 and str(path) in " ".join(err.split()) and what in err and "not an archive id" in err
    assert tree(outside) == before and sorted(p.name for p in tmp_path.iterdir()) == top
    assert path.is_file() and sorted(p.name for p in (ws / "ledgers").iterdir()) == [".migrate.lock", "runs.parquet"]
    with pytest.raises(LedgerError, match="not an archive id"):
        read_table(ws, "runs")


def test_a_row_for_an_archive_that_does_not_exist_never_lands(world: World) -> None:
    cells = pq.read_table(world.other / "ledgers" / "cells" / f"{world.theirs}.parquet")
    fake = "0123456789abcdef"
    forged = cells.set_column(cells.column_names.index("archive_id"), "archive_id", pa.array([fake]))
    forged = forged.set_column(forged.column_names.index("median_tok_s"), "median_tok_s", pa.array([99999.0]))
    pq.write_table(forged, world.ledger_file("cells", f"{fake}.parquet"))
    res = world.merge()
    merged = read_table(world.here, "cells")
    assert merged is not None and 99999.0 not in merged.column("median_tok_s").to_pylist()
    assert any(r.file.endswith(f"cells/{fake}.parquet") and f"no verified archive {fake}" in r.reason
               for r in res.refusals)
    world.check(merged={world.theirs})


def test_rows_claiming_the_targets_own_archive_never_land(world: World) -> None:
    path = world.other / "ledgers" / "cells" / f"{world.theirs}.parquet"
    cells = pq.read_table(path)
    forged = cells.set_column(cells.column_names.index("archive_id"), "archive_id", pa.array([world.mine]))
    pq.write_table(forged.set_column(forged.column_names.index("median_tok_s"), "median_tok_s",
                                     pa.array([123456.0])), path)
    res = world.merge()
    assert any(r.file == str(path) and f"claim archive(s) {world.mine}" in r.reason for r in res.refusals)
    merged = read_table(world.here, "cells")
    assert merged is not None and sorted(merged.column("median_tok_s").to_pylist()) == [100.0, 200.0]
    world.check(merged={world.theirs})


def test_a_file_holding_its_rows_three_times_gives_them_once(world: World) -> None:
    path = world.other / "ledgers" / "cells" / f"{world.theirs}.parquet"
    cells = pq.read_table(path)
    pq.write_table(pa.concat_tables([cells, cells, cells]), path)
    res = world.merge()
    assert any(r.file == str(path) and "3 rows where archive" in r.reason for r in res.refusals)
    assert len(rows_of(world.here, world.theirs)["cells"]) == 1
    world.check(merged={world.theirs})


def test_a_cell_invalid_on_its_host_stays_invalid(world: World) -> None:
    bad = make(world.other, "short", ok_rounds=0).name
    as_parquet_host(world.other)
    path = world.other / "ledgers" / "cells" / f"{bad}.parquet"
    cells = pq.read_table(path)
    assert cells.column("valid").to_pylist() == [False]
    pq.write_table(cells.set_column(cells.column_names.index("valid"), "valid", pa.array([True])), path)
    res = world.merge()
    assert sorted(res.archives) == sorted([world.theirs, bad])
    assert [r["valid"] for r in rows_of(world.here, bad)["cells"]] == [False]  # re-derived from the evidence
    assert [r["valid"] for r in rows_of(world.here, world.theirs)["cells"]] == [True]
    world.check(merged={world.theirs, bad})


def test_a_forged_resume_of_the_targets_archive_does_not_supersede_it(world: World) -> None:
    path = world.other / "ledgers" / "runs" / f"{world.theirs}.parquet"
    runs = pq.read_table(path)
    pq.write_table(runs.set_column(runs.column_names.index("resumed_from"), "resumed_from",
                                   pa.array([world.mine])), path)
    world.merge()
    assert {(r["valid"], r["superseded_by"]) for r in rows_of(world.here, world.mine)["cells"]} == {(True, None)}
    assert not (world.here / "ledgers" / ".resumes" / world.mine).exists()
    world.check(merged={world.theirs})


def test_a_garbage_governance_file_is_refused_and_the_table_still_reads(world: World) -> None:
    path = world.ledger_file("records", "20261201T000000000000-deadbeef.parquet")
    path.write_bytes(b"PAR1 this is not parquet PAR1")
    res = world.merge()
    assert any(r.file == str(path) and "not a readable Parquet file" in r.reason for r in res.refusals)
    code, out, err = run_cli("ledger", "show", "--table", "records", "-w", str(world.here))
    assert code == 0 and "empty" in out, err
    world.check(merged={world.theirs})


def test_a_symlinked_governance_file_is_refused_and_the_secret_not_copied(world: World) -> None:
    link = world.ledger_file("closures", "20261201T000000000000-abcdef01.parquet")
    link.symlink_to(world.outside / "secret.parquet")
    res = world.merge()
    assert any(r.file == str(link) for r in res.refusals), refusals(res)
    assert read_table(world.here, "closures") is None
    assert not [p for p in world.here.rglob("*") if p.is_file() and b"TOPSECRET" in p.read_bytes()]
    world.check(merged={world.theirs})


def test_governance_rows_are_validated_and_merged_once(world: World) -> None:
    good = {"direction": "faster-x", "action": "close", "evidence_archive_id": world.theirs, "reason": "no gain",
            "at": GOOD, "closing_archive_id": world.theirs, "source": "cli"}
    ok = world.ledger_file("closures", "20261201T000000000001-00000001.parquet")
    pq.write_table(pa.Table.from_pylist([good, good]), ok)
    dangling = world.ledger_file("closures", "20261201T000000000002-00000002.parquet")
    pq.write_table(pa.Table.from_pylist([good | {"evidence_archive_id": "feedfacefeedface"}]), dangling)
    unnamed = world.ledger_file("closures", "pwn.parquet")
    shutil.copy(ok, unnamed)
    res = world.merge()
    assert res.governance == {"closures": 1}
    reasons = {r.file: r.reason for r in res.refusals}
    assert "feedfacefeedface, not an archive of this workspace" in reasons[str(dangling)]
    assert "not a closures file name" in reasons[str(unnamed)] and str(ok) not in reasons
    closures = read_table(world.here, "closures")
    assert closures is not None and closures.column("reason").to_pylist() == ["no gain"]
    world.snapshot()
    again = merge_workspace(world.here, world.other)
    assert again.governance == {} and again.archives == [] and again.present == 1
    world.check(merged={world.theirs})


def test_a_tampered_archive_is_refused_by_hash(world: World) -> None:
    src = world.other / "archives" / world.theirs
    target = src / "cells.parquet"
    data = bytearray(target.read_bytes())
    data[len(data) // 2] ^= 0xFF  # same size, other content
    target.chmod(0o644)
    target.write_bytes(bytes(data))
    res = world.merge()
    assert any(r.file == str(src) and "changed: cells.parquet" in r.reason for r in res.refusals), refusals(res)
    assert res.archives == [] and not (world.here / "archives" / world.theirs).exists()
    world.check(merged=set())


@pytest.mark.parametrize("where", ["file", "dir", "archive"])
def test_an_archive_holding_a_symlink_is_refused(world: World, where: str) -> None:
    src = world.other / "archives" / world.theirs
    if where == "file":
        (src / "extra.txt").symlink_to(world.outside / "secret.parquet")
    elif where == "dir":
        (src / "more").symlink_to(world.outside / "victimdir", target_is_directory=True)
    else:
        moved = world.outside / "victimdir" / world.theirs
        shutil.copytree(src, moved)
        shutil.rmtree(src)
        src.symlink_to(moved, target_is_directory=True)
    res = world.merge()
    assert any(r.file == str(src) and ("symlink" in r.reason or "links are never followed" in r.reason)
               for r in res.refusals), refusals(res)
    assert res.archives == []
    world.check(merged=set())


def test_entries_of_the_other_archives_that_are_no_archive_ids_are_refused(world: World) -> None:
    (world.other / "archives" / "not-an-id").mkdir()
    res = world.merge()
    assert any(r.file.endswith("not-an-id") and "not an archive id" in r.reason for r in res.refusals)
    assert res.archives == [world.theirs]
    world.check(merged={world.theirs})


def test_a_symlinked_archives_directory_is_an_error(world: World) -> None:
    moved = world.outside / "victimdir" / "archives"
    shutil.move(world.other / "archives", moved)
    (world.other / "archives").symlink_to(moved, target_is_directory=True)
    world.snapshot()
    with pytest.raises(LedgerError, match="a symlink"):
        merge_workspace(world.here, world.other)
    world.check(merged=set())


@pytest.mark.parametrize("renames", [
    [[".staging/00000000-0.parquet", "../../outside/pwned.parquet"]],
    [["../../outside/victim1/important.txt", "cells/0123456789abcdef.parquet"]],
    [[".staging/00000000-0.parquet", "/tmp/abs.parquet"]],
    [[".staging/00000000-0", ".resumes/../../x"]],
    "not a list",
])
def test_a_hostile_journal_of_the_target_is_an_error_and_renames_nothing(world: World, renames: Any) -> None:
    """A target still on the Parquet layout (schema 4) with a hostile commit journal: the move into the
    Delta tables checks the journal first and renames nothing (reads never replay it)."""
    as_parquet_host(world.here)
    led = world.here / "ledgers"
    (led / ".staging" / "00000000-0.parquet").write_bytes(b"staged")
    (led / ".commit.json").write_text(json.dumps({"renames": renames}))
    world.before = {"outside": tree(world.outside), "other": tree(world.other),
                    "top": sorted(p.name for p in world.root.iterdir())}
    ledger_before = tree(led)
    assert read_table(world.here, "cells") is not None  # read as it is, the journal not replayed
    with pytest.raises(LedgerError, match=r"commit\.json"):
        ingest_archive(world.here, open_archive(world.here / "archives" / world.mine))
    assert {k: v for k, v in tree(led).items() if k != ".migrate.lock"} == ledger_before
    assert tree(world.outside) == world.before["outside"] and tree(world.other) == world.before["other"]
    assert sorted(p.name for p in world.root.iterdir()) == world.before["top"]


def test_a_staging_symlink_of_the_target_deletes_nothing(world: World) -> None:
    as_parquet_host(world.here)
    led = world.here / "ledgers"
    (led / ".staging").rmdir()
    (led / ".staging").symlink_to(world.outside / "victimdir", target_is_directory=True)
    before = tree(world.outside)
    with pytest.raises(LedgerError, match="staging area is not a directory"):
        ingest_archive(world.here, open_archive(world.here / "archives" / world.mine))
    assert tree(world.outside) == before


def test_cli_prints_each_refusal_on_its_own_line_and_exits_6(world: World) -> None:
    fake = "0123456789abcdef"
    shutil.copy(world.other / "ledgers" / "cells" / f"{world.theirs}.parquet",
                world.ledger_file("cells", f"{fake}.parquet"))
    world.snapshot()
    code, out, err = run_cli("ledger", "merge", str(world.other), "-w", str(world.here))
    assert code == 6 and "1 item(s) refused" in err
    assert "1 archive(s) added, 0 already present" in out
    line = next(ln for ln in out.splitlines() if ln.startswith("refused: "))
    assert line.startswith(f"refused: {world.other}/ledgers/cells/{fake}.parquet: no verified archive {fake}")
    world.check(merged={world.theirs})


def test_governance_rows_written_by_dsv4h_merge_whole_and_in_order(world: World, tmp_path: Path) -> None:
    newer = make(world.other, "newer", median=3.0).name
    add_closure(world.other, "dir-x", world.theirs, "no gain")
    reopen_direction(world.other, "dir-x", newer, "new evidence")
    check_gate(Path(__file__).resolve().parents[2] / "campaigns" / "gates" / "fresh-response.yaml", world.theirs,
               world.other)
    plan = tmp_path / "outside" / "plan.txt"
    plan.write_text("predict\n")
    freeze_file(plan, world.other)
    reveal_file(plan, world.theirs, world.other)
    write_historical_ledger(world.other, synthetic_historical_entries(2))
    res = world.merge()
    assert res.refusals == [] and sorted(res.archives) == sorted([world.theirs, newer])
    n_hist = len(read_table(world.other, "historical") or [])
    assert res.governance == {"closures": 2, "gates": 1, "freezes": 2, "historical": n_hist}
    assert [s["action"] for s in closure_states(world.here)] == ["reopen"]
    world.snapshot()
    again = merge_workspace(world.here, world.other)
    assert again.governance == {} and again.refusals == [] and again.present == 2
    world.check(merged={world.theirs, newer})


def test_a_symlinked_migration_lock_of_the_target_is_never_truncated(world: World) -> None:
    as_parquet_host(world.here)
    led = world.here / "ledgers"
    (led / ".migrate.lock").symlink_to(world.outside / "victim1" / "important.txt")
    before = tree(world.outside)
    with pytest.raises(LedgerError, match="migration lock"):
        ingest_archive(world.here, open_archive(world.here / "archives" / world.mine))
    assert tree(world.outside) == before


def test_a_resume_marker_naming_a_path_is_never_used(world: World) -> None:
    """A target on the Parquet layout whose resume marker names a path: the marker is never read as
    one (only an archive id is), the other host's archive merges valid, nothing outside changes."""
    as_parquet_host(world.here)
    resumes = world.here / "ledgers" / ".resumes"
    resumes.mkdir(exist_ok=True)
    (resumes / world.theirs).write_text("../../outside/victim1")
    res = world.merge()
    assert res.archives == [world.theirs] and not res.refusals, refusals(res)
    assert {r["valid"] for r in rows_of(world.here, world.theirs)["cells"]} == {True}
    world.check(merged={world.theirs})


def test_a_self_consistent_archive_naming_the_targets_archive_as_resumed_is_refused(world: World) -> None:
    """A hash-certified archive whose run block resumes the target's good archive, but carries none
    of its records, must not supersede it."""
    forged = make(world.other, "forged", median=300.0, resumed_from=world.mine, ingest=False).name
    res = world.merge()
    assert f"claims to resume archive {world.mine}" in refusals(res) and forged in refusals(res)
    assert {(r["valid"], r["superseded_by"]) for r in rows_of(world.here, world.mine)["cells"]} == {(True, None)}
    assert not (world.here / "ledgers" / ".resumes" / world.mine).exists()
    world.check(merged={world.theirs})


def test_a_real_resume_of_the_targets_archive_supersedes_it(world: World) -> None:
    """The same claim from an archive that carries the older archive's records (as a resume writes
    them) is honoured: the older archive's rows become superseded."""
    w = ArchiveWriter(world.other)
    w.write_wave(open_archive(world.here / "archives" / world.mine).records())
    path = w.finalize(status="complete", run=run_block(campaign="mine", plan_id="p", labels=["simulated"],
                                                       resumed_from=world.mine))
    res = world.merge_unchecked()
    assert not res.refusals, refusals(res)
    cells = read_table(world.here, "cells")
    assert cells is not None
    assert {r["superseded_by"] for r in cells.to_pylist() if r["archive_id"] == world.mine} == {path.name}


def test_an_archive_here_that_claims_a_resume_it_does_not_carry_does_not_supersede_the_arriving_one(
        tmp_path: Path) -> None:
    """The other order: the claimant is already in the target; the claimed archive arriving later is
    refused (named with the reason) instead of being marked superseded by it."""
    host, here = tmp_path / "host", tmp_path / "here"
    good = make(host, "good")
    make(here, "claimant", resumed_from=good.name)
    res = merge_workspace(here, host)
    assert res.archives == [] and "claims to have resumed it" in refusals(res), refusals(res)
    assert not (here / "archives" / good.name).exists()


@pytest.mark.parametrize(("created_wall", "lands"), [
    ("9999-12-31T00:00:00+00:00", False),  # beyond what a ledger timestamp holds: one refusal
    ("2100-01-01T00:00:00+00:00", True), ("1970-01-01T00:00:00+00:00", True),
    ("yesterday", True), ("2026-12-01T00:00:00", True)])  # not a time, no offset: the row check
def test_an_archive_dated_far_off_or_not_at_all_lands_once(world: World, created_wall: str, lands: bool) -> None:
    """The run's start decides whether a missing transaction is trusted (docs/ledger-format.md, "What an
    ingest reads"): a start in the far future or past, not a time, or without an offset gets the row
    check (or, out of a timestamp's range, a clean refusal); never a second copy, nothing outside."""
    odd = make(world.other, "odd", median=300.0, ingest=False, created_wall=created_wall).name
    first = world.merge()
    if lands:
        assert odd in first.archives and first.refusals == [], refusals(first)
    else:
        assert [Path(r.file).name for r in first.refusals] == [odd] and "out of bounds" in refusals(first)
    second = world.merge()
    assert second.archives == [] and second.present == 1 + int(lands)
    if lands:
        archive = open_archive(world.here / "archives" / odd)
        assert ingest_archive(world.here, archive) == {}  # the ingest's own check, past merge's
    cells = read_table(world.here, "cells")
    assert cells is not None
    assert cells.column("median_tok_s").to_pylist().count(300.0) == int(lands)
