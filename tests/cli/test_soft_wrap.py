"""Machine-relevant output (commands, ids, paths, hints) is never hard-wrapped (issue 24, point 6):
on an 80-column terminal a line that carries a long path stays one line, so it can be copied or
grepped whole; tables still fit the width."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
from rich.table import Table

from harness.cli import report_error
from harness.cli.common import PlainConsole

REPO = Path(__file__).resolve().parents[2]
AIPERF = REPO / "tests" / "fixtures" / "peers" / "aiperf-0.13.0"


def long_dir(root: Path) -> Path:
    """A directory whose path is well over 80 characters (a clone under a deep home directory)."""
    d = root / ("a-rather-long-directory-name-for-a-clone-" * 3) / "workspace-with-a-long-name"
    d.mkdir(parents=True)
    assert len(str(d)) > 140
    return d


def test_resume_hint_is_one_line(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                 capsys: pytest.CaptureFixture[str]) -> None:
    monkeypatch.setenv("COLUMNS", "80")
    spec = long_dir(tmp_path) / "my-decode.yaml"
    command = f"dsv4h campaign run {spec} --resume 3e09c0ffee3e09c0"
    report_error("decode C8 failed: the service died",
                 f"data so far is in archive 3e09c0ffee3e09c0 ({spec.parent}); continue with '{command}'")
    err = capsys.readouterr().err
    lines = err.splitlines()
    assert len(lines) == 2 and lines[0].startswith("error: ") and lines[1].startswith("hint: "), err
    assert f"'{command}'" in lines[1]


def test_plain_lines_soft_wrap_and_tables_fit() -> None:
    console = PlainConsole(width=80, record=True, file=open(os.devnull, "w"))  # noqa: SIM115
    path = "/home/someone/" + "x" * 120 + "/archive"
    console.print(f"imported {path} as external archive 78163532deadbeef")
    table = Table("path", "archive")
    table.add_row(path, "78163532deadbeef")
    console.print(table)
    text = console.export_text()
    first, *rest = text.splitlines()
    assert first == f"imported {path} as external archive 78163532deadbeef"
    assert rest and all(len(line) <= 80 for line in rest), rest


def test_import_from_a_long_path_prints_one_line(tmp_path: Path) -> None:
    """The end-to-end case the user hit: ``dsv4h import`` of a peer directory under a long path
    prints ``imported <path> as external archive <id>`` as one line on an 80-column terminal."""
    base = long_dir(tmp_path)
    peer = base / AIPERF.name
    shutil.copytree(AIPERF, peer)
    env = {**os.environ, "COLUMNS": "80", "NO_COLOR": "1"}
    proc = subprocess.run([sys.executable, "-m", "harness.cli", "import", str(peer), "--tool", "aiperf",
                           "-w", str(base / "ws")], capture_output=True, text=True, timeout=240, env=env,
                          cwd=REPO, check=False)
    assert proc.returncode == 0, proc.stdout[-2000:] + proc.stderr[-2000:]
    (line,) = [ln for ln in proc.stdout.splitlines() if "as external" in ln]
    assert str(peer) in line and line.split("external archive")[1].split()[0].isalnum(), proc.stdout
