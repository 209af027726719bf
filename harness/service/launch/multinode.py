"""A multi-node service inside a Slurm allocation (edge module: srun, scancel, files, processes).

``launch`` (called by ``harness.service.launch.manager.start_service`` for a profile with ``nnodes > 1``):

1. the allocation: ``SLURM_JOB_ID`` and ``scontrol show hostnames $SLURM_JOB_NODELIST``;
2. GPU owners checked on every node the service uses, the GPU tool run there through
   ``srun --nodes=1 --ntasks=1 -w NODE --overlap`` (the simulator: not checked, as on one node, unless
   the profile asks);
3. every rank started with one ``srun`` (``harness.service.launch.slurm.ranks_srun_argv``), each task through
   the rank wrapper, which writes ``rank-R.json`` (step id, node, PID, birth time, argv) into the
   workspace (which must be shared by the nodes) and execs the engine;
4. rank 0's URL (the simulator prints it; SGLang serves on the profile's host and port).

``MultiNodeService.stop`` cancels the step (``scancel JOBID.STEPID``) and then checks on each node that no
rank (PID and birth time) and none of its descendants is left, raising ``ServiceError`` naming any that
is. Every process call goes through an injectable ``runner``; see docs/multinode.md.
"""

from __future__ import annotations

import contextlib
import json
import os
import socket
import sys
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import psutil

from harness.errors import ServiceError
from harness.formats import parse_model
from harness.inputs.spec import ServiceProfile
from harness.service.devices.gpu_probe import ensure_gpus_free, resolve_source, subprocess_runner
from harness.service.devices.ownership import CREATE_TIME_TOLERANCE_S, service_gpus
from harness.service.launch.command import LaunchCommand, check_executables, sglang_command, sim_command
from harness.service.launch.slurm import (
    Placement,
    RankRecord,
    check_records,
    cpus_per_task,
    dist_init_addr,
    hostnames_argv,
    node_argv,
    parse_hostnames,
    placement,
    rank_template,
    ranks_srun_argv,
    scancel_argv,
    tasks_per_node,
    wrapper_argv,
)
from harness.service.process import OwnedProcess, start_owned, stop_owned

Runner = Callable[[Sequence[str]], str]
Starter = Callable[..., OwnedProcess]
STOP_TIMEOUT_S = 60.0
LIVE_SNIPPET = "from harness.service.launch.multinode import print_live_trees; print_live_trees()"


@dataclass(frozen=True)
class Allocation:
    """The Slurm allocation this process runs in."""

    job_id: str
    nodes: tuple[str, ...]


def current_allocation(env: Mapping[str, str], runner: Runner = subprocess_runner) -> Allocation:
    """The allocation of ``env`` (``SLURM_JOB_ID``, ``SLURM_JOB_NODELIST`` expanded by scontrol);
    ``ServiceError`` outside one."""
    job = env.get("SLURM_JOB_ID")
    nodelist = env.get("SLURM_JOB_NODELIST") or env.get("SLURM_NODELIST")
    if not job or not nodelist:
        raise ServiceError("a multi-node service (nnodes > 1) runs inside a Slurm allocation; SLURM_JOB_ID is "
                           "not set here", hint="run dsv4h inside salloc or sbatch (docs/multinode.md), e.g. "
                           "salloc -N 2 dsv4h campaign run SPEC")
    return Allocation(job, tuple(parse_hostnames(runner(hostnames_argv(nodelist)))))


def live_trees(pairs: Sequence[Sequence[float]]) -> list[list[float]]:
    """The live processes among ``pairs`` ((pid, birth time) of each rank, matched by birth time) and
    every descendant of each, as [pid, birth time] (zombies left out)."""
    out: list[list[float]] = []
    for pid, birth in pairs:
        try:
            root = psutil.Process(int(pid))
            if abs(root.create_time() - float(birth)) > CREATE_TIME_TOLERANCE_S:
                continue
            for p in (root, *root.children(recursive=True)):
                if p.status() != psutil.STATUS_ZOMBIE:
                    out.append([p.pid, p.create_time()])
        except psutil.Error:
            continue
    return out


