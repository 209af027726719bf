"""Campaign, service-profile and workload specifications (pydantic, ``extra="forbid"``).

``load_campaign(path)`` reads YAML and returns a validated ``CampaignSpec``; any problem raises
``SpecError`` naming the file, the field path and the fix (with a did-you-mean for unknown keys).
Pure: reads files, no other side effects.

Limits: everything that sizes work has a bound checked at load (``MAX_*`` below: concurrency, tiers,
rounds, waves, tokens, durations; floats must be finite), so no spec makes the planner or a run
allocate or loop without end. Names that become file names (service, campaign, workload) are
names: letters, digits, ``.``, ``_``, ``-``, starting with a letter or digit, at most
``MAX_NAME_CHARS`` (service) or ``MAX_CAMPAIGN_NAME_CHARS`` characters (:func:`check_name`).

Campaign spec format history (``SPEC_FORMAT_VERSION``):
  1 - first version (2026-11-29).
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Annotated, Any, Literal

from pydantic import BaseModel, Field, field_validator, model_validator

from harness.errors import SpecError
from harness.formats import Strict, parse_model, read_yaml, resolve_path

SPEC_FORMAT_VERSION = 1

MAX_NAME_CHARS = 64
MAX_CAMPAIGN_NAME_CHARS = 160
MAX_CONCURRENCY = 4096
MAX_WORKERS = 256
MAX_TIERS = 64
MAX_ROUNDS = 100
MAX_WAVES = 100_000
MAX_NEW_TOKENS = 1 << 20
MAX_SECONDS = 7 * 86400.0
MAX_EVENT_BYTES = 1 << 30
NAME_PATTERN = rf"^[A-Za-z0-9][A-Za-z0-9._-]{{0,{MAX_NAME_CHARS - 1}}}$"
CAMPAIGN_NAME_PATTERN = rf"^[A-Za-z0-9][A-Za-z0-9._-]{{0,{MAX_CAMPAIGN_NAME_CHARS - 1}}}$"
_TEXT = 100_000  # characters of free text (descriptions, reasons)
_PATH = 4096  # characters of a path or URL
_LIST = 4096  # entries of a list of arguments, ids or keys


def check_name(value: str, what: str = "service name") -> str:
    """``value`` if it is a valid name (module docstring), else ``SpecError`` saying why; for names
    given on the command line, which become file names inside the workspace."""
    if not re.fullmatch(NAME_PATTERN, value):
        shown = value if len(value) <= 80 else value[:77] + "..."
        raise SpecError(f"{what} {shown!r} is not a name: use letters, digits, '.', '_' and '-', starting with "
                        f"a letter or digit, at most {MAX_NAME_CHARS} characters",
                        hint="names never contain '/' or spaces; list started services with 'dsv4h service "
                        "status -w WORKSPACE'")
    return value

ClaimClass = Literal["native-ar", "speculative-full-target", "speculative-approximate"]
ProtocolClass = Literal["formal", "abba-screen", "rate-sweep"]
Backend = Literal["sim", "sglang", "vllm", "command", "attach"]
TIERS = (1, 2, 4, 8, 16, 32, 64)
# Every value a spec's ``kind`` may take, in the order the docs list them (one place: the CLI's
# unknown-kind hint, the JSON Schema and docs/spec-reference.md all read it).
SPEC_KINDS = ("formal-matrix", "abba", "rate-sweep")


def kinds_hint(lead: str = "kind: ") -> str:
    """``use kind: formal-matrix, kind: abba or kind: rate-sweep`` (``lead`` before each kind), built
    from ``SPEC_KINDS``."""
    named = [f"{lead}{k}" for k in SPEC_KINDS]
    return "use " + ", ".join(named[:-1]) + " or " + named[-1]


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
    harness then cannot prove a fresh process and records that).
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
    model_path: str | None = Field(None, max_length=_PATH, description="model weights ('sglang'/'vllm' need it)")
    served_model_name: str | None = Field(None, max_length=_PATH, description="model name the server reports")
    tp_size: int | None = Field(None, ge=1, le=MAX_CONCURRENCY, description="tensor-parallel size (count)")
    ep_size: int | None = Field(None, ge=1, le=MAX_CONCURRENCY, description="expert-parallel size (count)")
    dp_size: int | None = Field(None, ge=1, le=MAX_CONCURRENCY, description="data-parallel size (count)")
    host: str = Field("127.0.0.1", max_length=255, description="address the server listens on")
    port: int | None = Field(None, ge=0, le=65535, description="TCP port (default: a free one) (port)")
    python: str | None = Field(None, max_length=_PATH,
                               description="interpreter that runs the engine (default: this one)")
    command: list[str] | None = Field(
        None, max_length=_LIST, description="backend 'command': the server's argv; {host} and {port} are filled "
        "in (any OpenAI-compatible server, e.g. transformers serve)")
    health_path: str = Field("/health", pattern=r"^/", max_length=_PATH,
                             description="GET path answering 200 once the server is ready (e.g. /v1/models)")
    # SGLang launch settings (None = leave the engine's default; see harness.service.command)
    mem_fraction_static: float | None = Field(None, gt=0, le=1,
                                              description="GPU memory share for weights and KV (ratio)")
    max_total_tokens: int | None = Field(None, ge=1, le=1 << 40, description="KV pool size (tokens)")
    chunked_prefill_size: int | None = Field(None, ge=1, le=1 << 31, description="prefill chunk size (tokens)")
    max_running_requests: int | None = Field(None, ge=1, le=1 << 24,
                                             description="requests the engine runs at once (count)")
    max_prefill_tokens: int | None = Field(None, ge=1, le=1 << 31,
                                           description="tokens in one prefill batch (tokens)")
    cuda_graph_bs: list[int] | None = Field(None, max_length=_LIST,
                                            description="batch sizes captured as CUDA graphs (count)")
    attention_backend: str | None = Field(None, max_length=256, description="engine attention backend")
    moe_backend: str | None = Field(None, max_length=256, description="engine MoE backend")
    page_size: int | None = Field(None, ge=1, le=1 << 20, description="KV cache page size (tokens)")
    disable_radix_cache: bool = Field(False, description="turn the engine's prefix cache off")
    trust_remote_code: bool = Field(False, description="let the engine run the model's own code")
    numa: Literal["none", "interleave"] = Field("none", description="NUMA memory policy of the engine process")
    nnodes: int = Field(1, ge=1, le=1024, description="hosts the service spans (count)")
    node_rank: int | None = Field(None, ge=0, le=1023, description="this host's rank among nnodes (index)")
    dist_init_addr: str | None = Field(None, max_length=512, description="host:port of the multi-node rendezvous")
    gpus: list[int | str] | None = Field(
        None, max_length=_LIST,
        description="GPU indices/UUIDs the service uses (default: *_VISIBLE_DEVICES from env, else all) (index)")
    gpu_owners_source: Literal["auto", "amd-smi", "nvidia-smi", "nvml", "none"] = Field(
        "auto", description="tool that lists GPU owner processes")
    check_gpu_owners: bool | None = Field(
        None, description="refuse unrelated GPU owners before launch and before every cell/leg "
        "(default: on for every backend but sim)")
    memory_sample_interval_s: float = Field(5.0, gt=0, le=3600, allow_inf_nan=False,
                                            description="period of GPU memory samples (seconds)")
    extra_args: list[str] = Field(default_factory=list, max_length=_LIST,
                                  description="more arguments appended to the engine's argv")
    env: dict[str, str] = Field(default_factory=dict, max_length=_LIST,
                                description="environment variables set for the engine")
    patches: str | None = Field(None, max_length=_PATH, description="path of a model_patches series file")
    sim: SimSettings = Field(default_factory=lambda: SimSettings(),  # noqa: PLW0108 - mypy needs the call
                             description="simulator settings (backend sim)")
    startup_timeout_s: float = Field(900.0, gt=0, le=MAX_SECONDS, allow_inf_nan=False,
                                     description="longest wait for the server to become healthy (seconds)")
    expect: dict[str, Any] = Field(
        default_factory=dict, max_length=_LIST,
        description="server_info keys the running server must report (identity verification)",
    )

    @model_validator(mode="after")
    def _check_backend(self) -> ServiceProfile:
        if self.backend == "attach" and not self.url:
            raise ValueError("backend 'attach' needs 'url' (e.g. url: http://127.0.0.1:30021)")
        if self.backend in ("sglang", "vllm") and not self.model_path:
            raise ValueError(f"backend '{self.backend}' needs 'model_path'")
        if self.backend == "command" and not self.command:
            raise ValueError("backend 'command' needs 'command' (the server's argv, with {port})")
        if self.backend == "command" and self.protocol is None:
            raise ValueError("backend 'command' needs 'protocol' (sglang, vllm, openai-completions or openai-chat)")
        return self

    @property
    def checks_gpus(self) -> bool:
        """Whether GPU ownership is checked for this service."""
        return self.check_gpu_owners if self.check_gpu_owners is not None else self.backend != "sim"

    @property
    def wire_protocol(self) -> Literal["sglang", "vllm", "openai-completions", "openai-chat"]:
        """The HTTP protocol the load client speaks to this service."""
        if self.protocol:
            return self.protocol
        return "vllm" if self.backend == "vllm" else "sglang"


class CorporaSpec(Strict):
    """Paths of frozen corpora (relative to the spec file, or to the working directory)."""

    decode: str | None = Field(None, max_length=_PATH, description="corpus of the decode cells")
    prefill: str | None = Field(None, max_length=_PATH, description="corpus of the prefill cells")


class DecodeSpec(Strict):
    """Formal decode cells: duration-driven rounds of natural-EOS waves."""

    tiers: list[int] = Field(default_factory=lambda: list(TIERS),
                             description="concurrencies measured, one cell each (requests in flight)")
    rounds: int = Field(3, ge=1, le=MAX_ROUNDS, description="measured rounds per cell (count)")
    min_resident_seconds: float = Field(30.0, gt=0, le=MAX_SECONDS, allow_inf_nan=False,
                                        description="common resident window a round must reach (seconds)")
    warmup_waves: int = Field(1, ge=0, le=1000, description="unmeasured waves before each cell (count)")
    max_new_tokens: int = Field(2048, ge=1, le=MAX_NEW_TOKENS, description="cap on every answer (tokens)")
    ignore_eos: bool = Field(False, description="keep generating past EOS up to max_new_tokens")
    temperature: float = Field(0.0, ge=0, le=100, allow_inf_nan=False,
                               description="sampling temperature; 0 = greedy (ratio)")
    cache_salt: Literal["fresh", "none"] = Field("fresh", description="a fresh cache salt per request, or none")
    max_waves_per_round: int = Field(200, ge=1, le=MAX_WAVES,
                                     description="waves after which a round stops short of its window (count)")

    @field_validator("tiers")
    @classmethod
    def _tiers(cls, v: list[int]) -> list[int]:
        return _check_tiers(v)


class PrefillSpec(Strict):
    """Formal prefill cells: one output token, cache defeated, ``cached_tokens == 0`` verified."""

    tiers: list[int] = Field(default_factory=lambda: list(TIERS),
                             description="concurrencies measured, one cell each (requests in flight)")
    rounds: int = Field(3, ge=1, le=MAX_ROUNDS, description="measured rounds per cell (count)")
    waves_per_round: int = Field(1, ge=1, le=10_000, description="waves in each measured round (count)")
    warmup_waves: int = Field(1, ge=0, le=1000, description="unmeasured waves before each cell (count)")
    max_new_tokens: int = Field(1, ge=1, le=MAX_NEW_TOKENS, description="output per request (tokens)")
    cache_defeat: Literal["salt", "flush"] = Field("salt", description="how the prefix cache is defeated: a "
                                                   "fresh salt per request, or a flush before each wave")

    @field_validator("tiers")
    @classmethod
    def _tiers(cls, v: list[int]) -> list[int]:
        return _check_tiers(v)


def _check_tiers(v: list[int]) -> list[int]:
    if not v:
        raise ValueError("tiers is empty; list at least one concurrency, e.g. [1, 2, 4, 8, 16, 32, 64]")
    if len(v) > MAX_TIERS:
        raise ValueError(f"{len(v)} tiers; at most {MAX_TIERS}")
    if any(c < 1 or c > MAX_CONCURRENCY for c in v):
        raise ValueError(f"every tier must be a concurrency from 1 to {MAX_CONCURRENCY}")
    if len(set(v)) != len(v):
        raise ValueError("tiers contain duplicates")
    return sorted(v)


class ReopenSpec(Strict):
    """New evidence that reopens a closed direction (``dsv4h closure list``)."""

    evidence: str = Field(min_length=1, max_length=_PATH,
                          description="archive id/path of NEW evidence (not the closing archive)")
    reason: str = Field(min_length=1, max_length=_TEXT, description="why this evidence reopens the direction")


class ClientLimits(Strict):
    """Bounds on every streamed request, so no server can hold a run: a request fails (with the
    reason in its record) once it has run longer than ``deadline_grace_s`` + ``deadline_factor`` x
    ``max_new_tokens`` x the step observed on its own stream (time per output token since its first
    token), once its server streams more output tokens than ``max_new_tokens``, or once one SSE
    event grows past ``max_event_bytes`` without ending. Silence is bounded by ``request_timeout_s``."""

    deadline_factor: float = Field(4.0, ge=1, le=1000, allow_inf_nan=False,
                                   description="multiplies max_new_tokens x observed step (ratio)")
    deadline_grace_s: float = Field(60.0, ge=0, le=MAX_SECONDS, allow_inf_nan=False,
                                    description="time added to every request's deadline (seconds)")
    max_event_bytes: int = Field(4 << 20, ge=1024, le=MAX_EVENT_BYTES,
                                 description="largest SSE event accepted (bytes)")


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


class CampaignSpec(Strict):
    """A formal matrix campaign (``kind: formal-matrix``)."""

    format_version: int = Field(SPEC_FORMAT_VERSION, description="spec format version; this dsv4h reads 1 (version)")
    name: str = Field(pattern=CAMPAIGN_NAME_PATTERN, description="campaign name (letters, digits, '.', '_', '-')")
    kind: Literal["formal-matrix"] = Field("formal-matrix", description="spec kind (the default when absent)")
    description: str = Field("", max_length=_TEXT, description="free text shown in reports")
    claim_class: ClaimClass = Field(description="what the measured decoding claims to be")
    protocol_class: Literal["formal"] = Field("formal", description="evidence protocol class (fixed by the kind)")
    labels: list[Annotated[str, Field(max_length=128)]] = Field(default_factory=list, max_length=64,
                                                                description="free labels for listings")
    service: ServiceProfile = Field(description="the service measured (inline, or a profile file's path)")
    corpora: CorporaSpec = Field(default_factory=CorporaSpec, description="frozen corpora per workload")
    decode: DecodeSpec | None = Field(None, description="decode cells (needs corpora.decode)")
    prefill: PrefillSpec | None = Field(None, description="prefill cells (needs corpora.prefill)")
    oracles: list[Annotated[str, Field(max_length=_PATH)]] = Field(
        default_factory=list, max_length=64,
        description="oracle files run as sentinels before and after measurement on every service")
    direction: str | None = Field(None, pattern=r"^[a-z0-9][a-z0-9._-]{0,127}$",
                                  description="direction this run explores; refused while closed")
    reopen: ReopenSpec | None = Field(None, description="new evidence that reopens a closed 'direction'")
    analysis_plan: str | None = Field(None, max_length=_PATH,
                                      description="analysis plan frozen with 'dsv4h freeze FILE' before the run")
    order: list[Literal["decode", "prefill"]] = Field(default_factory=lambda: ["decode", "prefill"],  # type: ignore[arg-type]
                                                      description="workloads in the order they run")
    request_timeout_s: float = Field(1800.0, gt=0, le=MAX_SECONDS, allow_inf_nan=False,
                                     description="longest silence tolerated while reading a response (seconds)")
    client: ClientLimits = Field(default_factory=lambda: ClientLimits(),  # noqa: PLW0108 - mypy needs the call
                                 description="bounds on every streamed request")
    load: LoadSettings = Field(default_factory=lambda: LoadSettings(),  # noqa: PLW0108 - mypy needs the call
                               description="how the load is generated")

    @model_validator(mode="after")
    def _check(self) -> CampaignSpec:
        if self.format_version != SPEC_FORMAT_VERSION:
            raise ValueError(f"format_version {self.format_version} is not supported (this dsv4h reads 1)")
        if self.decode is None and self.prefill is None:
            raise ValueError("a formal matrix needs a 'decode' section, a 'prefill' section, or both")
        if self.decode is not None and not self.corpora.decode:
            raise ValueError("'decode' is set but 'corpora.decode' is missing")
        if self.prefill is not None and not self.corpora.prefill:
            raise ValueError("'prefill' is set but 'corpora.prefill' is missing")
        if self.reopen is not None and self.direction is None:
            raise ValueError("'reopen' needs the 'direction' it reopens")
        if len(set(self.order)) != len(self.order):
            raise ValueError(f"'order' lists a workload twice: {self.order}")
        dropped = [w for w, sec in (("decode", self.decode), ("prefill", self.prefill))
                   if sec is not None and w not in self.order]
        if dropped:
            raise ValueError(f"'{dropped[0]}' is set but 'order' ({self.order}) leaves it out, so it would never "
                             f"run; add it to 'order' or remove the section")
        return self


class AbbaWorkload(Strict):
    """The fixed waves of an ABBA screen: the same requests in every leg."""

    name: str | None = Field(None, pattern=CAMPAIGN_NAME_PATTERN,
                             description="screen name (default: CONTROL-vs-CANDIDATE)")
    description: str = Field("", max_length=_TEXT, description="free text shown in reports")
    claim_class: ClaimClass = Field("native-ar", description="what the measured decoding claims to be")
    corpus: str = Field(max_length=_PATH, description="frozen corpus the waves draw from")
    concurrency: int = Field(ge=1, le=MAX_CONCURRENCY, description="requests in every wave (count)")
    cases: list[str] | None = Field(None, max_length=MAX_CONCURRENCY,
                                    description="case ids (default: the first `concurrency` cases)")
    waves_per_leg: int = Field(2, ge=1, le=10_000, description="measured waves in each leg (count)")
    warmup_waves: int = Field(1, ge=0, le=1000, description="unmeasured waves before each leg (count)")
    max_new_tokens: int = Field(2048, ge=1, le=MAX_NEW_TOKENS, description="cap on every answer (tokens)")
    ignore_eos: bool = Field(False, description="keep generating past EOS up to max_new_tokens")
    cache_salt: Literal["fresh", "none"] = Field("fresh", description="a fresh cache salt per request, or none")
    boundary: Literal["resident", "http"] = Field("resident", description="rate measured over resident windows "
                                                  "or over whole HTTP requests")
    declared_change: list[str] = Field(
        default_factory=list, max_length=256,
        description="profile keys the candidate may change (dotted, e.g. sim.step_factor, env, extra_args)",
    )
    noise_floor_pct: float = Field(0.5, ge=0, le=100, allow_inf_nan=False,
                                   description="differences below this are noise (percent)")

    @model_validator(mode="after")
    def _check(self) -> AbbaWorkload:
        if self.cases is not None and len(self.cases) != self.concurrency:
            raise ValueError(f"cases lists {len(self.cases)} ids but concurrency is {self.concurrency}")
        return self


class AbbaSpec(Strict):
    """An ABBA screen (``kind: abba``): control and candidate profiles plus a fixed workload."""

    format_version: int = Field(SPEC_FORMAT_VERSION, description="spec format version; this dsv4h reads 1 (version)")
    name: str = Field(pattern=CAMPAIGN_NAME_PATTERN, description="campaign name (letters, digits, '.', '_', '-')")
    kind: Literal["abba"] = Field("abba", description="spec kind")
    description: str = Field("", max_length=_TEXT, description="free text shown in reports")
    protocol_class: Literal["abba-screen"] = Field("abba-screen", description="evidence protocol class (fixed "
                                                   "by the kind)")
    labels: list[Annotated[str, Field(max_length=128)]] = Field(default_factory=list, max_length=64,
                                                                description="free labels for listings")
    control: ServiceProfile = Field(description="the A service (inline, or a profile file's path)")
    candidate: ServiceProfile = Field(description="the B service (inline, or a profile file's path)")
    workload: AbbaWorkload = Field(description="the fixed waves (inline, or a workload file's path)")
    fresh_candidate: bool = Field(False, description="start B2 on a new candidate service instead of "
                                  "sharing B1's")
    allow_identity_change: bool = Field(False, description="run even when the profiles differ in keys "
                                        "outside declared_change (recorded)")
    oracles: list[Annotated[str, Field(max_length=_PATH)]] = Field(
        default_factory=list, max_length=64, description="oracle files run before and after every leg")
    direction: str | None = Field(None, pattern=r"^[a-z0-9][a-z0-9._-]{0,127}$",
                                  description="direction this screen explores; refused while closed")
    reopen: ReopenSpec | None = Field(None, description="new evidence that reopens a closed 'direction'")
    request_timeout_s: float = Field(1800.0, gt=0, le=MAX_SECONDS, allow_inf_nan=False,
                                     description="longest silence tolerated while reading a response (seconds)")
    client: ClientLimits = Field(default_factory=lambda: ClientLimits(),  # noqa: PLW0108 - mypy needs the call
                                 description="bounds on every streamed request")

    @property
    def claim_class(self) -> ClaimClass:
        """The claim class declared by the workload."""
        return self.workload.claim_class


# --- loading with good errors -------------------------------------------------------------


def _inline_service(data: dict[str, Any], base: Path, source: str) -> None:
    svc = data.get("service")
    if isinstance(svc, str):
        path = resolve_path(svc, base)
        loaded = read_yaml(path)
        if not isinstance(loaded, dict):
            raise SpecError(f"{path}: a service profile must be a mapping", hint="see campaigns/profiles/")
        parse_model(ServiceProfile, loaded, str(path))
        data["service"] = loaded


def _inline_file(data: dict[str, Any], key: str, base: Path, model: type[BaseModel]) -> None:
    """Replace ``data[key]`` naming a YAML file by that file's (validated) content."""
    ref = data.get(key)
    if isinstance(ref, str):
        path = resolve_path(ref, base)
        loaded = read_yaml(path)
        parse_model(model, loaded, str(path))
        data[key] = loaded


