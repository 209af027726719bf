"""The typed archive view (harness.store.view): every result file declared once with its reader, each
read on first use only, undeclared names and wrong readers refused; the real GPU archives hold no
result file the declaration lacks."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from harness.errors import ArchiveError
from harness.store.archive import Archive, open_archive
from harness.store.view import ARCHIVE_FILES, ArchiveView

FIXTURES = Path(__file__).resolve().parents[1] / "fixtures" / "gpu-archives"
ARCHIVES = sorted(p for p in FIXTURES.iterdir() if (p / "manifest.json").is_file())
# what an archive holds besides its declared result files: the manifest, records, the spec as written,
# the frozen plan, and the prompts of a quick screen
NOT_RESULTS = {"manifest.json", "records", "spec.yaml", "plan.json", "prompts"}


@pytest.mark.parametrize("path", ARCHIVES, ids=[p.name for p in ARCHIVES])
def test_every_file_of_a_real_archive_is_declared(path: Path) -> None:
    names = {p.name for p in path.iterdir()} - NOT_RESULTS
    assert names and names <= set(ARCHIVE_FILES), names - set(ARCHIVE_FILES)
    view = ArchiveView(open_archive(path))
    for name in names:
        reader = ARCHIVE_FILES[name].reader
        got: Any = view.doc(name) if reader == "json" else view.lines(name) if reader == "jsonl" else view.table(name)
        assert got is not None and got != []


def test_each_file_is_read_once_and_absent_ones_are_empty(monkeypatch: pytest.MonkeyPatch) -> None:
    archive = open_archive(ARCHIVES[0])
    calls: list[str] = []
    real = Archive.json

    def counted(self: Archive, name: str) -> Any:
        calls.append(name)
        return real(self, name)

    monkeypatch.setattr(Archive, "json", counted)
    view = ArchiveView(archive)
    first = view.doc("service.json")
    assert view.doc("service.json") is first and view.services() == first["services"]
    assert calls == ["service.json"]
    assert view.doc("sla.json") is None and view.doc("sla.json", {}) == {} and view.rows("probes.parquet") == []
    assert view.lines("server_metrics.jsonl") == [] and view.table("replay.parquet") is None


def test_undeclared_names_and_wrong_readers_are_refused() -> None:
    view = ArchiveView(open_archive(ARCHIVES[0]))
    with pytest.raises(KeyError, match="not a declared archive file"):
        view.doc("notes.json")
    with pytest.raises(KeyError, match="is a parquet file, not json"):
        view.doc("cells.parquet")
    with pytest.raises(KeyError, match="is a json file, not jsonl"):
        view.lines("spec.json")


@pytest.mark.parametrize("bad", ['{"event": "run-start"', "[1, 2]", "[" * 100_000, "\xff\xfe"])
def test_a_torn_or_forged_jsonl_line_is_one_clean_error(tmp_path: Path, bad: str) -> None:
    import shutil

    src = ARCHIVES[0]
    copy = tmp_path / src.name
    shutil.copytree(src, copy)
    (copy / "wave_checks.jsonl").write_text('{"ok": 1}\n' + bad + "\n", encoding="utf-8", errors="replace")
    with pytest.raises(ArchiveError, match=r"wave_checks\.jsonl: line 2 is not a JSON object"):
        ArchiveView(open_archive(copy)).lines("wave_checks.jsonl")
