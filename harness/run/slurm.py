"""Campaigns as Slurm jobs (edge: Slurm's command line, files): submit, follow, end (docs/slurm.md).

- :func:`submit`: write the batch script of a spec's ``slurm:`` section (``run.slurm_script``), keep it
  as ``<workspace>/jobs/<jobid>.sh``, submit it with ``sbatch --parsable`` and record the job in
  ``<workspace>/jobs/<jobid>.json`` (:class:`JobRecord`).
- :func:`end_job` (``dsv4h campaign job-end``, the script's last step, idempotent): every finalized
  archive of the job's own workspace is copied into the workspace, checked and ingested into its
  ledgers (``run.merge.merge_archive``: verified copy, evidence rules, the public ledger ingest; every
  append is a Delta transaction, so jobs that end at once all land, losing nothing); the job's
  end is recorded in ``<workspace>/jobs/<jobid>.end.json`` (:class:`JobEnd`).
- :func:`job_states`: each job's state from ``squeue``, then ``sacct``, then ``scontrol show job``
  (a finished job stays there MinJobAge seconds), then the job's own end record.

Slurm is reached only through ``runner`` (default :func:`run_cli`, ``subprocess.run``), so tests
inject its answers. Job record format history (``JOB_FORMAT_VERSION``, both records):
  1 - first version (2026-12-02).
"""

from __future__ import annotations

import os
import secrets
import subprocess
from collections.abc import Callable, Mapping, Sequence
from datetime import UTC, datetime
from pathlib import Path
from typing import Literal

from pydantic import Field

from harness.errors import DsvError, SlurmError, SpecError
from harness.formats import Strict, atomic_write, dump_json, parse_model, read_regular
from harness.hashing import sha256_bytes
from harness.inputs.spec import LoadedSpec
from harness.run.merge import merge_archive
from harness.run.slurm_script import (
    JobState,
    batch_script,
    is_job_id,
    job_workspace,
    parse_job_id,
    parse_sacct,
    parse_squeue,
    sacct_argv,
    sbatch_argv,
    scontrol_argv,
    scontrol_state,
    squeue_argv,
)
from harness.store.archive import iter_archives, iter_partials
from harness.store.ledger import ingested

__all__ = ["end_job", "job_archives", "job_states", "read_end", "read_record", "read_records", "submit"]

JOB_FORMAT_VERSION = 1
JOBS_DIR = "jobs"
CLI_TIMEOUT_S = 60.0

Runner = Callable[[Sequence[str]], "subprocess.CompletedProcess[str]"]


def run_cli(argv: Sequence[str]) -> subprocess.CompletedProcess[str]:
    """Run one Slurm command (bounded by ``CLI_TIMEOUT_S``); ``SlurmError`` when it is not installed
    or does not answer in time."""
    try:
        return subprocess.run(list(argv), capture_output=True, text=True, timeout=CLI_TIMEOUT_S, check=False)
    except FileNotFoundError:
        raise SlurmError(f"{argv[0]} is not installed here (Slurm's command line is needed)",
                         hint="run on a Slurm login node; a one-host test cluster: bash .ci/start_slurm.sh") from None
    except subprocess.TimeoutExpired:
        raise SlurmError(f"{argv[0]} did not answer within {CLI_TIMEOUT_S:.0f} s",
                         hint="check the controller: scontrol ping") from None


class JobRecord(Strict):
    """One submitted job (``<workspace>/jobs/<jobid>.json``, written once by ``submit``)."""

    format_version: Literal[1] = 1
    job_id: str = Field(pattern=r"^\d{1,12}(_\d{1,9})?$")
    campaign: str
    kind: str
    spec_path: str = Field(description="absolute path of the spec file")
    spec_sha256: str = Field(pattern=r"^[0-9a-f]{64}$")
    script_sha256: str = Field(pattern=r"^[0-9a-f]{64}$", description="of jobs/<jobid>.sh, the script submitted")
    submitted_wall: str = Field(description="ISO 8601 with offset")
    workspace: str = Field(description="the workspace the job ends into")
    job_workspace: str = Field(description="the job's own workspace on the allocation")
    resume: str | None = None


