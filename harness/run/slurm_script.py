"""Slurm batch scripts and Slurm's answers (pure): what ``dsv4h campaign submit`` hands to ``sbatch``
and how ``squeue``, ``sacct`` and ``scontrol show job`` are read back (docs/slurm.md).

:func:`batch_script` writes one campaign job: the ``#SBATCH`` lines of the spec's ``slurm:`` section
(:class:`harness.inputs.spec.SlurmSpec`) plus the job's log (``<workspace>/jobs/%j.out``) and
``--signal=B:USR1@<stop_grace_s>``; then the body runs ``dsv4h campaign run SPEC -w <job workspace>``
in the background and waits for it. Stopping: ``scancel`` (and the time limit) send SIGTERM to every
process of the job, dsv4h included, which finalizes a ``partial`` archive as on Ctrl-C; the shell
traps SIGTERM only to keep waiting (Slurm kills what is left KillWait seconds later). ``USR1``, sent to
the shell alone before the time limit, is turned into one SIGTERM to dsv4h. Whatever the end, the
script then runs ``dsv4h campaign job-end``, which brings the job's archives into the workspace and
its ledgers, and exits with the run's status. ``$0`` (the copy Slurm runs) is exported as
``DSV4H_SLURM_SCRIPT`` so the run keeps the script in its archive (``run.session.open_writer``).

Batch script format history (``BATCH_FORMAT_VERSION``, the script's first comment line):
  1 - first version (2026-12-02).
"""

from __future__ import annotations

import re
import shlex
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path

from harness.errors import SlurmError
from harness.inputs.spec.slurm import SlurmSpec

__all__ = ["batch_script"]

BATCH_FORMAT_VERSION = 1
SCRIPT_ENV = "DSV4H_SLURM_SCRIPT"
JOB_DIR_PREFIX = "dsv4h-job-"
_JOB_ID_RE = re.compile(r"\d{1,12}(_\d{1,9})?")
_UNSAFE_IN_SBATCH = re.compile(r"[\s%\"'\\$`]")


def sbatch_lines(slurm: SlurmSpec, *, name: str, log: Path) -> list[str]:
    """The ``#SBATCH`` lines of one campaign job, in a fixed order (name, log, signal, then the
    section's fields, then ``extra_sbatch`` as written)."""
    opts = [f"--job-name={slurm.job_name or 'dsv4h-' + name}", f"--output={log}",
            f"--signal=B:USR1@{slurm.stop_grace_s}", f"--nodes={slurm.nodes}"]
    if slurm.partition is not None:
        opts.append(f"--partition={slurm.partition}")
    if slurm.gpus_per_node is not None:
        opts.append(f"--gpus-per-node={slurm.gpus_per_node}")
    if slurm.time_limit is not None:
        opts.append(f"--time={slurm.time_limit}")
    if slurm.account is not None:
        opts.append(f"--account={slurm.account}")
    if slurm.cpus_per_task is not None:
        opts.append(f"--cpus-per-task={slurm.cpus_per_task}")
    opts.extend(slurm.extra_sbatch)
    return [f"#SBATCH {o}" for o in opts]


def job_workspace_expr(slurm: SlurmSpec, workspace: Path) -> str:
    """The shell expression of the job's own workspace (``$SLURM_JOB_ID`` expanded in the job)."""
    if slurm.workspace_root is not None:
        return shlex.quote(str(Path(slurm.workspace_root) / JOB_DIR_PREFIX)) + '"$SLURM_JOB_ID"'
    return shlex.quote(str(workspace / "jobs")) + '/"$SLURM_JOB_ID"'


def job_workspace(slurm: SlurmSpec, workspace: Path, job_id: str) -> Path:
    """The job's own workspace once its id is known (what :func:`job_workspace_expr` expands to)."""
    if slurm.workspace_root is not None:
        return Path(slurm.workspace_root) / f"{JOB_DIR_PREFIX}{job_id}"
    return workspace / "jobs" / job_id


def check_workspace_path(workspace: Path) -> None:
    """Refuse (``SlurmError``) a workspace Slurm's ``#SBATCH --output`` cannot carry: relative, or with
    white space, quotes, ``%`` (Slurm's own patterns), ``$`` or backslashes."""
    if not workspace.is_absolute() or _UNSAFE_IN_SBATCH.search(str(workspace)):
        raise SlurmError(f"workspace {workspace} cannot be a Slurm job's: it must be an absolute path without "
                         "spaces, quotes, '%', '$' or backslashes (it appears in '#SBATCH --output=')",
                         hint="choose another workspace with -w, e.g. -w /shared/dsv4h-ws")


