"""Matched AR/SD specs (``kind: matched-sd``, protocol class ``matched-sd``; pure, reads YAML): one
native autoregressive service profile, one speculative profile and one fixed workload, run leg by leg
in a declared order (default AR1 -> SD1 -> SD2 -> AR2), every leg on a freshly started service. The
result (docs/speculative.md): both arms' resident and HTTP rates, acceptance, T_SD/T_AR against the
tokens per step, the break-even verdict and the greedy outputs compared token by token. Its claims
never mix with formal cells or ABBA screens."""

from __future__ import annotations

import re
from typing import ClassVar, Literal

from pydantic import BaseModel, Field, field_validator

from harness.inputs.spec.abba import FixedWaves
from harness.inputs.spec.base import _TEXT, MAX_NEW_TOKENS, ClaimClass
from harness.inputs.spec.service import ServiceProfile, TwoProfileSpec

LEG_PATTERN = r"^(AR|SD)[1-9][0-9]?$"
MAX_LEGS = 16
DEFAULT_ORDER = ("AR1", "SD1", "SD2", "AR2")
SdClaim = Literal["speculative-full-target", "speculative-approximate"]


class MatchedWorkload(FixedWaves):
    """The fixed waves of a matched AR/SD run: the same requests in every leg (greedy, to the cap)."""

    max_new_tokens: int = Field(256, ge=2, le=MAX_NEW_TOKENS, description="cap on every answer (tokens)")
    ignore_eos: bool = Field(True, description="keep generating past EOS up to max_new_tokens")


class MatchedSdSpec(TwoProfileSpec):
    """A matched AR/SD run (``kind: matched-sd``; module docstring)."""

    PROFILES: ClassVar[tuple[str, str]] = ("ar", "sd")
    WORKLOAD: ClassVar[type[BaseModel]] = MatchedWorkload

    kind: Literal["matched-sd"] = Field("matched-sd", description="spec kind")
    protocol_class: Literal["matched-sd"] = Field("matched-sd", description="evidence protocol class (fixed "
                                                  "by the kind)")
    ar: ServiceProfile = Field(description="the native autoregressive service (inline, or a profile file's path)")
    sd: ServiceProfile = Field(description="the speculative service (inline, or a profile file's path)")
    sd_claim: SdClaim = Field("speculative-full-target", description="what the speculative arm claims: "
                              "full-target (must reproduce the AR outputs) or approximate (declared)")
    order: list[str] = Field(default_factory=lambda: list(DEFAULT_ORDER), min_length=2, max_length=MAX_LEGS,
                             description="legs in run order, each on a freshly started service: AR<n> or SD<n>")
    declared_change: list[str] = Field(
        default_factory=lambda: ["sim.speculative", "launch.extra_args"], max_length=256,
        description="profile keys the SD profile may change (dotted); anything else must match the AR profile")
    workload: MatchedWorkload = Field(description="the fixed waves (inline, or a workload file's path)")
    notes: str = Field("", max_length=_TEXT, description="free text shown in reports")

    @field_validator("order")
    @classmethod
    def _order(cls, order: list[str]) -> list[str]:
        bad = [leg for leg in order if not re.fullmatch(LEG_PATTERN, leg)]
        if bad:
            raise ValueError(f"leg names {bad} are not AR<n> or SD<n> (e.g. AR1, SD1, SD2, AR2)")
        if len(set(order)) != len(order):
            raise ValueError("every leg name appears once")
        if not any(leg.startswith("AR") for leg in order) or not any(leg.startswith("SD") for leg in order):
            raise ValueError("the order needs at least one AR leg and one SD leg")
        return order

    @property
    def claim_class(self) -> ClaimClass:
        """The claim this run tests: the speculative arm's (the AR arm is checked as native-ar)."""
        return self.sd_claim

    def profile_of(self, leg: str) -> ServiceProfile:
        """The service profile leg ``leg`` runs on."""
        return self.ar if leg.startswith("AR") else self.sd

    @staticmethod
    def arm_claim(leg: str, sd_claim: ClaimClass) -> ClaimClass:
        """The claim class a leg's service is verified under."""
        return "native-ar" if leg.startswith("AR") else sd_claim
