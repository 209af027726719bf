"""Rate-sweep specs (``kind: rate-sweep``, protocol class ``rate-sweep``): open-loop request streams at
several rates over one frozen corpus (pure, reads YAML).

A sweep is its own protocol class: its cells (one per rate) are never formal-matrix cells and never
ABBA legs, and the evidence rules and reports keep them apart. Per rate: ``warmup_requests`` sent at
that rate first (kept, never counted), then ``rounds`` measured rounds, each following its own planned
arrival schedule (harness.inputs.arrivals), archived before the first request is sent.

Example::

    name: sim-rate-sweep
    kind: rate-sweep
    claim_class: native-ar
    service: profiles/sim-control.yaml
    corpus: ../corpora/sim-code-512
    rates: [2, 4, 8]                 # or geometric: {start: 1, stop: 16, steps: 5}
    arrivals: {process: poisson, seed: 1, count: 40, max_concurrency: 64}
    slo: {ttft_ms: 500, tpot_ms: 50}
"""

from __future__ import annotations

from pathlib import Path
from typing import Annotated, Any, Literal

from pydantic import Field, model_validator

from harness.errors import SpecError
from harness.formats import Strict, parse_model, read_yaml, resolve_path
from harness.inputs.arrivals import Process, geometric_rates
from harness.inputs.spec import (
    CAMPAIGN_NAME_PATTERN,
    MAX_CONCURRENCY,
    MAX_NEW_TOKENS,
    MAX_SECONDS,
    ClaimClass,
    ClientLimits,
    ReopenSpec,
    ServiceProfile,
    load_profile,
)

MAX_RATES = 64
MAX_RATE = 1e6


class GeometricRates(Strict):
    """``steps`` rates from ``start`` to ``stop`` (requests/s), equally spaced on a log scale."""

    start: float = Field(gt=0, le=MAX_RATE, allow_inf_nan=False)
    stop: float = Field(gt=0, le=MAX_RATE, allow_inf_nan=False)
    steps: int = Field(ge=1, le=MAX_RATES)


class ArrivalSettings(Strict):
    """How requests arrive in every round: the process, its seed, the round's size, an optional cap."""

    process: Process = "poisson"
    burstiness: float = Field(1.0, gt=0, le=1000, allow_inf_nan=False,
                              description="gamma shape; 1 = Poisson, < 1 burstier, > 1 more regular")
    seed: int = Field(0, ge=0, le=2**63 - 1)
    count: int | None = Field(None, ge=1, le=1_000_000, description="requests per round")
    duration_s: float | None = Field(None, gt=0, le=MAX_SECONDS, allow_inf_nan=False,
                                     description="send every planned arrival before this many seconds")
    max_concurrency: int | None = Field(None, ge=1, le=MAX_CONCURRENCY,
                                        description="at most this many requests in flight; later ones wait")

    @model_validator(mode="after")
    def _size(self) -> ArrivalSettings:
        if (self.count is None) == (self.duration_s is None):
            raise ValueError("give exactly one of 'count' and 'duration_s'")
        return self


class SloSpec(Strict):
    """Latency objectives for goodput, in milliseconds (as sglang.bench_serving's --goodput)."""

    ttft_ms: float | None = Field(None, gt=0, allow_inf_nan=False)
    tpot_ms: float | None = Field(None, gt=0, allow_inf_nan=False)
    e2e_ms: float | None = Field(None, gt=0, allow_inf_nan=False)


