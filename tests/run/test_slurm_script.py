"""Slurm batch scripts and Slurm's answers (harness.run.slurm_script), known answers with literal text."""

from __future__ import annotations

import contextlib
from pathlib import Path

import pytest
from hypothesis import given
from hypothesis import strategies as st

from harness.errors import SlurmError
from harness.inputs.spec import SlurmSpec
from harness.run.slurm_script import (
    JobState,
    batch_script,
    job_workspace,
    parse_job_id,
    parse_sacct,
    parse_scontrol,
    parse_squeue,
    sacct_argv,
    sbatch_argv,
    scontrol_state,
    squeue_argv,
)

FULL = SlurmSpec(partition="gpu", nodes=2, gpus_per_node=8, time_limit="01:30:00", account="perf", cpus_per_task=16,
                 extra_sbatch=["--qos=high", "--exclusive"], workspace_root="/scratch/dsv4h")

FULL_SCRIPT = """#!/bin/bash
# dsv4h batch script, format 1: written by 'dsv4h campaign submit' for campaign tp8.
# It runs the campaign in the job's own workspace, then brings its archives into the workspace and
# its ledgers (dsv4h campaign job-end). scancel finalizes a partial archive, as Ctrl-C does.
#SBATCH --job-name=dsv4h-tp8
#SBATCH --output=/shared/ws/jobs/%j.out
#SBATCH --signal=B:USR1@60
#SBATCH --nodes=2
#SBATCH --partition=gpu
#SBATCH --gpus-per-node=8
#SBATCH --time=01:30:00
#SBATCH --account=perf
#SBATCH --cpus-per-task=16
#SBATCH --qos=high
#SBATCH --exclusive
set -u
export DSV4H_SLURM_SCRIPT="$0"
export PYTHONPATH=/opt/dsv4h
cd /shared || exit 1
job_ws=/scratch/dsv4h/dsv4h-job-"$SLURM_JOB_ID"
# job control on: a background dsv4h keeps SIGINT (else ignored), its Ctrl-C path for SIGTERM.
set -m
/opt/venv/bin/python -m harness.cli campaign run /shared/specs/tp8.yaml -w "$job_ws" &
run=$!
# scancel signals every process of the job: dsv4h stops by itself; the shell keeps waiting.
trap ':' TERM INT
# USR1 (--signal, before the time limit) reaches the shell alone: dsv4h is told once.
trap 'kill -TERM "$run" 2>/dev/null' USR1
while :; do
    wait "$run"; status=$?
    kill -0 "$run" 2>/dev/null || break
done
/opt/venv/bin/python -m harness.cli campaign job-end "$SLURM_JOB_ID" -w /shared/ws --job-workspace "$job_ws" \
--run-status "$status"
exit "$status"
""".replace("\\\n", "")

PY = ["/opt/venv/bin/python", "-m", "harness.cli"]


def test_full_section_script() -> None:
    text = batch_script(FULL, name="tp8", spec_path=Path("/shared/specs/tp8.yaml"), workspace=Path("/shared/ws"),
                        dsv4h=PY, env={"PYTHONPATH": "/opt/dsv4h"}, cwd=Path("/shared"))
    assert text == FULL_SCRIPT
    assert job_workspace(FULL, Path("/shared/ws"), "42") == Path("/scratch/dsv4h/dsv4h-job-42")


