"""SLA-search specs (``kind: sla-search``, protocol class ``sla-search``): the highest open-loop request
rate whose p99 TTFT / TPOT / E2E meet declared limits (pure, reads YAML).

Each probe is one offered rate measured as a rate-sweep cell (``warmup_requests`` at that rate, then
``rounds`` measured rounds with the sweep's arrival plans); which rate comes next is decided by
harness.measure.sla from the probes so far: ``search.start_req_s``, doubled until a probe fails, then
bisected until the bracket is at most ``precision_req_s`` (or ``precision_rel`` of the passing rate)
wide, or ``max_probes`` probes ran (unconverged). A probe the client or the simulator fell behind in
is measured again, at most ``max_remeasure`` times (harness.measure.sla_load).

Example::

    name: sim-sla
    kind: sla-search
    claim_class: native-ar
    service: profiles/sim-control.yaml
    corpus: ../corpora/sim-code-512
    arrivals: {process: poisson, seed: 1, count: 40}
    limits: {ttft_ms: 500}           # any of ttft_ms, tpot_ms, e2e_ms (p99 of every round)
    search: {start_req_s: 1, precision_req_s: 0.5, max_probes: 12}
"""

from __future__ import annotations

from pathlib import Path
from typing import Any, Literal

from pydantic import Field, model_validator

from harness.formats import Strict
from harness.inputs.spec.base import MAX_NEW_TOKENS, MAX_SECONDS, SpecPaths
from harness.inputs.spec.service import OneServiceSpec
from harness.inputs.spec.sweep import MAX_RATE, MAX_RATES, ArrivalSettings, SloSpec, SweepSpec


class SearchSpec(Strict):
    """Where the search starts, how narrow its bracket must get, and how many probes it may run."""

    start_req_s: float = Field(gt=0, le=MAX_RATE, allow_inf_nan=False, description="first probed rate (requests/s)")
    precision_req_s: float | None = Field(None, gt=0, le=MAX_RATE, allow_inf_nan=False,
                                          description="stop when lowest failing - highest passing <= this; "
                                          "or give precision_rel (requests/s)")
    precision_rel: float | None = Field(None, gt=0, le=10, allow_inf_nan=False,
                                        description="stop when (lowest failing - highest passing) / highest "
                                        "passing <= this; or give precision_req_s (ratio)")
    max_probes: int = Field(12, ge=1, le=MAX_RATES, description="probe cap: the search ends unconverged after "
                            "this many probes (count)")
    max_rate_req_s: float | None = Field(None, gt=0, le=MAX_RATE, allow_inf_nan=False,
                                         description="never probe above this rate (requests/s)")
    max_remeasure: int = Field(2, ge=0, le=5, description="times a probe invalid for load (the client or the "
                               "simulator fell behind) is measured again before the search's result is "
                               "withheld (count)")

    @model_validator(mode="after")
    def _check(self) -> SearchSpec:
        if (self.precision_req_s is None) == (self.precision_rel is None):
            raise ValueError("give exactly one of 'precision_req_s' (absolute) and 'precision_rel' (relative)")
        if self.max_rate_req_s is not None and self.max_rate_req_s < self.start_req_s:
            raise ValueError("max_rate_req_s must be >= start_req_s")
        return self


class SlaSpec(OneServiceSpec):
    """An SLA search (``kind: sla-search``)."""

    kind: Literal["sla-search"] = Field("sla-search", description="spec kind")
    protocol_class: Literal["sla-search"] = Field("sla-search", description="evidence protocol class (fixed by "
                                                  "the kind)")
    corpus: str = Field(min_length=1, max_length=4096, description="frozen corpus the requests draw from")
    arrivals: ArrivalSettings = Field(description="how requests arrive in every round of every probe")
    limits: SloSpec = Field(description="p99 limits a probe must meet in every measured round (ms); at least one")
    search: SearchSpec = Field(description="start rate, precision and probe cap of the search")
    rounds: int = Field(2, ge=1, le=100, description="measured rounds per probe (count)")
    warmup_requests: int = Field(4, ge=0, le=100_000, description="unmeasured requests sent first at each probed "
                                 "rate (count)")
    max_new_tokens: int = Field(256, ge=1, le=MAX_NEW_TOKENS,
                                description="cap on every answer; a corpus case's declared output length wins "
                                "when it is smaller and use_case_output_lengths is set (tokens)")
    use_case_output_lengths: bool = Field(
        True, description="send each case's declared output length as max_new_tokens with ignore_eos")
    ignore_eos: bool = Field(False, description="keep generating past EOS up to max_new_tokens")
    schedule_tolerance_ms: float = Field(50.0, gt=0, le=60_000, allow_inf_nan=False,
                                         description="p99 send lag above this is a schedule not kept (ms)")
    request_timeout_s: float = Field(600.0, gt=0, le=MAX_SECONDS, allow_inf_nan=False,
                                     description="longest silence tolerated while reading a response (seconds)")
    def spec_paths(self, base: Path) -> SpecPaths:
        """The corpus the requests draw from (workload ``sweep``) and the oracles."""
        return self.corpus_paths(base, sweep=self.corpus)


    @model_validator(mode="after")
    def _check(self) -> SlaSpec:
        lim = self.limits
        if lim.ttft_ms is None and lim.tpot_ms is None and lim.e2e_ms is None:
            raise ValueError("limits: declare at least one of ttft_ms, tpot_ms, e2e_ms")
        if self.rounds * (1 + self.search.max_remeasure) > 100:
            raise ValueError("rounds x (1 + search.max_remeasure) must be at most 100 (the round indices of a "
                             "probe's measurements)")
        if self.reopen is not None and self.direction is None:
            raise ValueError("'reopen' needs the 'direction' it reopens")
        return self

    @property
    def analysis_plan(self) -> None:
        """SLA searches name no analysis plan (the run skeleton asks)."""
        return None

    def limits_s(self) -> dict[str, float | None]:
        """The declared limits in seconds (``ttft``, ``tpot``, ``e2e``; None: not declared)."""
        lim = self.limits
        return {k: None if v is None else v / 1000 for k, v in
                (("ttft", lim.ttft_ms), ("tpot", lim.tpot_ms), ("e2e", lim.e2e_ms))}


_SLA_ONLY = ("kind", "protocol_class", "limits", "search")


def probe_sweep(spec: SlaSpec, rates: list[float]) -> SweepSpec:
    """The rate sweep whose cells are the probes at ``rates`` (the SLA search measures each probe with
    the sweep's planning and rows; its limits become the sweep's goodput SLO)."""
    data: dict[str, Any] = {k: v for k, v in spec.model_dump().items() if k not in _SLA_ONLY}
    return SweepSpec.model_validate(data | {"rates": rates, "slo": spec.limits.model_dump()})


def sla_definition(spec: SlaSpec) -> dict[str, Any]:
    """What every probe's plan depends on besides its rate (hashed into the plan id)."""
    return {"arrivals": spec.arrivals.model_dump(mode="json"), "rounds": spec.rounds,
            "warmup_requests": spec.warmup_requests, "max_new_tokens": spec.max_new_tokens,
            "use_case_output_lengths": spec.use_case_output_lengths, "ignore_eos": spec.ignore_eos,
            "limits": spec.limits.model_dump(mode="json"), "search": spec.search.model_dump(mode="json")}
