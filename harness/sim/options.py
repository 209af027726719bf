"""Options of one simulated server (what a launch command line would say)."""

from __future__ import annotations

from typing import Any, Literal

from pydantic import Field, field_validator

from harness.formats import Strict, parse_model
from harness.sim.faults import parse_fault
from harness.sim.profiles import SimProfile, get_profile

StreamMode = Literal["cumulative", "delta", "skip-tokenizer-init"]


class SimOptions(Strict):
    """Server options.  Durations in seconds unless named ``_ms``.

    ``time_scale`` multiplies every model duration (not the profile's gather window); ``step_factor``
    multiplies decode step time only (``1/1.1`` makes a +10% faster candidate).  ``fault`` (a
    ``harness.sim.faults`` spec) applies to every ``fault_every``-th ``/generate`` request (only among
    the first ``fault_first`` requests when set); with ``request_faults`` (off by default) a request's own
    ``sim_fault`` field overrides it; without, a request carrying ``sim_fault`` gets HTTP 400 (test hooks
    are never open to any client: ``harness.sim.faults``).
    ``die_after_requests=N``: when request N+1 arrives the server dies (listener closed, every
    connection cut, nothing more answered); ``die_after_s`` does the same that long after ready.
    ``openai_usage`` says how the OpenAI endpoints report usage (``harness.sim.openai_api``).
    ``grid_t0_ns`` (``time.perf_counter_ns()``): forwards end on the grid ``t0 + k * step`` of the profile's
    one decode step (``batching.grid_step_s``; set by ``harness.sim.cluster`` for all its processes).
    """

    profile: str | SimProfile = "paper-tp8"
    host: str = "127.0.0.1"
    port: int = Field(default=0, ge=0, le=65535)
    stream_mode: StreamMode = "cumulative"
    openai_usage: Literal["honor", "final-only", "none"] = "honor"
    stream_interval: int = Field(default=1, ge=1)
    time_scale: float = Field(default=1.0, gt=0)
    step_factor: float = Field(default=1.0, gt=0)
    startup_delay_s: float = Field(default=0.0, ge=0)
    die_after_requests: int | None = Field(default=None, ge=0)
    die_after_s: float | None = Field(default=None, ge=0)
    fault: str | None = None
    fault_every: int = Field(default=1, ge=1)
    fault_first: int | None = Field(default=None, ge=0)
    request_faults: bool = False  # honour a request body's ``sim_fault`` (tests only; 400 otherwise)
    disable_radix_cache: bool = False
    reuse_port: bool = False  # SO_REUSEPORT: several simulator processes share one port (harness.sim.cluster)
    grid_t0_ns: int | None = Field(default=None, ge=0)  # the cluster's shared step grid anchor (perf_counter_ns)
    model_path: str | None = None

    @field_validator("profile")
    @classmethod
    def _known_profile(cls, value: str | SimProfile) -> str | SimProfile:
        if isinstance(value, str):
            get_profile(value)
        return value

    @field_validator("fault")
    @classmethod
    def _valid_fault(cls, value: str | None) -> str | None:
        if value is not None:
            parse_fault(value)
        return value

    @classmethod
    def build(cls, **options: Any) -> SimOptions:
        """Validate keyword options; any problem raises ``SpecError`` naming the field."""
        return parse_model(cls, options, "simulator options", what="invalid simulator options")

    @property
    def resolved_profile(self) -> SimProfile:
        """The profile object (looked up by name if a name was given)."""
        return get_profile(self.profile) if isinstance(self.profile, str) else self.profile

    @property
    def resolved_model_path(self) -> str:
        """``model_path`` as reported by the server."""
        return self.model_path or self.resolved_profile.model_path
