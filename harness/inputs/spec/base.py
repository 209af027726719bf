"""The shared header of every spec kind (pure): limits, names, and :class:`SpecBase`.

Every kind's model (formal matrix, ABBA screen, rate sweep) extends :class:`SpecBase`, so the
header fields (format version, name, kind, description, labels, oracles, direction, reopen,
request timeout, client limits) are declared once and the format version is checked in one place.

Limits: everything that sizes work has a bound checked at load (``MAX_*`` below: concurrency, tiers,
rounds, waves, tokens, durations; floats must be finite), so no spec makes the planner or a run
allocate or loop without end. Names that become file names (service, campaign, workload) are
names: letters, digits, ``.``, ``_``, ``-``, starting with a letter or digit, at most
``MAX_NAME_CHARS`` (service) or ``MAX_CAMPAIGN_NAME_CHARS`` characters (:func:`check_name`).

Cache defeat has one vocabulary (:data:`CacheDefeat`): ``fresh-salt`` (a fresh cache salt per
request), ``flush`` (``/flush_cache`` before each wave), ``none``; a spec says it as ``cache:`` in
``decode``, ``prefill`` and an ABBA workload, the plan and every wave carry the same word. The first
spellings (``cache_salt: fresh|none``, ``cache_defeat: salt|flush``) are still read
(:func:`legacy_cache`), never written.

Spec format history (``SPEC_FORMAT_VERSION``, every kind):
  1 - first version (2026-11-29); 2026-12-02: ``cache:`` replaces ``cache_salt`` / ``cache_defeat``
      (both still read, so every version-1 file keeps loading with the same plan); 2026-12-02: the
      optional ``slurm:`` section (``harness.inputs.spec.slurm``; files without it load as before).
  2 - a service profile keeps ``name``, ``backend``, ``url``, ``protocol``, ``openai``, ``tokenizer`` and
      ``sim`` at its top level and the rest in its ``launch``, ``identity`` and ``devices`` sections
      (``harness.inputs.spec.service_sections``); dotted profile keys (``declared_change``) are spelled
      the same way (``launch.env``). Version 1's flat spelling is still read, in files of either version
      and in the profiles recorded by archives (``sectioned``), and never written (2026-12-04).
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Annotated, Any, Literal, Self

from pydantic import BaseModel, Field, field_validator

from harness.errors import SpecError
from harness.formats import Strict, parse_model, read_yaml, resolve_path
from harness.inputs.spec.slurm import SlurmSpec
from harness.kinds import KINDS
from harness.kinds import SPEC_KINDS as _SPEC_KINDS

SPEC_FORMAT_VERSION = 2
READABLE_SPEC_FORMATS = (1, 2)
"""The spec format versions this dsv4h reads (history above)."""

CacheDefeat = Literal["fresh-salt", "flush", "none"]
"""How a wave defeats the server's prefix cache (module docstring)."""

_LEGACY_CACHE = {"cache_salt": {"fresh": "fresh-salt", "none": "none"},
                 "cache_defeat": {"salt": "fresh-salt", "flush": "flush"}}


def legacy_cache(data: object) -> object:
    """``data`` (a section's raw mapping) with a first-spelling key (``cache_salt`` / ``cache_defeat``)
    turned into ``cache``; an unknown value passes through for ``cache``'s own error. Raises
    ``ValueError`` (a validation error of the section) when it gives more than one spelling."""
    if not isinstance(data, dict):
        return data
    old = [k for k in _LEGACY_CACHE if k in data]
    if not old:
        return data
    if "cache" in data or len(old) > 1:
        raise ValueError(f"give one of cache, {', '.join(old)} (they say the same thing): "
                         "write cache: fresh-salt | flush | none")
    out = {k: v for k, v in data.items() if k != old[0]}
    value = data[old[0]]
    out["cache"] = _LEGACY_CACHE[old[0]].get(value, value) if isinstance(value, str) else value
    return out

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
ProtocolClass = Literal["formal", "abba-screen", "rate-sweep", "matched-sd", "trace-replay", "sla-search"]
Backend = Literal["sim", "sglang", "vllm", "command", "attach"]
TIERS = (1, 2, 4, 8, 16, 32, 64)
# Every value a spec's ``kind`` may take, in the order the docs list them: the kind descriptor's kinds
# with a spec model (harness.kinds; the CLI's unknown-kind hint, the JSON Schema and
# docs/spec-reference.md all read it).
SPEC_KINDS = _SPEC_KINDS