def load_campaign(path: Path) -> CampaignSpec:
    """Load and validate a formal-matrix YAML file (``service`` may name a profile file)."""
    spec = load_any(path)
    if not isinstance(spec, CampaignSpec):
        raise SpecError(f"{path}: kind '{spec.kind}' is not a formal matrix",
                        hint="run ABBA specs with 'dsv4h campaign run' or 'dsv4h abba'")
    return spec


def load_any(path: Path) -> CampaignSpec | AbbaSpec:
    """Load a campaign of any kind (``formal-matrix`` or ``abba``); profile and workload entries
    may name YAML files relative to the spec."""
    data = read_yaml(path)
    if not isinstance(data, dict):
        return parse_model(CampaignSpec, data, str(path))
    kind = data.get("kind", "formal-matrix")
    if kind == "abba":
        for key in ("control", "candidate"):
            _inline_file(data, key, path.parent, ServiceProfile)
        _inline_file(data, "workload", path.parent, AbbaWorkload)
        return parse_model(AbbaSpec, data, str(path))
    if kind == "rate-sweep":
        raise SpecError(f"{path}: kind 'rate-sweep' is a rate sweep, not a campaign this loader reads",
                        hint="run it with 'dsv4h campaign run' or 'dsv4h sweep run'")
    if kind != "formal-matrix":
        raise SpecError(f"{path}: kind '{kind}' is not known", hint=kinds_hint())
    _inline_service(data, path.parent, str(path))
    return parse_model(CampaignSpec, data, str(path))


