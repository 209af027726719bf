"""docs/spec-reference.md and the JSON Schema are generated from the spec models and kept in step:
every field has a one-line meaning, every numeric field a unit, the committed reference equals a
fresh rendering byte for byte, and the JSON Schema accepts every shipped spec and profile."""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any, Literal

import pytest

from harness.errors import SpecError
from harness.formats import read_yaml
from harness.inputs.spec import SPEC_KINDS, AbbaWorkload, ServiceProfile, kinds_hint, load_spec
from harness.inputs.spec_reference import (
    KIND_MODELS,
    REGENERATE,
    fields_without_description,
    fields_without_unit,
    is_numeric,
    json_schema,
    reference_markdown,
    split_unit,
    type_text,
)

ROOT = Path(__file__).resolve().parents[2]
DOC = ROOT / "docs" / "spec-reference.md"
WORKLOAD_FILES = {"abba-c32.yaml"}  # ABBA workloads named by 'dsv4h abba --workload', not specs


def test_committed_reference_is_current() -> None:
    assert DOC.read_bytes() == reference_markdown().encode(), f"docs/spec-reference.md is stale: run {REGENERATE}"


def test_every_field_has_a_meaning_and_every_number_a_unit() -> None:
    assert fields_without_description() == []
    assert fields_without_unit() == []


def test_unit_split_and_type_text() -> None:
    assert split_unit("longest wait (seconds)") == ("longest wait", "seconds")
    assert split_unit("GPU ids (default: all)") == ("GPU ids (default: all)", "")
    assert type_text(Literal["a", "b"] | None) == '"a" | "b" | null'
    assert type_text(dict[str, list[int]]) == "map[str, list[int]]"
    assert type_text(ServiceProfile) == "[ServiceProfile](#serviceprofile)"
    assert is_numeric(list[int] | None) and not is_numeric(bool) and not is_numeric(list[str])


def test_reference_rows_state_defaults_and_units() -> None:
    md = reference_markdown()
    assert "| `min_resident_seconds` | float | `30.0` | seconds | common resident window a round must reach |" in md
    assert "| `service` | [ServiceProfile](#serviceprofile) \\| path | required | - |" in md
    assert "| `max_event_bytes` | int | `4194304` | bytes |" in md
    headings = re.findall(r"^## (.+)$", md, flags=re.M)
    assert headings[:len(SPEC_KINDS)] == [f"kind: {k}" for k in SPEC_KINDS]
    assert {"ServiceProfile", "DecodeSpec", "ArrivalSettings", "SimSettings"} <= set(headings)
    assert len(headings) == len(set(headings))


def test_kinds_come_from_one_tuple(tmp_path: Path) -> None:
    assert tuple(KIND_MODELS) == SPEC_KINDS == ("formal-matrix", "abba", "rate-sweep", "matched-sd", "trace-replay",
                                                "sla-search")
    assert kinds_hint() == ("use kind: formal-matrix, kind: abba, kind: rate-sweep, kind: matched-sd, "
                            "kind: trace-replay or kind: sla-search")
    spec = tmp_path / "s.yaml"
    spec.write_text("name: x\nkind: matrix\n")
    with pytest.raises(SpecError) as err:
        load_spec(spec)
    assert "kind 'matrix' is not known" in err.value.message and err.value.hint == kinds_hint()


# --- a JSON Schema subset validator (jsonschema is not a dependency) --------------------------

_CHECKED = {"$ref", "anyOf", "oneOf", "const", "enum", "type", "properties", "required", "additionalProperties",
            "items", "minimum", "maximum", "exclusiveMinimum", "exclusiveMaximum", "minLength", "maxLength",
            "pattern", "maxItems", "minItems", "maxProperties"}
_NOTES = {"title", "description", "default", "$schema", "$defs"}
_TYPES: dict[str, Any] = {"string": str, "integer": int, "number": (int, float), "boolean": bool,
                          "array": list, "object": dict, "null": type(None)}


def _keywords(schema: Any) -> set[str]:
    if isinstance(schema, dict):
        found = set(schema)
        for key, value in schema.items():
            if key in ("properties", "$defs"):
                found |= set().union(*(_keywords(v) for v in value.values())) if value else set()
            elif key != "default":
                found |= _keywords(value)
        return found
    if isinstance(schema, list):
        return set().union(*(_keywords(v) for v in schema)) if schema else set()
    return set()


