"""Spec formats of every kind (pydantic, ``extra="forbid"``; pure, reads files).

- :mod:`.base`: limits, names and :class:`SpecBase`, the header every kind shares (one format check);
- :mod:`.service`: service profiles, simulator/OpenAI/load settings; :mod:`.service_sections`: a
  profile's ``launch``, ``identity`` and ``devices`` sections (and the flat spelling of format 1);
- :mod:`.formal`, :mod:`.abba`, :mod:`.sweep`, :mod:`.matched`, :mod:`.sla`: the kinds' models (formal-matrix,
  abba, rate-sweep, matched-sd, sla-search);
- :mod:`.load`: :func:`load_spec`, the one loader, which decides the kind.

The public names are re-exported here (``from harness.inputs.spec import X``).
"""

from harness.inputs.spec.abba import AbbaSpec, AbbaWorkload, FixedWaves, abba_from_files
from harness.inputs.spec.base import (
    CAMPAIGN_NAME_PATTERN,
    MAX_CAMPAIGN_NAME_CHARS,
    MAX_CONCURRENCY,
    MAX_EVENT_BYTES,
    MAX_NAME_CHARS,
    MAX_NEW_TOKENS,
    MAX_ROUNDS,
    MAX_SECONDS,
    MAX_TIERS,
    MAX_WAVES,
    MAX_WORKERS,
    NAME_PATTERN,
    SPEC_FORMAT_VERSION,
    SPEC_KINDS,
    TIERS,
    Backend,
    CacheDefeat,
    ClaimClass,
    ClientLimits,
    ProtocolClass,
    ReopenSpec,
    SpecBase,
    SpecPaths,
    check_format_version,
    check_name,
    kinds_hint,
    legacy_cache,
)
from harness.inputs.spec.formal import CampaignSpec, CorporaSpec, DecodeSpec, PrefillSpec
from harness.inputs.spec.load import (
    DEFAULT_KIND,
    SPEC_MODELS,
    AnySpec,
    KindSpec,
    LoadedSpec,
    kind_of,
    load_spec,
    loaded_abba,
    spec_model,
    spec_paths,
    with_resolved_profiles,
)
from harness.inputs.spec.matched import MatchedSdSpec, MatchedWorkload
from harness.inputs.spec.replay import ReplaySpec, replay_definition
from harness.inputs.spec.service import (
    LoadSettings,
    OneServiceSpec,
    OpenAISettings,
    ServiceProfile,
    SimSettings,
    load_profile,
    resolve_profile,
)
from harness.inputs.spec.service_sections import (
    DeviceSettings,
    IdentitySettings,
    LaunchSettings,
    LibraryRequirement,
    SourceTree,
    sectioned_dump,
    sectioned_key,
    spelled_key,
)
from harness.inputs.spec.sla import SearchSpec, SlaSpec, probe_sweep, sla_definition
from harness.inputs.spec.slurm import SlurmSpec
from harness.inputs.spec.sweep import MAX_RATE, ArrivalSettings, GeometricRates, SloSpec, SweepSpec, sweep_definition

__all__ = [
    "CAMPAIGN_NAME_PATTERN", "DEFAULT_KIND", "MAX_CAMPAIGN_NAME_CHARS", "MAX_CONCURRENCY", "MAX_EVENT_BYTES",
    "MAX_NAME_CHARS", "MAX_NEW_TOKENS", "MAX_RATE", "MAX_ROUNDS", "MAX_SECONDS", "MAX_TIERS", "MAX_WAVES",
    "MAX_WORKERS", "NAME_PATTERN", "SPEC_FORMAT_VERSION", "SPEC_KINDS", "SPEC_MODELS", "TIERS", "AbbaSpec",
    "AbbaWorkload", "AnySpec", "ArrivalSettings", "Backend", "CacheDefeat", "CampaignSpec", "ClaimClass",
    "ClientLimits", "CorporaSpec", "DecodeSpec", "DeviceSettings", "FixedWaves", "GeometricRates", "IdentitySettings",
    "KindSpec", "LaunchSettings", "LibraryRequirement", "LoadSettings", "LoadedSpec", "MatchedSdSpec",
    "MatchedWorkload", "OneServiceSpec", "OpenAISettings", "PrefillSpec", "ProtocolClass", "ReopenSpec", "ReplaySpec",
    "SearchSpec", "ServiceProfile", "SimSettings", "SlaSpec", "SloSpec", "SlurmSpec", "SourceTree", "SpecBase",
    "SpecPaths", "SweepSpec", "abba_from_files", "check_format_version", "check_name", "kind_of", "kinds_hint",
    "legacy_cache", "load_profile", "load_spec", "loaded_abba", "probe_sweep", "replay_definition", "resolve_profile",
    "sectioned_dump", "sectioned_key", "sla_definition", "spec_model", "spec_paths", "spelled_key",
    "sweep_definition",
    "with_resolved_profiles",
]