def abba_from_files(control: Path, candidate: Path, workload: Path, *, fresh_candidate: bool = False,
                    allow_identity_change: bool = False) -> AbbaSpec:
    """Assemble an ABBA spec from two profile files and a workload file (``dsv4h abba``)."""
    ctrl = load_profile(control)
    cand = load_profile(candidate)
    wl = parse_model(AbbaWorkload, read_yaml(workload), str(workload))
    wl_data = wl.model_dump()
    wl_data["corpus"] = str(resolve_path(wl.corpus, workload.parent))
    name = wl.name or f"{ctrl.name}-vs-{cand.name}"
    return AbbaSpec(name=name, description=wl.description, control=ctrl, candidate=cand,
                    workload=AbbaWorkload.model_validate(wl_data), fresh_candidate=fresh_candidate,
                    allow_identity_change=allow_identity_change, request_timeout_s=1800.0)


def load_profile(path: Path) -> ServiceProfile:
    """Load and validate a service-profile YAML file (its ``patches`` path resolved against the file's
    directory)."""
    return _resolve_profile(parse_model(ServiceProfile, read_yaml(path), str(path)), path.parent)


# --- paths resolved once ----------------------------------------------------------------------


@dataclass(frozen=True)
class SpecPaths:
    """Every path a spec names, resolved once at load (relative to the spec's directory first, then
    the working directory). ``corpora`` maps a workload (``decode``, ``prefill``, or ``workload``
    for an ABBA screen) to its corpus directory or name."""

    corpora: Mapping[str, Path]
    oracles: tuple[Path, ...] = ()
    analysis_plan: Path | None = None


