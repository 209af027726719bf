"""Verify before trust: a changed archive never becomes ledger rows or anything else; damaged files
are clean errors naming them; references are archive ids or paths, never patterns (issue 14)."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from testkit import run_block

from harness.errors import ArchiveError
from harness.formats import dump_json
from harness.records import RequestRecord
from harness.store.archive import (
    ArchiveWriter,
    claim_resume,
    find_archive,
    find_partial,
    iter_partials,
    manifest_id,
    open_archive,
    open_verified,
    resumed_by,
    verify_archive,
)
from harness.store.ledger import ingest_archive, read_table


def rec(i: int, prompt: int = 100) -> RequestRecord:
    return RequestRecord(rid=f"r{i}", send_ns=0, done_ns=10, event_ns=np.array([1, 2]), event_tokens=np.array([1, 2]),
                         wave_id="w", cell_id="c", prompt_tokens=prompt)


def make(ws: Path, campaign: str = "x", status: str = "partial") -> Path:
    w = ArchiveWriter(ws)
    w.write_json("spec.json", {"name": campaign})
    w.write_wave([rec(0), rec(1)])
    w.write_wave([rec(2)])
    w.write_table("cells.parquet", pa.Table.from_pylist([{"cell_id": "c", "median_tok_s": 9005.0}]))
    return w.finalize(status=status, run=run_block(campaign=campaign))


def reforge(path: Path) -> Path:
    """Re-hash every file and rewrite the manifest and directory name, as a careful forger would."""
    m = json.loads((path / "manifest.json").read_text())
    from harness.hashing import sha256_file

    for rel in m["files"]:
        m["files"][rel] = {"sha256": sha256_file(path / rel), "bytes": (path / rel).stat().st_size}
    m.pop("archive_id")
    m["archive_id"] = manifest_id(m)
    (path / "manifest.json").write_bytes(dump_json(m))
    target: Path = path.parent / str(m["archive_id"])
    path.rename(target)
    return target


def test_edited_record_part_is_refused_by_ingest_naming_the_file(tmp_path: Path) -> None:
    path = make(tmp_path)
    part = path / "records" / "part-000000.parquet"
    t = pq.read_table(part)
    t = t.set_column(t.column_names.index("prompt_tokens"), "prompt_tokens", pa.array([1000, 1000], pa.int64()))
    pq.write_table(t, part)  # prompt_tokens x10, the forged prefill rate
    with pytest.raises(ArchiveError, match=r"changed: records/part-000000\.parquet"):
        ingest_archive(tmp_path, open_archive(path))
    assert read_table(tmp_path, "runs") is None  # nothing was ingested
    with pytest.raises(ArchiveError, match="refusing to use it"):
        open_verified(path)


@pytest.mark.parametrize("tamper", ["delete-part", "swap-parts", "edit-status", "add-file"])
def test_every_kind_of_tampering_is_refused_before_ingest(tmp_path: Path, tamper: str) -> None:
    path = make(tmp_path / "a")
    other = make(tmp_path / "b", campaign="y")
    if tamper == "delete-part":
        (path / "records" / "part-000001.parquet").unlink()
        want = "missing: records/part-000001.parquet"
    elif tamper == "swap-parts":
        shutil.copy(other / "records" / "part-000000.parquet", path / "records" / "part-000001.parquet")
        want = "changed: records/part-000001.parquet"
    elif tamper == "edit-status":
        m = json.loads((path / "manifest.json").read_text())
        m["status"] = "complete"
        (path / "manifest.json").write_text(json.dumps(m))
        want = "does not match its content"
    else:
        (path / "records" / "part-000002.parquet").write_bytes((path / "records" / "part-000000.parquet").read_bytes())
        want = "extra: records/part-000002.parquet"
    with pytest.raises(ArchiveError, match=want):
        ingest_archive(tmp_path, open_archive(path))
    assert read_table(tmp_path, "runs") is None


def test_corrupt_part_behind_a_consistent_manifest_is_a_clean_error(tmp_path: Path) -> None:
    path = make(tmp_path)
    part = path / "records" / "part-000000.parquet"
    part.write_bytes(part.read_bytes()[:40] + b"garbage" * 10)
    forged = reforge(path)
    assert verify_archive(forged) == []  # hashes agree: only reading can find the damage
    with pytest.raises(ArchiveError, match=r"part-000000\.parquet: cannot read this Parquet file"):
        open_archive(forged).records()
    with pytest.raises(ArchiveError, match="cannot read this Parquet file"):
        ingest_archive(tmp_path, open_archive(forged))
    (forged / "cells.parquet").write_bytes(b"PAR1 not really")
    with pytest.raises(ArchiveError, match=r"cells\.parquet: cannot read"):
        open_archive(forged).table("cells.parquet")


@pytest.mark.parametrize(("ref", "want"), [
    ("", "empty archive reference"),
    ("*", "ids are 16 hex digits"),
    ("fd*", "ids are 16 hex digits"),
    ("../x", "not an archive"),
    ("/etc", "not an archive"),
])
def test_references_are_ids_or_paths_never_patterns(tmp_path: Path, ref: str, want: str) -> None:
    make(tmp_path)
    with pytest.raises(ArchiveError, match=want):
        find_archive(ref, tmp_path)


def test_absolute_and_relative_paths_and_partials(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    path = make(tmp_path)
    assert find_archive(str(path.resolve()), tmp_path) == path.resolve()
    monkeypatch.chdir(tmp_path)
    assert find_archive(f"archives/{path.name}", Path("elsewhere")) == Path(f"archives/{path.name}")
    w = ArchiveWriter(tmp_path, token="t1")
    assert [p.live for p in iter_partials(tmp_path)] == [True]  # its writer holds the lock
    with pytest.raises(ArchiveError, match="unfinalized"):
        find_archive(str(w.dir), tmp_path)
    assert find_partial("t1", tmp_path) == w.dir
    assert find_partial(str(w.dir.resolve()), tmp_path) == w.dir.resolve()
    with pytest.raises(ArchiveError, match="in use by another running dsv4h"):
        ArchiveWriter.reopen(w.dir)
    w.close()
    assert [(p.token, p.live) for p in iter_partials(tmp_path)] == [("t1", False)]  # stranded now


def test_an_archive_is_resumed_at_most_once(tmp_path: Path) -> None:
    path = make(tmp_path)
    aid = path.name
    assert resumed_by(tmp_path, aid) is None
    claim_resume(tmp_path, aid, "run-a")
    assert resumed_by(tmp_path, aid) == "the run in .partial-run-a"
    with pytest.raises(ArchiveError, match="already resumed"):
        claim_resume(tmp_path, aid, "run-b")
    assert not (tmp_path / "archives" / ".dsv4h").exists()  # claims live outside archives/


def test_failed_event_append_leaves_no_half_line(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    import os

    w = ArchiveWriter(tmp_path)
    w.append_event({"event": "one"})
    real = os.write

    def short(fd: int, data: bytes) -> int:
        return real(fd, data[: len(data) // 2])  # what a full disk does to a write

    monkeypatch.setattr(os, "write", short)
    with pytest.raises(OSError, match="short write"):
        w.append_event({"event": "two", "pad": "x" * 100})
    monkeypatch.setattr(os, "write", real)
    lines = (w.dir / "events.jsonl").read_text().splitlines()
    assert [json.loads(x)["event"] for x in lines] == ["one"]
    w.close()