def _errors(value: Any, schema: dict[str, Any], root: dict[str, Any], at: str) -> list[str]:  # noqa: C901, PLR0912
    if "$ref" in schema:
        schema = root["$defs"][schema["$ref"].rsplit("/", 1)[1]]
    out: list[str] = []
    for key in ("anyOf", "oneOf"):
        if key in schema:
            matched = [s for s in schema[key] if not _errors(value, s, root, at)]
            if (key == "anyOf" and not matched) or (key == "oneOf" and len(matched) != 1):
                out.append(f"{at}: {len(matched)} of {key} match")
    if "const" in schema and value != schema["const"]:
        out.append(f"{at}: not {schema['const']!r}")
    if "enum" in schema and value not in schema["enum"]:
        out.append(f"{at}: {value!r} not in {schema['enum']}")
    if "type" in schema:
        kind = schema["type"]
        if (isinstance(value, bool) and kind in ("integer", "number")) or not isinstance(value, _TYPES[kind]):
            return [*out, f"{at}: {value!r} is not {kind}"]
    if isinstance(value, int | float) and not isinstance(value, bool):
        bounds = (("minimum", value < schema.get("minimum", value)), ("maximum", value > schema.get("maximum", value)),
                  ("exclusiveMinimum", "exclusiveMinimum" in schema and value <= schema["exclusiveMinimum"]),
                  ("exclusiveMaximum", "exclusiveMaximum" in schema and value >= schema["exclusiveMaximum"]))
        out += [f"{at}: {value} breaks {name}" for name, broken in bounds if broken]
    if isinstance(value, str):
        if len(value) > schema.get("maxLength", len(value)) or len(value) < schema.get("minLength", 0):
            out.append(f"{at}: length {len(value)}")
        if "pattern" in schema and not re.search(schema["pattern"], value):
            out.append(f"{at}: {value!r} does not match {schema['pattern']}")
    if isinstance(value, list):
        if len(value) > schema.get("maxItems", len(value)) or len(value) < schema.get("minItems", 0):
            out.append(f"{at}: {len(value)} items")
        for i, item in enumerate(value):
            out += _errors(item, schema.get("items", {}), root, f"{at}[{i}]")
    if isinstance(value, dict):
        props = schema.get("properties", {})
        if len(value) > schema.get("maxProperties", len(value)):
            out.append(f"{at}: {len(value)} keys")
        out += [f"{at}.{k}: required" for k in schema.get("required", []) if k not in value]
        for k, v in value.items():
            extra = schema.get("additionalProperties", True)
            if k in props:
                out += _errors(v, props[k], root, f"{at}.{k}")
            elif extra is False:
                out.append(f"{at}.{k}: not allowed")
            elif isinstance(extra, dict):
                out += _errors(v, extra, root, f"{at}.{k}")
    return out


def test_the_validator_understands_every_keyword_the_schema_uses() -> None:
    assert _keywords(json_schema()) - _CHECKED - _NOTES - {"format"} == set()  # format is annotation only


def test_schema_is_json_with_one_branch_per_kind() -> None:
    schema = json.loads(json.dumps(json_schema()))
    branches = [schema["$defs"][ref["$ref"].rsplit("/", 1)[1]] for ref in schema["oneOf"]]
    assert [b["properties"]["kind"]["const"] for b in branches] == list(SPEC_KINDS)
    assert {"type": "string", "description": "path of a YAML file holding it, relative to the spec"} in \
        schema["$defs"]["AbbaSpec"]["properties"]["workload"]["anyOf"]
    one = json_schema("rate-sweep")
    assert one["title"] == "SweepSpec" and "rates" in one["properties"] and "oneOf" not in one


def test_schema_accepts_every_shipped_spec_and_refuses_mistakes() -> None:
    schema = json_schema()
    specs = sorted(p for p in (ROOT / "campaigns").glob("*.yaml") if p.name not in WORKLOAD_FILES)
    assert {str(read_yaml(p).get("kind", "formal-matrix")) for p in specs} == set(SPEC_KINDS)
    for path in specs:
        data = read_yaml(path)
        assert _errors(data, schema, schema, path.name) == []
        assert load_spec(path).kind == str(data.get("kind", "formal-matrix"))  # and the models agree
    good = read_yaml(ROOT / "campaigns" / "demo-matrix.yaml")
    assert _errors({**good, "decod": {}}, schema, schema, "x") != []
    assert _errors({**good, "kind": "rate-sweep"}, schema, schema, "x") != []
    assert _errors({**good, "request_timeout_s": -1}, schema, schema, "x") != []


def test_schema_accepts_shipped_profiles_and_workloads() -> None:
    schema = json_schema()
    profile = {"$ref": "#/$defs/ServiceProfile"}
    workload = {"$ref": "#/$defs/AbbaWorkload"}
    profiles = sorted((ROOT / "campaigns" / "profiles").glob("*.yaml"))
    assert profiles
    for path in profiles:
        data = read_yaml(path)
        assert _errors(data, profile, schema, path.name) == []
        ServiceProfile.model_validate(data)
    for name in WORKLOAD_FILES:
        data = read_yaml(ROOT / "campaigns" / name)
        assert _errors(data, workload, schema, name) == []
        AbbaWorkload.model_validate(data)
