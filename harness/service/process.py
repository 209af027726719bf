"""Owned process trees: start a service in its own session, stop only what we started.

A process is *owned* when its PID **and** its creation time match what was recorded at launch;
a reused PID (same number, different birth) is never signalled. Stopping escalates SIGTERM ->
SIGKILL over the recorded root and every descendant, then waits until all are gone.

Every tree started here is *live* until it is stopped or deliberately released (``dsv4h service
start`` leaves its server running); :func:`stop_all_live` stops whatever is still live, and runs at
interpreter exit as a last resort, so no path out of dsv4h (an exception, a signal, a full disk)
leaves a server it launched running.
"""

from __future__ import annotations

import atexit
import os
import signal
import subprocess
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import IO, Any

import psutil

from harness.errors import ServiceError

__all__ = ["OwnedProcess", "release", "stop_all_live", "stop_owned"]


@dataclass
class OwnedProcess:
    """A process tree dsv4h started: PID, birth time (psutil ``create_time``, seconds since the
    epoch), argv, environment diff and log path."""

    pid: int
    create_time: float
    argv: list[str]
    env_diff: dict[str, str]
    log_path: Path
    cwd: str
    popen: subprocess.Popen[bytes] | None = field(default=None, repr=False)
    _log: IO[bytes] | None = field(default=None, repr=False)

    def identity(self) -> dict[str, Any]:
        """What is recorded in archives about this process."""
        return {
            "pid": self.pid,
            "create_time": self.create_time,
            "argv": list(self.argv),
            "env_diff": dict(self.env_diff),
            "log_path": str(self.log_path),
            "cwd": self.cwd,
        }

    def is_ours(self, proc: psutil.Process) -> bool:
        """True when ``proc`` is the recorded root (same PID and same birth time)."""
        try:
            return proc.pid == self.pid and abs(proc.create_time() - self.create_time) < 0.05
        except psutil.Error:
            return False

    def runs_recorded_command(self) -> bool:
        """True when the live root (PID and birth time match) runs the recorded argv: a record edited
        to name another process's PID and birth time does not get that process signalled."""
        try:
            root = psutil.Process(self.pid)
            return self.is_ours(root) and list(root.cmdline()) == list(self.argv)
        except psutil.Error:
            return False

    def exit_code(self) -> int | None:
        """The root's exit status if it has exited, else None."""
        if self.popen is not None:
            return self.popen.poll()
        try:
            p = psutil.Process(self.pid)
            if not self.is_ours(p) or p.status() == psutil.STATUS_ZOMBIE:
                return -1
            return None
        except psutil.NoSuchProcess:
            return -1

    def alive(self) -> bool:
        """True while the recorded root is running."""
        return self.exit_code() is None

    def tree(self) -> list[psutil.Process]:
        """The live owned tree: the root (if it is still ours) and all its descendants."""
        try:
            root = psutil.Process(self.pid)
        except psutil.NoSuchProcess:
            return []
        if not self.is_ours(root):
            return []
        try:
            return [root, *root.children(recursive=True)]
        except psutil.NoSuchProcess:
            return [root]

    def settle(self, timeout_s: float) -> int | None:
        """Wait up to ``timeout_s`` seconds for the root to exit; its exit status, or None if it runs on.

        Used once a part of the service is known to be gone, so that the log tail read next holds the
        survivors' last lines (a multi-node rank 0 logs the lost rank just before it exits)."""
        deadline = time.monotonic() + timeout_s
        while (code := self.exit_code()) is None and time.monotonic() < deadline:
            time.sleep(0.05)
        return code

    def log_tail(self, n_lines: int = 40) -> str:
        """The last lines of the process log (empty if none)."""
        try:
            data = self.log_path.read_bytes()[-16384:]
        except OSError:
            return ""
        return "\n".join(data.decode("utf-8", "replace").splitlines()[-n_lines:])


def start_owned(
    argv: Sequence[str],
    *,
    log_path: Path,
    env_diff: Mapping[str, str] | None = None,
    cwd: Path | None = None,
) -> OwnedProcess:
    """Start ``argv`` in a new session (its own process group), stdout+stderr to ``log_path``."""
    log_path.parent.mkdir(parents=True, exist_ok=True)
    env = dict(os.environ)
    env.update(env_diff or {})
    env.setdefault("PYTHONUNBUFFERED", "1")
    log = log_path.open("ab")
    try:
        popen = subprocess.Popen(
            list(argv), stdout=log, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL,
            env=env, cwd=str(cwd) if cwd else None, start_new_session=True,
        )
    except OSError as exc:
        log.close()
        raise ServiceError(f"cannot start {argv[0]}: {exc}",
                           hint="check that the program is installed and the profile's launch.python path") from exc
    try:
        create_time = psutil.Process(popen.pid).create_time()
    except psutil.NoSuchProcess:
        create_time = 0.0
    proc = OwnedProcess(
        pid=popen.pid, create_time=create_time, argv=list(argv), env_diff=dict(env_diff or {}),
        log_path=log_path, cwd=str(cwd or Path.cwd()), popen=popen, _log=log,
    )
    _register(proc)
    return proc