def print_live_trees() -> None:
    """``live_trees`` of the JSON list in ``argv[1]``, printed as JSON (the per-node probe)."""
    print(json.dumps(live_trees(json.loads(sys.argv[1]))))


def is_local(node: str) -> bool:
    """True when ``node`` names this host."""
    return node in (socket.gethostname(), socket.gethostname().split(".")[0], "localhost")


@dataclass
class MultiNodeService:
    """The ranks of one multi-node service: the step, where each rank runs, what each reported."""

    job_id: str
    step_id: str
    where: Placement
    record_dir: Path
    ranks: list[RankRecord]
    dist_init_addr: str
    srun_argv: list[str]
    owners_per_node: list[dict[str, Any]]
    runner: Runner = field(default=subprocess_runner, repr=False)
    python: str = sys.executable
    stopped: dict[str, Any] | None = None

    def on_node(self, node: str) -> list[RankRecord]:
        """The ranks on ``node``."""
        return [r for r in self.ranks if r.node == node]

    def live(self) -> dict[str, list[list[float]]]:
        """Per node, the live processes of its ranks' trees ([pid, birth time])."""
        out: dict[str, list[list[float]]] = {}
        for node in self.where.nodes:
            pairs = [[r.pid, r.create_time] for r in self.on_node(node)]
            if not pairs:
                continue
            if is_local(node):
                found = live_trees(pairs)
            else:
                found = json.loads(self.runner(node_argv(self.job_id, node,
                                                         [self.python, "-c", LIVE_SNIPPET, json.dumps(pairs)])))
            if found:
                out[node] = found
        return out

    def gone_here(self) -> list[RankRecord]:
        """The ranks on this host that are no longer running (cheap: no srun; called before every wave)."""
        return [r for r in self.ranks if is_local(r.node) and not live_trees([[r.pid, r.create_time]])]

    def check_owners(self, profile: ServiceProfile) -> list[dict[str, Any]] | None:
        """GPU owners on every node, the ranks' trees counted as owned (None when not checked)."""
        if not profile.checks_gpus:
            return None
        trees = self.live()
        return [owners_on_node(profile, self.job_id, node, self.runner,
                               [(int(p), float(c)) for p, c in trees.get(node, [])]) for node in self.where.nodes]

    def stop(self, timeout_s: float = STOP_TIMEOUT_S) -> None:
        """``scancel JOBID.STEPID``, then wait until no rank process is left on any node; ``ServiceError``
        naming the survivors otherwise."""
        argv = scancel_argv(self.job_id, self.step_id)
        with contextlib.suppress(ServiceError):  # the step may be over already; what matters is below
            self.runner(argv)
        deadline = time.monotonic() + timeout_s
        left = self.live()
        while left and time.monotonic() < deadline:
            time.sleep(0.2)
            left = self.live()
        self.stopped = {"scancel": argv, "left": left}
        if left:
            raise ServiceError(f"after {' '.join(argv)} rank processes are still alive: {left}",
                               hint="stop them by hand (scancel the step again, or kill the PIDs on those nodes)")

    def identity(self) -> dict[str, Any]:
        """What the archive records: the step, every node and rank."""
        return {"scheduler": "slurm", "job_id": self.job_id, "step_id": self.step_id,
                "nodes": list(self.where.nodes), "tasks_per_node": self.where.tasks_per_node,
                "dist_init_addr": self.dist_init_addr, "srun": list(self.srun_argv),
                "record_dir": str(self.record_dir),
                "ranks": [r.model_dump(mode="json") for r in sorted(self.ranks, key=lambda r: r.rank)],
                "gpu_owners_per_node": self.owners_per_node, "stopped": self.stopped}


def owners_on_node(profile: ServiceProfile, job_id: str, node: str, runner: Runner,
                   owned: Sequence[tuple[int, float]] = ()) -> dict[str, Any]:
    """The GPU owners of ``node`` read by the GPU tool run there (``OwnershipError`` when an unrelated
    process holds one of the service's GPUs). NVML is in-process, so a node is read with nvidia-smi."""
    source = profile.devices.gpu_owners_source
    resolved = resolve_source("nvidia-smi" if source == "nvml" else source, nvml_available=lambda: False)
    if resolved == "drm-fdinfo":
        raise ServiceError(f"GPU owners of node {node} cannot be read with drm-fdinfo (a local /proc walk)",
                           hint="set gpu_owners_source to xpu-smi, nvidia-smi or amd-smi for multi-node services")
    gpus = service_gpus(profile.devices.gpus, {**os.environ, **profile.launch.env})
    snap = ensure_gpus_free(gpus, list(owned) or None, source=resolved,
                            runner=lambda argv: runner(node_argv(job_id, node, argv)))
    return {"node": node, "checked": True, "snapshot": snap.to_dict()}


