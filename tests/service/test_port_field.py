"""Where a spec sets its service's port, in the spelling the spec (or its profile file) uses: the
sectioned ``launch.port`` or spec format 1's flat ``port`` (harness.service.launch.manager.port_field)."""

from __future__ import annotations

from pathlib import Path

import pytest

from harness.service.launch.manager import port_field


@pytest.mark.parametrize(("service", "profile", "named"), [
    ("{backend: sim, launch: {port: 30001}}", None, "'service.launch.port' in {spec}"),
    ("{backend: sim, port: 30001}", None, "'service.port' in {spec}"),
    ("svc.yaml", "backend: sim\nlaunch: {port: 30001}\n",
     "'launch.port' in the service profile svc.yaml (named by 'service' in {spec})"),
    ("svc.yaml", "backend: sim\nport: 30001\n",
     "'port' in the service profile svc.yaml (named by 'service' in {spec})"),
])
def test_port_field_names_the_spelling_used(tmp_path: Path, service: str, profile: str | None, named: str) -> None:
    spec = tmp_path / "spec.yaml"
    spec.write_text(f"name: x\nservice: {service}\n")
    if profile is not None:
        (tmp_path / "svc.yaml").write_text(profile)
    assert port_field(spec) == named.format(spec=spec)


def test_port_field_without_a_spec_file() -> None:
    assert port_field(None) == "'service.launch.port' in the spec"

