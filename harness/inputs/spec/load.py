"""One loader for every spec kind (pure, reads files): :func:`load_spec` reads a YAML file, decides
its kind (the one place that does, :func:`kind_of`; ``formal-matrix`` when ``kind`` is absent),
inlines the sections that name YAML files, validates it as that kind's model (:data:`SPEC_MODELS`,
a union discriminated on ``kind``) and resolves every path it names once (:class:`SpecPaths`).
Any problem raises ``SpecError`` naming the file, the field path and the fix (with a did-you-mean
for unknown keys)."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Annotated, Any

from pydantic import BaseModel, Field

from harness.errors import SpecError
from harness.formats import parse_model, read_yaml, resolve_path
from harness.inputs.spec.abba import AbbaSpec, AbbaWorkload
from harness.inputs.spec.base import SPEC_KINDS, SpecBase, kinds_hint
from harness.inputs.spec.formal import CampaignSpec
from harness.inputs.spec.matched import MatchedSdSpec, MatchedWorkload
from harness.inputs.spec.replay import ReplaySpec
from harness.inputs.spec.service import ServiceProfile, load_profile, resolve_profile
from harness.inputs.spec.sla import SlaSpec
from harness.inputs.spec.sweep import SweepSpec

DEFAULT_KIND = "formal-matrix"
# The union discriminated on ``kind``: each kind's model (in SPEC_KINDS order).
AnySpec = Annotated[CampaignSpec | AbbaSpec | SweepSpec | MatchedSdSpec | ReplaySpec | SlaSpec,
                    Field(discriminator="kind")]
SPEC_MODELS: dict[str, type[SpecBase]] = {"formal-matrix": CampaignSpec, "abba": AbbaSpec, "rate-sweep": SweepSpec,
                                          "matched-sd": MatchedSdSpec, "trace-replay": ReplaySpec,
                                          "sla-search": SlaSpec}
KindSpec = CampaignSpec | AbbaSpec | SweepSpec | MatchedSdSpec | ReplaySpec | SlaSpec
assert tuple(SPEC_MODELS) == SPEC_KINDS


def kind_of(data: Any) -> str:
    """The kind a spec's parsed YAML declares (``formal-matrix`` when it declares none or is not a
    mapping, so the formal model reports what is wrong)."""
    if isinstance(data, Mapping):
        return str(data.get("kind", DEFAULT_KIND))
    return DEFAULT_KIND


@dataclass(frozen=True)
class SpecPaths:
    """Every path a spec names, resolved once at load (relative to the spec's directory first, then
    the working directory). ``corpora`` maps a workload (``decode``, ``prefill``; ``workload`` for an
    ABBA screen; ``sweep`` for a rate sweep and an SLA search; ``replay`` and its ``trace`` file for a trace
    replay) to its corpus directory or name."""

    corpora: Mapping[str, Path]
    oracles: tuple[Path, ...] = ()
    analysis_plan: Path | None = None


@dataclass(frozen=True)
class LoadedSpec:
    """A validated spec of any kind with its source file, raw bytes and resolved paths."""

    spec: KindSpec
    source: Path | None
    raw: bytes | None
    paths: SpecPaths

    @property
    def kind(self) -> str:
        """The spec's kind (one of ``SPEC_KINDS``)."""
        return self.spec.kind


def _inline_file(data: dict[str, Any], key: str, base: Path, model: type[BaseModel]) -> None:
    """Replace ``data[key]`` naming a YAML file by that file's (validated) content."""
    ref = data.get(key)
    if isinstance(ref, str):
        path = resolve_path(ref, base)
        loaded = read_yaml(path)
        if model is ServiceProfile and not isinstance(loaded, dict):
            raise SpecError(f"{path}: a service profile must be a mapping", hint="see campaigns/profiles/")
        parse_model(model, loaded, str(path))
        data[key] = loaded