def kinds_hint(lead: str = "kind: ") -> str:
    """``use kind: formal-matrix, kind: abba or kind: rate-sweep`` (``lead`` before each kind), built
    from the kinds with a spec model that ``harness.kinds.KINDS`` holds now."""
    named = [f"{lead}{k.name}" for k in KINDS.values() if k.from_spec]
    return "use " + ", ".join(named[:-1]) + " or " + named[-1]




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




class SpecBase(Strict):
    """The header every spec kind shares; the kinds' models narrow ``kind`` and ``protocol_class``."""

    format_version: int = Field(SPEC_FORMAT_VERSION, description="spec format version; this dsv4h reads 1 and 2 "
                                "(version)")
    name: str = Field(pattern=CAMPAIGN_NAME_PATTERN, description="campaign name (letters, digits, '.', '_', '-')")
    kind: str = Field(description="spec kind")
    description: str = Field("", max_length=_TEXT, description="free text shown in reports")
    protocol_class: str = Field(description="evidence protocol class (fixed by the kind)")
    labels: list[Annotated[str, Field(max_length=128)]] = Field(default_factory=list, max_length=64,
                                                                description="free labels for listings")
    oracles: list[Annotated[str, Field(max_length=_PATH)]] = Field(
        default_factory=list, max_length=64,
        description="oracle files run as sentinels before and after measurement on every service")
    direction: str | None = Field(None, pattern=r"^[a-z0-9][a-z0-9._-]{0,127}$",
                                  description="direction this run explores; refused while closed")
    reopen: ReopenSpec | None = Field(None, description="new evidence that reopens a closed 'direction'")
    request_timeout_s: float = Field(1800.0, gt=0, le=MAX_SECONDS, allow_inf_nan=False,
                                     description="longest silence tolerated while reading a response (seconds)")
    client: ClientLimits = Field(default_factory=lambda: ClientLimits(),  # noqa: PLW0108 - mypy needs the call
                                 description="bounds on every streamed request")
    slurm: SlurmSpec | None = Field(None, description="the Slurm allocation 'dsv4h campaign submit' asks for "
                                    "(docs/slurm.md); ignored by 'campaign run'")

    @field_validator("format_version")
    @classmethod
    def _format_version(cls, value: int) -> int:
        return check_format_version(value)

    # Each kind's model carries its own loading behaviour (the one loader, harness.inputs.spec.load,
    # calls these three; it never tests which kind it holds).

    @classmethod
    def inline_files(cls, data: dict[str, Any], base: Path) -> None:
        """Replace, in the parsed YAML ``data``, the sections that name other YAML files by those files'
        content (paths relative to ``base``, the spec file's directory). Nothing by default."""

    def spec_paths(self, base: Path) -> SpecPaths:
        """Every path the spec names, resolved against ``base`` (the spec file's directory)."""
        return SpecPaths(corpora={}, oracles=self.oracle_paths(base))

    def with_resolved_profiles(self, base: Path) -> Self:
        """The spec with each service profile's paths made absolute against ``base``; itself by default."""
        return self

    def oracle_paths(self, base: Path) -> tuple[Path, ...]:
        """The oracle files, resolved against ``base``."""
        return tuple(resolve_path(p, base) for p in self.oracles)


@dataclass(frozen=True)
class SpecPaths:
    """Every path a spec names, resolved once at load (relative to the spec's directory first, then
    the working directory). ``corpora`` maps a workload (``decode``, ``prefill``; ``workload`` for an
    ABBA screen; ``sweep`` for a rate sweep and an SLA search; ``replay`` and its ``trace`` file for a trace
    replay) to its corpus directory or name."""

    corpora: Mapping[str, Path]
    oracles: tuple[Path, ...] = ()
    analysis_plan: Path | None = None


def inline_file(data: dict[str, Any], key: str, base: Path, model: type[BaseModel]) -> None:
    """Replace ``data[key]`` naming a YAML file by that file's content, validated as ``model``
    (``SpecError`` naming the file when it is not a mapping or not valid)."""
    ref = data.get(key)
    if isinstance(ref, str):
        path = resolve_path(ref, base)
        loaded = read_yaml(path)
        if not isinstance(loaded, dict):
            raise SpecError(f"{path}: a {key} file must be a mapping", hint="see campaigns/profiles/")
        parse_model(model, loaded, str(path))
        data[key] = loaded


def check_format_version(value: int) -> int:
    """``value`` when this dsv4h reads spec format ``value``, else ``ValueError`` naming the versions
    it reads (the loader adds the file's name)."""
    if value not in READABLE_SPEC_FORMATS:
        readable = ", ".join(map(str, READABLE_SPEC_FORMATS))
        raise ValueError(f"format_version {value} is not supported (this dsv4h reads {readable})")
    return value
