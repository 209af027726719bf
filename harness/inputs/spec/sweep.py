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
    stop_at_saturation: true         # no higher rate once one is over-saturated
"""

from __future__ import annotations

from pathlib import Path
from typing import Annotated, Any, Literal

from pydantic import Field, model_validator

from harness.formats import Strict
from harness.inputs.arrivals import Process, geometric_rates
from harness.inputs.spec.base import MAX_CONCURRENCY, MAX_NEW_TOKENS, MAX_SECONDS, SpecPaths
from harness.inputs.spec.service import OneServiceSpec

MAX_RATES = 64
MAX_RATE = 1e6


class GeometricRates(Strict):
    """``steps`` rates from ``start`` to ``stop`` (requests/s), equally spaced on a log scale."""

    start: float = Field(gt=0, le=MAX_RATE, allow_inf_nan=False, description="lowest rate (requests/s)")
    stop: float = Field(gt=0, le=MAX_RATE, allow_inf_nan=False, description="highest rate (requests/s)")
    steps: int = Field(ge=1, le=MAX_RATES, description="rates from start to stop (count)")


class ArrivalSettings(Strict):
    """How requests arrive in every round: the process, its seed, the round's size, an optional cap."""

    process: Process = Field("poisson", description="arrival process of the planned schedule")
    burstiness: float = Field(1.0, gt=0, le=1000, allow_inf_nan=False,
                              description="gamma shape; 1 = Poisson, < 1 burstier, > 1 more regular (ratio)")
    seed: int = Field(0, ge=0, le=2**63 - 1, description="seed of the arrival schedule (index)")
    count: int | None = Field(None, ge=1, le=1_000_000, description="requests per round (count)")
    duration_s: float | None = Field(None, gt=0, le=MAX_SECONDS, allow_inf_nan=False,
                                     description="send every planned arrival before this many seconds (seconds)")
    max_concurrency: int | None = Field(None, ge=1, le=MAX_CONCURRENCY,
                                        description="at most this many requests in flight; later ones wait (count)")

    @model_validator(mode="after")
    def _size(self) -> ArrivalSettings:
        if (self.count is None) == (self.duration_s is None):
            raise ValueError("give exactly one of 'count' and 'duration_s'")
        return self


class SloSpec(Strict):
    """Latency objectives for goodput, in milliseconds (as sglang.bench_serving's --goodput)."""

    ttft_ms: float | None = Field(None, gt=0, allow_inf_nan=False, description="time to first token bound (ms)")
    tpot_ms: float | None = Field(None, gt=0, allow_inf_nan=False, description="time per output token bound (ms)")
    e2e_ms: float | None = Field(None, gt=0, allow_inf_nan=False, description="end-to-end latency bound (ms)")


class SweepSpec(OneServiceSpec):
    """A rate sweep (``kind: rate-sweep``)."""

    kind: Literal["rate-sweep"] = Field("rate-sweep", description="spec kind")
    protocol_class: Literal["rate-sweep"] = Field("rate-sweep", description="evidence protocol class (fixed by "
                                                  "the kind)")
    corpus: str = Field(min_length=1, max_length=4096, description="frozen corpus the requests draw from")
    rates: list[Annotated[float, Field(gt=0, le=MAX_RATE, allow_inf_nan=False)]] | None = Field(
        None, max_length=MAX_RATES, description="offered rates, run ascending; or give 'geometric' (requests/s)")
    geometric: GeometricRates | None = Field(None, description="rates spaced on a log scale; or give 'rates'")
    arrivals: ArrivalSettings = Field(description="how requests arrive in every round")
    rounds: int = Field(3, ge=1, le=100, description="measured rounds per rate (count)")
    warmup_requests: int = Field(4, ge=0, le=100_000, description="unmeasured requests sent first at each rate "
                                 "(count)")
    max_new_tokens: int = Field(256, ge=1, le=MAX_NEW_TOKENS,
                                description="cap on every answer; a corpus case's declared output length wins "
                                "when it is smaller and use_case_output_lengths is set (tokens)")
    use_case_output_lengths: bool = Field(
        True, description="send each case's declared output length (corpus built from a distribution or "
        "a ShareGPT file) as max_new_tokens with ignore_eos")
    ignore_eos: bool = Field(False, description="keep generating past EOS up to max_new_tokens")
    slo: SloSpec = Field(default_factory=lambda: SloSpec(),  # noqa: PLW0108 - mypy needs the call
                         description="latency objectives for goodput")
    schedule_tolerance_ms: float = Field(50.0, gt=0, le=60_000, allow_inf_nan=False,
                                         description="p99 send lag above this is a schedule not kept (ms)")
    stop_at_saturation: bool = Field(
        False, description="after the rounds of the first rate found over-saturated (docs/saturation.md), "
        "run no higher rate; those are recorded as not run")
    request_timeout_s: float = Field(600.0, gt=0, le=MAX_SECONDS, allow_inf_nan=False,
                                     description="longest silence tolerated while reading a response (seconds)")
    def spec_paths(self, base: Path) -> SpecPaths:
        """The corpus the requests draw from (workload ``sweep``) and the oracles."""
        return self.corpus_paths(base, sweep=self.corpus)


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


def sweep_definition(spec: SweepSpec) -> dict[str, Any]:
    """What the plan depends on (hashed into the plan id)."""
    return {"rates": spec.rate_list, "arrivals": spec.arrivals.model_dump(mode="json"), "rounds": spec.rounds,
            "warmup_requests": spec.warmup_requests, "max_new_tokens": spec.max_new_tokens,
            "use_case_output_lengths": spec.use_case_output_lengths, "ignore_eos": spec.ignore_eos}
