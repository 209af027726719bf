"""``dsv4h campaign submit|jobs|job-end``: campaigns as Slurm jobs (docs/slurm.md), mounted under ``campaign``."""

from __future__ import annotations

import os
import sys
from pathlib import Path
from typing import Annotated, Any

import typer

from harness.cli.common import WorkspaceOpt, console, esc, existing_workspace, resolve_workspace
from harness.cli.listing import Col, JsonOpt, emit, wall_second


def submit(
    spec: Annotated[Path, typer.Argument(help="campaign YAML file with a slurm: section")],
    workspace: WorkspaceOpt = Path(),
    resume: Annotated[str | None, typer.Option("--resume", help="an archive (path, or id in this workspace) "
                                               "the job continues, as 'campaign run --resume' does")] = None,
    show: Annotated[bool, typer.Option("--print", help="print the batch script; submit nothing")] = False,
) -> None:
    """Submit a campaign as one Slurm job: write its batch script from the spec's slurm: section, keep it as
    WORKSPACE/jobs/JOBID.sh, submit it with 'sbatch --parsable' and record the job in WORKSPACE/jobs/JOBID.json.
    The job runs 'dsv4h campaign run SPEC' in its own workspace, then brings its archive into WORKSPACE and its
    ledgers. 'scancel JOBID' leaves a partial archive, as Ctrl-C does. Follow it with 'dsv4h campaign jobs'.

    Example: dsv4h campaign submit campaigns/slurm-demo.yaml -w /shared/ws
    """
    from harness.errors import SpecError
    from harness.inputs.spec import load_spec
    from harness.run.slurm import submit as submit_job
    from harness.run.slurm_script import batch_script

    ws = resolve_workspace(workspace).absolute()
    loaded = load_spec(spec)
    target = None
    if resume is not None:
        from harness.store.archive import find_archive

        target = find_archive(resume, ws).resolve()
    dsv4h = [sys.executable, "-m", "harness.cli"]
    env = {"PYTHONPATH": os.environ["PYTHONPATH"]} if os.environ.get("PYTHONPATH") else {}
    if show:
        if loaded.spec.slurm is None:
            raise SpecError(f"{spec}: the spec has no 'slurm:' section", hint="see docs/slurm.md")
        typer.echo(batch_script(loaded.spec.slurm, name=loaded.spec.name, spec_path=spec.resolve(), workspace=ws,
                                dsv4h=dsv4h, env=env, cwd=Path.cwd(), resume=target), nl=False)
        return
    rec = submit_job(loaded, ws, dsv4h=dsv4h, env=env, cwd=Path.cwd(), resume=target)
    jobs_dir = ws / "jobs"
    console.print(f"submitted job {rec.job_id} ({esc(rec.campaign)}): script {esc(jobs_dir / (rec.job_id + '.sh'))}, "
                  f"log {esc(jobs_dir / (rec.job_id + '.out'))}, job workspace {esc(rec.job_workspace)}")
    console.print(f"follow it with: dsv4h campaign jobs -w {esc(ws)}")


_COLS = (Col("job_id", "job", ident=True), Col("campaign", "campaign"), Col("state", "state"),
         Col("submitted", "submitted (UTC)"), Col("archive_id", "archive", ident=True),
         Col("archive_status", "status"), Col("ledger", "ledgers"))


def jobs(workspace: WorkspaceOpt = Path(), json_out: JsonOpt = False) -> None:
    """List the Slurm jobs submitted from a workspace: each job's state (squeue, then sacct, then
    'scontrol show job', then the job's own end record), its archive once it exists and whether that
    archive is in the workspace's ledgers. --json prints every field.

    Example: dsv4h campaign jobs -w /shared/ws --json
    """
    from harness.run.slurm import job_archives, job_states, read_end, read_records
    from harness.store.ledger import ingested

    ws = existing_workspace(workspace)
    records = read_records(ws)
    states = job_states(ws, [r.job_id for r in records])
    rows: list[dict[str, Any]] = []
    for r in records:
        st = states[r.job_id]
        end = read_end(ws, r.job_id)
        archives = [(a.archive_id, a.status) for a in end.archives] if end is not None else job_archives(r)
        last = archives[-1] if archives else (None, None)
        rows.append({**r.model_dump(mode="json"), "state": st.state, "state_source": st.source,
                     "exit_code": st.exit_code, "reason": st.reason, "submitted": wall_second(r.submitted_wall),
                     "archives": [{"archive_id": a, "status": s, "in_ledgers": ingested(ws, a)} for a, s in archives],
                     "archive_id": last[0], "archive_status": last[1],
                     "ledger": None if last[0] is None else ("yes" if ingested(ws, last[0]) else "not yet"),
                     "run_status": None if end is None else end.run_status,
                     "partials": [] if end is None else end.partials})
    if json_out:
        emit(console, rows, _COLS, json_out=True)
        return
    shown = [{**row, "state": f"{row['state']} ({row['state_source']})"} for row in rows]
    emit(console, shown, _COLS, title=f"Slurm jobs of {esc(ws)}")
    for row in rows:
        if row["partials"]:
            console.print(f"job {row['job_id']} left unfinalized partial archives: dsv4h archive recover -w "
                          f"{esc(row['job_workspace'])}")


def job_end(
    job: Annotated[str, typer.Argument(help="Slurm job id")],
    workspace: WorkspaceOpt = Path(),
    job_workspace: Annotated[Path | None, typer.Option(
        "--job-workspace", help="the job's own workspace (default: the one its record names)")] = None,
    run_status: Annotated[int, typer.Option("--run-status", help="exit status of the job's campaign run")] = 0,
) -> None:
    """The last step of a job's batch script (run it again by hand after a job was killed before it):
    copy every finalized archive of the job's workspace into WORKSPACE, check it, append it to the
    ledgers and record the job's end in WORKSPACE/jobs/JOBID.end.json. Idempotent.

    Example: dsv4h campaign job-end 42 -w /shared/ws
    """
    from harness.run.slurm import end_job, read_record

    ws = existing_workspace(workspace)
    job_ws = job_workspace if job_workspace is not None else Path(read_record(ws, job).job_workspace)
    end = end_job(ws, job, job_ws, run_status)
    for a in end.archives:
        console.print(f"job {job}: archive {a.archive_id} ({esc(a.status)}): {esc(a.ledger)}")
    if not end.archives:
        console.print(f"job {job}: no finalized archive in {esc(job_ws)}")
    for p in end.partials:
        console.print(f"job {job}: {esc(p)} is not finalized: dsv4h archive recover -w {esc(job_ws)}")
