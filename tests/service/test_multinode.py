"""The multi-node launcher with Slurm injected (harness.service.launch.multinode): no cluster needed.

The runner answers ``scontrol``, the per-node GPU tool and ``scancel``; the starter stands in for srun:
it runs the rank wrapper once per task, with SLURM_PROCID and the other variables srun sets, as local
processes. The ranks are the real simulator; the test checks the argv the launcher asked for, that the
GPU tool ran once per node through ``srun -w NODE --overlap``, the rank records, rank 0's health, and
that stop cancels the step and leaves no rank running.
"""

from __future__ import annotations

import contextlib
import json
import os
import re
import signal
import socket
import sys
import time
import urllib.request
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import psutil
import pytest

from harness.errors import OwnershipError, ServiceError
from harness.inputs.spec import ServiceProfile
from harness.service.devices.gpu_probe import NVIDIA_APPS, NVIDIA_GPUS
from harness.service.launch.multinode import launch, read_records
from harness.service.launch.slurm import TASKS_PER_NODE_ENV
from harness.service.process import OwnedProcess, start_owned, stop_owned

FIX = Path(__file__).resolve().parent.parent / "fixtures" / "gpu" / "nvidia-h200"
HOST = socket.gethostname()
HANG_S = 120.0

# srun, as far as the launcher sees it: one local process that runs each task with srun's variables
FAKE_SRUN = """
import json, os, subprocess, sys
task, n, job = json.loads(sys.argv[1]), int(sys.argv[2]), sys.argv[3]
procs = [subprocess.Popen(task, env={**os.environ, "SLURM_PROCID": str(r), "SLURM_NTASKS": str(n),
         "SLURM_JOB_ID": job, "SLURM_STEP_ID": "0", "SLURMD_NODENAME": sys.argv[4]}) for r in range(n)]
codes = [p.wait() for p in procs]
sys.exit(max(abs(c) for c in codes))
"""


class Slurm:
    """The injected runner and starter, with what each was asked."""

    def __init__(self, nodes: Sequence[str], apps: str = "apps_idle.csv") -> None:
        self.nodes, self.apps = list(nodes), apps
        self.calls: list[list[str]] = []
        self.srun: list[str] = []
        self.records: Path | None = None

    def run(self, argv: Sequence[str]) -> str:
        argv = list(argv)
        self.calls.append(argv)
        if argv[:3] == ["scontrol", "show", "hostnames"]:
            return "\n".join(self.nodes) + "\n"
        if argv[0] == "srun" and argv[-len(NVIDIA_APPS):] == list(NVIDIA_APPS):
            return (FIX / self.apps).read_text()
        if argv[0] == "srun" and argv[-len(NVIDIA_GPUS):] == list(NVIDIA_GPUS):
            return (FIX / "gpus_busy.csv").read_text()
        if argv[0] == "scancel":
            assert self.records is not None
            for rec in read_records(self.records):
                with contextlib.suppress(ProcessLookupError):
                    os.kill(rec.pid, signal.SIGTERM)
            return ""
        raise ServiceError(f"unexpected command {argv}")

    def start(self, argv: Sequence[str], *, log_path: Path, env_diff: dict[str, str]) -> OwnedProcess:
        self.srun = list(argv)
        task = argv[argv.index("--unbuffered") + 1:]
        self.records = Path(task[task.index("--record-dir") + 1])
        ntasks = int(next(a for a in argv if a.startswith("--ntasks=")).split("=")[1])
        return start_owned([sys.executable, "-c", FAKE_SRUN, json.dumps(task), str(ntasks), "4711", HOST],
                           log_path=log_path, env_diff=env_diff)


def _profile(**kw: Any) -> ServiceProfile:
    return ServiceProfile(name="two", backend="sim", sim={"profile": "fast"},
                          launch={"nnodes": 2, "startup_timeout_s": HANG_S}, **kw)


