"""Where an ABBA screen sets a role's port, in the spelling its spec or profile file uses
(harness.run.abba.abba_port_field; a one-service spec's twin: tests/service/test_port_field.py)."""

from __future__ import annotations

from pathlib import Path

from harness.run.abba import abba_port_field


def test_abba_port_field_names_the_spelling_used(tmp_path: Path) -> None:
    spec = tmp_path / "screen.yaml"
    (tmp_path / "cand.yaml").write_text("backend: sim\nlaunch: {port: 30001}\n")
    spec.write_text("kind: abba\ncontrol: {backend: sim, port: 30002}\ncandidate: cand.yaml\n")
    assert abba_port_field(spec, "control") == f"'control.port' in {spec}"
    assert abba_port_field(spec, "candidate") == (
        f"'launch.port' in the service profile cand.yaml (named by 'candidate' in {spec})")
    assert abba_port_field(None, "control") == "'port' in the control service profile (--control)"
