"""Every path a spec names is resolved once, at load, against the spec's directory."""

from __future__ import annotations

from pathlib import Path

import pytest

from harness.inputs.spec import AbbaSpec, CampaignSpec, load_profile, load_spec

REPO = Path(__file__).resolve().parents[2]


def test_demo_matrix_paths_resolved_against_its_directory(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    monkeypatch.chdir(tmp_path)  # the working directory must not matter
    loaded = load_spec(REPO / "campaigns" / "demo-matrix.yaml")
    assert isinstance(loaded.spec, CampaignSpec)
    assert loaded.raw == (REPO / "campaigns" / "demo-matrix.yaml").read_bytes()
    assert set(loaded.paths.corpora) == {"decode", "prefill"}
    for p in loaded.paths.corpora.values():
        assert p.is_absolute() and p.parent == REPO / "corpora"
    assert loaded.paths.oracles == (REPO / "oracles" / "france.yaml",)
    # the spec itself keeps what the user wrote (plan ids and archives stay machine-independent)
    assert loaded.spec.oracles == ["../oracles/france.yaml"]


def test_abba_spec_resolves_its_workload_corpus() -> None:
    loaded = load_spec(REPO / "campaigns" / "abba-demo.yaml")
    assert isinstance(loaded.spec, AbbaSpec)
    assert loaded.paths.corpora["workload"].is_absolute()
    assert loaded.paths.corpora["workload"].exists()


def test_profile_patches_path_made_absolute_against_the_profile_file(tmp_path: Path) -> None:
    prof = tmp_path / "profiles" / "p.yaml"
    prof.parent.mkdir()
    (tmp_path / "profiles" / "series.yaml").write_text("x")
    prof.write_text("name: p\nbackend: sglang\nmodel_path: /m\npatches: series.yaml\n")
    assert load_profile(prof).launch.patches == str((tmp_path / "profiles" / "series.yaml").resolve())