ENV = {"SLURM_JOB_ID": "4711", "SLURM_JOB_NODELIST": f"{HOST}", TASKS_PER_NODE_ENV: "2",
       "PYTHONPATH": str(Path(__file__).resolve().parents[2])}


def _url(log: Path) -> str:
    deadline = time.monotonic() + HANG_S
    while time.monotonic() < deadline:
        m = re.search(r"listening on (http://[0-9.]+:\d+)", log.read_text(errors="replace") if log.exists() else "")
        if m:
            return m.group(1)
        time.sleep(0.05)
    raise AssertionError(log.read_text(errors="replace"))


@pytest.mark.slow
def test_launch_records_every_rank_serves_from_rank0_and_stop_leaves_none(tmp_path: Path,
                                                                         monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("PYTHONPATH", ENV["PYTHONPATH"])
    slurm = Slurm([HOST])
    log = tmp_path / "logs" / "two.log"
    prof = _profile(devices={"check_gpu_owners": True, "gpu_owners_source": "nvidia-smi", "gpus": [0]})
    started = launch(prof, tmp_path, log, env=ENV, runner=slurm.run, start=slurm.start)
    try:
        svc = started.service
        assert slurm.calls[0] == ["scontrol", "show", "hostnames", HOST]
        assert slurm.calls[1] == ["srun", "--jobid=4711", "--nodes=1", "--ntasks=1", "-w", HOST, "--overlap",
                                  *NVIDIA_APPS]  # the GPU tool, run on the node
        assert [o["node"] for o in svc.owners_per_node] == [HOST] and svc.owners_per_node[0]["checked"]
        assert slurm.srun[:10] == ["srun", "--jobid=4711", "--nodes=1", "--ntasks=2", "--ntasks-per-node=2",
                                   f"--nodelist={HOST}", "--overlap", "--kill-on-bad-exit=1", "--label",
                                   "--unbuffered"]
        assert svc.step_id == "0" and [r.rank for r in svc.ranks] == [0, 1]
        assert [r.argv[r.argv.index("--node-rank") + 1] for r in svc.ranks] == ["0", "1"]
        assert all(psutil.Process(r.pid).create_time() == pytest.approx(r.create_time, abs=0.05) for r in svc.ranks)
        with urllib.request.urlopen(_url(log) + "/health", timeout=10) as resp:
            assert resp.status == 200
        assert svc.gone_here() == []
        ident = svc.identity()
        assert ident["nodes"] == [HOST] and ident["job_id"] == "4711" and len(ident["ranks"]) == 2
        svc.stop()
        assert ["scancel", "4711.0"] in slurm.calls
        assert svc.live() == {} and svc.stopped == {"scancel": ["scancel", "4711.0"], "left": {}}
    finally:
        stop_owned(started.process)
    assert started.process.exit_code() is not None


def test_an_unrelated_gpu_owner_on_a_node_refuses_before_any_rank_starts(tmp_path: Path) -> None:
    slurm = Slurm([HOST], apps="apps_busy.csv")
    prof = _profile(devices={"check_gpu_owners": True, "gpu_owners_source": "nvidia-smi", "gpus": [0]})
    with pytest.raises(OwnershipError, match="PID 525"):
        launch(prof, tmp_path, tmp_path / "x.log", env=ENV, runner=slurm.run, start=slurm.start)
    assert slurm.srun == []


def test_outside_an_allocation_or_too_small_a_one_is_refused(tmp_path: Path) -> None:
    slurm = Slurm([HOST])
    with pytest.raises(ServiceError, match="SLURM_JOB_ID is not set"):
        launch(_profile(), tmp_path, tmp_path / "x.log", env={}, runner=slurm.run, start=slurm.start)
    with pytest.raises(ServiceError, match="allocation has 1"):
        launch(_profile(), tmp_path, tmp_path / "x.log", env={k: v for k, v in ENV.items() if k != TASKS_PER_NODE_ENV},
               runner=slurm.run, start=slurm.start)
    assert slurm.srun == []
