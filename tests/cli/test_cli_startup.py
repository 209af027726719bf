"""Start-up stays light (issue 24): ``dsv4h version`` and ``dsv4h --help`` import no command module,
so none of pandas, pyarrow, matplotlib or aiohttp. Not a timing test: the property behind the speed
(benchmarks/bench_startup.py measures the seconds)."""

from __future__ import annotations

import inspect
import subprocess
import sys
from pathlib import Path

import pytest

from harness import cli

ROOT = Path(__file__).resolve().parents[2]
HEAVY = ("pyarrow", "pandas", "matplotlib", "aiohttp", "numpy")

_CHILD = """
import sys
sys.argv = ["dsv4h", *sys.argv[1:]]
from harness.cli import run
run()
heavy = [m for m in {heavy!r} if m in sys.modules]
cmds = sorted(m for m in sys.modules if m.startswith("harness.cli.") and m.endswith("_cmd"))
print("LOADED", heavy, cmds)
"""


@pytest.mark.parametrize("args", [["version"], ["--help"], []])
def test_version_and_help_import_no_heavy_module(args: list[str]) -> None:
    proc = subprocess.run([sys.executable, "-c", _CHILD.format(heavy=HEAVY), *args], cwd=ROOT,
                          capture_output=True, text=True, timeout=120, check=False)
    last = proc.stdout.strip().splitlines()[-1]
    assert last == "LOADED [] []", proc.stdout[-2000:] + proc.stderr[-2000:]
    if args == ["--help"]:
        for name in cli.SUMMARIES:  # the root help still lists every command
            assert f" {name} " in proc.stdout, name


def test_one_command_loads_only_its_module() -> None:
    proc = subprocess.run([sys.executable, "-c", _CHILD.format(heavy=()), "gate", "--help"], cwd=ROOT,
                          capture_output=True, text=True, timeout=120, check=False)
    assert "Usage: dsv4h gate" in proc.stdout
    assert proc.stdout.strip().splitlines()[-1] == "LOADED [] ['harness.cli.gate_cmd']"


def test_summaries_match_each_commands_own_help() -> None:
    """The root help screen is drawn from ``cli.SUMMARIES``: each must be the first paragraph of the
    command's own help, as typer would list it from the loaded command."""
    names = [name for _, name in cli._COMMANDS] + ["import"] + [name for _, name in cli._GROUPS]
    assert sorted(names) == sorted(cli.SUMMARIES)
    for name in names:
        cmd = cli.load_command(name)
        first = inspect.cleandoc(cmd.short_help or cmd.help or "").split("\n\n")[0].strip()
        assert cli.SUMMARIES[name] == first, name


def test_typo_suggests_a_lazily_loaded_command() -> None:
    proc = subprocess.run([sys.executable, "-m", "harness.cli", "campain"], cwd=ROOT, capture_output=True,
                          text=True, timeout=120, check=False)
    assert proc.returncode != 0 and "campaign" in proc.stderr + proc.stdout
