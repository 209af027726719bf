"""Simulator profiles (pure): the analytic model a simulated server follows, and its known answers.

A profile fixes every model parameter: resident decode rate per concurrency tier (tok/s), the prefill
forward cost ``a + T/p`` (seconds, tokens, tok/s), admission limits and the server identity reported by
``/server_info``.  ``analytic_decode_rate`` and ``analytic_prefill_rate`` give the rates a measurement
against the simulator must reproduce (docs/simulator.md#what-paper-tp8-reproduces).
"""

from __future__ import annotations

import itertools
import math
from pathlib import Path

from pydantic import Field, model_validator

from harness.errors import SpecError
from harness.formats import Strict, parse_model, read_yaml
from harness.sim.batching import decode_step_s, plan_prefill_forward, prefill_forward_s
from harness.sim.cold import ColdShapeSpec
from harness.sim.power import SimPower
from harness.sim.speculation import SpeculativeSpec

__all__ = ["CalibrationSource"]

MAX_RUNNING = 65536
"""Largest ``max_running`` a profile may declare (the scale profile uses 4096)."""


class CalibrationSource(Strict):
    """Where a profile fitted by ``dsv4h sim calibrate`` came from: the archive, its data origin, and
    the cells its verdict marks invalid that the fit used anyway (``--allow-invalid``): cell id -> the
    rules of the blocking findings that invalidate it (empty when every cell used was valid)."""

    archive_id: str
    data_origin: str
    invalid_cells: dict[str, tuple[str, ...]] = Field(default_factory=dict)


class SimProfile(Strict):
    """One analytic server model.  Durations in seconds, rates in tokens per second.  ``speculative``
    (``harness.sim.speculation.SpeculativeSpec``) makes every decode step a verify step; absent, the
    server decodes natively (one token per request per step). ``power`` (``harness.sim.power.SimPower``)
    adds a modelled power draw and energy counter served at ``GET /sim/power``. ``cold_shape``
    (``harness.sim.cold.ColdShapeSpec``) makes the first prefill forward of each shape slower.
    ``calibration`` (:class:`CalibrationSource`) records what a fitted profile was fitted from."""

    name: str
    description: str = ""
    model_name: str = "deepseek-v4-flash"
    decode_tiers: tuple[tuple[int, float], ...] = Field(
        description="(resident batch B, decode tok/s at B), strictly increasing B; rate(B) is piecewise "
        "linear in log2(B) between tiers, constant step time below the first, constant rate above the last"
    )
    prefill_a_s: float = Field(ge=0, description="fixed cost of one prefill forward (s)")
    prefill_rate_tps: float = Field(gt=0, description="prefill tokens/s inside a forward")
    gather_s: float = Field(
        ge=0,
        description="wall seconds an idle scheduler waits after the first arrival before forming its first "
        "batch (the front end's batching window; not scaled by time_scale)",
    )
    prefill_admission: int = Field(ge=1, description="max requests in one prefill forward")
    chunk_budget: int = Field(ge=1, description="max prompt tokens in one prefill forward (chunked prefill)")
    max_running: int = Field(ge=1, le=MAX_RUNNING, description="max resident requests (prefilling or decoding)")
    eos_min: int = Field(ge=1, description="shortest natural completion, EOS included (tokens)")
    eos_max: int = Field(ge=1, description="longest natural completion, EOS included (tokens)")
    tp_size: int = 8
    dp_size: int = 1
    ep_size: int = 1
    page_size: int = Field(default=1, ge=1)
    cuda_graph_bs: tuple[int, ...] = (1, 2, 4, 8, 16, 32, 64)
    max_total_num_tokens: int = Field(default=1_048_576, ge=1)
    context_length: int = Field(default=1_048_576, ge=2)
    mem_fraction_static: float = 0.96
    speculative: SpeculativeSpec | None = None
    power: SimPower | None = Field(
        default=None, description="power model (harness.sim.power); absent, GET /sim/power answers 404"
    )
    cold_shape: ColdShapeSpec | None = Field(
        default=None, description="cold-shape compile cost (harness.sim.cold): the first prefill forward of each "
        "(input-length bucket, batch tier) shape since the process started lasts compile_s more; absent, none"
    )
    calibration: CalibrationSource | None = Field(
        default=None, description="the archive a calibrated profile was fitted from, and the invalid cells the fit "
        "used (harness.sim.calibrate); absent for a hand-written profile"
    )

    @model_validator(mode="after")
    def _check(self) -> SimProfile:
        batches = [b for b, _ in self.decode_tiers]
        if not batches or batches[0] < 1 or any(b2 <= b1 for b1, b2 in itertools.pairwise(batches)):
            raise ValueError("decode_tiers must be non-empty with strictly increasing batch sizes >= 1")
        if any(r <= 0 for _, r in self.decode_tiers):
            raise ValueError("decode_tiers rates must be > 0")
        if self.eos_max < self.eos_min:
            raise ValueError("eos_max must be >= eos_min")
        return self

    @property
    def model_path(self) -> str:
        """The ``model_path`` the server reports, e.g. ``sim://deepseek-v4-flash/paper-tp8``."""
        return f"sim://{self.model_name}/{self.name}"

    def decode_rate(self, batch: int) -> float:
        """Interpolated resident decode rate (tok/s) with ``batch`` running requests (model time)."""
        if batch < 1:
            raise ValueError("batch must be >= 1")
        tiers = self.decode_tiers
        b0, r0 = tiers[0]
        if batch <= b0:
            return r0 * batch / b0
        b_last, r_last = tiers[-1]
        if batch >= b_last:
            return r_last
        x = math.log2(batch)
        for (b1, r1), (b2, r2) in itertools.pairwise(tiers):
            if b1 <= batch <= b2:
                frac = (x - math.log2(b1)) / (math.log2(b2) - math.log2(b1))
                return r1 + (r2 - r1) * frac
        raise AssertionError("unreachable")  # pragma: no cover


