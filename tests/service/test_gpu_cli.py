"""``dsv4h gpu owners|memory`` against a fake nvidia-smi on PATH (real subprocess path)."""

from __future__ import annotations

import json
import os
import stat
import sys
from pathlib import Path

import pytest
from typer.testing import CliRunner

from harness.cli import _GROUPS
from harness.cli.gpu_cmd import app
from harness.service.devices import gpu_probe
from harness.service.devices.gpu import MIB
from harness.service.devices.gpu_probe import OWNERS_FILE_ENV

H200 = Path(__file__).resolve().parent.parent / "fixtures" / "gpu" / "nvidia-h200"
UUID = "GPU-8731a51e-f4a8-1ed8-dbb3-ea2c72f10b5f"


@pytest.fixture
def fake_path(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """A PATH holding only a fake ``nvidia-smi`` that prints the H200 captures; no pynvml."""
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    tool = bin_dir / "nvidia-smi"
    tool.write_text(f"#!{sys.executable}\nimport sys\n"
                    "arg = sys.argv[1]\n"
                    f"name = 'apps_busy.csv' if arg.startswith('--query-compute-apps') else 'gpus_busy.csv'\n"
                    f"sys.stdout.write(open({str(H200)!r} + '/' + name).read())\n")
    tool.chmod(tool.stat().st_mode | stat.S_IXUSR)
    monkeypatch.setenv("PATH", str(bin_dir))
    monkeypatch.setattr(gpu_probe, "nvml_importable", lambda: False)
    monkeypatch.delenv(OWNERS_FILE_ENV, raising=False)
    monkeypatch.setenv("COLUMNS", "200")
    return bin_dir


def test_group_registered() -> None:
    assert ("gpu_cmd", "gpu") in _GROUPS


def test_help_has_examples() -> None:
    r = CliRunner().invoke(app, ["--help"])
    assert r.exit_code == 0 and "Example: dsv4h gpu owners" in r.output
    for cmd in ("owners", "memory"):
        r = CliRunner().invoke(app, [cmd, "--help"], env={"COLUMNS": "200"})
        assert r.exit_code == 0 and "Example: dsv4h gpu" in r.output


def test_no_tools_says_so_and_exits_zero(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("PATH", str(tmp_path))
    monkeypatch.setattr(gpu_probe, "nvml_importable", lambda: False)
    monkeypatch.delenv(OWNERS_FILE_ENV, raising=False)
    for cmd in ("owners", "memory"):
        r = CliRunner().invoke(app, [cmd], env={"COLUMNS": "200"})
        assert r.exit_code == 0, r.output
        assert "no GPU tool found on this machine" in r.output
        r = CliRunner().invoke(app, [cmd, "--json"])
        assert r.exit_code == 0 and json.loads(r.output)["available"] is False


def test_owners_json_and_table(fake_path: Path) -> None:
    r = CliRunner().invoke(app, ["owners", "--json"])
    assert r.exit_code == 0, r.output
    data = json.loads(r.output)
    assert data["source"] == "nvidia-smi"
    assert data["owners"] == [{"gpu": UUID, "pid": 525, "name": "python3", "vram_bytes": 3472 * MIB,
                               "source": "nvidia-smi", "verdict": None}]
    assert data["devices"][0]["memory_total_bytes"] == 143771 * MIB
    r = CliRunner().invoke(app, ["owners"])
    assert r.exit_code == 0
    assert "python3" in r.output and "3.39 GiB" in r.output and "525" in r.output


def test_owners_relative_to_pid_with_injected_decoy(fake_path: Path, tmp_path: Path,
                                                     monkeypatch: pytest.MonkeyPatch) -> None:
    me = os.getpid()
    f = tmp_path / "owners.json"
    f.write_text(json.dumps([{"gpu": 0, "pid": me, "name": "pytest", "vram_bytes": 1 << 30}]))
    monkeypatch.setenv(OWNERS_FILE_ENV, str(f))
    r = CliRunner().invoke(app, ["owners", "--json", "--source", "nvidia-smi", "--pid", str(me)])
    assert r.exit_code == 0, r.output
    verdicts = {o["pid"]: o["verdict"] for o in json.loads(r.output)["owners"]}
    assert verdicts == {525: "unrelated", me: "owned"}
    r = CliRunner().invoke(app, ["owners", "--pid", str(me)])
    assert "unrelated" in r.output and "owned (injected)" in r.output


def test_memory_json_and_table(fake_path: Path) -> None:
    r = CliRunner().invoke(app, ["memory", "--json"])
    assert r.exit_code == 0, r.output
    (sample,) = json.loads(r.output)["samples"]
    assert (sample["device"], sample["used_bytes"], sample["total_bytes"]) == (0, 3481 * MIB, 143771 * MIB)
    r = CliRunner().invoke(app, ["memory"])
    assert r.exit_code == 0 and "140.40 GiB" in r.output and "2.4" in r.output


def test_bad_source_and_missing_pid(fake_path: Path) -> None:
    r = CliRunner().invoke(app, ["owners", "--source", "rocm-smi"])
    assert r.exit_code == 2
    r = CliRunner().invoke(app, ["owners", "--pid", str(2**22 + 4321)])
    assert r.exit_code == 1 and "no process with PID" in str(r.exception)
