"""One spec base and one loader for every kind (harness.inputs.spec): the kind is decided in one
place, every kind checks its format version the same way, and the shared header is declared once."""

from __future__ import annotations

from pathlib import Path

import pytest

from harness.errors import SpecError
from harness.formats import read_yaml
from harness.inputs.spec import (
    SPEC_KINDS,
    SPEC_MODELS,
    AbbaSpec,
    CampaignSpec,
    MatchedSdSpec,
    SpecBase,
    SweepSpec,
    kind_of,
    load_spec,
)

ROOT = Path(__file__).resolve().parents[2]
SHIPPED = {"formal-matrix": "demo-matrix.yaml", "abba": "abba-demo.yaml", "rate-sweep": "sweep-demo.yaml",
           "matched-sd": "matched-eagle-demo.yaml", "trace-replay": "replay-demo.yaml",
           "sla-search": "sla-demo.yaml"}


def _copy(tmp_path: Path, kind: str, extra: str = "") -> Path:
    """The shipped spec of ``kind`` with ``extra`` in front, in a copy of the repository's layout
    (links to its profiles, workloads, corpora and oracles, which the specs name relatively)."""
    (tmp_path / "campaigns").mkdir(exist_ok=True)
    for name in ("corpora", "oracles"):
        if not (tmp_path / name).exists():
            (tmp_path / name).symlink_to(ROOT / name)
    for entry in (ROOT / "campaigns").iterdir():
        if not (tmp_path / "campaigns" / entry.name).exists():
            (tmp_path / "campaigns" / entry.name).symlink_to(entry)
    out = tmp_path / "campaigns" / f"copy-{SHIPPED[kind]}"
    out.write_text(extra + (ROOT / "campaigns" / SHIPPED[kind]).read_text())
    return out


@pytest.mark.parametrize("kind", SPEC_KINDS)
def test_every_kind_loads_through_the_one_loader(tmp_path: Path, kind: str) -> None:
    loaded = load_spec(_copy(tmp_path, kind))
    assert loaded.kind == kind and isinstance(loaded.spec, SPEC_MODELS[kind])
    assert loaded.spec.protocol_class == {"formal-matrix": "formal", "abba": "abba-screen",
                                          "rate-sweep": "rate-sweep", "matched-sd": "matched-sd",
                                          "trace-replay": "trace-replay",
                                          "sla-search": "sla-search"}[kind]


@pytest.mark.parametrize("kind", SPEC_KINDS)
def test_format_version_3_gets_the_same_error_in_every_kind(tmp_path: Path, kind: str) -> None:
    path = _copy(tmp_path, kind, "format_version: 3\n")
    with pytest.raises(SpecError) as err:
        load_spec(path)
    assert str(path) in err.value.message
    assert "format_version 3 is not supported (this dsv4h reads 1, 2)" in err.value.message


@pytest.mark.parametrize("version", [1, 2])
@pytest.mark.parametrize("kind", SPEC_KINDS)
def test_format_versions_1_and_2_load_in_every_kind(tmp_path: Path, kind: str, version: int) -> None:
    assert load_spec(_copy(tmp_path, kind, f"format_version: {version}\n")).spec.format_version == version


def test_the_kinds_share_one_header() -> None:
    header = list(SpecBase.model_fields)
    assert header == ["format_version", "name", "kind", "description", "protocol_class", "labels", "oracles",
                      "direction", "reopen", "request_timeout_s", "client", "slurm"]
    for model in (CampaignSpec, AbbaSpec, SweepSpec, MatchedSdSpec):
        assert issubclass(model, SpecBase) and list(model.model_fields)[:len(header)] == header
    # the one default that differs stays what it was
    assert SweepSpec.model_fields["request_timeout_s"].default == 600.0
    assert CampaignSpec.model_fields["request_timeout_s"].default == 1800.0


def test_kind_defaults_to_formal_matrix_and_sweep_paths_resolve(tmp_path: Path) -> None:
    assert kind_of({"name": "x"}) == "formal-matrix" and kind_of(["not", "a", "mapping"]) == "formal-matrix"
    assert kind_of(read_yaml(ROOT / "campaigns" / "sweep-demo.yaml")) == "rate-sweep"
    loaded = load_spec(ROOT / "campaigns" / "sweep-demo.yaml")
    assert loaded.paths.corpora == {"sweep": (ROOT / "corpora" / "sim-code-512").resolve()}