def batch_script(slurm: SlurmSpec, *, name: str, spec_path: Path, workspace: Path, dsv4h: Sequence[str],
                 env: Mapping[str, str] = {}, cwd: Path | None = None, resume: Path | None = None) -> str:
    """The batch script of one campaign job (module docstring). ``spec_path`` and ``workspace`` are
    absolute; ``dsv4h`` is the command that runs dsv4h on the allocation (e.g. ``python -m harness.cli``);
    ``env`` is exported first (``PYTHONPATH``, say); ``cwd`` is where the run starts."""
    check_workspace_path(workspace)
    cmd = " ".join(shlex.quote(a) for a in dsv4h)
    run = f"{cmd} campaign run {shlex.quote(str(spec_path))} -w \"$job_ws\""
    if resume is not None:
        run += f" --resume {shlex.quote(str(resume))}"
    lines = [
        "#!/bin/bash",
        f"# dsv4h batch script, format {BATCH_FORMAT_VERSION}: written by 'dsv4h campaign submit' for campaign {name}.",
        "# It runs the campaign in the job's own workspace, then brings its archives into the workspace and",
        "# its ledgers (dsv4h campaign job-end). scancel finalizes a partial archive, as Ctrl-C does.",
        *sbatch_lines(slurm, name=name, log=workspace / "jobs" / "%j.out"),
        "set -u",
        f'export {SCRIPT_ENV}="$0"',
        *(f"export {k}={shlex.quote(v)}" for k, v in sorted(env.items())),
    ]
    if cwd is not None:
        lines.append(f"cd {shlex.quote(str(cwd))} || exit 1")
    lines += [
        f"job_ws={job_workspace_expr(slurm, workspace)}",
        "# job control on: a background dsv4h keeps SIGINT (else ignored), its Ctrl-C path for SIGTERM.",
        "set -m",
        f"{run} &",
        "run=$!",
        "# scancel signals every process of the job: dsv4h stops by itself; the shell keeps waiting.",
        "trap ':' TERM INT",
        "# USR1 (--signal, before the time limit) reaches the shell alone: dsv4h is told once.",
        "trap 'kill -TERM \"$run\" 2>/dev/null' USR1",
        "while :; do",
        '    wait "$run"; status=$?',
        '    kill -0 "$run" 2>/dev/null || break',
        "done",
        f"{cmd} campaign job-end \"$SLURM_JOB_ID\" -w {shlex.quote(str(workspace))} "
        '--job-workspace "$job_ws" --run-status "$status"',
        'exit "$status"',
    ]
    return "\n".join(lines) + "\n"


def sbatch_argv(script: Path) -> list[str]:
    """The command that submits ``script`` and prints only the job id."""
    return ["sbatch", "--parsable", str(script)]


def parse_job_id(stdout: str) -> str:
    """The job id ``sbatch --parsable`` printed (``12`` or ``12;cluster``); ``SlurmError`` otherwise."""
    text = stdout.strip().splitlines()[-1].strip() if stdout.strip() else ""
    job = text.split(";", 1)[0]
    if not _JOB_ID_RE.fullmatch(job):
        raise SlurmError(f"sbatch printed {stdout.strip()[:200]!r}, not a job id",
                         hint="run the sbatch line of the job's script by hand to see why")
    return job


def is_job_id(value: str) -> bool:
    """True when ``value`` has the form of a Slurm job id (``12``, ``12_3``)."""
    return bool(_JOB_ID_RE.fullmatch(value))


@dataclass(frozen=True)
class JobState:
    """What Slurm (or the job's own record) says of one job: ``state`` (Slurm's word: ``PENDING``,
    ``RUNNING``, ``COMPLETED``, ``CANCELLED``, ``FAILED``, ``TIMEOUT`` ... or ``UNKNOWN``),
    ``source`` (``squeue``, ``sacct``, ``scontrol`` or ``job record``), ``exit_code`` (``0:0``) and
    ``reason`` (why it is pending, or the node list)."""

    job_id: str
    state: str
    source: str
    exit_code: str | None = None
    reason: str | None = None


SQUEUE_FORMAT = "%i|%T|%R"
SACCT_FIELDS = "JobID,State,ExitCode"


def squeue_argv() -> list[str]:
    """Every job Slurm still holds (recent ends included), one ``id|state|reason`` line each."""
    return ["squeue", "-h", "--states=all", "-o", SQUEUE_FORMAT]


def parse_squeue(stdout: str) -> dict[str, JobState]:
    """``squeue -o '%i|%T|%R'`` lines by job id (lines of another form are skipped)."""
    out: dict[str, JobState] = {}
    for line in stdout.splitlines():
        parts = line.strip().split("|", 2)
        if len(parts) == 3 and is_job_id(parts[0]) and parts[1]:
            out[parts[0]] = JobState(parts[0], parts[1], "squeue", reason=parts[2] or None)
    return out


def sacct_argv(job_ids: Sequence[str]) -> list[str]:
    """The accounting lines of ``job_ids`` (allocations only, ``id|state|exit``)."""
    return ["sacct", "-n", "-P", "-X", "-j", ",".join(job_ids), "-o", SACCT_FIELDS]


def parse_sacct(stdout: str) -> dict[str, JobState]:
    """``sacct -P -o JobID,State,ExitCode`` lines by job id (``CANCELLED by 0`` -> ``CANCELLED``)."""
    out: dict[str, JobState] = {}
    for line in stdout.splitlines():
        parts = line.strip().split("|")
        if len(parts) == 3 and is_job_id(parts[0]) and parts[1]:
            out[parts[0]] = JobState(parts[0], parts[1].split()[0], "sacct", exit_code=parts[2] or None)
    return out


def scontrol_argv(job_id: str) -> list[str]:
    """One job's record on one line (kept MinJobAge seconds after it ends)."""
    return ["scontrol", "show", "job", "-o", job_id]


def parse_scontrol(stdout: str) -> dict[str, str]:
    """``scontrol show job -o`` as ``{key: value}`` (values without spaces; ``Command=`` and the like
    that may hold spaces are cut at the first one, which is all the state needs)."""
    fields: dict[str, str] = {}
    for token in stdout.split():
        key, sep, value = token.partition("=")
        if sep and key and key not in fields:
            fields[key] = value
    return fields


def scontrol_state(job_id: str, stdout: str) -> JobState | None:
    """The state ``scontrol show job -o`` gives for ``job_id`` (None when it names no such job)."""
    f = parse_scontrol(stdout)
    if f.get("JobId") != job_id or not f.get("JobState"):
        return None
    return JobState(job_id, f["JobState"], "scontrol", exit_code=f.get("ExitCode"), reason=f.get("Reason"))
