"""Pure command builders: a service profile -> argv and environment diff.

No processes are started here; ``harness.service.manager`` does that.
"""

from __future__ import annotations

import sys
from dataclasses import dataclass

from harness.spec import ServiceProfile


@dataclass(frozen=True)
class LaunchCommand:
    """The argv, the environment variables added to the caller's, and the port it will listen on."""

    argv: tuple[str, ...]
    env_diff: dict[str, str]
    port: int


def sim_command(profile: ServiceProfile, port: int = 0, python: str | None = None) -> LaunchCommand:
    """``dsv4h sim serve`` for ``backend: sim`` (port 0 = let the OS choose; the URL is printed)."""
    s = profile.sim
    argv = [
        python or sys.executable, "-c", "from harness.cli import main; main()", "sim", "serve",
        "--host", profile.host, "--port", str(port), "--profile", s.profile,
        "--stream-mode", s.stream_mode, "--stream-interval", str(s.stream_interval),
        "--time-scale", repr(s.time_scale), "--step-factor", repr(s.step_factor),
    ]
    if s.die_after_requests is not None:
        argv += ["--die-after-requests", str(s.die_after_requests)]
    return LaunchCommand(tuple(argv), dict(profile.env), port)


def sglang_command(profile: ServiceProfile, port: int) -> LaunchCommand:
    """``python -m sglang.launch_server`` with the profile's model, parallelism and extra args."""
    argv = [profile.python or sys.executable, "-m", "sglang.launch_server",
            "--model-path", str(profile.model_path)]
    if profile.tp_size is not None:
        argv += ["--tp-size", str(profile.tp_size)]
    if profile.ep_size is not None:
        argv += ["--ep-size", str(profile.ep_size)]
    if profile.dp_size is not None:
        argv += ["--dp-size", str(profile.dp_size)]
    argv += [*profile.extra_args, "--host", profile.host, "--port", str(port)]
    return LaunchCommand(tuple(argv), dict(profile.env), port)


def vllm_command(profile: ServiceProfile, port: int) -> LaunchCommand:
    """vLLM's OpenAI server module (the ``vllm`` console script is broken in the CPU wheel)."""
    argv = [profile.python or sys.executable, "-m", "vllm.entrypoints.openai.api_server",
            "--model", str(profile.model_path)]
    if profile.served_model_name:
        argv += ["--served-model-name", profile.served_model_name]
    if profile.tp_size is not None:
        argv += ["--tensor-parallel-size", str(profile.tp_size)]
    argv += [*profile.extra_args, "--host", profile.host, "--port", str(port)]
    return LaunchCommand(tuple(argv), dict(profile.env), port)