class EndedArchive(Strict):
    """One archive of a job's workspace and what its end did with it."""

    archive_id: str
    status: str
    ledger: str = Field(description="'appended', 'present' (already in the ledgers) or 'refused: <why>'")


class JobEnd(Strict):
    """How a job ended (``<workspace>/jobs/<jobid>.end.json``, rewritten by each ``job-end``)."""

    format_version: Literal[1] = 1
    job_id: str
    ended_wall: str
    run_status: int = Field(description="exit status of 'dsv4h campaign run' in the job (143: SIGTERM)")
    job_workspace: str
    archives: list[EndedArchive] = Field(default_factory=list)
    partials: list[str] = Field(default_factory=list,
                                description="partial directories left unfinalized (dsv4h archive recover -w JOB_WS)")


def jobs_dir(workspace: Path) -> Path:
    """``<workspace>/jobs``: scripts, records, logs and (by default) the jobs' own workspaces."""
    return workspace / JOBS_DIR


def _now() -> str:
    return datetime.now(UTC).isoformat()


def submit(loaded: LoadedSpec, workspace: Path, *, dsv4h: Sequence[str], env: Mapping[str, str] = {},
           cwd: Path | None = None, resume: Path | None = None, runner: Runner = run_cli,
           now: Callable[[], str] = _now) -> JobRecord:
    """Submit ``loaded`` (whose spec has a ``slurm:`` section) as one job ending into ``workspace``
    (module docstring); ``SpecError`` without the section, ``SlurmError`` when sbatch refuses."""
    spec = loaded.spec
    if spec.slurm is None or loaded.source is None or loaded.raw is None:
        raise SpecError(f"{loaded.source}: the spec has no 'slurm:' section; 'campaign submit' needs one",
                        hint="add e.g. 'slurm: {partition: debug, time_limit: \"01:00:00\"}' (docs/slurm.md)")
    ws = workspace.resolve()
    spec_path = loaded.source.resolve()
    text = batch_script(spec.slurm, name=spec.name, spec_path=spec_path, workspace=ws, dsv4h=dsv4h, env=env,
                        cwd=cwd, resume=resume)
    jobs = jobs_dir(ws)
    jobs.mkdir(parents=True, exist_ok=True)
    pending = jobs / f".submit-{secrets.token_hex(6)}.sh"
    atomic_write(pending, text.encode())
    try:
        done = runner(sbatch_argv(pending))
        if done.returncode != 0:
            raise SlurmError(f"sbatch refused the job: {(done.stderr or done.stdout).strip()[:600]}",
                             hint=f"the script is {pending}; check the spec's slurm: section (partition, "
                             "account, time_limit) against 'sinfo'")
        job_id = parse_job_id(done.stdout)
    except BaseException:
        pending.unlink(missing_ok=True)
        raise
    script = jobs / f"{job_id}.sh"
    os.replace(pending, script)
    record = JobRecord(job_id=job_id, campaign=spec.name, kind=spec.kind, spec_path=str(spec_path),
                       spec_sha256=sha256_bytes(loaded.raw), script_sha256=sha256_bytes(text.encode()),
                       submitted_wall=now(), workspace=str(ws),
                       job_workspace=str(job_workspace(spec.slurm, ws, job_id)),
                       resume=None if resume is None else str(resume))
    atomic_write(jobs / f"{job_id}.json", dump_json(record.model_dump(mode="json")))
    return record


def read_records(workspace: Path) -> list[JobRecord]:
    """Every job recorded in ``workspace``, by job id (``LedgerError``-free: a malformed record is a
    ``SpecError`` naming the file and field)."""
    jobs = jobs_dir(workspace)
    if not jobs.is_dir():
        return []
    out = []
    for p in jobs.glob("*.json"):
        if is_job_id(p.stem):
            out.append(parse_model(JobRecord, _json(p), str(p), what="invalid job record"))
    return sorted(out, key=lambda r: [int(x) for x in r.job_id.split("_")])


