"""``dsv4h campaign schema``: the JSON Schema of every spec kind (or one) and, with --markdown, the
reference committed as docs/spec-reference.md."""

from __future__ import annotations

import json
from pathlib import Path

from typer.testing import CliRunner

from harness.cli.campaign_cmd import app
from harness.errors import SpecError
from harness.inputs.spec import SPEC_KINDS
from harness.inputs.spec_reference import json_schema

ROOT = Path(__file__).resolve().parents[2]
runner = CliRunner()


def test_schema_prints_the_union_of_every_kind() -> None:
    result = runner.invoke(app, ["schema"])
    assert result.exit_code == 0, result.output
    printed = json.loads(result.output)
    assert printed == json_schema()
    assert [r["$ref"] for r in printed["oneOf"]] == ["#/$defs/CampaignSpec", "#/$defs/AbbaSpec", "#/$defs/SweepSpec",
                                                     "#/$defs/MatchedSdSpec", "#/$defs/ReplaySpec",
                                                     "#/$defs/SlaSpec"]


def test_schema_of_one_kind() -> None:
    result = runner.invoke(app, ["schema", "--kind", "rate-sweep"])
    assert result.exit_code == 0, result.output
    printed = json.loads(result.output)
    assert printed["properties"]["kind"]["const"] == "rate-sweep"
    assert printed["properties"]["schedule_tolerance_ms"]["default"] == 50.0


def test_markdown_is_the_committed_reference() -> None:
    result = runner.invoke(app, ["schema", "--markdown"])
    assert result.exit_code == 0, result.output
    assert result.output == (ROOT / "docs" / "spec-reference.md").read_text()


def test_unknown_kind_lists_every_kind() -> None:
    result = runner.invoke(app, ["schema", "--kind", "sweep"])
    assert isinstance(result.exception, SpecError)
    assert result.exception.hint == "use " + ", ".join(f"--kind {k}" for k in SPEC_KINDS[:-1]) + \
        f" or --kind {SPEC_KINDS[-1]}"
    assert "--kind rate-sweep" in (result.exception.hint or "")
