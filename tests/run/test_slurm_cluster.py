"""Campaigns as jobs of a real Slurm cluster (the one-host cluster of .ci/start_slurm.sh; docs/slurm.md):
a job's archive and ledger rows land in the workspace, two jobs ending into one ledger lose nothing, and
scancel leaves a partial archive that recovers and resumes. Skipped without a cluster (``sinfo`` fails),
except under CI (``CI`` set), where a missing cluster fails the run."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import psutil
import pytest
from testkit import ran

from harness.hashing import sha256_file
from harness.store.archive import iter_archives, iter_partials, open_verified, verify_archive
from harness.store.ledger import archive_rows

REPO = Path(__file__).resolve().parents[2]
pytestmark = [pytest.mark.slurm, pytest.mark.slow]


def _cluster_up() -> bool:
    try:
        return subprocess.run(["sinfo", "-h"], capture_output=True, timeout=30, check=False).returncode == 0
    except (OSError, subprocess.TimeoutExpired):
        return False


if not _cluster_up():
    if os.environ.get("CI"):
        pytest.fail("CI must provide a Slurm cluster: 'sinfo' fails (.ci/run starts one with .ci/start_slurm.sh)",
                    pytrace=False)
    pytest.skip("no Slurm cluster here ('sinfo' fails; bash .ci/start_slurm.sh starts one)", allow_module_level=True)


def _spec(tmp_path: Path, name: str, resident_s: float = 0.1) -> Path:
    p = tmp_path / f"{name}.yaml"
    p.write_text(f"""name: {name}
