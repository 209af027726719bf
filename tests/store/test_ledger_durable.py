"""Durable ledger commits and the log check (issue 37 item 2): every commit fsyncs its log entry, the
data files it adds and their directories; a zero-length, half-written, garbled or missing log entry,
or a data file shorter than its commit says, is refused (exit 6) naming the file, with a hint naming
``dsv4h ledger repair`` and no native backtrace; ``repair`` moves the damage aside, never deletes it,
and keeps governance rows of intact later entries."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pyarrow as pa
import pytest
from test_ledger_commit import make
from testkit import run_cli

from harness.errors import LedgerError
from harness.store.archive import open_archive
from harness.store.ledger import append_rows, durable, ingest_archive, read_table
from harness.store.ledger import delta as dl
from harness.store.ledger.repair import repair_ledger


def _newest(ws: Path, table: str) -> Path:
    path = dl.table_path(ws, table)
    _, versions = durable.log_versions(path)
    return durable.entry_path(path, versions[-1])


def test_an_ingest_fsyncs_each_commit_entry_its_data_files_and_the_directories(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    path = make(tmp_path, "a")
    ingest_archive(tmp_path, open_archive(make(tmp_path, "first")))  # the tables exist
    synced: list[str] = []
    real = os.fsync

    def fsync(fd: int) -> None:
        synced.append(os.readlink(f"/proc/self/fd/{fd}"))
        real(fd)

    monkeypatch.setattr(os, "fsync", fsync)
    ingest_archive(tmp_path, open_archive(path))
    cells = dl.table_path(tmp_path, "cells")
    entry = _newest(tmp_path, "cells")
    (data, size), = durable.parse_entry(entry, int(entry.name[:20])).adds
    assert (cells / data).stat().st_size == size
    for p in (entry, cells / data, cells / "_delta_log", cells):
        assert str(p) in synced, p
    assert synced.index(str(entry)) < synced.index(str(cells / "_delta_log"))  # the entry, then its directory
    runs = _newest(tmp_path, "runs")
    assert str(runs) in synced


def _zero(entry: Path) -> None:
    entry.write_bytes(b"")


def _half(entry: Path) -> None:
    raw = entry.read_bytes()
    entry.write_bytes(raw[: len(raw) // 2])


def _garbage(entry: Path) -> None:
    entry.write_bytes(b"\x00\x17not json at all\n")


def _not_an_action(entry: Path) -> None:
    entry.write_text(json.dumps({"hello": 1}) + "\n")


def _gap(entry: Path) -> None:
    version = int(entry.name[:20])
    os.replace(entry, entry.with_name(f"{version + 1:020d}.json"))  # version N missing, N + 1 there


def _data_empty(entry: Path) -> None:
    (data, _), = durable.parse_entry(entry, int(entry.name[:20])).adds
    (entry.parent.parent / data).write_bytes(b"")


CASES = {"zero-length": (_zero, "zero-length"), "half-written": (_half, "not JSON"),
         "garbage": (_garbage, "not JSON"), "not-an-action": (_not_an_action, "not one Delta action"),
         "gap": (_gap, "missing (versions jump"), "data-empty": (_data_empty, "is 0 bytes")}


@pytest.mark.parametrize("case", sorted(CASES))
def test_a_damaged_newest_entry_is_refused_naming_it_with_the_repair_hint(tmp_path: Path, case: str) -> None:
    ws = tmp_path / "ws"
    ingest_archive(ws, open_archive(make(ws, "a")))
    entry = _newest(ws, "cells")
    damage, reason = CASES[case]
    damage(entry)
    with pytest.raises(LedgerError) as exc:
        read_table(ws, "cells")
    assert reason in exc.value.message and "cells" in exc.value.message
    assert "dsv4h ledger repair" in (exc.value.hint or "")
    for argv in (("ledger", "show", "--table", "cells"), ("ledger", "history", "--table", "cells")):
        code, out, err = run_cli(*argv, "-w", str(ws))
        assert code == 6, (argv, out, err)
        assert "ledger repair" in err and "<unknown>" not in err and "pthread" not in err, err
    make(ws, "b")
    code, _, err = run_cli("ledger", "ingest", "-w", str(ws))  # a later run's ingest is refused the same way
    assert code == 6 and "ledger repair" in err, err


def test_a_deltalake_error_is_its_first_line_only() -> None:
    exc = RuntimeError("Kernel error: Json error: unexpected 'g'\n   0: <unknown>\n  12: start_thread\n")
    assert dl._flat(exc) == "Kernel error: Json error: unexpected 'g'"


def test_repair_keeps_governance_rows_of_intact_later_entries_and_deletes_nothing(tmp_path: Path) -> None:
    for i in range(3):
        append_rows(tmp_path, "gates", [{"gate": f"g{i}", "append_key": f"20261204T00000{i}000000-0000000{i}"}])
    path = dl.table_path(tmp_path, "gates")
    _, versions = durable.log_versions(path)
    middle = durable.entry_path(path, versions[-2])  # g1's commit lost; g2's, after it, intact
    middle.write_bytes(b"")
    with pytest.raises(LedgerError):
        read_table(tmp_path, "gates")
    res = repair_ledger(tmp_path, lambda p: {})
    assert set(res.damaged) == {"gates"}
    t = read_table(tmp_path, "gates")
    assert t is not None and sorted(t.column("gate").to_pylist()) == ["g0", "g2"]
    assert res.salvaged == {"gates": 1}
    assert res.quarantine is not None
    kept = res.quarantine / "entries" / "gates" / "_delta_log" / middle.name
    assert kept.is_file() and kept.stat().st_size == 0  # moved aside, not deleted
    assert not res.rebuilt  # no archive table was damaged: none rebuilt
    append_rows(tmp_path, "gates", [{"gate": "g3"}])  # the table takes writes again
    t = read_table(tmp_path, "gates")
    assert t is not None and sorted(t.column("gate").to_pylist()) == ["g0", "g2", "g3"]


def test_repair_keeps_rows_of_an_archive_gone_from_disk(tmp_path: Path) -> None:
    import shutil

    gone = make(tmp_path, "gone")
    here = make(tmp_path, "here")
    for p in (gone, here):
        ingest_archive(tmp_path, open_archive(p))
    shutil.rmtree(gone)
    _zero(_newest(tmp_path, "cells"))
    res = repair_ledger(tmp_path, lambda p: ingest_archive(tmp_path, open_archive(p)))
    assert res.carried == [gone.name] and set(res.rederived) == {here.name}
    cells = read_table(tmp_path, "cells")
    assert cells is not None
    assert sorted(cells.column("archive_id").to_pylist()) == sorted([gone.name] * 2 + [here.name] * 2)
    assert res.rebuilt["runs"] == 2 and res.rebuilt["cells"] == 4


def test_ledger_repair_through_the_cli(tmp_path: Path) -> None:
    old = make(tmp_path, "m")
    new = make(tmp_path, "m", resumed_from=old.name)
    code, _, err = run_cli("ledger", "ingest", "-w", str(tmp_path))
    assert code == 0, err
    before = read_table(tmp_path, "cells")
    assert before is not None
    _zero(_newest(tmp_path, "cells"))  # the supersede update of cells lost: old rows would count twice
    code, out, err = run_cli("ledger", "repair", "-w", str(tmp_path))
    assert code == 0, err
    assert "damaged: cells" in out and "2 archive(s) re-derived" in out and "moved aside" in out, out
    after = read_table(tmp_path, "cells")
    assert after is not None
    def key(t: pa.Table) -> list[tuple[object, ...]]:
        return sorted((r["archive_id"], r["cell_id"], r["valid"], r["superseded_by"]) for r in t.to_pylist())

    assert key(after) == key(before) and after.num_rows == 4  # as the clean ingest left it
    assert {r["superseded_by"] for r in after.to_pylist() if r["archive_id"] == old.name} == {new.name}
    code, out, _ = run_cli("ledger", "repair", "-w", str(tmp_path))
    assert code == 0 and "no damaged Delta log entry found" in out and "0 archive(s) re-derived" in out, out
    code, out, _ = run_cli("ledger", "repair", "--help")
    assert code == 0 and "Example: dsv4h ledger repair" in out


def test_merge_refuses_another_hosts_table_with_a_zero_length_entry(tmp_path: Path) -> None:
    from harness.run.merge import merge_workspace

    here, other = tmp_path / "here", tmp_path / "other"
    ingest_archive(here, open_archive(make(here, "h")))
    theirs = make(other, "o")
    ingest_archive(other, open_archive(theirs))
    entry = _newest(other, "cells")
    _zero(entry)
    res = merge_workspace(here, other)
    assert any(r.file == str(dl.table_path(other, "cells")) and entry.name in r.reason and "zero-length" in r.reason
               for r in res.refusals), res.refusals
    assert theirs.name in res.archives  # the archive itself is merged: its rows re-derived here


def test_a_zero_length_checkpoint_pointer_is_refused_and_repair_moves_it_aside(tmp_path: Path) -> None:
    path = make(tmp_path, "a")
    ingest_archive(tmp_path, open_archive(path))
    dl.optimize(tmp_path)  # writes a checkpoint and _last_checkpoint
    pointer = dl.table_path(tmp_path, "cells") / "_delta_log" / "_last_checkpoint"
    pointer.write_bytes(b"")
    with pytest.raises(LedgerError, match="_last_checkpoint: not a Delta checkpoint pointer"):
        read_table(tmp_path, "cells")
    res = repair_ledger(tmp_path, lambda p: ingest_archive(tmp_path, open_archive(p)))
    assert set(res.damaged) == {"cells"} and res.quarantine is not None
    assert (res.quarantine / "entries" / "cells" / "_delta_log" / "_last_checkpoint").is_file()
    cells = read_table(tmp_path, "cells")
    assert cells is not None and cells.column("archive_id").to_pylist() == [path.name] * 2
