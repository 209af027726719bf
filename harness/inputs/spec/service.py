"""Service profiles and load settings (pure, reads YAML): what service a run measures, how it is
started, and how the load client drives it.

A profile keeps at its top level what names the service and how the client reaches it (``name``,
``backend``, ``url``, ``protocol``, ``openai``, ``tokenizer``, ``sim``) and the rest in three sections
matching ``harness.service``'s subpackages: ``launch``, ``identity``, ``devices``
(:mod:`harness.inputs.spec.service_sections`, which also reads spec format 1's flat spelling)."""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path
from typing import Any, ClassVar, Literal, Self

from pydantic import BaseModel, Field, field_validator, model_validator

from harness.formats import Strict, parse_model, read_yaml, resolve_path
from harness.inputs.spec.base import (
    _PATH,
    MAX_WORKERS,
    NAME_PATTERN,
    Backend,
    ClaimClass,
    SpecBase,
    SpecPaths,
    inline_file,
)
from harness.inputs.spec.service_sections import (
    FLAT_KEYS,
    DeviceSettings,
    IdentitySettings,
    LaunchSettings,
    sectioned,
)


class SimSettings(Strict):
    """Options of the built-in simulator when ``backend: sim``."""

    profile: str = Field("paper-tp8", max_length=128, description="built-in simulator profile name "
                         "(harness/sim/profile_files/)")
    profile_file: str | None = Field(
        None, max_length=_PATH, description="a simulator profile YAML file (relative to the spec; "
        "harness/sim/profile_files/ holds the built-ins as examples); replaces 'profile' when set")
    stream_mode: Literal["cumulative", "delta", "skip-tokenizer-init"] = Field(
        "cumulative", description="how the simulator streams text: cumulative, delta, or token ids only")
    openai_usage: Literal["honor", "final-only", "none"] = Field(
        "honor", description="usage in the simulator's OpenAI streams: per chunk when asked (vLLM-like), "
        "final-only, or none (text deltas only, like transformers serve)")
    stream_interval: int = Field(1, ge=1, le=10_000, description="decode steps per streamed event (tokens)")
    time_scale: float = Field(1.0, gt=0, le=1000, allow_inf_nan=False,
                              description="multiplies every simulated duration (ratio)")
    step_factor: float = Field(1.0, gt=0, le=1000, allow_inf_nan=False,
                               description="multiplies decode step time; 1/1.1 = +10% faster (ratio)")
    die_after_requests: int | None = Field(None, ge=1, le=10**9,
                                           description="fault injection for tests: exit after N requests (count)")
    fault: str | None = Field(None, description="fault injection for tests: a simulator fault spec "
                              "(harness.sim.faults, e.g. error_event:3), checked when the simulator starts")
    fault_every: int = Field(1, ge=1, description="apply the fault to every N-th generate request (count)")
    fault_first: int | None = Field(None, ge=0,
                                    description="apply the fault only among the first N requests (count)")
    speculative: dict[str, Any] | None = Field(
        None, description="speculative decoding on top of the profile (docs/simulator.md: algorithm, "
        "draft_tokens, accept_probs, verify_cost, seed, sglang_fields, vllm_per_request, forge_report); absent: the "
        "profile's own (native unless its file has a speculative block); checked when the service starts")
    processes: int = Field(1, ge=1, le=64, description="simulator processes on one port and one step grid "
                           "(harness.sim.cluster): for event rates one process cannot emit (about 20k events/s "
                           "each); needs a profile whose decode step does not depend on the batch (count)")


class OpenAISettings(Strict):
    """How a generic OpenAI-compatible server is driven (``protocol: openai-completions|openai-chat``).

    Token counting prefers usage on every chunk, then per-chunk token ids, then one token per
    content chunk reconciled with the final usage, then re-tokenized text (``tokenizer`` needed);
    ``count_method`` pins one. Every record says which method produced its counts.
    """

    prompt_format: Literal["token-ids", "text"] = Field(
        "token-ids", description="send prompts as token ids or as text decoded with 'tokenizer'")
    continuous_usage_stats: bool = Field(True, description="ask for usage on every streamed chunk")
    return_token_ids: bool = Field(False, description="ask the server for the token ids of every chunk")
    send_cache_salt: bool = Field(False, description="send a cache salt (the server must accept the field)")
    count_method: Literal["auto", "usage-per-chunk", "token-ids", "chunks", "retokenized"] = Field(
        "auto", description="how output tokens are counted (auto: the best the stream offers)")
    chat_template: str | None = Field(
        None, description="what the server applies to chat messages (recorded; e.g. 'model default')")