def _parse(path: Path) -> KindSpec:
    data = read_yaml(path)
    kind = kind_of(data)
    if kind not in SPEC_MODELS:
        raise SpecError(f"{path}: kind '{kind}' is not known", hint=kinds_hint())
    if not isinstance(data, dict):
        return parse_model(CampaignSpec, data, str(path))
    if kind == "abba":
        for key in ("control", "candidate"):
            _inline_file(data, key, path.parent, ServiceProfile)
        _inline_file(data, "workload", path.parent, AbbaWorkload)
        return parse_model(AbbaSpec, data, str(path))
    if kind == "matched-sd":
        for key in ("ar", "sd"):
            _inline_file(data, key, path.parent, ServiceProfile)
        _inline_file(data, "workload", path.parent, MatchedWorkload)
        return parse_model(MatchedSdSpec, data, str(path))
    if kind in ("rate-sweep", "trace-replay", "sla-search"):  # a profile file's own paths resolve against its directory
        svc = data.get("service")
        if isinstance(svc, str):
            data["service"] = load_profile(resolve_path(svc, path.parent)).model_dump(mode="json")
        if kind == "trace-replay":
            return parse_model(ReplaySpec, data, str(path))
        if kind == "sla-search":
            return parse_model(SlaSpec, data, str(path))
        return parse_model(SweepSpec, data, str(path))
    _inline_file(data, "service", path.parent, ServiceProfile)
    return parse_model(CampaignSpec, data, str(path))


def spec_paths(spec: KindSpec, base: Path) -> SpecPaths:
    """Resolve the paths of ``spec`` against ``base`` (the spec file's directory)."""
    oracles = tuple(resolve_path(p, base) for p in spec.oracles)
    if isinstance(spec, AbbaSpec | MatchedSdSpec):
        return SpecPaths(corpora={"workload": resolve_path(spec.workload.corpus, base)}, oracles=oracles)
    if isinstance(spec, SweepSpec | SlaSpec):
        return SpecPaths(corpora={"sweep": resolve_path(spec.corpus, base)}, oracles=oracles)
    if isinstance(spec, ReplaySpec):
        return SpecPaths(corpora={"replay": resolve_path(spec.corpus, base),
                                  "trace": resolve_path(spec.trace, base)}, oracles=oracles)
    corpora: dict[str, Path] = {}
    if spec.decode is not None and spec.corpora.decode:
        corpora["decode"] = resolve_path(spec.corpora.decode, base)
    if spec.prefill is not None and spec.corpora.prefill:
        corpora["prefill"] = resolve_path(spec.corpora.prefill, base)
    plan = resolve_path(spec.analysis_plan, base) if spec.analysis_plan else None
    return SpecPaths(corpora=corpora, oracles=oracles, analysis_plan=plan)


def with_resolved_profiles(spec: KindSpec, base: Path
                           ) -> KindSpec:
    """``spec`` with each service profile's paths (``patches``, ``tokenizer``, ``sim.profile_file``)
    made absolute (machine-local)."""
    if isinstance(spec, AbbaSpec):
        return spec.model_copy(update={"control": resolve_profile(spec.control, base),
                                       "candidate": resolve_profile(spec.candidate, base)})
    if isinstance(spec, MatchedSdSpec):
        return spec.model_copy(update={"ar": resolve_profile(spec.ar, base), "sd": resolve_profile(spec.sd, base)})
    return spec.model_copy(update={"service": resolve_profile(spec.service, base)})


def load_spec(path: Path) -> LoadedSpec:
    """Load a spec of any kind (module docstring) with its raw bytes and every path resolved."""
    spec = with_resolved_profiles(_parse(path), path.parent)
    return LoadedSpec(spec, path, path.read_bytes(), spec_paths(spec, path.parent))


def loaded_abba(spec: AbbaSpec, base: Path, raw: bytes | None = None, source: Path | None = None) -> LoadedSpec:
    """Wrap an ABBA spec assembled in code (``abba_from_files``) with paths resolved against ``base``."""
    spec2 = with_resolved_profiles(spec, base)
    return LoadedSpec(spec2, source, raw, spec_paths(spec2, base))
