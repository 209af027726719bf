"""A spec's ``slurm:`` section (pure): how ``dsv4h campaign submit`` asks Slurm for an allocation.

Every field becomes one ``#SBATCH`` line of the batch script (``harness.run.slurm_script``); the
section changes nothing about how the campaign itself runs (``dsv4h campaign run`` ignores it). Values
are checked at load so no script carries a newline, a shell word or a time Slurm would refuse:
``time_limit`` takes Slurm's own forms (``MM``, ``MM:SS``, ``HH:MM:SS``, ``D-HH``, ``D-HH:MM``,
``D-HH:MM:SS``), ``extra_sbatch`` takes options (``--qos=high``), one per entry, without ``#SBATCH``,
none of them one dsv4h writes itself under any spelling sbatch accepts (``--out=`` is ``--output=``) and
``--export`` only without assignments (``harness.inputs.spec.sbatch_options``).
``workspace_root`` is a directory on the allocation (node-local scratch, say): the job's own workspace
is ``<workspace_root>/dsv4h-job-<jobid>``; unset, it is ``<workspace>/jobs/<jobid>`` of the submitting
workspace (a shared file system).
"""

from __future__ import annotations

import re
from typing import Annotated

from pydantic import Field, field_validator

from harness.formats import Strict
from harness.inputs.spec.sbatch_options import option_problem

MAX_NODES = 4096
MAX_GPUS_PER_NODE = 64
MAX_CPUS_PER_TASK = 4096
MAX_EXTRA_LINES = 64
# Slurm's --time forms (sbatch(1)): minutes, minutes:seconds, hours:minutes:seconds, days-hours,
# days-hours:minutes, days-hours:minutes:seconds.
TIME_LIMIT_RE = re.compile(r"\d{1,6}(:\d{1,2}){0,2}|\d{1,4}-\d{1,2}(:\d{1,2}){0,2}")
_WORD = r"^[A-Za-z0-9][A-Za-z0-9._,:+=@%-]{0,255}$"  # one shell word that needs no quoting
_OPTION = re.compile(r"--?[A-Za-z][A-Za-z0-9-]*"  # one option, its value without quotes, spaces or $
                     r"(=[A-Za-z0-9._,:+=@%/()\[\]-]{1,1024})?( [A-Za-z0-9._,:+=@%/-]{1,1024})?")


class SlurmSpec(Strict):
    """The allocation of one campaign job (module docstring); unset fields are left to the cluster's
    defaults (no ``#SBATCH`` line)."""

    partition: str | None = Field(None, pattern=_WORD, description="partition (sbatch --partition)")
    nodes: int = Field(1, ge=1, le=MAX_NODES, description="nodes, sbatch --nodes (count)")
    gpus_per_node: int | None = Field(None, ge=0, le=MAX_GPUS_PER_NODE,
                                      description="GPUs per node, sbatch --gpus-per-node; unset: none asked (count)")
    time_limit: str | None = Field(None, max_length=32,
                                   description="wall-time limit in Slurm's form: MM, HH:MM:SS, D-HH:MM:SS "
                                   "(sbatch --time)")
    account: str | None = Field(None, pattern=_WORD, description="account charged (sbatch --account)")
    cpus_per_task: int | None = Field(None, ge=1, le=MAX_CPUS_PER_TASK,
                                      description="CPUs per task, sbatch --cpus-per-task (count)")
    job_name: str | None = Field(None, pattern=_WORD, description="job name (default: dsv4h-<campaign name>)")
    stop_grace_s: int = Field(60, ge=0, le=3600,
                              description="seconds before the time limit at which the run is told to stop "
                              "with sbatch --signal=B:USR1@N; the run then finalizes a partial archive (seconds)")
    extra_sbatch: list[Annotated[str, Field(max_length=2048)]] = Field(
        default_factory=list, max_length=MAX_EXTRA_LINES,
        description="further sbatch options, one per entry, e.g. --qos=high (written as #SBATCH lines)")
    workspace_root: str | None = Field(None, max_length=4096,
                                       description="absolute directory on the allocation holding the job's own "
                                       "workspace (default: <workspace>/jobs/<jobid>)")

    @field_validator("time_limit")
    @classmethod
    def _time(cls, value: str | None) -> str | None:
        if value is not None and not TIME_LIMIT_RE.fullmatch(value):
            raise ValueError(f"time_limit {value!r} is not a Slurm time: write MM, MM:SS, HH:MM:SS, D-HH, D-HH:MM "
                             "or D-HH:MM:SS (e.g. '01:30:00')")
        return value

    @field_validator("extra_sbatch")
    @classmethod
    def _extra(cls, value: list[str]) -> list[str]:
        for line in value:
            if line.startswith("#"):
                raise ValueError(f"extra_sbatch entry {line!r}: give the option alone (e.g. --qos=high), "
                                 "dsv4h writes the '#SBATCH' itself")
            if not _OPTION.fullmatch(line):
                raise ValueError(f"extra_sbatch entry {line!r} is not one sbatch option: write --name=value "
                                 "(letters, digits and . _ , : + = @ % / - in the value; no quotes, spaces or "
                                 "newlines)")
            problem = option_problem(line)
            if problem:
                raise ValueError(f"extra_sbatch entry {line!r}: {problem}; remove it")
        return value

    @field_validator("workspace_root")
    @classmethod
    def _root(cls, value: str | None) -> str | None:
        if value is not None and (not value.startswith("/") or "\n" in value or "\x00" in value):
            raise ValueError(f"workspace_root {value!r} must be an absolute path on the allocation "
                             "(e.g. /scratch/dsv4h)")
        return value
