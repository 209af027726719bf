"""Small builders shared by tests in several folders."""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path
from typing import Any

from harness.store.runblock import RunBlock


def run_block(**fields: Any) -> RunBlock:
    """A complete run block for a hand-made archive; ``fields`` override the defaults."""
    base: dict[str, Any] = {"campaign": "test", "kind": "formal-matrix", "claim_class": "native-ar",
                            "protocol_class": "formal", "backend": "sim", "service_name": "sim",
                            "created_wall": "2026-11-30T00:00:00+0000", "run_token": "test"}
    return RunBlock.model_validate(base | fields)


def run_cli(*args: str) -> tuple[int, str, str]:
    """Run the dsv4h command line in this process as ``harness.cli.main`` would: (exit status,
    stdout, the error and hint lines ``main`` prints). An error ``main`` would not map (a bug) is raised."""
    from typer.testing import CliRunner

    from harness.cli import _register, app, error_lines

    _register()
    result = CliRunner().invoke(app, list(args))
    exc = result.exception
    if exc is None or isinstance(exc, SystemExit):
        return result.exit_code, result.stdout, ""
    lines = error_lines(exc)
    if lines is None:
        raise exc
    message, hint, code = lines
    return code, result.stdout, f"error: {message}\n" + (f"hint: {hint}\n" if hint else "")


TINY_SWEEP = """
name: {name}
kind: rate-sweep
claim_class: native-ar
service: {profile}
corpus: {corpus}
rates: [4, 8]
arrivals: {{process: poisson, seed: 1, count: 8, max_concurrency: 16}}
rounds: 3
warmup_requests: 2
max_new_tokens: 8
slo: {{ttft_ms: 2000, tpot_ms: 500}}
schedule_tolerance_ms: 200
"""


def tiny_sweep_spec(directory: Path, name: str = "sweep-test") -> Path:
    """A two-rate Poisson sweep of 8 requests per round on the simulator (``sim-control``), written to
    ``directory/sweep.yaml``: seconds to run, for end-to-end tests."""
    root = Path(__file__).resolve().parents[1]
    spec = directory / "sweep.yaml"
    spec.write_text(TINY_SWEEP.format(name=name, profile=root / "campaigns/profiles/sim-control.yaml",
                                      corpus=root / "corpora/sim-code-512"))
    return spec


def quick_decode_run(directory: Path, name: str, tier: int) -> tuple[Any, Path]:
    """A short formal matrix on the simulator (profile ``fast`` at ``time_scale`` 3: decode steps of
    15-54 ms, so a busy machine keeps the simulator on its model and the cells valid; one decode tier,
    3 rounds of 0.2 s resident, 32 tokens), run in process into ``directory/ws``: (the run outcome, the
    workspace). Asserts that it completed."""
    from harness.run.campaign import run_campaign

    root = Path(__file__).resolve().parents[1]
    spec = directory / "s.yaml"
    spec.write_text(f"""
name: {name}
claim_class: native-ar
service: {{backend: sim, sim: {{profile: fast, time_scale: 3}}, startup_timeout_s: 60}}
corpora: {{decode: {root / 'corpora' / 'sim-code-512'}}}
decode: {{tiers: [{tier}], rounds: 3, min_resident_seconds: 0.2, warmup_waves: 1, max_new_tokens: 32}}
""")
    ws = directory / "ws"
    out = run_campaign(spec, ws)
    assert out.status == "complete", out.error
    return out, ws


LOAD_RULES = frozenset({"sim-lateness", "client-stalled", "client-bound"})
"""Rules that judge the machine a run ran on: a busy test machine may make them block (the run then
exits 7 with its rows marked invalid, as it must); any other blocking rule is a failure."""
LOAD_COMPANIONS = frozenset({"sla-probe-invalid"})
"""Rules that also block when a load rule does (an SLA probe whose round the simulator fell behind in):
accepted only beside a load rule."""


def ran(code: int, out: str, err: str) -> bool:
    """Whether a run command ended as it should on this machine: exit 0, or exit 7 (a blocking
    finding) whose error line names only :data:`LOAD_RULES` (``harness.cli.outcome.end_run``)."""
    if code == 0:
        return True
    m = re.search(r"blocking finding\(s\) \(([^)]*)\)", err)
    if code != 7 or m is None:
        return False
    names = set(m.group(1).split(", "))
    return bool(names & LOAD_RULES) and names - LOAD_COMPANIONS <= LOAD_RULES


def run_dsv4h(*args: str, timeout_s: float = 240) -> subprocess.CompletedProcess[str]:
    """``python -m harness.cli ARGS`` in a child process from the repository root; asserts it ran
    (:func:`ran`: exit 0, or 7 for a machine too busy for the simulator)."""
    root = Path(__file__).resolve().parents[1]
    proc = subprocess.run([sys.executable, "-m", "harness.cli", *args], capture_output=True, text=True,
                          timeout=timeout_s, cwd=root, check=False)
    assert ran(proc.returncode, proc.stdout, proc.stderr), proc.stdout[-2000:] + proc.stderr[-2000:]
    return proc


def only_archive(ws: Path) -> Path:
    """The one archive directory of workspace ``ws`` (asserts there is exactly one)."""
    (archive,) = [p for p in (ws / "archives").iterdir() if not p.name.startswith(".")]
    return archive
