"""The sections of a service profile (pure), one per subpackage of ``harness.service``:

- ``launch`` (:class:`LaunchSettings`, read by ``harness.service.launch``): how the server is started:
  address, interpreter, argv, engine flags, environment, nodes, patch series, startup timeout;
- ``identity`` (:class:`IdentitySettings`, ``harness.service.identity`` and the identity check of the
  running server): what is served and verified: model, served name, parallel sizes, the
  ``/server_info`` keys it must report, the stack recorded (weights hash, source trees, libraries);
- ``devices`` (:class:`DeviceSettings`, ``harness.service.devices``): GPUs, their ownership check and
  the memory and power samplers.

Spec format 1 wrote these keys at the top level of the profile; that flat spelling is still read
(:func:`sectioned`, applied before validation to every profile, so old spec files and the profiles
recorded in old archives load the same) and never written. A key given both ways is an error.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Annotated, Any, Literal

from pydantic import Field

from harness.formats import Strict
from harness.inputs.spec.base import _LIST, _PATH, MAX_CONCURRENCY, MAX_SECONDS, NAME_PATTERN


class SourceTree(Strict):
    """A source tree the served stack comes from (``source_trees``): recorded with its git commit,
    dirty paths, a SHA-256 of the tracked diff against HEAD and of the untracked files, and the
    installed distribution's version (and whether it is an editable install of this tree)."""

    name: str = Field(pattern=NAME_PATTERN, description="a name for the tree (e.g. sglang, aiter)")
    path: str = Field(max_length=_PATH, description="the tree's directory (relative to the spec)")
    distribution: str | None = Field(None, max_length=256, description="the installed distribution built "
                                     "from it (e.g. sglang), whose version and install location are recorded")


class LibraryRequirement(Strict):
    """A shared object the live workers must map (``require_libraries``)."""

    name: str = Field(max_length=256, description="file name glob of the shared object (e.g. libccl.so*)")
    sha256: str | None = Field(None, pattern=r"^[0-9a-f]{64}$",
                               description="the SHA-256 the mapped file must have (any when absent)")
    every_worker: bool = Field(True, description="every worker process must map it (else: at least one)")


class LaunchSettings(Strict):
    """How the service is started (``harness.service.launch``). Engine flags left ``None`` keep the
    engine's default (``harness.service.launch.command``)."""

    host: str = Field("127.0.0.1", max_length=255, description="address the server listens on")
    port: int | None = Field(None, ge=0, le=65535, description="TCP port (default: a free one) (port)")
    python: str | None = Field(None, max_length=_PATH,
                               description="interpreter that runs the engine (default: this one)")
    command: list[str] | None = Field(
        None, max_length=_LIST, description="backend 'command': the server's argv; {host} and {port} are filled "
        "in (any OpenAI-compatible server, e.g. transformers serve)")
    health_path: str = Field("/health", pattern=r"^/", max_length=_PATH,
                             description="GET path answering 200 once the server is ready (e.g. /v1/models)")
    startup_timeout_s: float = Field(900.0, gt=0, le=MAX_SECONDS, allow_inf_nan=False,
                                     description="longest wait for the server to become healthy (seconds)")
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
    extra_args: list[str] = Field(default_factory=list, max_length=_LIST,
                                  description="more arguments appended to the engine's argv")
    env: dict[str, str] = Field(default_factory=dict, max_length=_LIST,
                                description="environment variables set for the engine")
    patches: str | None = Field(None, max_length=_PATH, description="path of a model_patches series file")


class IdentitySettings(Strict):
    """What the service serves and what is verified or recorded about it (``harness.service.identity``;
    the running server's ``/server_info`` is checked against ``model_path``, the parallel sizes and
    ``expect``)."""

    model_path: str | None = Field(None, max_length=_PATH, description="model weights ('sglang'/'vllm' need it)")
    served_model_name: str | None = Field(None, max_length=_PATH, description="model name the server reports")
    tp_size: int | None = Field(None, ge=1, le=MAX_CONCURRENCY, description="tensor-parallel size (count)")
    ep_size: int | None = Field(None, ge=1, le=MAX_CONCURRENCY, description="expert-parallel size (count)")
    dp_size: int | None = Field(None, ge=1, le=MAX_CONCURRENCY, description="data-parallel size (count)")
    expect: dict[str, Any] = Field(
        default_factory=dict, max_length=_LIST,
        description="server_info keys the running server must report (identity verification)")
    hash_weights: bool = Field(False, description="hash every weight byte of model_path too (slow; cached by "
                               "path, size and mtime); by default only the configs, tokenizer files, shard index "
                               "and each shard's safetensors header are hashed")
    source_trees: list[SourceTree] = Field(default_factory=list, max_length=64,
                                           description="source trees the served stack is built from, recorded with "
                                           "commit, dirty paths and diff hashes (e.g. sglang, aiter)")
    require_libraries: list[LibraryRequirement] = Field(
        default_factory=list, max_length=64,
        description="shared objects the live workers must map (checked before measurement and at the end)")
    library_dirs: list[Annotated[str, Field(max_length=_PATH)]] | None = Field(
        None, max_length=64, description="when set, no worker may map a shared object from outside these "
        "directories (and the interpreter's own)")


