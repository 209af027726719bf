"""Servers dsv4h launched for a run, recorded in the workspace (edge module: files, processes).

``<workspace>/services/launched/<pid>-<birth ms>.json`` is written the moment a campaign or screen
starts a server and removed when dsv4h stops it. It names the server (PID and birth time, argv,
log, URL once known, profile name) and its *owner*: the dsv4h process (PID and birth time) that
started it. A record whose owner is gone while its server still runs is a server that a dsv4h
killed without a chance to clean up (``kill -9``, a power cut) left behind: :func:`scan` finds
them and :func:`stop_launched` stops one, PID and birth time checked again, so a reused PID is
never signalled. Servers started by hand (``dsv4h service start``) live in ``services/NAME.json``
instead and are never swept.
"""

from __future__ import annotations

import contextlib
import json
import os
import re
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal

import psutil

from harness.formats import atomic_write, dump_json
from harness.service.devices.ownership import CREATE_TIME_TOLERANCE_S
from harness.service.process import OwnedProcess, StopReport, stop_owned

LAUNCHED_DIR = "launched"
_RECORD_RE = re.compile(r"\d+-\d+\.json")

State = Literal["running", "left-behind", "gone"]


def launched_dir(workspace: Path) -> Path:
    """Where launch records live."""
    return workspace / "services" / LAUNCHED_DIR


def _birth(pid: int) -> float | None:
    try:
        return float(psutil.Process(pid).create_time())
    except (psutil.Error, OSError):
        return None


def _alive(pid: int, create_time: float) -> bool:
    birth = _birth(pid)
    if birth is None or abs(birth - create_time) > CREATE_TIME_TOLERANCE_S:
        return False
    with contextlib.suppress(psutil.Error):
        return bool(psutil.Process(pid).status() != psutil.STATUS_ZOMBIE)
    return False


def _self_identity() -> dict[str, Any]:
    return {"pid": os.getpid(), "create_time": _birth(os.getpid()) or 0.0}


def record_launch(workspace: Path, proc: OwnedProcess, name: str) -> Path:
    """Record a server this process just launched; returns the record's path."""
    path = launched_dir(workspace) / f"{proc.pid}-{int(proc.create_time * 1000)}.json"
    path.parent.mkdir(parents=True, exist_ok=True)
    atomic_write(path, dump_json({"name": name, "url": None, "process": proc.identity(),
                                  "owner": _self_identity()}))
    return path


def note_url(path: Path, url: str) -> None:
    """Add the server's URL to its launch record once it is known (best effort)."""
    with contextlib.suppress(OSError, ValueError):
        data = json.loads(path.read_text())
        atomic_write(path, dump_json(data | {"url": url}))


def forget(path: Path | None) -> None:
    """Remove a launch record (the server was stopped, or handed over to ``service start``)."""
    if path is not None:
        path.unlink(missing_ok=True)


@dataclass(frozen=True)
class Launched:
    """One launch record and what it finds now."""

    path: Path
    name: str
    url: str | None
    process: OwnedProcess
    owner_pid: int
    state: State

    def describe(self) -> str:
        """One line naming the server."""
        where = f" at {self.url}" if self.url else ""
        return (f"'{self.name}'{where}: pid {self.process.pid}, log {self.process.log_path} "
                f"(started by dsv4h pid {self.owner_pid})")


def _read(path: Path) -> Launched | None:
    try:
        data = json.loads(path.read_text())
        p, owner = data["process"], data["owner"]
        proc = OwnedProcess(pid=int(p["pid"]), create_time=float(p["create_time"]), argv=list(p["argv"]),
                            env_diff=dict(p.get("env_diff") or {}), log_path=Path(str(p["log_path"])),
                            cwd=str(p.get("cwd", "")))
        owner_pid, owner_birth = int(owner["pid"]), float(owner["create_time"])
    except (OSError, ValueError, KeyError, TypeError):
        return None
    if not _alive(proc.pid, proc.create_time):
        state: State = "gone"
    elif _alive(owner_pid, owner_birth):
        state = "running"
    else:
        state = "left-behind"
    return Launched(path, str(data.get("name", "?")), data.get("url"), proc, owner_pid, state)


def scan(workspace: Path, *, drop_gone: bool = True) -> list[Launched]:
    """Every launch record of the workspace with its state; records of servers that are gone are
    removed (``drop_gone``)."""
    root = launched_dir(workspace)
    if not root.is_dir():
        return []
    out = []
    for path in sorted(root.iterdir()):
        if not _RECORD_RE.fullmatch(path.name):
            continue
        entry = _read(path)
        if entry is None:
            continue
        if entry.state == "gone" and drop_gone:
            forget(path)
        out.append(entry)
    return out


def left_behind(workspace: Path) -> list[Launched]:
    """Servers whose dsv4h is gone but which still run."""
    return [e for e in scan(workspace) if e.state == "left-behind"]


def stop_launched(entry: Launched) -> StopReport:
    """Stop a recorded server's tree (PID, birth time and command checked) and remove its record."""
    if not entry.process.runs_recorded_command():
        forget(entry.path)
        return StopReport((), (), None)
    report = stop_owned(entry.process, term_timeout_s=10.0)
    forget(entry.path)
    return report
