"""The resume command a run prints works as printed (issue 37 item 8a)."""

from __future__ import annotations

import shlex
from pathlib import Path

import pytest

from harness.run.options import resume_command


def test_a_workspace_other_than_the_current_directory_is_named(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(tmp_path)
    assert resume_command(Path("spec.yaml"), "3e09c0ffee3e09c0", Path("ws"), env={}) == \
        "dsv4h campaign run spec.yaml --resume 3e09c0ffee3e09c0 -w ws"


def test_the_current_directory_needs_no_flag_unless_the_environment_names_another(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(tmp_path)
    assert resume_command(Path("spec.yaml"), "3e09c0ffee3e09c0", Path(), env={}) == \
        "dsv4h campaign run spec.yaml --resume 3e09c0ffee3e09c0"
    assert resume_command(Path("spec.yaml"), "3e09c0ffee3e09c0", tmp_path, env={}) == \
        "dsv4h campaign run spec.yaml --resume 3e09c0ffee3e09c0"
    # $DSV4H_WORKSPACE would pick another workspace without -w: the flag is printed
    assert resume_command(Path("spec.yaml"), "3e09c0ffee3e09c0", tmp_path, env={"DSV4H_WORKSPACE": "/elsewhere"}) \
        == f"dsv4h campaign run spec.yaml --resume 3e09c0ffee3e09c0 -w {tmp_path}"


def test_paths_are_shell_quoted(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(tmp_path)
    cmd = resume_command(Path("my specs/run 1.yaml"), "3e09c0ffee3e09c0", Path("the ws"), env={})
    assert cmd == "dsv4h campaign run 'my specs/run 1.yaml' --resume 3e09c0ffee3e09c0 -w 'the ws'"
    assert shlex.split(cmd)[3:] == ["my specs/run 1.yaml", "--resume", "3e09c0ffee3e09c0", "-w", "the ws"]
