"""The spec formats' reference and JSON Schema, generated from the pydantic models (pure).

:func:`reference_markdown` renders ``docs/spec-reference.md`` (``dsv4h campaign schema --markdown``):
one section per spec kind, then one per nested model, each a table of field, type, default, unit and
meaning. :func:`json_schema` is the JSON Schema of one kind, or of every kind as a ``oneOf``
(``dsv4h campaign schema``), for editors.

Unit convention: a field's description ends with its unit in parentheses, one of ``UNITS``
(``"... before this many seconds (seconds)"``); every numeric field has one (:func:`fields_without_unit`),
every field has a description (:func:`fields_without_description`).
"""

from __future__ import annotations

import inspect
import json
import re
import types
from collections.abc import Iterator
from typing import Annotated, Any, Literal, Union, get_args, get_origin

from pydantic import BaseModel
from pydantic.fields import FieldInfo

from harness.inputs.spec import SPEC_KINDS, SPEC_MODELS, AbbaSpec, CampaignSpec, MatchedSdSpec, SlaSpec, SweepSpec

__all__ = ["json_schema", "reference_markdown"]

UNITS = ("seconds", "ms", "tokens", "bytes", "requests/s", "requests in flight", "count", "ratio", "percent",
         "index", "port", "version")
KIND_MODELS: dict[str, type[BaseModel]] = dict(SPEC_MODELS)  # the kinds' models, from the one loader
# Fields a spec file may give as the path of a YAML file (relative to the spec) instead of inline.
FILE_FIELDS: dict[type[BaseModel], tuple[str, ...]] = {
    CampaignSpec: ("service",), AbbaSpec: ("control", "candidate", "workload"), SweepSpec: ("service",),
    MatchedSdSpec: ("ar", "sd", "workload"), SlaSpec: ("service",)}
SCHEMA_DIALECT = "https://json-schema.org/draft/2020-12/schema"
REGENERATE = "dsv4h campaign schema --markdown > docs/spec-reference.md"
_UNIT_RE = re.compile(r"\s\(([^()]+)\)$")


def split_unit(description: str) -> tuple[str, str]:
    """``(meaning, unit)`` of a description: its trailing ``(unit)`` when that is one of ``UNITS``."""
    m = _UNIT_RE.search(description)
    if m and m.group(1) in UNITS:
        return description[:m.start()], m.group(1)
    return description, ""


def _strip(annotation: Any) -> Any:
    return get_args(annotation)[0] if get_origin(annotation) is Annotated else annotation


def _parts(annotation: Any) -> tuple[Any, ...]:
    """Direct type arguments of ``annotation`` (members of a union, items of a list or a map)."""
    return tuple(_strip(a) for a in get_args(_strip(annotation)) if get_origin(_strip(annotation)) is not Literal)


def _walk(annotation: Any) -> Iterator[Any]:
    annotation = _strip(annotation)
    yield annotation
    for part in _parts(annotation):
        yield from _walk(part)


def is_numeric(annotation: Any) -> bool:
    """Whether a field's type holds a number (int or float, alone or in a union or list; not bool)."""
    return any(t is int or t is float for t in _walk(annotation))


def nested_models(annotation: Any) -> list[type[BaseModel]]:
    """Models a field's type refers to, in order."""
    return [t for t in _walk(annotation) if isinstance(t, type) and issubclass(t, BaseModel)]


def type_text(annotation: Any) -> str:
    """A field's type as the reference writes it: ``int``, ``"a" | "b"``, ``list[str]``, ``[Model](#model)``."""
    annotation = _strip(annotation)
    origin = get_origin(annotation)
    if origin is Literal:
        return " | ".join(json.dumps(v) for v in get_args(annotation))
    if origin in (Union, types.UnionType):
        return " | ".join(type_text(a) for a in get_args(annotation))
    if origin is list:
        return f"list[{type_text(get_args(annotation)[0])}]"
    if origin is dict:
        key, value = get_args(annotation)
        return f"map[{type_text(key)}, {type_text(value)}]"
    if annotation is type(None):
        return "null"
    if isinstance(annotation, type) and issubclass(annotation, BaseModel):
        return f"[{annotation.__name__}](#{annotation.__name__.lower()})"
    return {int: "int", float: "float", str: "str", bool: "bool"}.get(annotation, "any")


def default_text(field: FieldInfo) -> str:
    """``required``, ``(section)`` for a nested model's defaults, else the default as JSON."""
    if field.is_required():
        return "required"
    value = field.get_default(call_default_factory=True)
    if isinstance(value, BaseModel):
        return "(its defaults)"
    return json.dumps(value)


def all_models() -> list[type[BaseModel]]:
    """Every model of the spec formats: the kinds' models, then each nested model once, in the
    order the kinds first refer to it."""
    seen: list[type[BaseModel]] = list(KIND_MODELS.values())
    i = 0
    while i < len(seen):
        for field in seen[i].model_fields.values():
            seen.extend(m for m in nested_models(field.annotation) if m not in seen)
        i += 1
    return seen