class SweepSpec(Strict):
    """A rate sweep (``kind: rate-sweep``)."""

    format_version: int = 1
    name: str = Field(pattern=CAMPAIGN_NAME_PATTERN)
    kind: Literal["rate-sweep"] = "rate-sweep"
    description: str = Field("", max_length=100_000)
    claim_class: ClaimClass
    protocol_class: Literal["rate-sweep"] = "rate-sweep"
    labels: list[Annotated[str, Field(max_length=128)]] = Field(default_factory=list, max_length=64)
    service: ServiceProfile
    corpus: str = Field(min_length=1, max_length=4096)
    rates: list[Annotated[float, Field(gt=0, le=MAX_RATE, allow_inf_nan=False)]] | None = Field(
        None, max_length=MAX_RATES)
    geometric: GeometricRates | None = None
    arrivals: ArrivalSettings
    rounds: int = Field(3, ge=1, le=100)
    warmup_requests: int = Field(4, ge=0, le=100_000)
    max_new_tokens: int = Field(256, ge=1, le=MAX_NEW_TOKENS,
                                description="cap on every answer; a corpus case's declared output length wins "
                                "when it is smaller and use_case_output_lengths is set")
    use_case_output_lengths: bool = Field(
        True, description="send each case's declared output length (corpus built from a distribution or "
        "a ShareGPT file) as max_new_tokens with ignore_eos")
    ignore_eos: bool = False
    slo: SloSpec = Field(default_factory=lambda: SloSpec())  # noqa: PLW0108 - mypy needs the call
    schedule_tolerance_ms: float = Field(50.0, gt=0, le=60_000, allow_inf_nan=False,
                                         description="p99 send lag above this is a schedule not kept")
    oracles: list[Annotated[str, Field(max_length=4096)]] = Field(default_factory=list, max_length=64)
    direction: str | None = Field(None, pattern=r"^[a-z0-9][a-z0-9._-]{0,127}$")
    reopen: ReopenSpec | None = None
    request_timeout_s: float = Field(600.0, gt=0, le=MAX_SECONDS, allow_inf_nan=False)
    client: ClientLimits = Field(default_factory=lambda: ClientLimits())  # noqa: PLW0108 - mypy needs the call

    @model_validator(mode="after")
    def _check(self) -> SweepSpec:
        if (self.rates is None) == (self.geometric is None):
            raise ValueError("give exactly one of 'rates' (a list) and 'geometric' ({start, stop, steps})")
        if self.geometric is not None and self.geometric.start > self.geometric.stop:
            raise ValueError("geometric: start must be <= stop")
        rates = self.rate_list
        if len(set(rates)) != len(rates):
            raise ValueError(f"rates repeat: {rates}")
        if self.reopen is not None and self.direction is None:
            raise ValueError("'reopen' needs the 'direction' it reopens")
        return self

    @property
    def rate_list(self) -> list[float]:
        """The offered rates (requests/s) in the order they run (ascending)."""
        if self.rates is not None:
            return sorted(float(r) for r in self.rates)
        assert self.geometric is not None
        g = self.geometric
        return geometric_rates(g.start, g.stop, g.steps)

    @property
    def analysis_plan(self) -> None:
        """Sweeps name no analysis plan (the run skeleton asks)."""
        return None


def load_sweep(path: Path) -> tuple[SweepSpec, Path]:
    """Load a ``kind: rate-sweep`` YAML file (``service`` may name a profile file); returns the spec,
    with the profile's paths made absolute, and the resolved corpus path."""
    data = read_yaml(path)
    if isinstance(data, dict):
        if data.get("kind", "rate-sweep") != "rate-sweep":
            raise SpecError(f"{path}: kind '{data.get('kind')}' is not a rate sweep",
                            hint="run formal matrices and ABBA screens with 'dsv4h campaign run'")
        svc = data.get("service")
        if isinstance(svc, str):
            data = dict(data)
            data["service"] = load_profile(resolve_path(svc, path.parent)).model_dump(mode="json")
    spec = parse_model(SweepSpec, data, str(path))
    return spec, resolve_path(spec.corpus, path.parent)


def sweep_definition(spec: SweepSpec) -> dict[str, Any]:
    """What the plan depends on (hashed into the plan id)."""
    return {"rates": spec.rate_list, "arrivals": spec.arrivals.model_dump(mode="json"), "rounds": spec.rounds,
            "warmup_requests": spec.warmup_requests, "max_new_tokens": spec.max_new_tokens,
            "use_case_output_lengths": spec.use_case_output_lengths, "ignore_eos": spec.ignore_eos}
