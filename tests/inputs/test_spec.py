"""Campaign specs: validation errors name file, field path and fix."""

from __future__ import annotations

from pathlib import Path

import pytest

from harness.errors import SpecError
from harness.inputs.spec import CampaignSpec, load_spec

REPO = Path(__file__).resolve().parents[2]

GOOD = """
name: t
kind: formal-matrix
claim_class: native-ar
service: {backend: sim, sim: {profile: fast}}
corpora: {decode: CORPUS}
decode: {tiers: [1, 2], rounds: 3, min_resident_seconds: 0.2, max_new_tokens: 32}
"""


def load_campaign(path: Path) -> CampaignSpec:
    """The formal matrix ``path`` holds, through the one loader."""
    spec = load_spec(path).spec
    assert isinstance(spec, CampaignSpec)
    return spec


def write(tmp_path: Path, text: str) -> Path:
    p = tmp_path / "spec.yaml"
    p.write_text(text.replace("CORPUS", str(REPO / "corpora" / "sim-code-512")))
    return p


def test_shipped_specs_validate() -> None:
    for name in ("demo-matrix.yaml", "tp8-native-formal.yaml"):
        spec = load_campaign(REPO / "campaigns" / name)
        assert spec.claim_class == "native-ar"
        assert spec.protocol_class == "formal"


def test_good_spec(tmp_path: Path) -> None:
    spec = load_campaign(write(tmp_path, GOOD))
    assert spec.decode is not None and spec.decode.tiers == [1, 2]
    assert spec.service.wire_protocol == "sglang"


def test_unknown_key_did_you_mean(tmp_path: Path) -> None:
    with pytest.raises(SpecError) as ei:
        load_campaign(write(tmp_path, GOOD.replace("rounds: 3", "roundz: 3")))
    msg = str(ei.value)
    assert "spec.yaml" in msg and "decode.roundz" in msg and "did you mean 'rounds'" in msg
    assert ei.value.hint and "decode.rounds" in ei.value.hint


def test_wrong_type_names_field(tmp_path: Path) -> None:
    with pytest.raises(SpecError, match=r"decode.min_resident_seconds"):
        load_campaign(write(tmp_path, GOOD.replace("min_resident_seconds: 0.2", "min_resident_seconds: soon")))


def test_empty_tiers(tmp_path: Path) -> None:
    with pytest.raises(SpecError, match="tiers is empty"):
        load_campaign(write(tmp_path, GOOD.replace("tiers: [1, 2]", "tiers: []")))


def test_unknown_claim_class(tmp_path: Path) -> None:
    with pytest.raises(SpecError, match="claim_class"):
        load_campaign(write(tmp_path, GOOD.replace("native-ar", "native")))


def test_missing_required_and_yaml_syntax(tmp_path: Path) -> None:
    with pytest.raises(SpecError, match="claim_class: required field is missing"):
        load_campaign(write(tmp_path, GOOD.replace("claim_class: native-ar\n", "")))
    with pytest.raises(SpecError, match=r"spec.yaml:\d+:\d+: YAML syntax error"):
        load_campaign(write(tmp_path, GOOD + "\n  bad: [unclosed\n"))
    with pytest.raises(SpecError, match="no such file"):
        load_campaign(tmp_path / "nope.yaml")


def test_attach_needs_url(tmp_path: Path) -> None:
    with pytest.raises(SpecError, match="needs 'url'"):
        load_campaign(write(tmp_path, GOOD.replace("backend: sim, sim: {profile: fast}", "backend: attach")))


def test_service_profile_file(tmp_path: Path) -> None:
    (tmp_path / "svc.yaml").write_text("backend: sim\nsim: {profile: fast}\nname: s1\n")
    spec = load_campaign(write(tmp_path, GOOD.replace("{backend: sim, sim: {profile: fast}}", "svc.yaml")))
    assert spec.service.name == "s1"
    (tmp_path / "svc.yaml").write_text("backend: sim\nsimm: {}\n")
    with pytest.raises(SpecError, match=r"(?s)svc.yaml.*simm.*did you mean 'sim'"):
        load_campaign(write(tmp_path, GOOD.replace("{backend: sim, sim: {profile: fast}}", "svc.yaml")))
