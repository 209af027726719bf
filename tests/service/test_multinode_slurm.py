"""A two-rank multi-node simulator service inside a Slurm allocation (docs/multinode.md).

On the one-host cluster (.ci/start_slurm.sh: node ``vm``) both ranks run on the one node, each its own
node rank: ``DSV4H_SLURM_TASKS_PER_NODE=2`` (the test-only override) makes the launcher's srun place
two tasks on it. ``salloc`` runs ``dsv4h campaign run`` inside the allocation (SLURM_JOB_ID set).
Skipped where ``sinfo`` fails; under CI (``CI`` set) a missing cluster fails the run.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import psutil
import pytest
from testkit import ran

from harness.service.launch.slurm import TASKS_PER_NODE_ENV

REPO = Path(__file__).resolve().parents[2]
HANG_S = 240.0

pytestmark = [pytest.mark.slurm, pytest.mark.slow]


def _cluster_up() -> bool:
    try:
        return subprocess.run(["sinfo", "-h"], capture_output=True, timeout=30, check=False).returncode == 0
    except (OSError, subprocess.SubprocessError):
        return False


if not _cluster_up():
    if os.environ.get("CI"):
        pytest.fail("CI must provide the one-host Slurm cluster: sinfo fails (.ci/start_slurm.sh starts it)",
                    pytrace=False)
    pytest.skip("no Slurm cluster here (sinfo fails; .ci/start_slurm.sh starts one)", allow_module_level=True)


def _spec(tmp: Path, name: str, rounds: int, min_resident_s: float, max_new_tokens: int) -> Path:
    path = tmp / f"{name}.yaml"
    path.write_text(f"""
name: {name}
claim_class: native-ar
service: {{name: sim-two-ranks, backend: sim, sim: {{profile: fast}}, nnodes: 2, startup_timeout_s: 120}}
corpora: {{decode: {REPO / 'corpora' / 'sim-code-512'}, prefill: {REPO / 'corpora' / 'sim-code-8k'}}}
decode: {{tiers: [1], rounds: {rounds}, min_resident_seconds: {min_resident_s}, warmup_waves: 1,
         max_new_tokens: {max_new_tokens}}}
prefill: {{tiers: [1], rounds: 1, warmup_waves: 1}}
order: [decode, prefill]
""")
    return path


def _salloc_campaign(spec: Path, ws: Path) -> list[str]:
    return ["salloc", "--nodes=1", "--ntasks=2", f"--job-name=dsv4h-test-{spec.stem}", "--immediate=120",
            sys.executable, "-c", "from harness.cli import main; main()", "campaign", "run", str(spec), "-w", str(ws)]


def _env() -> dict[str, str]:
    return {**os.environ, TASKS_PER_NODE_ENV: "2", "PYTHONPATH": str(REPO), "COLUMNS": "200"}


def _records(ws: Path) -> list[dict[str, object]]:
    return [json.loads(p.read_text()) for p in sorted(ws.glob("multinode/*/rank-*.json"))]


def _alive(rec: dict[str, object]) -> bool:
    try:
        p = psutil.Process(int(str(rec["pid"])))
        return abs(p.create_time() - float(str(rec["create_time"]))) < 0.05 and p.status() != psutil.STATUS_ZOMBIE
    except psutil.Error:
        return False


def test_a_two_rank_service_serves_a_campaign_and_stops_on_both_ranks(tmp_path: Path) -> None:
    ws = tmp_path / "ws"
    done = subprocess.run(_salloc_campaign(_spec(tmp_path, "mn-ok", 1, 0.25, 32), ws), env=_env(), cwd=tmp_path,
                          capture_output=True, text=True, timeout=HANG_S, check=False)
    assert ran(done.returncode, done.stdout, done.stderr), done.stdout[-3000:] + done.stderr[-3000:]
    (archive,) = [p for p in (ws / "archives").iterdir() if not p.name.startswith(".")]
    manifest = json.loads((archive / "manifest.json").read_text())
    assert manifest["status"] == "complete"
    svc = json.loads((archive / "service.json").read_text())["services"][0]
    mn = svc["multinode"]
    assert mn["scheduler"] == "slurm" and mn["nodes"] and mn["tasks_per_node"] == 2
    assert [r["rank"] for r in mn["ranks"]] == [0, 1]
    assert {r["step_id"] for r in mn["ranks"]} == {mn["step_id"]}
    assert all(r["node"] in mn["nodes"] for r in mn["ranks"])
    assert [r["argv"][r["argv"].index("--node-rank") + 1] for r in mn["ranks"]] == ["0", "1"]
    assert mn["srun"][:7] == ["srun", f"--jobid={mn['job_id']}", "--nodes=1", "--ntasks=2", "--ntasks-per-node=2",
                              "--cpus-per-task=1", f"--nodelist={mn['nodes'][0]}"]  # salloc -n2: 2 CPUs, 2 ranks
    assert svc["command"] == mn["srun"]
    # both ranks reported, and none is left once the run is over
    records = _records(ws)
    assert [r["rank"] for r in records] == [0, 1]
    assert not [r for r in records if _alive(r)]
    assert not list((ws / "services" / "launched").glob("*.json"))
    events = [json.loads(line) for line in (archive / "events.jsonl").read_text().splitlines()]
    (stopped,) = [e for e in events if e["event"] == "service-stopped"]
    assert stopped["multinode_stop"] == {"scancel": ["scancel", f"{mn['job_id']}.{mn['step_id']}"], "left": {}}


def test_killing_rank_1_takes_the_service_down_with_a_clear_error(tmp_path: Path) -> None:
    ws = tmp_path / "ws"
    proc = subprocess.Popen(_salloc_campaign(_spec(tmp_path, "mn-kill", 50, 1.0, 256), ws), env=_env(),
                            cwd=tmp_path, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    try:
        deadline = time.monotonic() + HANG_S
        while time.monotonic() < deadline and proc.poll() is None:
            events = list(ws.glob("archives/*/events.jsonl"))  # the partial archive, while it runs
            if len(_records(ws)) == 2 and events and "service-ready" in events[0].read_text(errors="replace"):
                break
            time.sleep(0.2)
        assert proc.poll() is None, "the campaign ended before its service was up"
        rank1 = next(r for r in _records(ws) if r["rank"] == 1)
        os.kill(int(str(rank1["pid"])), signal.SIGKILL)
        out, _ = proc.communicate(timeout=HANG_S)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait(30)
    assert proc.returncode != 0, out[-3000:]
    assert f"node rank 1 (pid {rank1['pid']}" in out and "the multi-node service is down" in out, out[-3000:]
    assert "node rank 1 lost" in out  # rank 0's own line, in the log tail
    assert not [r for r in _records(ws) if _alive(r)]