class ServiceProfile(Strict):
    """What service to measure and how to start it.

    ``backend``: ``sim`` (built-in simulator, started as an owned subprocess), ``sglang`` or ``vllm``
    (launched as an owned process tree), ``attach`` (an already-running server at ``url``; the
    harness then cannot prove a fresh process and records that). The rest is in three sections,
    ``launch``, ``identity`` and ``devices``; the flat spelling of spec format 1 (``port:``,
    ``tp_size:`` ... at the top level) is read into them, never written.
    """

    name: str = Field("service", pattern=NAME_PATTERN,
                      description="a name (letters, digits, '.', '_', '-'; at most 64 characters): it names "
                      "log files and state in the workspace")
    backend: Backend = Field("sim", description="how the service is started (or attached to)")
    url: str | None = Field(None, max_length=_PATH, description="base URL of the server ('attach' needs it)")
    protocol: Literal["sglang", "vllm", "openai-completions", "openai-chat"] | None = Field(
        None, description="HTTP protocol spoken (default: vllm for backend vllm, else sglang)")
    openai: OpenAISettings = Field(default_factory=lambda: OpenAISettings(),  # noqa: PLW0108 - mypy needs the call
                                   description="settings for the openai-* protocols")
    tokenizer: str | None = Field(
        None, description="tokenizer (directory or tokenizer.json) that decodes corpus ids into text prompts "
        "and re-tokenizes streamed text; needed for text prompts, chat and re-tokenized counting")
    sim: SimSettings = Field(default_factory=lambda: SimSettings(),  # noqa: PLW0108 - mypy needs the call
                             description="simulator settings (backend sim)")
    launch: LaunchSettings = Field(default_factory=lambda: LaunchSettings(),  # noqa: PLW0108 - mypy needs the call
                                   description="how the service is started (harness.service.launch)")
    identity: IdentitySettings = Field(default_factory=lambda: IdentitySettings(),  # noqa: PLW0108
                                       description="what is served and verified (harness.service.identity)")
    devices: DeviceSettings = Field(default_factory=lambda: DeviceSettings(),  # noqa: PLW0108
                                    description="GPUs, their owners and the samplers (harness.service.devices)")

    FLAT_KEYS: ClassVar[Mapping[str, str]] = FLAT_KEYS
    """Spec format 1's flat keys and their sectioned paths (read, never written; did-you-mean candidates)."""

    @model_validator(mode="before")
    @classmethod
    def _sections(cls, data: object) -> object:
        return sectioned(data)

    @model_validator(mode="after")
    def _check_backend(self) -> ServiceProfile:
        if self.backend == "attach" and not self.url:
            raise ValueError("backend 'attach' needs 'url' (e.g. url: http://127.0.0.1:30021)")
        if self.backend in ("sglang", "vllm") and not self.identity.model_path:
            raise ValueError(f"backend '{self.backend}' needs 'identity.model_path'")
        if self.backend == "command" and not self.launch.command:
            raise ValueError("backend 'command' needs 'launch.command' (the server's argv, with {port})")
        if self.backend == "command" and self.protocol is None:
            raise ValueError("backend 'command' needs 'protocol' (sglang, vllm, openai-completions or openai-chat)")
        return self

    @property
    def checks_gpus(self) -> bool:
        """Whether GPU ownership is checked for this service."""
        check = self.devices.check_gpu_owners
        return check if check is not None else self.backend != "sim"

    @property
    def wire_protocol(self) -> Literal["sglang", "vllm", "openai-completions", "openai-chat"]:
        """The HTTP protocol the load client speaks to this service."""
        if self.protocol:
            return self.protocol
        return "vllm" if self.backend == "vllm" else "sglang"


class LoadSettings(Strict):
    """How the load is generated. ``workers``: client processes a wave's streams are spread over
    (``harness.load.workers``; same host, one monotonic clock, synchronized start). ``1`` keeps every
    stream in the campaign's own process; ``auto`` sizes the pool from the offered event rate and the
    measured client CPU per event (``harness.load.workers.auto_workers``). ``transport``: how the client
    reads the streams (``harness.load.driver.resolve_transport``: ``auto`` is the lean ``wire`` transport
    for ``http://`` services, aiohttp for ``https://``)."""

    workers: int | Literal["auto"] = Field(1, description="client worker processes (1 = in process) or auto "
                                             "(count)")
    pin_cpus: bool = Field(False, description="pin each worker process to its own CPU (Linux)")
    transport: Literal["auto", "wire", "aiohttp"] = Field("auto", description="client transport: auto, wire "
                                                          "or aiohttp")

    @field_validator("workers")
    @classmethod
    def _workers_range(cls, value: int | str) -> int | str:
        if isinstance(value, int) and not 1 <= value <= MAX_WORKERS:
            raise ValueError(f"workers must be 'auto' or 1..{MAX_WORKERS}")
        return value


