"""Pure Slurm command building for multi-node services (docs/multinode.md).

A service profile with ``nnodes > 1`` is started inside a Slurm allocation with **one** ``srun`` step:
one task per node (``--ntasks-per-node=1``), each task runs the rank wrapper
(``harness.service.launch.slurm_rank``), which takes its node rank from ``SLURM_PROCID`` (the node index when
there is one task per node), fills it into the rank's argv, writes a rank record (JSON) into the shared
workspace and ``exec``s the engine (so the recorded PID is the engine's). Per-node probes (GPU owners,
"is this rank gone") run as ``srun --nodes=1 --ntasks=1 -w NODE --overlap``; the step is stopped with
``scancel JOBID.STEPID``. Nothing here runs a process; ``harness.service.launch.multinode`` does.

``DSV4H_SLURM_TASKS_PER_NODE`` (test only) places several ranks on one node, so a one-host cluster
can run a two-rank service; real services leave it unset (one rank per node).
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

from pydantic import Field

from harness.errors import ServiceError, SpecError
from harness.formats import Strict

RANK_PLACEHOLDER = "{node_rank}"
TASKS_PER_NODE_ENV = "DSV4H_SLURM_TASKS_PER_NODE"
RANK_WRAPPER_MODULE = "harness.service.launch.slurm_rank"


@dataclass(frozen=True)
class Placement:
    """Where the ranks of one service run: ``nodes`` (allocation order, rank r on node r //
    tasks_per_node), ``nnodes`` ranks in all."""

    nodes: tuple[str, ...]
    nnodes: int
    tasks_per_node: int = 1

    def node_of(self, rank: int) -> str:
        """The node rank ``rank`` runs on."""
        return self.nodes[rank // self.tasks_per_node]


class RankRecord(Strict):
    """What one rank reports about itself (``rank-R.json`` in the record directory), written by the
    rank wrapper just before it ``exec``s the engine."""

    rank: int = Field(ge=0)
    nnodes: int = Field(ge=1)
    job_id: str
    step_id: str
    node: str
    pid: int = Field(ge=1)
    create_time: float
    argv: list[str]


def tasks_per_node(env: Mapping[str, str]) -> int:
    """The test-only override of ranks per node (default 1); ``SpecError`` for a bad value."""
    raw = env.get(TASKS_PER_NODE_ENV, "1").strip()
    if not raw.isdigit() or int(raw) < 1:
        raise SpecError(f"{TASKS_PER_NODE_ENV}={raw!r} is not a positive integer",
                        hint=f"unset {TASKS_PER_NODE_ENV} (it is a test-only override; one rank per node)")
    return int(raw)


def placement(nnodes: int, allocation: Sequence[str], per_node: int = 1) -> Placement:
    """The nodes of an allocation ``nnodes`` ranks use, ``per_node`` to a node (``ServiceError`` when the
    allocation is too small, ``SpecError`` when the ranks do not divide evenly)."""
    if nnodes % per_node:
        raise SpecError(f"nnodes {nnodes} is not a multiple of {TASKS_PER_NODE_ENV}={per_node}",
                        hint="use a tasks-per-node that divides nnodes (or unset it)")
    need = nnodes // per_node
    if len(allocation) < need:
        raise ServiceError(f"the service spans {need} node(s) but the Slurm allocation has {len(allocation)} "
                           f"({', '.join(allocation) or 'none'})", hint=f"allocate {need} nodes (salloc -N {need})")
    return Placement(tuple(allocation[:need]), nnodes, per_node)


def parse_hostnames(text: str) -> list[str]:
    """``scontrol show hostnames`` output -> node names in order."""
    return [line.strip() for line in text.splitlines() if line.strip()]


def hostnames_argv(nodelist: str) -> list[str]:
    """Expand a Slurm node list (``SLURM_JOB_NODELIST``)."""
    return ["scontrol", "show", "hostnames", nodelist]


def rank_template(argv: Sequence[str]) -> list[str]:
    """``argv`` of node rank 0 with the value after ``--node-rank`` replaced by ``{node_rank}`` (which the
    rank wrapper fills in from ``SLURM_PROCID``); ``ServiceError`` when the argv has no ``--node-rank``."""
    out = list(argv)
    for i, arg in enumerate(out[:-1]):
        if arg == "--node-rank":
            out[i + 1] = RANK_PLACEHOLDER
            return out
    raise ServiceError("a multi-node argv has no --node-rank", hint="build it with nnodes > 1")


def fill_rank(template: Sequence[str], rank: int) -> list[str]:
    """The argv of node rank ``rank`` (every ``{node_rank}`` replaced)."""
    return [a.replace(RANK_PLACEHOLDER, str(rank)) for a in template]


def wrapper_argv(python: str, record_dir: str, template: Sequence[str]) -> list[str]:
    """What every task of the ranks' step runs: the rank wrapper, then the rank template."""
    return [python, "-m", RANK_WRAPPER_MODULE, "--record-dir", record_dir, "--", *template]