PAPER_DECODE = ((1, 88.63), (2, 107.41), (4, 187.13), (8, 333.38), (16, 598.11), (32, 1041.78), (64, 1327.10))
"""The report's Table 2 resident decode column (tok/s), Sept 18 version."""

PAPER_PREFILL = {1: 7035.83, 2: 9176.62, 4: 10278.75, 8: 10362.67, 16: 10413.87, 32: 10431.43, 64: 10381.49}
"""The report's prefill column (input tok/s, 8K prompts, admission 16, chunk budget 32768)."""

PROFILE_DIR = Path(__file__).with_name("profile_files")
"""Where the built-in profiles live, one YAML file each (``<name>.yaml``)."""

SPECULATIVE_PROFILE_DIR = PROFILE_DIR / "speculative"
"""Example speculative profiles (``speculative:`` block), loaded by path (``--profile-file``)."""


def load_profile_file(path: Path) -> SimProfile:
    """Read and validate a simulator profile YAML file; problems raise ``SpecError`` naming the file
    and the field."""
    return parse_model(SimProfile, read_yaml(path), str(path), what="invalid simulator profile",
                       hint="see harness/sim/profile_files/paper-tp8.yaml for a complete profile")


PROFILES: dict[str, SimProfile] = {
    p.name: p for p in (load_profile_file(f) for f in sorted(PROFILE_DIR.glob("*.yaml")))
}
"""The built-in profiles by name (loaded from ``PROFILE_DIR``)."""


def get_profile(name: str) -> SimProfile:
    """Return the named profile; unknown names raise ``SpecError`` listing the valid ones."""
    try:
        return PROFILES[name]
    except KeyError:
        valid = ", ".join(sorted(PROFILES))
        raise SpecError(
            f"unknown simulator profile {name!r}; valid profiles: {valid}",
            hint="pick one of the listed names (see `dsv4h sim profiles`)",
        ) from None


def profile_for(name: str, profile_file: str | Path | None = None) -> SimProfile:
    """The profile a service asks for: ``profile_file`` when given, else the built-in ``name``."""
    return load_profile_file(Path(profile_file)) if profile_file is not None else get_profile(name)


def analytic_decode_rate(
    profile: SimProfile, batch: int, step_factor: float = 1.0, *, time_scale: float = 1.0
) -> float:
    """Resident decode rate (tok/s) the server emits with ``batch`` running requests; for a speculative
    profile its expected value, ``batch x E[a] / (verify_cost x step(batch))``."""
    step = decode_step_s(profile, batch, step_factor=step_factor, time_scale=time_scale)
    spec = profile.speculative
    if spec is not None:
        return batch * spec.expected_tokens_per_step / (spec.verify_cost * step)
    return batch / step


def analytic_prefill_rate(
    profile: SimProfile, n_requests: int, prompt_len: int, *, time_scale: float = 1.0
) -> float:
    """Prefill rate (input tok/s) of a wave of ``n_requests`` fresh prompts of ``prompt_len`` tokens.

    It is all prompt tokens / (first arrival to last first token) for requests that all arrive within
    the gather window, each asking for one output token, with nothing served from the prefix cache: the
    gather window (unscaled) plus the prefill forwards (scaled) the scheduler forms with exactly the
    batching rules it uses at run time.
    """
    if n_requests < 1 or prompt_len < 1:
        raise ValueError("n_requests and prompt_len must be >= 1")
    # A one-token request finishes at the end of its prefill, so it never stays resident afterwards.
    remaining = [prompt_len] * n_requests
    chunked = 0
    seconds = profile.gather_s
    while chunked or remaining:
        reserve = prompt_len + 1
        kv_free = profile.max_total_num_tokens - (reserve if chunked else 0)
        take, grants = plan_prefill_forward(
            profile, chunked_remaining=chunked, resident=1 if chunked else 0, kv_free=kv_free,
            waiting=((u, reserve) for u in remaining),
        )
        if take == 0 and not grants:
            raise ValueError("prompt does not fit the profile's token capacity")
        seconds += prefill_forward_s(profile, take + sum(grants), time_scale=time_scale)
        chunked -= take
        del remaining[: len(grants)]
        if grants and grants[-1] < prompt_len:
            chunked = prompt_len - grants[-1]
    return n_requests * prompt_len / seconds
