"""Every run's console says SIMULATED when its data is simulated (the run block, harness.service.origin):
the title of ``dsv4h sweep run``'s, ``dsv4h sla run``'s and ``dsv4h replay run``'s end-of-run output
(``campaign run`` of those kinds delegates to the same code)."""

from __future__ import annotations

from pathlib import Path

from testkit import run_cli, tiny_sweep_spec
from typer.testing import CliRunner

from harness.cli import _register, app

REPO = Path(__file__).resolve().parents[2]


def flat(text: str) -> str:
    """``text`` with every run of white space one blank (a table title wraps at the table's width)."""
    return " ".join(text.split())


def test_sweep_run_says_simulated(tmp_path: Path) -> None:
    spec = tiny_sweep_spec(tmp_path)  # one rate, one round of 4 requests: seconds
    spec.write_text(spec.read_text().replace("rates: [4, 8]", "rates: [8]").replace("rounds: 3", "rounds: 1")
                    .replace("count: 8", "count: 4").replace("warmup_requests: 2", "warmup_requests: 1"))
    _register()
    result = CliRunner().invoke(app, ["sweep", "run", str(spec), "-w", str(tmp_path / "ws"), "--percentiles",
                                      "50,99"], env={"COLUMNS": "200"}, terminal_width=200)
    assert result.exit_code == 0, result.output
    assert "sweep-test: rate sweep, per offered rate (SIMULATED)" in result.stdout
    assert "sweep-test: latency per offered rate (ms) (SIMULATED)" in flat(result.stdout)  # a title may wrap


def test_sla_run_says_simulated(tmp_path: Path) -> None:
    spec = tmp_path / "sla.yaml"
    spec.write_text((REPO / "campaigns/sla-demo.yaml").read_text().replace("max_probes: 10", "max_probes: 1")
                    .replace("count: 20", "count: 4")
                    .replace("service: profiles/", f"service: {REPO}/campaigns/profiles/")
                    .replace("corpus: ../corpora", f"corpus: {REPO}/corpora"))
    code, out, err = run_cli("sla", "run", str(spec), "-w", str(tmp_path / "ws"))
    assert code == 0, out + err
    assert "SLA search probes (SIMULATED)" in flat(out)


def test_replay_run_says_simulated(tmp_path: Path) -> None:
    spec = tmp_path / "replay.yaml"
    spec.write_text((REPO / "campaigns/replay-demo.yaml").read_text().replace("speed: 1", "speed: 4")
                    .replace("lateness_tolerance_ms: 50", "lateness_tolerance_ms: 1000")
                    .replace("../corpora", f"{REPO}/corpora"))
    code, out, err = run_cli("replay", "run", str(spec), "-w", str(tmp_path / "ws"))
    assert code == 0, out + err
    assert "replay-demo: trace replay (SIMULATED)" in out and "20/20 ok" in out
