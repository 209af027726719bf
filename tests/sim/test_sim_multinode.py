"""The simulator's multi-node launch (harness.sim.rendezvous): ranks as local subprocesses, no Slurm.

Rank 0 serves HTTP only once every rank joined at --dist-init-addr; a lost rank takes the service down
(rank 0 exits non-zero naming it); rank 0 gone makes the other ranks exit. No timing bound: every wait
is for a line or an exit, with a generous deadline that only catches a hang.
"""

from __future__ import annotations

import os
import signal
import socket
import subprocess
import sys
import time
import urllib.request
from pathlib import Path

import pytest

from harness.errors import SpecError
from harness.sim.rendezvous import check_ranks, split_addr

HANG_S = 120.0


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def _rank(tmp: Path, rank: int, addr: str, nnodes: int = 2) -> tuple[subprocess.Popen[bytes], Path]:
    log = tmp / f"rank-{rank}.log"
    argv = [sys.executable, "-c", "from harness.cli import main; main()", "sim", "serve", "--profile", "fast",
            "--port", "0", "--nnodes", str(nnodes), "--node-rank", str(rank), "--dist-init-addr", addr]
    with log.open("wb") as out:
        proc = subprocess.Popen(argv, stdout=out, stderr=subprocess.STDOUT, env={**os.environ, "PYTHONUNBUFFERED": "1"})
    return proc, log


def _wait_line(log: Path, needle: str) -> str:
    deadline = time.monotonic() + HANG_S
    while time.monotonic() < deadline:
        for line in log.read_text(errors="replace").splitlines():
            if needle in line:
                return line
        time.sleep(0.05)
    raise AssertionError(f"{needle!r} never in {log}:\n{log.read_text(errors='replace')}")


def _stop(*procs: subprocess.Popen[bytes]) -> None:
    for p in procs:
        if p.poll() is None:
            p.kill()
        p.wait(10)


def test_multinode_flags_are_checked() -> None:
    assert split_addr("127.0.0.1:25000") == ("127.0.0.1", 25000)
    assert split_addr("[::1]:25000") == ("::1", 25000)
    assert check_ranks(2, 1, "vm:1") == ("vm", 1)
    with pytest.raises(SpecError, match="not HOST:PORT"):
        split_addr("vm")
    with pytest.raises(SpecError, match=r"outside 0\.\.1"):
        check_ranks(2, 2, "vm:1")
    with pytest.raises(SpecError, match="needs --dist-init-addr"):
        check_ranks(2, 0, None)


@pytest.mark.slow
def test_rank0_serves_only_after_every_rank_joined_and_a_lost_rank_takes_it_down(tmp_path: Path) -> None:
    addr = f"127.0.0.1:{_free_port()}"
    r0, log0 = _rank(tmp_path, 0, addr)
    r1 = None
    try:
        _wait_line(log0, "waiting for 1 rank(s)")
        assert "listening on" not in log0.read_text()  # nothing is served before rank 1 joins
        r1, log1 = _rank(tmp_path, 1, addr)
        url = _wait_line(log0, "listening on").split()[-1]
        _wait_line(log1, "rank 1 joined")
        with urllib.request.urlopen(url + "/health", timeout=10) as resp:
            assert resp.status == 200
        r1.send_signal(signal.SIGKILL)  # rank 1 dies: the service is down
        assert r0.wait(HANG_S) != 0
        text = log0.read_text()
        assert "node rank 1 lost" in text and "the service is down" in text
    finally:
        _stop(r0, *([r1] if r1 else []))


@pytest.mark.slow
def test_rank0_gone_makes_the_other_ranks_exit(tmp_path: Path) -> None:
    addr = f"127.0.0.1:{_free_port()}"
    r0, log0 = _rank(tmp_path, 0, addr)
    r1, log1 = _rank(tmp_path, 1, addr)  # may start before rank 0 listens: it retries
    try:
        _wait_line(log0, "listening on")
        _wait_line(log1, "rank 1 joined")
        r0.send_signal(signal.SIGKILL)
        assert r1.wait(HANG_S) != 0
        assert "rank 0 at" in log1.read_text() and "is gone" in log1.read_text()
    finally:
        _stop(r0, r1)


@pytest.mark.slow
def test_a_rank_stopped_by_sigterm_exits_0_and_rank_0_reports_it_lost(tmp_path: Path) -> None:
    addr = f"127.0.0.1:{_free_port()}"
    r0, log0 = _rank(tmp_path, 0, addr)
    r1, log1 = _rank(tmp_path, 1, addr)
    try:
        _wait_line(log0, "listening on")
        _wait_line(log1, "rank 1 joined")
        r1.send_signal(signal.SIGTERM)
        assert r1.wait(HANG_S) == 0
        assert r0.wait(HANG_S) != 0
        assert "node rank 1 lost" in log0.read_text()
    finally:
        _stop(r0, r1)
