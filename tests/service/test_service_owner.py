"""One owner for every launched server: a last-resort stop whatever ends the process, and a record
in the workspace so a server a killed dsv4h left behind is found and stopped (issue 14, point 2)."""

from __future__ import annotations

import json
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import psutil
from testkit import run_cli

from harness.service.launch.registry import forget, left_behind, record_launch, scan, stop_launched
from harness.service.process import OwnedProcess, start_owned

SLEEPER = [sys.executable, "-c", "import time; time.sleep(120)"]


def gone(pid: int, birth: float) -> bool:
    try:
        p = psutil.Process(pid)
        return abs(p.create_time() - birth) > 0.05 or p.status() == psutil.STATUS_ZOMBIE
    except psutil.Error:
        return True


def wait_gone(pid: int, birth: float, timeout: float = 15.0) -> bool:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if gone(pid, birth):
            return True
        time.sleep(0.05)
    return False


def child_script(tmp_path: Path, body: str) -> tuple[int, float, str]:
    """Run a Python process that starts an owned sleeper, prints its pid and birth, then ``body``."""
    script = textwrap.dedent(f"""
        import json, os, sys
        from pathlib import Path
        from harness.service.process import start_owned
        from harness.service.launch.registry import record_launch
        ws = Path({str(tmp_path)!r})
        proc = start_owned({SLEEPER!r}, log_path=ws / "logs" / "s.log")
        record_launch(ws, proc, "sleeper")
        print(json.dumps([proc.pid, proc.create_time]), flush=True)
    """) + textwrap.dedent(body)
    r = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=60, check=False)
    pid, birth = json.loads(r.stdout.splitlines()[0])
    return int(pid), float(birth), r.stderr


def test_an_exception_still_stops_the_owned_tree(tmp_path: Path) -> None:
    pid, birth, err = child_script(tmp_path, "raise RuntimeError('a bug in the middle of a run')\n")
    assert "a bug in the middle" in err
    assert wait_gone(pid, birth), "the owned server outlived the process that started it"


def test_kill_9_leaves_a_record_that_reap_finds_and_stops(tmp_path: Path) -> None:
    decoy = subprocess.Popen(SLEEPER)  # an unrelated process: must survive everything below
    pid, birth, _ = child_script(tmp_path, "os._exit(0)\n")  # like SIGKILL: no cleanup ran
    try:
        assert not gone(pid, birth)
        [entry] = scan(tmp_path)
        assert entry.state == "left-behind" and entry.process.pid == pid and entry.name == "sleeper"
        code, out, _ = run_cli("service", "status", "-w", str(tmp_path))
        assert code == 0 and "left-behind" in out
        code, out, _ = run_cli("service", "reap", "-w", str(tmp_path))
        assert code == 0 and "left behind" in out and "--stop" in out and not gone(pid, birth)
        code, out, _ = run_cli("service", "reap", "--stop", "-w", str(tmp_path))
        assert code == 0 and f"pid {pid}" in out
        assert wait_gone(pid, birth)
        assert scan(tmp_path) == [] and left_behind(tmp_path) == []
        assert decoy.poll() is None
    finally:
        decoy.kill()
        decoy.wait()
        if not gone(pid, birth):
            psutil.Process(pid).kill()


def test_records_of_live_owners_and_gone_servers(tmp_path: Path) -> None:
    proc = start_owned(SLEEPER, log_path=tmp_path / "logs" / "s.log")
    try:
        path = record_launch(tmp_path, proc, "mine")
        assert [e.state for e in scan(tmp_path)] == ["running"]  # its dsv4h (this process) lives
        assert left_behind(tmp_path) == []
    finally:
        from harness.service.process import stop_owned

        stop_owned(proc)
    assert [e.state for e in scan(tmp_path)] == ["gone"]  # reported once, then dropped
    assert not path.exists() and scan(tmp_path) == []
    forget(None)


def test_a_forged_record_never_gets_another_process_signalled(tmp_path: Path) -> None:
    decoy = subprocess.Popen(SLEEPER)
    try:
        birth = psutil.Process(decoy.pid).create_time()
        forged = OwnedProcess(pid=decoy.pid, create_time=birth, argv=["some", "server"], env_diff={},
                              log_path=tmp_path / "l", cwd=".")
        path = record_launch(tmp_path, forged, "forged")
        data = json.loads(path.read_text())
        data["owner"] = {"pid": 1, "create_time": 0.0}  # an owner that is "gone"
        path.write_text(json.dumps(data))
        [entry] = left_behind(tmp_path)
        report = stop_launched(entry)
        assert report.terminated == () and decoy.poll() is None  # argv differs: nothing signalled
    finally:
        decoy.kill()
        decoy.wait()