def _free_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def read_records(record_dir: Path) -> list[RankRecord]:
    """Every ``rank-R.json`` written so far."""
    out = []
    for path in sorted(record_dir.glob("rank-*.json")):
        out.append(parse_model(RankRecord, json.loads(path.read_text()), str(path)))
    return out


def _wait_records(proc: OwnedProcess, record_dir: Path, nnodes: int, timeout_s: float) -> list[RankRecord]:
    deadline = time.monotonic() + timeout_s
    while True:
        records = read_records(record_dir)
        if len(records) >= nnodes:
            return records
        code = proc.exit_code()
        if code is not None or time.monotonic() > deadline:
            why = f"exited with code {code}" if code is not None else f"did not start them in {timeout_s:.0f} s"
            raise ServiceError(f"srun {why}; {len(records)} of {nnodes} rank(s) reported\n"
                               f"--- log tail ({proc.log_path}) ---\n{proc.log_tail()}",
                               hint="read the log; check the allocation (squeue) and the shared workspace")
        time.sleep(0.1)


@dataclass
class Launched:
    """What ``launch`` started: the local srun process, the ranks, the command and rank 0's port."""

    process: OwnedProcess
    service: MultiNodeService
    command: LaunchCommand


def launch(profile: ServiceProfile, run_dir: Path, log: Path, *, witness_dir: str | None = None,
           env: Mapping[str, str] | None = None, runner: Runner = subprocess_runner,
           start: Starter = start_owned) -> Launched:
    """Check owners on every node, start every rank with one srun and wait for every rank's record
    (see the module docstring). The URL is the caller's to wait for (rank 0's port is the command's)."""
    environ = os.environ if env is None else env
    alloc = current_allocation(environ, runner)
    where = placement(profile.launch.nnodes, alloc.nodes, tasks_per_node(environ))
    owners = [owners_on_node(profile, alloc.job_id, node, runner) if profile.checks_gpus
              else {"node": node, "checked": False} for node in where.nodes]
    addr = dist_init_addr(profile.launch.dist_init_addr, where.nodes[0], _free_port())
    prof = profile.model_copy(update={"launch": profile.launch.model_copy(update={"dist_init_addr": addr})})
    if profile.backend == "sim":
        rank0 = sim_command(prof, port=profile.launch.port or 0, node_rank=0)
    else:
        rank0 = sglang_command(prof, profile.launch.port or _free_port(), node_rank=0, witness_dir=witness_dir)
        check_executables(rank0)  # numactl here; every node is assumed to have the same tools
        from harness.service.launch.sglang_flags import load_flagset, validate_argv

        validate_argv(rank0.argv, load_flagset(python=profile.launch.python or sys.executable))
    record_dir = (run_dir / "multinode" / log.stem).resolve()  # the ranks may run in another directory
    task = wrapper_argv(sys.executable, str(record_dir), rank_template(rank0.argv))
    argv = ranks_srun_argv(alloc.job_id, where, task, cpus_per_task=cpus_per_task(environ, where.tasks_per_node))
    proc = start(argv, log_path=log, env_diff=rank0.env_diff)
    try:
        records = _wait_records(proc, record_dir, profile.launch.nnodes, profile.launch.startup_timeout_s)
        step = check_records(records, profile.launch.nnodes, alloc.job_id)
    except BaseException:
        stop_owned(proc)
        raise
    svc = MultiNodeService(alloc.job_id, step, where, record_dir, records, addr, argv, owners, runner=runner)
    cmd = LaunchCommand(tuple(argv), dict(rank0.env_diff), rank0.port, needs_numactl=rank0.needs_numactl,
                        node_rank=None, nnodes=profile.launch.nnodes)
    return Launched(proc, svc, cmd)