claim_class: native-ar
service: {{backend: sim, sim: {{profile: fast, time_scale: 3}}, startup_timeout_s: 60}}
corpora: {{decode: {REPO / 'corpora' / 'sim-code-512'}}}
decode: {{tiers: [1, 2], rounds: 1, min_resident_seconds: {resident_s}, warmup_waves: 0, max_new_tokens: 16}}
slurm: {{partition: debug, time_limit: "00:05:00", cpus_per_task: 1}}
""")
    return p


def _dsv4h(*args: str, cwd: Path) -> subprocess.CompletedProcess[str]:
    env = dict(os.environ, PYTHONPATH=str(REPO), PYTHONUNBUFFERED="1")
    env.pop("DSV4H_SLURM_SCRIPT", None)
    return subprocess.run([sys.executable, "-m", "harness.cli", *args], capture_output=True, text=True, env=env,
                          cwd=cwd, timeout=120, check=False)


def _submit(spec: Path, ws: Path) -> str:
    out = _dsv4h("campaign", "submit", str(spec), "-w", str(ws), cwd=spec.parent)
    assert out.returncode == 0, out.stdout + out.stderr
    return out.stdout.split("submitted job ", 1)[1].split()[0]


def _wait_end(ws: Path, job: str, limit_s: float = 90) -> dict[str, Any]:
    end = ws / "jobs" / f"{job}.end.json"
    deadline = time.monotonic() + limit_s
    while not end.is_file():
        if time.monotonic() > deadline:
            log = ws / "jobs" / f"{job}.out"
            pytest.fail(f"job {job} did not end: {log.read_text()[-3000:] if log.is_file() else 'no log'}")
        time.sleep(0.5)
    return dict(json.loads(end.read_text()))


def _jobs(ws: Path) -> dict[str, dict[str, Any]]:
    out = _dsv4h("campaign", "jobs", "-w", str(ws), "--json", cwd=ws)
    assert out.returncode == 0, out.stderr
    return {r["job_id"]: r for r in json.loads(out.stdout)}


def _rows(ws: Path, table: str, archive_id: str) -> int:
    t = archive_rows(ws, table, archive_id)
    return 0 if t is None else t.num_rows


def test_job_archive_and_ledger_rows_land(tmp_path: Path) -> None:
    ws = tmp_path / "ws"
    job = _submit(_spec(tmp_path, "slurm-one"), ws)
    end = _wait_end(ws, job)
    log = (ws / "jobs" / f"{job}.out").read_text()
    assert ran(int(end["run_status"]), "", log), log[-3000:]  # 0, or 7 for a machine too busy for the simulator
    [ended] = end["archives"]
    assert (ended["status"], ended["ledger"]) == ("complete", "appended")
    archive = open_verified(ws / "archives" / ended["archive_id"])
    record = json.loads((ws / "jobs" / f"{job}.json").read_text())
    assert sha256_file(archive.path / "slurm-batch.sh") == record["script_sha256"] == sha256_file(
        ws / "jobs" / f"{job}.sh")
    assert archive.json("slurm-job.json")["job_id"] == job
    assert _rows(ws, "runs", archive.archive_id) == 1
    assert _rows(ws, "cells", archive.archive_id) == 2
    assert _rows(ws, "requests", archive.archive_id) == len(archive.records()) > 0
    row = _jobs(ws)[job]
    assert (row["archive_id"], row["archive_status"], row["ledger"]) == (archive.archive_id, "complete", "yes")
    assert row["state"] in {"COMPLETED", "COMPLETING"}


def test_two_jobs_into_one_ledger_lose_nothing(tmp_path: Path) -> None:
    ws = tmp_path / "ws"
    jobs = [_submit(_spec(tmp_path, name), ws) for name in ("slurm-a", "slurm-b")]
    ends = [_wait_end(ws, j) for j in jobs]
    ids = [e["archives"][0]["archive_id"] for e in ends]
    assert len(set(ids)) == 2
    assert all(ran(int(e["run_status"]), "", (ws / "jobs" / f"{j}.out").read_text())
               for e, j in zip(ends, jobs, strict=True))
    for aid in ids:
        a = open_verified(ws / "archives" / aid)
        assert _rows(ws, "runs", aid) == 1
        assert _rows(ws, "requests", aid) == len(a.records()) > 0
        for table in ("cells", "rounds", "waves"):
            assert _rows(ws, table, aid) == a.table(f"{table}.parquet").num_rows > 0, table


@pytest.mark.parametrize("signal", ["TERM", "KILL"])
def test_scancel_leaves_partial_that_recovers_and_resumes(tmp_path: Path, signal: str) -> None:
    """``scancel`` (SIGTERM: the run finalizes its partial itself) and SIGKILL of the run's process in
    the job (it dies at once: its partial directory is stranded, and ``archive recover`` finalizes it)."""
    ws = tmp_path / "ws"
    spec = _spec(tmp_path, "slurm-cancel", resident_s=3.0)
    job = _submit(spec, ws)
    job_ws = ws / "jobs" / job
    deadline = time.monotonic() + 300  # a hang guard, not a timing claim: a busy machine is slow to start the job
    while not list((job_ws / "archives").glob(".partial-*/records/*.parquet")) if (job_ws / "archives").is_dir() \
            else True:
        assert time.monotonic() < deadline, "the job wrote no wave"
        time.sleep(0.2)
    if signal == "TERM":
        subprocess.run(["scancel", job], check=True, timeout=30)
    else:  # the run's own process killed inside the job (as the OOM killer would): nothing can finalize
        runs = [p for p in psutil.process_iter(["cmdline"])
                if {"campaign", "run"} <= set(p.info["cmdline"] or []) and str(job_ws) in (p.info["cmdline"] or [])]
        assert runs, "the job's dsv4h process was not found"
        for p in runs:
            p.kill()
    deadline = time.monotonic() + 180  # a hang guard: SIGTERM, then SIGKILL after KillWait (10 s), on a busy machine
    while _jobs(ws)[job]["state"] in {"RUNNING", "PENDING", "COMPLETING"}:
        assert time.monotonic() < deadline, "scancel did not end the job"
        time.sleep(0.5)
    assert _jobs(ws)[job]["state"] in ({"CANCELLED"} if signal == "TERM" else {"FAILED", "COMPLETED"})
    stranded = [p for p in iter_partials(job_ws) if not p.live]
    assert len(stranded) == (0 if signal == "TERM" else 1)  # SIGKILL: nothing finalized it
    rec = _dsv4h("archive", "recover", "-w", str(job_ws), cwd=tmp_path)
    assert rec.returncode == 0, rec.stdout + rec.stderr
    assert [p for p in iter_partials(job_ws) if not p.live] == []
    [partial] = list(iter_archives(job_ws))
    assert partial.status == "partial" and verify_archive(partial.path) == []
    assert len(partial.records()) > 0
    resumed = _dsv4h("campaign", "run", str(spec), "-w", str(job_ws), "--resume", partial.archive_id, cwd=tmp_path)
    assert ran(resumed.returncode, resumed.stdout, resumed.stderr), resumed.stdout + resumed.stderr
    done = [a for a in iter_archives(job_ws) if a.archive_id != partial.archive_id]
    assert [a.status for a in done] == ["complete"]
    assert done[0].run.resumed_from == partial.archive_id
    again = _dsv4h("campaign", "job-end", job, "-w", str(ws), cwd=tmp_path)  # idempotent: the resumed one goes in
    assert again.returncode == 0, again.stdout + again.stderr
    assert _rows(ws, "runs", done[0].archive_id) == 1
