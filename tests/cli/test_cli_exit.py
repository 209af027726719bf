"""How the ``dsv4h`` process ends: ``main`` runs what interpreter shutdown would run at the Python
level (non-daemon threads joined, ``atexit`` handlers, both streams flushed) and then leaves with
``os._exit``, so native teardown (Arrow C++'s thread pool, apache/arrow#34314) cannot turn a finished
command into an abort. The status is the one ``run`` mapped."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from harness.cli import _status

REPO = Path(__file__).resolve().parents[2]

_CHILD = """
import atexit, sys, threading, time
from pathlib import Path
out = Path(sys.argv[1])
sys.argv = ["dsv4h", *sys.argv[2:]]
atexit.register(lambda: (out / "atexit").write_text("ran"))
def late():
    time.sleep(0.3)
    (out / "thread").write_text("finished")
threading.Thread(target=late).start()
from harness.cli import main
main()
print("AFTER MAIN")  # never reached: main ends the process
"""


def child(tmp_path: Path, *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-c", _CHILD, str(tmp_path), *args], cwd=REPO,
                          capture_output=True, text=True, timeout=120, check=False)


def test_success_runs_exit_handlers_and_threads_then_ends(tmp_path: Path) -> None:
    proc = child(tmp_path, "--help")
    assert proc.returncode == 0, proc.stderr
    assert "Usage: dsv4h" in proc.stdout and proc.stdout.rstrip().endswith("╯")  # flushed to the end
    assert "AFTER MAIN" not in proc.stdout
    assert (tmp_path / "atexit").read_text() == "ran"
    assert (tmp_path / "thread").read_text() == "finished"


def test_mapped_error_keeps_its_status_and_lines(tmp_path: Path) -> None:
    proc = child(tmp_path, "archive", "list", "-w", str(tmp_path / "nope"))
    assert proc.returncode == 6
    assert "error:" in proc.stderr and "hint:" in proc.stderr
    assert (tmp_path / "atexit").read_text() == "ran"


def test_usage_error_keeps_clicks_status(tmp_path: Path) -> None:
    proc = child(tmp_path, "archive", "list", "--no-such-option")
    assert proc.returncode == 2 and "No such option" in proc.stderr


@pytest.mark.parametrize(("code", "want"), [(None, 0), (0, 0), (3, 3), ("a message", 1)])
def test_status_of_system_exit(code: object, want: int, capsys: pytest.CaptureFixture[str]) -> None:
    assert _status(code) == want
    assert ("a message" in capsys.readouterr().err) == (code == "a message")
