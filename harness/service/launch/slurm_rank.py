"""The rank wrapper every task of a multi-node service's ``srun`` step runs (edge module: a file, exec).

``python -m harness.service.launch.slurm_rank --record-dir DIR -- ARGV...``: the node rank is ``SLURM_PROCID``
(one task per node: the node index); ``{node_rank}`` in ARGV is replaced by it; ``DIR/rank-R.json``
(``harness.service.launch.slurm.RankRecord``: rank, job and step id, node, PID, birth time, argv) is written
atomically; then ARGV replaces this process (``exec``: same PID, same birth time), so the record names
the engine process itself.
"""

from __future__ import annotations

import os
import socket
import sys
from pathlib import Path

import psutil

from harness.formats import atomic_write, dump_json
from harness.service.launch.slurm import RankRecord, fill_rank


def main(args: list[str] | None = None) -> None:
    """Entry point (see the module docstring); exits 2 on a usage error."""
    argv = list(sys.argv[1:] if args is None else args)
    if len(argv) < 4 or argv[0] != "--record-dir" or argv[2] != "--":
        sys.stderr.write("usage: python -m harness.service.launch.slurm_rank --record-dir DIR -- ARGV...\n")
        raise SystemExit(2)
    record_dir, template = Path(argv[1]), argv[3:]
    env = os.environ
    rank = int(env.get("SLURM_PROCID", "0"))
    nnodes = int(env.get("SLURM_NTASKS", env.get("SLURM_NPROCS", "1")))
    rank_argv = fill_rank(template, rank)
    record = RankRecord(rank=rank, nnodes=nnodes, job_id=env.get("SLURM_JOB_ID", ""),
                        step_id=env.get("SLURM_STEP_ID", ""), node=env.get("SLURMD_NODENAME") or socket.gethostname(),
                        pid=os.getpid(), create_time=psutil.Process().create_time(), argv=rank_argv)
    record_dir.mkdir(parents=True, exist_ok=True)
    atomic_write(record_dir / f"rank-{rank}.json", dump_json(record.model_dump(mode="json")))
    sys.stdout.flush()
    os.execvp(rank_argv[0], rank_argv)


if __name__ == "__main__":
    main()
