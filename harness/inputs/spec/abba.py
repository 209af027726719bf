"""ABBA screen specs (``kind: abba``, protocol class ``abba-screen``; pure, reads YAML): control and
candidate profiles plus one fixed workload, run A1 -> B1 -> B2 -> A2."""

from __future__ import annotations

from pathlib import Path
from typing import Any, ClassVar, Literal

from pydantic import BaseModel, Field, model_validator

from harness.formats import Strict, parse_model, read_yaml, resolve_path
from harness.inputs.spec.base import (
    _PATH,
    _TEXT,
    CAMPAIGN_NAME_PATTERN,
    MAX_CONCURRENCY,
    MAX_NEW_TOKENS,
    ClaimClass,
    legacy_cache,
)
from harness.inputs.spec.service import ServiceProfile, TwoProfileSpec, load_profile


class FixedWaves(Strict):
    """The same fixed waves in every leg of a screen (ABBA, matched AR/SD): the corpus and its cases,
    the waves per leg and their settings."""

    corpus: str = Field(max_length=_PATH, description="frozen corpus the waves draw from")
    concurrency: int = Field(ge=1, le=MAX_CONCURRENCY, description="requests in every wave (count)")
    cases: list[str] | None = Field(None, max_length=MAX_CONCURRENCY,
                                    description="case ids (default: the first `concurrency` cases)")
    waves_per_leg: int = Field(2, ge=1, le=10_000, description="measured waves in each leg (count)")
    warmup_waves: int = Field(1, ge=0, le=1000, description="unmeasured waves before each leg (count)")
    max_new_tokens: int = Field(2048, ge=1, le=MAX_NEW_TOKENS, description="cap on every answer (tokens)")
    ignore_eos: bool = Field(False, description="keep generating past EOS up to max_new_tokens")
    cache: Literal["fresh-salt", "none"] = Field("fresh-salt", description="prefix-cache defeat: a fresh cache "
                                                 "salt per request, or none (was cache_salt: fresh|none)")
    noise_floor_pct: float = Field(0.5, ge=0, le=100, allow_inf_nan=False,
                                   description="differences below this are noise (percent)")

    @model_validator(mode="before")
    @classmethod
    def _legacy_cache(cls, data: Any) -> Any:
        return legacy_cache(data)

    @model_validator(mode="after")
    def _check(self) -> FixedWaves:
        if self.cases is not None and len(self.cases) != self.concurrency:
            raise ValueError(f"cases lists {len(self.cases)} ids but concurrency is {self.concurrency}")
        return self


class AbbaWorkload(FixedWaves):
    """The fixed waves of an ABBA screen: the same requests in every leg."""

    name: str | None = Field(None, pattern=CAMPAIGN_NAME_PATTERN,
                             description="screen name (default: CONTROL-vs-CANDIDATE)")
    description: str = Field("", max_length=_TEXT, description="free text shown in reports")
    claim_class: ClaimClass = Field("native-ar", description="what the measured decoding claims to be")
    boundary: Literal["resident", "http"] = Field("resident", description="rate measured over resident windows "
                                                  "or over whole HTTP requests")
    declared_change: list[str] = Field(
        default_factory=list, max_length=256,
        description="profile keys the candidate may change (dotted, e.g. sim.step_factor, launch.env, "
        "launch.extra_args); identity.COMPONENT[.ENTRY] declares a served-stack difference (docs/identity.md)",
    )


class AbbaSpec(TwoProfileSpec):
    """An ABBA screen (``kind: abba``): control and candidate profiles plus a fixed workload."""

    PROFILES: ClassVar[tuple[str, str]] = ("control", "candidate")
    WORKLOAD: ClassVar[type[BaseModel]] = AbbaWorkload

    kind: Literal["abba"] = Field("abba", description="spec kind")
    protocol_class: Literal["abba-screen"] = Field("abba-screen", description="evidence protocol class (fixed "
                                                   "by the kind)")
    control: ServiceProfile = Field(description="the A service (inline, or a profile file's path)")
    candidate: ServiceProfile = Field(description="the B service (inline, or a profile file's path)")
    workload: AbbaWorkload = Field(description="the fixed waves (inline, or a workload file's path)")
    fresh_candidate: bool = Field(False, description="start B2 on a new candidate service instead of "
                                  "sharing B1's")
    allow_identity_change: bool = Field(False, description="run even when the profiles differ in keys "
                                        "outside declared_change (recorded)")

    @property
    def claim_class(self) -> ClaimClass:
        """The claim class declared by the workload."""
        return self.workload.claim_class



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
