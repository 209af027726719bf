"""Spec fields for scale runs: load.workers, sim.profile_file (resolved once), the sim command line."""

from __future__ import annotations

from pathlib import Path

import pytest

from harness.errors import SpecError
from harness.inputs.spec import CampaignSpec, load_spec
from harness.run.campaign import workers_for
from harness.service.launch.command import sim_command

ROOT = Path(__file__).resolve().parents[2]


def test_scale_spec_resolves_profile_file_and_workers() -> None:
    loaded = load_spec(ROOT / "campaigns" / "scale-c1024.yaml")
    spec = loaded.spec
    assert isinstance(spec, CampaignSpec) and spec.kind == "formal-matrix"  # its kind's model
    path = spec.service.sim.profile_file
    assert path is not None and Path(path).is_absolute() and Path(path).name == "scale-20ms.yaml"
    argv = sim_command(spec.service).argv
    assert argv[argv.index("--profile-file") + 1] == path
    assert spec.service.sim.processes == 8  # one step grid over 8 simulator processes (harness.sim.cluster)
    assert argv[argv.index("--processes") + 1] == "8"
    assert spec.load.workers == "auto"
    assert 1 <= workers_for(spec, 1024) <= 1024
    assert workers_for(spec.model_copy(update={"load": spec.load.model_copy(update={"workers": 3})}), 2) == 2


@pytest.mark.parametrize("value", ["0", "257", "many"])
def test_load_workers_is_bounded(tmp_path: Path, value: str) -> None:
    text = (ROOT / "campaigns" / "scale-c1024.yaml").read_text().replace("workers: auto", f"workers: {value}")
    text = text.replace("../", str(ROOT) + "/")
    spec = tmp_path / "s.yaml"
    spec.write_text(text)
    with pytest.raises(SpecError, match="workers"):
        load_spec(spec)


def test_load_transport_is_checked_and_sizes_auto_workers(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    from harness.load import workers

    monkeypatch.setattr(workers, "available_cpus", lambda: list(range(16)))  # the H200 host's 16 cores
    spec = load_spec(ROOT / "campaigns" / "scale-c1024.yaml").spec
    assert isinstance(spec, CampaignSpec)
    assert spec.load.transport == "auto"
    assert workers_for(spec, 1024) == 4  # 51,200 events/s x 18 us / 0.30 of a core (wire)
    on_aiohttp = spec.model_copy(update={"load": spec.load.model_copy(update={"transport": "aiohttp"})})
    assert workers_for(on_aiohttp, 1024) == 13  # 25 us / 0.10: the aiohttp sizing
    text = (ROOT / "campaigns" / "scale-c1024.yaml").read_text().replace("transport: auto", "transport: h2")
    path = tmp_path / "s.yaml"
    path.write_text(text.replace("../", str(ROOT) + "/"))
    with pytest.raises(SpecError, match="transport") as err:
        load_spec(path)
    assert "s.yaml" in str(err.value)