def fields_without_description() -> list[str]:
    """``Model.field`` for every field lacking a one-line description."""
    return [f"{m.__name__}.{name}" for m in all_models() for name, f in m.model_fields.items()
            if not f.description or "\n" in f.description]


def fields_without_unit() -> list[str]:
    """``Model.field`` for every numeric field whose description names no unit of ``UNITS``."""
    return [f"{m.__name__}.{name}" for m in all_models() for name, f in m.model_fields.items()
            if is_numeric(f.annotation) and not split_unit(f.description or "")[1]]


def _cell(text: str) -> str:
    return text.replace("|", "\\|").replace("*", "\\*")


def _intro(model: type[BaseModel]) -> str:
    doc = inspect.cleandoc(model.__doc__ or "").replace("``", "`")
    return "\n\n".join(" ".join(p.split()) for p in doc.split("\n\n") if p.strip())


def _table(model: type[BaseModel]) -> list[str]:
    rows = ["| field | type | default | unit | meaning |", "|---|---|---|---|---|"]
    files = FILE_FIELDS.get(model, ())
    for name, field in model.model_fields.items():
        typ = type_text(field.annotation) + (" | path" if name in files else "")
        meaning, unit = split_unit(field.description or "")
        default = default_text(field)
        shown = default if default in ("required", "(its defaults)") else f"`{_cell(default)}`"
        rows.append(f"| `{name}` | {_cell(typ)} | {shown} | {unit or '-'} | {_cell(meaning)} |")
    return rows


_HEADER = f"""# Spec reference

Generated from the pydantic models (the package `harness/inputs/spec/`; the shared header in `base.py`) by
`{REGENERATE}`
(a test keeps it in step). Every field, its type, its default ("required" when it has none), its unit
and what it means. Unknown keys are errors (with a did-you-mean).

JSON Schema for editors: `dsv4h campaign schema > spec.schema.json` (every kind, a `oneOf` over `kind`;
`--kind abba` for one), then start a spec with the YAML language server's modeline:

```yaml
# yaml-language-server: $schema=spec.schema.json
```

(the path is relative to the spec file; VS Code's YAML extension and other editors using the YAML
language server then complete and check keys). A `path` in a type means the value may instead name a
YAML file holding that section, relative to the spec.

| kind | model | what |
|---|---|---|
"""


def reference_markdown() -> str:
    """The whole reference (``docs/spec-reference.md``), ending in one newline."""
    out = [_HEADER.rstrip("\n")]
    out += [f"| `{k}` | [{m.__name__}](#kind-{k}) | {_cell(_intro(m).splitlines()[0])} |"
            for k, m in KIND_MODELS.items()]
    for model in all_models():
        kind = next((k for k, m in KIND_MODELS.items() if m is model), None)
        out += ["", f"## kind: {kind}" if kind else f"## {model.__name__}", ""]
        if kind:
            out += [f"Model `{model.__name__}`.", ""]
        out += [_intro(model), "", *_table(model)]
    return "\n".join(out) + "\n"


def _with_file_refs(schema: dict[str, Any], model: type[BaseModel]) -> dict[str, Any]:
    """``schema`` where each field of ``FILE_FIELDS`` also accepts a path string."""
    props = schema["properties"]
    for name in FILE_FIELDS.get(model, ()):
        inline = {k: v for k, v in props[name].items() if k not in ("description", "title")}
        props[name] = {"anyOf": [inline, {"type": "string", "description": "path of a YAML file holding it, "
                                          "relative to the spec"}],
                       "title": props[name].get("title", name), "description": props[name].get("description", "")}
    return schema


def json_schema(kind: str | None = None) -> dict[str, Any]:
    """JSON Schema (draft 2020-12) of the spec ``kind`` (one of ``SPEC_KINDS``), or of any spec (a
    ``oneOf`` over every kind) when ``kind`` is None. ``KeyError`` for an unknown kind."""
    models = [KIND_MODELS[kind]] if kind is not None else list(KIND_MODELS.values())
    defs: dict[str, Any] = {}
    tops: list[dict[str, Any]] = []
    for model in models:
        schema = model.model_json_schema(mode="validation")
        defs.update(schema.pop("$defs", {}))
        tops.append(_with_file_refs(schema, model))
    if kind is not None:
        return {"$schema": SCHEMA_DIALECT, **tops[0], "$defs": dict(sorted(defs.items()))}
    defs.update({m.__name__: s for m, s in zip(models, tops, strict=True)})
    return {"$schema": SCHEMA_DIALECT, "title": "dsv4h spec (any kind)",
            "description": "a campaign spec: " + ", ".join(SPEC_KINDS) + " (kind: formal-matrix when absent)",
            "oneOf": [{"$ref": f"#/$defs/{m.__name__}"} for m in models], "$defs": dict(sorted(defs.items()))}