class OneServiceSpec(SpecBase):
    """The header of a kind that measures one service (formal matrix, rate sweep): its claim class
    and its service profile."""

    claim_class: ClaimClass = Field(description="what the measured decoding claims to be")
    service: ServiceProfile = Field(description="the service measured (inline, or a profile file's path)")

    @classmethod
    def inline_files(cls, data: dict[str, Any], base: Path) -> None:
        """A ``service`` naming a profile file: that profile, its own paths resolved against its directory."""
        svc = data.get("service")
        if isinstance(svc, str):
            data["service"] = load_profile(resolve_path(svc, base)).model_dump(mode="json")

    def with_resolved_profiles(self, base: Path) -> Self:
        """The spec with its service profile's paths made absolute against ``base``."""
        return self.model_copy(update={"service": resolve_profile(self.service, base)})

    def corpus_paths(self, base: Path, **corpora: str) -> SpecPaths:
        """Paths of a one-service kind: the named ``corpora`` (workload -> path) and the oracles."""
        return SpecPaths(corpora={k: resolve_path(v, base) for k, v in corpora.items()},
                         oracles=self.oracle_paths(base))


def load_profile(path: Path) -> ServiceProfile:
    """Load and validate a service-profile YAML file (its ``patches`` path resolved against the file's
    directory)."""
    return resolve_profile(parse_model(ServiceProfile, read_yaml(path), str(path)), path.parent)


def resolve_profile(profile: ServiceProfile, base: Path) -> ServiceProfile:
    """``profile`` with its ``tokenizer``, ``sim.profile_file``, ``launch.patches``,
    ``identity.source_trees`` and ``identity.library_dirs`` paths made absolute against ``base`` (the
    directory of the file that named them)."""
    update: dict[str, Any] = {}
    if profile.tokenizer is not None:
        update["tokenizer"] = str(resolve_path(profile.tokenizer, base))
    if profile.sim.profile_file is not None:
        update["sim"] = profile.sim.model_copy(
            update={"profile_file": str(resolve_path(profile.sim.profile_file, base))})
    if profile.launch.patches is not None:
        patches = str(resolve_path(profile.launch.patches, base))
        update["launch"] = profile.launch.model_copy(update={"patches": patches})
    ident = profile.identity
    ident_update: dict[str, Any] = {}
    if ident.source_trees:
        ident_update["source_trees"] = [t.model_copy(update={"path": str(resolve_path(t.path, base))})
                                        for t in ident.source_trees]
    if ident.library_dirs:
        ident_update["library_dirs"] = [str(resolve_path(d, base)) for d in ident.library_dirs]
    if ident_update:
        update["identity"] = ident.model_copy(update=ident_update)
    return profile.model_copy(update=update) if update else profile


class TwoProfileSpec(SpecBase):
    """The header of a kind that compares two services on one fixed workload (an ABBA screen, a
    matched AR/SD run): ``PROFILES`` names its two profile keys, ``WORKLOAD`` its workload model (the
    model declares a ``workload`` field of that type)."""

    PROFILES: ClassVar[tuple[str, str]]
    WORKLOAD: ClassVar[type[BaseModel]]

    @classmethod
    def inline_files(cls, data: dict[str, Any], base: Path) -> None:
        """Both profiles and the workload named as files, inline."""
        for key in cls.PROFILES:
            inline_file(data, key, base, ServiceProfile)
        inline_file(data, "workload", base, cls.WORKLOAD)

    def spec_paths(self, base: Path) -> SpecPaths:
        """The workload's corpus and the oracles."""
        return SpecPaths(corpora={"workload": resolve_path(getattr(self, "workload").corpus, base)},  # noqa: B009
                         oracles=self.oracle_paths(base))

    def with_resolved_profiles(self, base: Path) -> Self:
        """Both profiles' paths made absolute against ``base``."""
        return self.model_copy(update={k: resolve_profile(getattr(self, k), base) for k in self.PROFILES})
