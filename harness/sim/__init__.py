"""The embedded SGLang-compatible simulator: a real HTTP server over an analytic step scheduler.

Everything measured against it has a known answer (``analytic_decode_rate``,
``analytic_prefill_rate``) and must be labelled ``simulated``.
"""

from harness.sim.options import SimOptions, StreamMode
from harness.sim.profiles import (
    PROFILES,
    SimProfile,
    analytic_decode_rate,
    analytic_prefill_rate,
    get_profile,
    load_profile_file,
    profile_for,
)
from harness.sim.runner import running_simulator, serve
from harness.sim.server import SimServer

__all__ = [
    "PROFILES",
    "SimOptions",
    "SimProfile",
    "SimServer",
    "StreamMode",
    "analytic_decode_rate",
    "analytic_prefill_rate",
    "get_profile",
    "load_profile_file",
    "profile_for",
    "running_simulator",
    "serve",
]
