"""`dsv4h service start|status|stop` on a real simulator service: only the owned tree is stopped."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import psutil

REPO = Path(__file__).resolve().parents[2]


def dsv4h(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "harness.cli", *args], capture_output=True, text=True, cwd=REPO,
                          timeout=120, check=False)


def test_start_status_stop(tmp_path: Path) -> None:
    prof = tmp_path / "p.yaml"
    prof.write_text("name: cli-sim\nbackend: sim\nsim: {profile: fast}\nstartup_timeout_s: 60\n")
    bystander = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(120)"])
    try:
        r = dsv4h("service", "start", str(prof), "-w", str(tmp_path))
        assert r.returncode == 0, r.stderr
        state = tmp_path / "services" / "cli-sim.json"
        assert state.exists()
        pid = int(__import__("json").loads(state.read_text())["process"]["pid"])
        assert psutil.pid_exists(pid)
        r = dsv4h("service", "status", "cli-sim", "-w", str(tmp_path))
        row = next(line for line in r.stdout.splitlines() if line.startswith("cli-sim"))
        assert row.split()[-2:] == ["alive", "200"]  # state, /health status
        listed = json.loads(dsv4h("service", "status", "cli-sim", "-w", str(tmp_path), "--json").stdout)
        assert listed[0]["name"] == "cli-sim" and listed[0]["state"] == "alive" and listed[0]["health_status"] == 200
        assert listed[0]["pid"] == pid
        r = dsv4h("service", "start", str(prof), "-w", str(tmp_path))
        assert r.returncode == 2 and "already has state" in r.stderr
        r = dsv4h("service", "stop", "cli-sim", "-w", str(tmp_path))
        assert r.returncode == 0, r.stderr
        assert not psutil.pid_exists(pid) or psutil.Process(pid).status() == psutil.STATUS_ZOMBIE
        assert not state.exists()
        assert bystander.poll() is None  # nothing the harness did not start was touched
        r = dsv4h("service", "stop", "cli-sim", "-w", str(tmp_path))
        assert r.returncode == 2 and "no started service" in r.stderr
    finally:
        bystander.kill()
        bystander.wait()
        if (tmp_path / "services" / "cli-sim.json").exists():  # a failed assertion must not leave it running
            dsv4h("service", "stop", "cli-sim", "-w", str(tmp_path))
