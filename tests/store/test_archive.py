"""Archives: atomic, hashed, never overwritten; verify names changed/missing/extra files."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest
from testkit import run_block

from harness.errors import ArchiveError
from harness.records import RequestRecord
from harness.store.archive import ArchiveWriter, find_archive, manifest_id, open_archive, verify_archive


def rec(i: int) -> RequestRecord:
    return RequestRecord(rid=f"r{i}", send_ns=0, done_ns=10, event_ns=np.array([1, 2]), event_tokens=np.array([1, 2]),
                         wave_id="w", cell_id="c")


def make(tmp_path: Path, status: str = "complete") -> Path:
    w = ArchiveWriter(tmp_path)
    w.write_json("spec.json", {"name": "x"})
    w.write_wave([rec(0), rec(1)])
    w.write_wave([rec(2)])
    w.append_event({"event": "run-start"})
    return w.finalize(status=status, run=run_block(campaign="x"))


def test_finalize_merges_waves_and_hashes(tmp_path: Path) -> None:
    path = make(tmp_path)
    a = open_archive(path)
    assert path.name == a.archive_id == manifest_id(a.manifest)
    assert set(a.manifest["files"]) == {"spec.json", "records/part-000000.parquet", "records/part-000001.parquet",
                                        "events.jsonl"}
    assert [r.rid for r in a.records()] == ["r0", "r1", "r2"]
    assert verify_archive(path) == []
    assert not list((tmp_path / "archives").glob(".partial-*"))


def test_verify_names_changed_missing_extra(tmp_path: Path) -> None:
    path = make(tmp_path)
    (path / "spec.json").write_text('{"name": "y"}')
    (path / "events.jsonl").unlink()
    (path / "notes.txt").write_text("hi")
    problems = verify_archive(path)
    assert any(p.startswith("changed: spec.json") for p in problems)
    assert "missing: events.jsonl" in problems
    assert "extra: notes.txt" in problems


def test_tampered_manifest_detected(tmp_path: Path) -> None:
    path = make(tmp_path)
    m = json.loads((path / "manifest.json").read_text())
    m["status"] = "complete-ish"
    (path / "manifest.json").write_text(json.dumps(m))
    assert any("does not match its content" in p for p in verify_archive(path))


def test_never_overwritten(tmp_path: Path) -> None:
    make(tmp_path)
    w = ArchiveWriter(tmp_path)
    w.write_json("spec.json", {"name": "x"})
    w.write_wave([rec(0), rec(1)])
    w.write_wave([rec(2)])
    w.append_event({"event": "run-start"})
    with pytest.raises(ArchiveError, match="never overwritten"):
        w.finalize(status="complete", run=run_block(campaign="x"))
    assert w.dir.exists()  # partial data kept


def test_find_by_prefix(tmp_path: Path) -> None:
    path = make(tmp_path)
    assert find_archive(path.name[:6], tmp_path) == path
    with pytest.raises(ArchiveError, match="no archive"):
        find_archive("zzzz", tmp_path)
