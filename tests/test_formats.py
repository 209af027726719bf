"""formats: strict models with field-path errors, YAML loading, atomic writes (one durability policy)."""

from __future__ import annotations

import os
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from pydantic import Field

from harness.errors import CorpusError, SpecError
from harness.formats import (
    Strict,
    atomic_write,
    atomic_write_dir,
    atomic_write_table,
    dump_json,
    parse_model,
    read_yaml,
    resolve_path,
)


class Inner(Strict):
    rate_tok_s: float = Field(gt=0)


class Outer(Strict):
    name: str
    inner: Inner


def test_unknown_key_names_path_and_suggests() -> None:
    with pytest.raises(SpecError) as ei:
        parse_model(Outer, {"name": "x", "inner": {"rate_tok_s": 1.0, "rate_toks": 2}}, "f.yaml")
    assert "f.yaml: invalid specification" in ei.value.message
    assert "inner.rate_toks: unknown key 'rate_toks' (did you mean 'rate_tok_s'?)" in ei.value.message
    assert ei.value.hint == "rename 'inner.rate_toks' to 'inner.rate_tok_s'"


def test_missing_and_bad_values_are_listed_with_fixes() -> None:
    with pytest.raises(SpecError) as ei:
        parse_model(Outer, {"inner": {"rate_tok_s": -1}}, "f.yaml")
    msg = ei.value.message
    assert "name: required field is missing" in msg and "inner.rate_tok_s:" in msg and "(got -1)" in msg
    assert ei.value.hint == "add 'name'; fix 'inner.rate_tok_s'"


def test_error_type_label_and_hint_are_the_callers() -> None:
    with pytest.raises(CorpusError) as ei:
        parse_model(Inner, {"rate_tok_s": 0}, "m.json", what="invalid manifest:", hint="rebuild", error=CorpusError)
    assert ei.value.message.startswith("m.json: invalid manifest:\n  rate_tok_s:")
    assert ei.value.hint == "rebuild"


def test_top_level_must_be_a_mapping() -> None:
    with pytest.raises(SpecError, match="expected a mapping at the top level, got list"):
        parse_model(Inner, [1], "f.yaml")


def test_read_yaml_syntax_error_names_line(tmp_path: Path) -> None:
    p = tmp_path / "bad.yaml"
    p.write_text("a: 1\nb: [1, 2\n")
    with pytest.raises(SpecError, match=r"bad.yaml:\d+:\d+: YAML syntax error"):
        read_yaml(p)
    with pytest.raises(SpecError, match="no such file"):
        read_yaml(tmp_path / "missing.yaml")


def test_resolve_path_prefers_the_files_directory(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    base, cwd = tmp_path / "spec", tmp_path / "cwd"
    (base / "c").mkdir(parents=True)
    (cwd / "c").mkdir(parents=True)
    (cwd / "only-cwd").mkdir()
    monkeypatch.chdir(cwd)
    assert resolve_path("c", base) == (base / "c").resolve()
    assert resolve_path("only-cwd", base) == (cwd / "only-cwd").resolve()
    assert resolve_path("nowhere", base) == (base / "nowhere").resolve()
    assert resolve_path("/abs/x", base) == Path("/abs/x")


def test_atomic_write_replaces_and_leaves_no_temporaries(tmp_path: Path) -> None:
    p = tmp_path / "f.json"
    atomic_write(p, b"one")
    atomic_write(p, dump_json({"b": 1, "a": [1, 2]}), mode=0o600)
    assert p.read_bytes() == b'{\n "a": [\n  1,\n  2\n ],\n "b": 1\n}\n'
    assert (os.stat(p).st_mode & 0o777) == 0o600
    assert sorted(x.name for x in tmp_path.iterdir()) == ["f.json"]


def test_exclusive_write_refuses_an_existing_target(tmp_path: Path) -> None:
    p = tmp_path / "o.yaml"
    atomic_write(p, b"first", exclusive=True)
    with pytest.raises(FileExistsError):
        atomic_write(p, b"second", exclusive=True)
    assert p.read_bytes() == b"first"
    assert sorted(x.name for x in tmp_path.iterdir()) == ["o.yaml"]


def test_failed_write_keeps_the_old_content(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    p = tmp_path / "t.parquet"
    atomic_write_table(p, pa.table({"x": [1]}))

    def boom(*a: object, **k: object) -> None:
        raise OSError(28, "No space left on device")

    monkeypatch.setattr(pq, "write_table", boom)
    with pytest.raises(OSError, match="No space"):
        atomic_write_table(p, pa.table({"x": [2]}))
    monkeypatch.undo()
    assert pq.read_table(p).column("x").to_pylist() == [1]
    assert sorted(x.name for x in tmp_path.iterdir()) == ["t.parquet"]


def test_atomic_dir_creates_and_replaces_whole(tmp_path: Path) -> None:
    d = tmp_path / "corpus"
    atomic_write_dir(d, {"a": b"1", "b": b"2"}, overwrite=False)
    with pytest.raises(FileExistsError):
        atomic_write_dir(d, {"a": b"x"}, overwrite=False)
    atomic_write_dir(d, {"c": b"3"}, overwrite=True)
    assert sorted(x.name for x in d.iterdir()) == ["c"]
    assert sorted(x.name for x in tmp_path.iterdir()) == ["corpus"]


def test_json_safe_known_answers() -> None:
    from datetime import UTC, datetime

    from harness.formats import json_safe

    when = datetime(2026, 12, 1, 2, 0, tzinfo=UTC)
    assert json_safe({"a": float("nan"), 1: (float("inf"), 2.5), "t": when, "n": [None, "x"]}) == \
        {"a": None, "1": [None, 2.5], "t": "2026-12-01T02:00:00+00:00", "n": [None, "x"]}


def test_read_regular_refuses_what_is_not_a_plain_file(tmp_path: Path) -> None:
    """A FIFO (without a writer: no hang), a directory, a file over the limit and, when links are not
    followed, a symlink are refused before any content is read."""
    import os

    from harness.formats import UnreadableFile, read_regular

    plain = tmp_path / "plain"
    plain.write_bytes(b"abc")
    assert read_regular(plain, 3) == b"abc"
    fifo = tmp_path / "fifo"
    os.mkfifo(fifo)
    with pytest.raises(UnreadableFile, match=r"not a regular file \(a FIFO\)"):
        read_regular(fifo, 10)
    with pytest.raises(UnreadableFile, match=r"not a regular file \(a directory\)"):
        read_regular(tmp_path, 10)
    with pytest.raises(UnreadableFile, match="3 bytes, more than the 2 accepted"):
        read_regular(plain, 2)
    link = tmp_path / "link"
    link.symlink_to(plain)
    assert read_regular(link, 3) == b"abc"
    with pytest.raises(OSError, match="symbolic links"):
        read_regular(link, 3, follow_symlinks=False)


def test_a_path_component_too_long_for_the_file_system_is_a_spec_error(tmp_path: Path) -> None:
    # Path.exists() raises ENAMETOOLONG instead of answering False (found by tests/inputs/test_spec_fuzz.py)
    with pytest.raises(SpecError, match="is not usable"):
        resolve_path("a" * 300, tmp_path)