class DeviceSettings(Strict):
    """The service's GPUs, their ownership check and the samplers (``harness.service.devices``)."""

    gpus: list[int | str] | None = Field(
        None, max_length=_LIST,
        description="GPU indices/UUIDs the service uses (default: *_VISIBLE_DEVICES from env, else all) (index)")
    gpu_owners_source: Literal["auto", "amd-smi", "nvidia-smi", "nvml", "xpu-smi", "drm-fdinfo", "none"] = Field(
        "auto", description="tool that lists GPU owner processes")
    check_gpu_owners: bool | None = Field(
        None, description="refuse unrelated GPU owners before launch and before every cell/leg "
        "(default: on for every backend but sim)")
    memory_sample_interval_s: float = Field(5.0, gt=0, le=3600, allow_inf_nan=False,
                                            description="period of GPU memory samples (seconds)")
    power_source: Literal["auto", "nvml", "amd-smi", "xpu-smi", "sim", "none"] = Field(
        "auto", description="where power and energy are read (auto: NVML, amd-smi or xpu-smi after the GPU "
        "owners source; the simulator's power model when its profile has one; none otherwise)")
    power_sample_interval_s: float = Field(0.2, gt=0, le=3600, allow_inf_nan=False,
                                           description="period of power/energy samples (seconds)")


SECTIONS: dict[str, type[Strict]] = {"launch": LaunchSettings, "identity": IdentitySettings,
                                     "devices": DeviceSettings}
"""Each section's key in a profile and its model."""

FLAT_KEYS: dict[str, str] = {key: f"{section}.{key}" for section, model in SECTIONS.items()
                             for key in model.model_fields}
"""Each key of spec format 1's flat spelling and its sectioned path (``port`` -> ``launch.port``)."""


def sectioned(data: object) -> object:
    """``data`` (a profile's raw mapping) with every flat key moved into its section; anything else
    passes through for the model's own errors. Raises ``ValueError`` (a validation error of the
    profile) when a key is given both flat and in its section."""
    if not isinstance(data, Mapping) or not any(key in FLAT_KEYS for key in data):
        return data
    out = dict(data)
    for key in [k for k in data if k in FLAT_KEYS]:
        section = FLAT_KEYS[key].split(".", 1)[0]
        current = out.get(section)
        if current is None:
            current = {}
        if not isinstance(current, Mapping):
            return data  # the section's own error says what is wrong
        if key in current:
            raise ValueError(f"'{key}' is given twice, at the top level and in '{section}': "
                             f"keep '{FLAT_KEYS[key]}'")
        out[section] = {**current, key: out.pop(key)}
    return out


def sectioned_key(key: str) -> str:
    """A dotted profile key in the sectioned spelling (``env.NCCL_ALGO`` -> ``launch.env.NCCL_ALGO``;
    a key already sectioned, or not a profile key, unchanged): for key lists such as ``declared_change``
    written in spec format 1."""
    head, dot, rest = key.partition(".")
    return FLAT_KEYS[head] + dot + rest if head in FLAT_KEYS else key


def spelled_key(data: object, key: str) -> str:
    """How the raw profile mapping ``data`` spells the flat ``key``, for a message naming where it was
    set: the flat name when ``data`` writes it so, else its sectioned path (``port`` -> ``launch.port``)."""
    if isinstance(data, Mapping) and key in data:
        return key
    return FLAT_KEYS.get(key, key)


def sectioned_dump(profile: Mapping[str, Any]) -> dict[str, Any]:
    """A recorded profile (``service.json``, ``spec.json``; flat in archives of format 3 and earlier) as a
    sectioned mapping, for readers that compare or look up its keys without validating it."""
    try:
        out = sectioned(profile)
    except ValueError:  # a key recorded both ways (never written so): read as recorded
        return dict(profile)
    return dict(out) if isinstance(out, Mapping) else dict(profile)
