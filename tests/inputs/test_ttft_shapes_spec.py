"""The formal spec's ``ttft_shapes`` key (docs/coldness.md): defaults, and errors naming file and field."""

from __future__ import annotations

from pathlib import Path

import pytest
import yaml

from harness.errors import SpecError
from harness.inputs.spec import CampaignSpec, load_spec

REPO = Path(__file__).resolve().parents[2]


def _write(tmp_path: Path, shapes: object) -> Path:
    body: dict[str, object] = {"name": "s", "claim_class": "native-ar", "service": {"backend": "sim"},
            "corpora": {"decode": str(REPO / "corpora" / "sim-code-512")}, "decode": {"tiers": [1]}}
    if shapes is not None:
        body["ttft_shapes"] = shapes
    path = tmp_path / "spec.yaml"
    path.write_text(yaml.safe_dump(body))
    return path


def test_default_is_one_bucket_and_the_concurrency(tmp_path: Path) -> None:
    spec = load_spec(_write(tmp_path, None)).spec
    assert isinstance(spec, CampaignSpec)
    assert spec.ttft_shapes.input_len_edges == [] and spec.ttft_shapes.batch_tiers == []
    given = load_spec(_write(tmp_path, {"input_len_edges": [1024, 8192], "batch_tiers": [1, 2, 4]})).spec
    assert isinstance(given, CampaignSpec) and given.ttft_shapes.batch_tiers == [1, 2, 4]


@pytest.mark.parametrize(("shapes", "field"), [
    ({"batch_tiers": [4, 2]}, "ttft_shapes.batch_tiers"),
    ({"input_len_edges": [0, 10]}, "ttft_shapes.input_len_edges"),
    ({"tiers": [1]}, "ttft_shapes.tiers"),
])
def test_bad_keys_name_the_file_and_the_field(tmp_path: Path, shapes: object, field: str) -> None:
    path = _write(tmp_path, shapes)
    with pytest.raises(SpecError) as err:
        load_spec(path)
    text = str(err.value)
    assert str(path) in text and field in text, text
