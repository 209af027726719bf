"""Submitting and following jobs (harness.run.slurm) with Slurm's answers injected: records, script kept, the
state fallbacks (squeue -> sacct -> scontrol -> the job's end record)."""

from __future__ import annotations

import json
import subprocess
from collections.abc import Sequence
from pathlib import Path

import pytest

from harness.errors import SlurmError, SpecError
from harness.hashing import sha256_bytes, sha256_file
from harness.inputs.spec import load_spec
from harness.run.slurm import end_job, job_states, read_end, read_record, read_records, submit
from harness.run.slurm_script import JobState

REPO = Path(__file__).resolve().parents[2]
SPEC = f"""name: tiny
claim_class: native-ar
service: {{backend: sim, sim: {{profile: fast}}}}
corpora: {{decode: {REPO / 'corpora' / 'sim-code-512'}}}
decode: {{tiers: [1], rounds: 1, min_resident_seconds: 0.1, max_new_tokens: 16}}
slurm: {{partition: debug, time_limit: "00:10:00"}}
"""


class FakeSlurm:
    """Answers keyed by the command's first word (a list of (rc, stdout, stderr) consumed in order)."""

    def __init__(self, answers: dict[str, list[tuple[int, str, str]]]) -> None:
        self.answers = answers
        self.calls: list[list[str]] = []

    def __call__(self, argv: Sequence[str]) -> subprocess.CompletedProcess[str]:
        self.calls.append(list(argv))
        rc, out, err = self.answers[argv[0]].pop(0)
        return subprocess.CompletedProcess(list(argv), rc, out, err)


def _spec(tmp_path: Path, text: str = SPEC) -> Path:
    p = tmp_path / "spec.yaml"
    p.write_text(text)
    return p


def test_submit_keeps_script_and_records_job(tmp_path: Path) -> None:
    ws = tmp_path / "ws"
    spec = _spec(tmp_path)
    fake = FakeSlurm({"sbatch": [(0, "42\n", "")]})
    rec = submit(load_spec(spec), ws, dsv4h=["dsv4h"], runner=fake, now=lambda: "2026-12-02T10:00:00+00:00")
    assert fake.calls[0][:2] == ["sbatch", "--parsable"]
    script = ws / "jobs" / "42.sh"
    assert rec.script_sha256 == sha256_file(script)
    assert rec.spec_sha256 == sha256_bytes(spec.read_bytes())
    assert "#SBATCH --partition=debug" in script.read_text()
    assert (rec.job_id, rec.campaign, rec.kind, rec.submitted_wall) == ("42", "tiny", "formal-matrix",
                                                                         "2026-12-02T10:00:00+00:00")
    assert rec.job_workspace == str((ws / "jobs" / "42").resolve())
    on_disk = json.loads((ws / "jobs" / "42.json").read_text())
    assert on_disk["format_version"] == 1 and on_disk["job_id"] == "42"
    assert read_records(ws) == [rec] and read_record(ws, "42") == rec
    assert [p.name for p in (ws / "jobs").iterdir() if p.name.startswith(".")] == []


def test_sbatch_refusal_leaves_nothing(tmp_path: Path) -> None:
    ws = tmp_path / "ws"
    fake = FakeSlurm({"sbatch": [(1, "", "sbatch: error: invalid partition specified: debug\n")]})
    with pytest.raises(SlurmError, match="invalid partition specified"):
        submit(load_spec(_spec(tmp_path)), ws, dsv4h=["dsv4h"], runner=fake)
    assert list((ws / "jobs").iterdir()) == []


def test_spec_without_section_refused(tmp_path: Path) -> None:
    spec = _spec(tmp_path, SPEC.split("slurm:", maxsplit=1)[0])
    with pytest.raises(SpecError, match="no 'slurm:' section"):
        submit(load_spec(spec), tmp_path / "ws", dsv4h=["dsv4h"], runner=FakeSlurm({}))


def test_unknown_job_refused(tmp_path: Path) -> None:
    with pytest.raises(SlurmError, match="job 9 was not submitted"):
        read_record(tmp_path, "9")


def test_state_fallbacks(tmp_path: Path) -> None:
    ws = tmp_path
    end_job(ws, "3", tmp_path / "nothing-here", 143, now=lambda: "2026-12-02T10:00:00+00:00")
    end_job(ws, "4", tmp_path / "nothing-here", 0)
    fake = FakeSlurm({
        "squeue": [(0, "1|RUNNING|vm\n99|PENDING|(Priority)\n", "")],
        "sacct": [(1, "", "Slurm accounting storage is disabled\n")],
        "scontrol": [(0, "JobId=2 JobState=COMPLETED Reason=None ExitCode=0:0\n", ""),
                     (1, "", "slurm_load_jobs error: Invalid job id specified\n"),
                     (1, "", "slurm_load_jobs error: Invalid job id specified\n"),
                     (1, "", "slurm_load_jobs error: Invalid job id specified\n")]})
    states = job_states(ws, ["1", "2", "3", "4", "5"], runner=fake)
    assert states == {"1": JobState("1", "RUNNING", "squeue", reason="vm"),
                      "2": JobState("2", "COMPLETED", "scontrol", exit_code="0:0", reason="None"),
                      "3": JobState("3", "FAILED", "job record", exit_code="143:0"),
                      "4": JobState("4", "COMPLETED", "job record", exit_code="0:0"),
                      "5": JobState("5", "UNKNOWN", "none")}
    assert fake.calls[1] == ["sacct", "-n", "-P", "-X", "-j", "2,3,4,5", "-o", "JobID,State,ExitCode"]
    end = read_end(ws, "3")
    assert end is not None and (end.run_status, end.archives, end.partials) == (143, [], [])


def test_sacct_answers_when_accounting_is_on(tmp_path: Path) -> None:
    fake = FakeSlurm({"squeue": [(0, "", "")], "sacct": [(0, "7|TIMEOUT|0:0\n", "")]})
    assert job_states(tmp_path, ["7"], runner=fake) == {"7": JobState("7", "TIMEOUT", "sacct", exit_code="0:0")}


def test_squeue_failure_is_an_error(tmp_path: Path) -> None:
    fake = FakeSlurm({"squeue": [(1, "", "slurm_load_jobs error: Unable to contact slurm controller\n")]})
    with pytest.raises(SlurmError, match="Unable to contact"):
        job_states(tmp_path, ["1"], runner=fake)


def test_run_inside_a_job_keeps_its_script(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    from harness.run.session import open_writer
    from harness.run.slurm_script import SCRIPT_ENV

    script = tmp_path / "slurm_script"
    script.write_text("#!/bin/bash\n#SBATCH --nodes=1\n")
    monkeypatch.setenv(SCRIPT_ENV, str(script))
    monkeypatch.setenv("SLURM_JOB_ID", "77")
    loaded = load_spec(_spec(tmp_path))
    writer, _ = open_writer(tmp_path / "ws", "t1", spec=loaded.spec, spec_bytes=loaded.raw, corpora={}, governance={})
    try:
        assert (writer.dir / "slurm-batch.sh").read_bytes() == script.read_bytes()
        job = json.loads((writer.dir / "slurm-job.json").read_text())
        assert (job["job_id"], job["script_sha256"]) == ("77", sha256_file(script))
    finally:
        writer.close()
    monkeypatch.delenv(SCRIPT_ENV)
    plain, _ = open_writer(tmp_path / "ws", "t2", spec=loaded.spec, spec_bytes=loaded.raw, corpora={}, governance={})
    try:
        assert not (plain.dir / "slurm-batch.sh").exists()
    finally:
        plain.close()