def ranks_srun_argv(job_id: str, where: Placement, task: Sequence[str], *,
                    cpus_per_task: int | None = None) -> list[str]:
    """The one ``srun`` that starts every rank: one step of the allocation ``job_id``, ``tasks_per_node``
    tasks on each node of ``where`` (1 but in tests), output lines labelled with the task (= rank), the
    whole step killed when one task fails. ``cpus_per_task``: the node's allocated CPUs shared by its
    ranks (an engine rank needs many CPUs, not Slurm's default of one per task)."""
    cpus = [f"--cpus-per-task={cpus_per_task}"] if cpus_per_task else []
    return ["srun", f"--jobid={job_id}", f"--nodes={len(where.nodes)}", f"--ntasks={where.nnodes}",
            f"--ntasks-per-node={where.tasks_per_node}", *cpus, f"--nodelist={','.join(where.nodes)}", "--overlap",
            "--kill-on-bad-exit=1", "--label", "--unbuffered", *task]


def cpus_per_task(env: Mapping[str, str], per_node: int) -> int | None:
    """The CPUs of a node split over its ranks: ``SLURM_CPUS_ON_NODE`` (batch jobs), else the fewest any
    node has in ``SLURM_JOB_CPUS_PER_NODE`` (``salloc``; e.g. ``64(x2),32`` -> 32). None when unknown."""
    raw = env.get("SLURM_CPUS_ON_NODE", "").strip()
    counts = [int(raw)] if raw.isdigit() else [
        int(n) for n in re.findall(r"(\d+)(?:\(x\d+\))?", env.get("SLURM_JOB_CPUS_PER_NODE", ""))]
    return max(1, min(counts) // per_node) if counts and min(counts) > 0 else None


def node_argv(job_id: str, node: str, argv: Sequence[str]) -> list[str]:
    """``argv`` run once on ``node`` inside the allocation (a probe: the GPU tool, a process check)."""
    return ["srun", f"--jobid={job_id}", "--nodes=1", "--ntasks=1", "-w", node, "--overlap", *argv]


def scancel_argv(job_id: str, step_id: str) -> list[str]:
    """Stop one step of the allocation (every rank, on every node)."""
    return ["scancel", f"{job_id}.{step_id}"]


def dist_init_addr(declared: str | None, first_node: str, port: int) -> str:
    """The rendezvous address: the profile's when it names one, else ``FIRST_NODE:PORT``."""
    return declared if declared else f"{first_node}:{port}"


def check_records(records: Sequence[RankRecord], nnodes: int, job_id: str) -> str:
    """The step id every rank reports (``ServiceError`` when ranks are missing, doubled, or from
    another job or step)."""
    ranks = sorted(r.rank for r in records)
    if ranks != list(range(nnodes)):
        raise ServiceError(f"rank records {ranks} are not ranks 0..{nnodes - 1}",
                           hint="every task must run one rank; check SLURM_PROCID and --ntasks")
    jobs = {r.job_id for r in records}
    steps = {r.step_id for r in records}
    if jobs != {job_id} or len(steps) != 1:
        raise ServiceError(f"rank records name job(s) {sorted(jobs)} step(s) {sorted(steps)}, not one step "
                           f"of job {job_id}", hint="clear the record directory and start again")
    return steps.pop()