@dataclass(frozen=True)
class LoadedSpec:
    """A validated spec with its source file, raw bytes and resolved paths."""

    spec: CampaignSpec | AbbaSpec
    source: Path | None
    raw: bytes | None
    paths: SpecPaths


def _resolve_profile(profile: ServiceProfile, base: Path) -> ServiceProfile:
    update: dict[str, Any] = {key: str(resolve_path(value, base)) for key, value in
                              (("patches", profile.patches), ("tokenizer", profile.tokenizer)) if value is not None}
    if profile.sim.profile_file is not None:
        update["sim"] = profile.sim.model_copy(
            update={"profile_file": str(resolve_path(profile.sim.profile_file, base))})
    return profile.model_copy(update=update) if update else profile


def spec_paths(spec: CampaignSpec | AbbaSpec, base: Path) -> SpecPaths:
    """Resolve the paths of ``spec`` against ``base`` (the spec file's directory)."""
    oracles = tuple(resolve_path(p, base) for p in spec.oracles)
    if isinstance(spec, AbbaSpec):
        return SpecPaths(corpora={"workload": resolve_path(spec.workload.corpus, base)}, oracles=oracles)
    corpora: dict[str, Path] = {}
    if spec.decode is not None and spec.corpora.decode:
        corpora["decode"] = resolve_path(spec.corpora.decode, base)
    if spec.prefill is not None and spec.corpora.prefill:
        corpora["prefill"] = resolve_path(spec.corpora.prefill, base)
    plan = resolve_path(spec.analysis_plan, base) if spec.analysis_plan else None
    return SpecPaths(corpora=corpora, oracles=oracles, analysis_plan=plan)


def with_resolved_profiles(spec: CampaignSpec | AbbaSpec, base: Path) -> CampaignSpec | AbbaSpec:
    """``spec`` with each service profile's ``patches`` path made absolute (machine-local)."""
    if isinstance(spec, AbbaSpec):
        return spec.model_copy(update={"control": _resolve_profile(spec.control, base),
                                       "candidate": _resolve_profile(spec.candidate, base)})
    return spec.model_copy(update={"service": _resolve_profile(spec.service, base)})


def load_spec(path: Path) -> LoadedSpec:
    """Load a campaign of any kind with its raw bytes and every path resolved."""
    spec = with_resolved_profiles(load_any(path), path.parent)
    return LoadedSpec(spec, path, path.read_bytes(), spec_paths(spec, path.parent))


def loaded_abba(spec: AbbaSpec, base: Path, raw: bytes | None = None, source: Path | None = None) -> LoadedSpec:
    """Wrap an ABBA spec assembled in code (``abba_from_files``) with paths resolved against ``base``."""
    spec2 = with_resolved_profiles(spec, base)
    return LoadedSpec(spec2, source, raw, spec_paths(spec2, base))