def read_record(workspace: Path, job_id: str) -> JobRecord:
    """The record of ``job_id`` (``SlurmError`` when this workspace submitted no such job)."""
    p = jobs_dir(workspace) / f"{job_id}.json"
    if not is_job_id(job_id) or not p.is_file():
        raise SlurmError(f"job {job_id} was not submitted from workspace {workspace}",
                         hint="list the jobs of a workspace with: dsv4h campaign jobs -w WORKSPACE")
    return parse_model(JobRecord, _json(p), str(p), what="invalid job record")


def read_end(workspace: Path, job_id: str) -> JobEnd | None:
    """The end record of ``job_id`` (None before the job has ended)."""
    p = jobs_dir(workspace) / f"{job_id}.end.json"
    if not p.is_file():
        return None
    return parse_model(JobEnd, _json(p), str(p), what="invalid job end record")


def _json(path: Path) -> object:
    import json

    try:
        return json.loads(read_regular(path, 1 << 20))
    except ValueError as exc:
        raise SpecError(f"{path}: not JSON ({exc})", hint="a job record is written by dsv4h; restore or remove it") \
            from None


def end_job(workspace: Path, job_id: str, job_ws: Path, run_status: int,
            now: Callable[[], str] = _now) -> JobEnd:
    """Bring every finalized archive of ``job_ws`` into ``workspace`` and its ledgers and record the
    job's end (module docstring). Idempotent: an archive already in the ledgers is ``present``; one that
    cannot be merged is recorded ``refused`` with the reason (the others still go in)."""
    ended: list[EndedArchive] = []
    same = job_ws.resolve() == workspace.resolve()
    for a in iter_archives(job_ws):
        if same or ingested(workspace, a.archive_id):
            ended.append(EndedArchive(archive_id=a.archive_id, status=a.status, ledger="present"))
            continue
        try:
            merge_archive(workspace, a.path)
        except DsvError as exc:
            ended.append(EndedArchive(archive_id=a.archive_id, status=a.status, ledger=f"refused: {exc.message}"[:600]))
            continue
        ended.append(EndedArchive(archive_id=a.archive_id, status=a.status, ledger="appended"))
    end = JobEnd(job_id=job_id, ended_wall=now(), run_status=run_status, job_workspace=str(job_ws),
                 archives=ended, partials=[p.path.name for p in iter_partials(job_ws)])
    jobs_dir(workspace).mkdir(parents=True, exist_ok=True)
    atomic_write(jobs_dir(workspace) / f"{job_id}.end.json", dump_json(end.model_dump(mode="json")))
    return end


def job_states(workspace: Path, job_ids: Sequence[str], runner: Runner = run_cli) -> dict[str, JobState]:
    """Each job's state (module docstring): ``squeue``, ``sacct``, ``scontrol show job``, then the job's
    end record (``COMPLETED`` for run status 0, else ``FAILED``), else ``UNKNOWN``."""
    want = list(job_ids)
    if not want:
        return {}
    q = runner(squeue_argv())
    if q.returncode != 0:
        raise SlurmError(f"squeue failed: {(q.stderr or q.stdout).strip()[:400]}",
                         hint="check the controller: scontrol ping")
    found = {k: v for k, v in parse_squeue(q.stdout).items() if k in want}
    missing = [j for j in want if j not in found]
    if missing:
        a = runner(sacct_argv(missing))
        if a.returncode == 0:  # "accounting storage is disabled" is an error exit: fall back
            found.update({k: v for k, v in parse_sacct(a.stdout).items() if k in missing})
    for j in [j for j in want if j not in found]:
        s = runner(scontrol_argv(j))
        state = scontrol_state(j, s.stdout) if s.returncode == 0 else None
        if state is not None:
            found[j] = state
            continue
        end = read_end(workspace, j)
        if end is not None:
            found[j] = JobState(j, "COMPLETED" if end.run_status == 0 else "FAILED", "job record",
                                exit_code=f"{end.run_status}:0")
        else:
            found[j] = JobState(j, "UNKNOWN", "none")
    return found


def job_archives(record: JobRecord) -> list[tuple[str, str]]:
    """(archive id, status) of every finalized archive in the job's own workspace, when this machine
    can read it (node-local scratch elsewhere: none)."""
    ws = Path(record.job_workspace)
    try:
        return [(a.archive_id, a.status) for a in iter_archives(ws)]
    except OSError:
        return []
