"""An ABBA screen whose control or candidate asks for a port already in use is refused before any
service starts or any archive opens, naming the port and where it was set (issue 24, as campaigns
and sweeps do)."""

from __future__ import annotations

import socket
from collections.abc import Iterator
from pathlib import Path

import pytest
from testkit import run_cli

REPO = Path(__file__).resolve().parents[2]
CORPUS = REPO / "corpora" / "sim-code-512"
WORKLOAD = f"""name: port-screen
claim_class: native-ar
corpus: {CORPUS}
concurrency: 2
waves_per_leg: 1
warmup_waves: 1
max_new_tokens: 8
declared_change: [sim.step_factor]
"""


@pytest.fixture
def taken_port() -> Iterator[int]:
    """A port on 127.0.0.1 held (bound and listening) for the test's length."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind(("127.0.0.1", 0))
        s.listen()
        yield int(s.getsockname()[1])


def profile(name: str, port: int | None = None, step_factor: float = 1.0) -> str:
    line = f"port: {port}\n" if port is not None else ""
    return (f"name: {name}\nbackend: sim\nhost: 127.0.0.1\n{line}"
            f"sim: {{profile: fast, step_factor: {step_factor}}}\nstartup_timeout_s: 30\n")


def error_lines(err: str) -> list[str]:
    return [line for line in err.splitlines() if line.startswith("error:")]


def test_abba_cli_refuses_a_taken_control_port(tmp_path: Path, taken_port: int) -> None:
    (tmp_path / "ctrl.yaml").write_text(profile("ctrl", taken_port))
    (tmp_path / "cand.yaml").write_text(profile("cand", step_factor=0.9))
    (tmp_path / "wl.yaml").write_text(WORKLOAD)
    ws = tmp_path / "ws"
    code, _, err = run_cli("abba", "--control", str(tmp_path / "ctrl.yaml"), "--candidate",
                           str(tmp_path / "cand.yaml"), "--workload", str(tmp_path / "wl.yaml"), "-w", str(ws))
    assert code != 0
    assert error_lines(err) == [f"error: port 127.0.0.1:{taken_port} is already in use "
                                "(set by 'port' in the control service profile (--control))"], err
    assert not (ws / "archives").exists() or not any((ws / "archives").iterdir())
    assert not (ws / "ledgers").exists()


def test_abba_spec_refuses_a_taken_candidate_port(tmp_path: Path, taken_port: int) -> None:
    (tmp_path / "ctrl.yaml").write_text(profile("ctrl"))
    (tmp_path / "cand.yaml").write_text(profile("cand", taken_port, step_factor=0.9))
    (tmp_path / "wl.yaml").write_text(WORKLOAD)
    spec = tmp_path / "screen.yaml"
    spec.write_text("name: port-screen\nkind: abba\ncontrol: ctrl.yaml\ncandidate: cand.yaml\nworkload: wl.yaml\n")
    ws = tmp_path / "ws"
    code, _, err = run_cli("campaign", "run", str(spec), "-w", str(ws))
    assert code != 0
    assert error_lines(err) == [f"error: port 127.0.0.1:{taken_port} is already in use (set by 'port' in the "
                                f"service profile cand.yaml (named by 'candidate' in {spec}))"], err
    assert not (ws / "archives").exists() or not any((ws / "archives").iterdir())
    assert not (ws / "ledgers").exists()