def test_defaults_resume_and_quoting() -> None:
    text = batch_script(SlurmSpec(stop_grace_s=30, job_name="nightly"), name="x",
                        spec_path=Path("/home/a b/spec.yaml"), workspace=Path("/shared/ws"), dsv4h=["dsv4h"],
                        resume=Path("/shared/ws/archives/0123456789abcdef"))
    lines = text.splitlines()
    assert [ln for ln in lines if ln.startswith("#SBATCH")] == [
        "#SBATCH --job-name=nightly", "#SBATCH --output=/shared/ws/jobs/%j.out", "#SBATCH --signal=B:USR1@30",
        "#SBATCH --nodes=1"]
    assert "dsv4h campaign run '/home/a b/spec.yaml' -w \"$job_ws\" --resume /shared/ws/archives/0123456789abcdef &" \
        in lines
    assert 'job_ws=/shared/ws/jobs/"$SLURM_JOB_ID"' in lines
    assert not any(ln.startswith(("cd ", "export PYTHONPATH")) for ln in lines)
    assert job_workspace(SlurmSpec(), Path("/shared/ws"), "7") == Path("/shared/ws/jobs/7")


@pytest.mark.parametrize("ws", ["relative/ws", "/has space/ws", "/pct%j/ws", "/q'uote", "/d$ollar"])
def test_workspace_sbatch_cannot_carry_refused(ws: str) -> None:
    with pytest.raises(SlurmError, match="cannot be a Slurm job's"):
        batch_script(SlurmSpec(), name="x", spec_path=Path("/s.yaml"), workspace=Path(ws), dsv4h=["dsv4h"])


def test_commands() -> None:
    assert sbatch_argv(Path("/ws/jobs/.submit-1.sh")) == ["sbatch", "--parsable", "/ws/jobs/.submit-1.sh"]
    assert squeue_argv() == ["squeue", "-h", "--states=all", "-o", "%i|%T|%R"]
    assert sacct_argv(["4", "5"]) == ["sacct", "-n", "-P", "-X", "-j", "4,5", "-o", "JobID,State,ExitCode"]


def test_parse_job_id() -> None:
    assert parse_job_id("12\n") == "12"
    assert parse_job_id("12;dsv4h-ci\n") == "12"
    assert parse_job_id("warning: something\n13\n") == "13"
    for bad in ("", "Submitted batch job 12", "12 13", "-1"):
        with pytest.raises(SlurmError, match="not a job id"):
            parse_job_id(bad)


def test_parse_squeue_and_sacct() -> None:
    out = "4|RUNNING|vm\n5|PENDING|(Resources)\n6|COMPLETED|vm\ngarbage line\n|X|y\n"
    assert parse_squeue(out) == {"4": JobState("4", "RUNNING", "squeue", reason="vm"),
                                 "5": JobState("5", "PENDING", "squeue", reason="(Resources)"),
                                 "6": JobState("6", "COMPLETED", "squeue", reason="vm")}
    assert parse_sacct("4|CANCELLED by 0|0:15\n5|COMPLETED|0:0\n") == {
        "4": JobState("4", "CANCELLED", "sacct", exit_code="0:15"),
        "5": JobState("5", "COMPLETED", "sacct", exit_code="0:0")}


SCONTROL = ("JobId=5 JobName=dsv4h-slurm-tiny UserId=root(0) GroupId=root(0) Priority=1 JobState=CANCELLED "
            "Reason=None Dependency=(null) ExitCode=0:15 RunTime=00:00:09 Command=/tmp/a b/5.sh WorkDir=/tmp\n")


def test_parse_scontrol() -> None:
    f = parse_scontrol(SCONTROL)
    assert (f["JobId"], f["JobState"], f["ExitCode"], f["Command"]) == ("5", "CANCELLED", "0:15", "/tmp/a")
    assert scontrol_state("5", SCONTROL) == JobState("5", "CANCELLED", "scontrol", exit_code="0:15", reason="None")
    assert scontrol_state("6", SCONTROL) is None
    assert scontrol_state("5", "slurm_load_jobs error: Invalid job id specified\n") is None


@given(st.text(max_size=300))
def test_parsers_never_raise_on_any_text(text: str) -> None:
    for state in (*parse_squeue(text).values(), *parse_sacct(text).values()):
        assert state.state and state.job_id.replace("_", "").isdigit()
    parse_scontrol(text)
    with contextlib.suppress(SlurmError):
        assert parse_job_id(text).replace("_", "").isdigit()
