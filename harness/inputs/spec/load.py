"""One loader for every spec kind (pure, reads files): :func:`load_spec` reads a YAML file, decides
its kind (the one place that does, :func:`kind_of`; ``formal-matrix`` when ``kind`` is absent),
inlines the sections that name YAML files, validates it as that kind's model (:func:`spec_model`,
read from the kind descriptor ``harness.kinds.KINDS`` at each load, so a kind registered after import
loads too; the models carry their own inlining and paths, so this module never tests which kind it
holds) and resolves every path it names once (:class:`SpecPaths`).
Any problem raises ``SpecError`` naming the file, the field path and the fix (with a did-you-mean
for unknown keys)."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from functools import cache
from pathlib import Path
from typing import Annotated, Any, Union, cast

from pydantic import Field

from harness.errors import SpecError
from harness.formats import parse_model, read_yaml
from harness.inputs.spec.base import SPEC_KINDS, SpecBase, SpecPaths, kinds_hint
from harness.kinds import KINDS, resolve

DEFAULT_KIND = "formal-matrix"
# The built-in kinds' models (harness.kinds at import), in SPEC_KINDS order: the JSON Schema's kinds.
SPEC_MODELS: dict[str, type[SpecBase]] = {name: resolve(KINDS[name].spec_model or "") for name in SPEC_KINDS}
# The union discriminated on ``kind`` (the JSON Schema's oneOf), built from SPEC_MODELS.
AnySpec = Annotated[Union[tuple(SPEC_MODELS.values())], Field(discriminator="kind")]  # type: ignore[valid-type]  # noqa: UP007
KindSpec = SpecBase  # a loaded spec: its kind's model (each kind's own modules narrow it)


def kind_of(data: Any) -> str:
    """The kind a spec's parsed YAML declares (``formal-matrix`` when it declares none or is not a
    mapping, so the formal model reports what is wrong)."""
    if isinstance(data, Mapping):
        return str(data.get("kind", DEFAULT_KIND))
    return DEFAULT_KIND


@dataclass(frozen=True)
class LoadedSpec:
    """A validated spec of any kind with its source file, raw bytes and resolved paths."""

    spec: SpecBase
    source: Path | None
    raw: bytes | None
    paths: SpecPaths

    @property
    def kind(self) -> str:
        """The spec's kind (one of ``SPEC_KINDS``)."""
        return self.spec.kind


@cache
def _model_of(ref: str) -> type[SpecBase]:
    """The spec model a ``module:attribute`` reference names (imported once per reference)."""
    return cast("type[SpecBase]", resolve(ref))


def spec_model(kind: str) -> type[SpecBase] | None:
    """The spec model of ``kind`` as :data:`harness.kinds.KINDS` holds it now (None: no such kind, or
    one not started from a spec)."""
    info = KINDS.get(kind)
    return None if info is None or info.spec_model is None else _model_of(info.spec_model)


def _parse(path: Path) -> SpecBase:
    data = read_yaml(path)
    kind = kind_of(data)
    model = spec_model(kind)
    if model is None:
        raise SpecError(f"{path}: kind '{kind}' is not known", hint=kinds_hint())
    if isinstance(data, dict):
        model.inline_files(data, path.parent)  # the kind's own sections that name files
    return parse_model(model, data, str(path))


def spec_paths(spec: SpecBase, base: Path) -> SpecPaths:
    """Resolve the paths of ``spec`` against ``base`` (the spec file's directory): the kind's own."""
    return spec.spec_paths(base)


def with_resolved_profiles(spec: SpecBase, base: Path) -> SpecBase:
    """``spec`` with each service profile's paths (``patches``, ``tokenizer``, ``sim.profile_file``)
    made absolute (machine-local): the kind's own."""
    return spec.with_resolved_profiles(base)


def load_spec(path: Path) -> LoadedSpec:
    """Load a spec of any kind (module docstring) with its raw bytes and every path resolved."""
    spec = with_resolved_profiles(_parse(path), path.parent)
    return LoadedSpec(spec, path, path.read_bytes(), spec_paths(spec, path.parent))


def loaded_abba(spec: SpecBase, base: Path, raw: bytes | None = None, source: Path | None = None) -> LoadedSpec:
    """Wrap an ABBA spec assembled in code (``abba_from_files``) with paths resolved against ``base``."""
    spec2 = with_resolved_profiles(spec, base)
    return LoadedSpec(spec2, source, raw, spec_paths(spec2, base))