_LIVE: dict[tuple[int, float], OwnedProcess] = {}
_atexit_installed: list[bool] = []


def _register(proc: OwnedProcess) -> None:
    if not _atexit_installed:
        atexit.register(stop_all_live)
        _atexit_installed.append(True)
    _LIVE[(proc.pid, proc.create_time)] = proc


def release(proc: OwnedProcess) -> None:
    """Leave ``proc`` running past this process's end (``dsv4h service start``)."""
    _LIVE.pop((proc.pid, proc.create_time), None)


def stop_all_live(term_timeout_s: float = 10.0) -> list[StopReport]:
    """Stop every owned tree still live (last-resort cleanup; also run at interpreter exit)."""
    out = []
    for proc in list(_LIVE.values()):
        try:
            out.append(stop_owned(proc, term_timeout_s=term_timeout_s))
        except (OSError, psutil.Error):
            _LIVE.pop((proc.pid, proc.create_time), None)
    return out


@dataclass(frozen=True)
class StopReport:
    """What ``stop_owned`` did: PIDs signalled, and which needed SIGKILL."""

    terminated: tuple[int, ...]
    killed: tuple[int, ...]
    exit_code: int | None


def stop_owned(proc: OwnedProcess, *, term_timeout_s: float = 15.0, kill_timeout_s: float = 10.0) -> StopReport:
    """Stop the owned tree: SIGTERM everything owned, then SIGKILL survivors; wait until gone.

    Only the recorded root (matched by PID and birth time) and its descendants are signalled;
    nothing else is touched, even in the same process group.
    """
    tree = proc.tree()
    # snapshot descendants' identities now: once the root dies they are re-parented
    members = [(p, _birth(p)) for p in tree]
    terminated: list[int] = []
    for p, _ in members:
        try:
            p.send_signal(signal.SIGTERM)
            p.send_signal(signal.SIGCONT)  # a stopped (SIGSTOP) process acts on SIGTERM only once continued
            terminated.append(p.pid)
        except psutil.Error:
            pass
    _, alive = psutil.wait_procs([p for p, _ in members], timeout=term_timeout_s)
    killed: list[int] = []
    for p in alive:
        birth = dict((q.pid, b) for q, b in members).get(p.pid)
        if birth is None or abs(_birth(p) - birth) > 0.05:
            continue
        try:
            p.kill()
            killed.append(p.pid)
        except psutil.Error:
            pass
    psutil.wait_procs(alive, timeout=kill_timeout_s)
    code: int | None = None
    if proc.popen is not None:
        try:
            code = proc.popen.wait(timeout=1.0)
        except subprocess.TimeoutExpired:
            code = None
    if proc._log is not None:
        proc._log.close()
        proc._log = None
    _LIVE.pop((proc.pid, proc.create_time), None)
    return StopReport(tuple(terminated), tuple(killed), code)


def _birth(p: psutil.Process) -> float:
    try:
        return p.create_time()
    except psutil.Error:
        return -1.0


def wait_for_line(proc: OwnedProcess, needle: str, timeout_s: float) -> str:
    """Wait until the process log contains a line with ``needle``; return that line.

    Raises ServiceError with the log tail when the process exits or the timeout passes.
    """
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        try:
            text = proc.log_path.read_text(encoding="utf-8", errors="replace")
        except OSError:
            text = ""
        for line in text.splitlines():
            if needle in line:
                return line
        code = proc.exit_code()
        if code is not None:
            raise ServiceError(
                f"service process {proc.pid} exited with code {code} during startup\n"
                f"--- log tail ({proc.log_path}) ---\n{proc.log_tail()}",
                hint="read the log above; fix the profile or free the port and try again",
            )
        time.sleep(0.05)
    raise ServiceError(
        f"service process {proc.pid} did not print '{needle}' within {timeout_s:.0f} s\n"
        f"--- log tail ({proc.log_path}) ---\n{proc.log_tail()}",
        hint="raise launch.startup_timeout_s in the profile or read the log",
    )
