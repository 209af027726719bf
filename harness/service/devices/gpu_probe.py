"""Read GPU owners and device memory from the machine (edge module: runs amd-smi / nvidia-smi / NVML).

Every tool call goes through a *runner*, a callable taking argv and returning stdout (raising
:class:`~harness.errors.ServiceError` on failure), so tests and CI can inject canned output or a
decoy owner. Parsing is done by the pure :mod:`harness.service.devices.gpu`.

Source selection (``source="auto"``): ``amd-smi`` if it is on ``PATH``, else NVML if ``pynvml``
(the ``nvml`` extra, nvidia-ml-py) imports and initialises, else ``nvidia-smi`` if on ``PATH``,
else ``xpu-smi`` if on ``PATH``, else ``drm-fdinfo`` when a render node is driven by ``xe`` or
``i915`` (Intel GPUs: :mod:`harness.service.devices.xpu_probe`), else an empty snapshot with source ``"none"``.

Injected owners: when ``$DSV4H_GPU_OWNERS_FILE`` names a JSON file (a list of
``{"gpu", "pid", "name", "vram_bytes"}``), its entries are merged into every snapshot as owners
with source ``"injected"``; the integration test uses it to register an unrelated decoy process.
"""

from __future__ import annotations

import contextlib
import importlib
import importlib.util
import json
import os
import shutil
import subprocess
import time
from collections.abc import Callable, Collection, Iterable, Mapping, Sequence
from datetime import UTC, datetime
from pathlib import Path
from typing import Any, Final

import psutil

from harness.errors import ServiceError
from harness.service.devices.gpu import (
    GpuDevice,
    GpuProcess,
    OwnersSnapshot,
    gpu_keys,
    merge_devices,
    parse_amd_list_json,
    parse_amd_metric_mem_json,
    parse_amd_process_json,
    parse_injected_owners,
    parse_nvidia_apps_csv,
    parse_nvidia_gpus_csv,
    parse_nvml_records,
)
from harness.service.devices.ownership import check_gpus_free, refusal
from harness.service.devices.xpu_probe import fdinfo_snapshot, has_intel_render_nodes, xpu_smi_memory, xpu_smi_owners
from harness.service.process import OwnedProcess

#: A command runner: argv in, stdout text out; raises ServiceError when the command fails.
Runner = Callable[[Sequence[str]], str]

OWNERS_FILE_ENV: Final = "DSV4H_GPU_OWNERS_FILE"
SOURCE_CHOICES: Final = ("auto", "amd-smi", "nvidia-smi", "nvml", "xpu-smi", "drm-fdinfo", "none")
DEFAULT_TIMEOUT_S: Final = 30.0

AMD_PROCESS: Final = ("amd-smi", "process", "--json")
AMD_LIST: Final = ("amd-smi", "list", "--json")
AMD_MEMORY: Final = ("amd-smi", "metric", "--mem-usage", "--json")
NVIDIA_APPS: Final = ("nvidia-smi", "--query-compute-apps=gpu_uuid,pid,process_name,used_memory",
                      "--format=csv,noheader,nounits")
NVIDIA_GPUS: Final = ("nvidia-smi", "--query-gpu=index,uuid,memory.used,memory.total",
                      "--format=csv,noheader,nounits")


def subprocess_runner(argv: Sequence[str], *, timeout_s: float = DEFAULT_TIMEOUT_S) -> str:
    """Run ``argv`` and return its stdout (UTF-8, undecodable bytes replaced).

    Raises ServiceError when the program is missing, exits non-zero or runs past ``timeout_s``
    seconds; the message carries the command and the tail of its stderr.
    """
    cmd = " ".join(argv)
    try:
        done = subprocess.run(list(argv), capture_output=True, timeout=timeout_s, check=False,
                              stdin=subprocess.DEVNULL)
    except FileNotFoundError as exc:
        raise ServiceError(f"'{argv[0]}' is not installed or not on PATH",
                           hint="install the GPU vendor tools or choose another --source") from exc
    except subprocess.TimeoutExpired as exc:
        raise ServiceError(f"'{cmd}' did not finish within {timeout_s:.0f} s",
                           hint="the GPU driver may be hung; check the machine before benchmarking") from exc
    except OSError as exc:
        raise ServiceError(f"cannot run '{cmd}': {exc}", hint="check the tool's installation") from exc
    if done.returncode != 0:
        tail = done.stderr.decode("utf-8", "replace").strip()[-600:] or done.stdout.decode(
            "utf-8", "replace").strip()[-600:]
        raise ServiceError(f"'{cmd}' exited with code {done.returncode}: {tail}",
                           hint="run it by hand; a driver or permission problem must be fixed before "
                                "GPU ownership can be checked")
    return done.stdout.decode("utf-8", "replace")


def nvml_importable() -> bool:
    """True when ``pynvml`` (nvidia-ml-py) can be imported; does not import it."""
    return importlib.util.find_spec("pynvml") is not None


def resolve_source(
    source: str,
    *,
    which: Callable[[str], str | None] = shutil.which,
    nvml_available: Callable[[], bool] = nvml_importable,
    intel_render_nodes: Callable[[], bool] = has_intel_render_nodes,
) -> str:
    """The concrete tool for ``source`` (``auto`` resolved as in the module docstring)."""
    if source not in SOURCE_CHOICES:
        raise ServiceError(f"unknown GPU owners source {source!r}",
                           hint=f"use one of {', '.join(SOURCE_CHOICES)}")
    if source != "auto":
        return source
    if which("amd-smi"):
        return "amd-smi"
    if nvml_available():
        return "nvml"
    if which("nvidia-smi"):
        return "nvidia-smi"
    if which("xpu-smi"):
        return "xpu-smi"
    return "drm-fdinfo" if intel_render_nodes() else "none"


def _now() -> tuple[str, int]:
    return datetime.now(UTC).isoformat(timespec="milliseconds"), time.perf_counter_ns()


def _text(value: Any) -> str:
    return value.decode("utf-8", "replace") if isinstance(value, bytes) else str(value)


def read_nvml_records(nvml: Any, *, with_processes: bool = True) -> list[dict[str, Any]]:
    """Read every device through the NVML module ``nvml`` (``pynvml`` or a stand-in with the same
    functions) into the plain records :func:`harness.service.devices.gpu.parse_nvml_records` reads.

    Memory is in bytes. Process names come from ``nvmlSystemGetProcessName`` when it answers
    (``None`` otherwise). Raises ServiceError when NVML fails.
    """
    try:
        nvml.nvmlInit()
    except Exception as exc:
        raise ServiceError(f"NVML cannot initialise: {exc}",
                           hint="is the NVIDIA driver loaded? try 'nvidia-smi', or use --source nvidia-smi")\
            from exc
    records: list[dict[str, Any]] = []
    try:
        for i in range(int(nvml.nvmlDeviceGetCount())):
            h = nvml.nvmlDeviceGetHandleByIndex(i)
            rec: dict[str, Any] = {"index": i, "uuid": _text(nvml.nvmlDeviceGetUUID(h))}
            try:
                rec["bdf"] = _text(nvml.nvmlDeviceGetPciInfo(h).busId)
            except Exception:
                rec["bdf"] = None
            mem = nvml.nvmlDeviceGetMemoryInfo(h)
            rec["total"], rec["used"] = int(mem.total), int(mem.used)
            if with_processes:
                procs = []
                for p in nvml.nvmlDeviceGetComputeRunningProcesses(h):
                    try:
                        name: str | None = _text(nvml.nvmlSystemGetProcessName(p.pid))
                    except Exception:
                        name = None
                    used = getattr(p, "usedGpuMemory", None)
                    procs.append({"pid": int(p.pid), "usedGpuMemory": None if used is None else int(used),
                                  "name": name})
                rec["procs"] = procs
            records.append(rec)
    except ServiceError:
        raise
    except Exception as exc:
        raise ServiceError(f"NVML query failed: {exc}",
                           hint="try --source nvidia-smi; check the driver with 'nvidia-smi'") from exc
    finally:
        with contextlib.suppress(Exception):
            nvml.nvmlShutdown()
    return records


def _import_nvml() -> Any:
    try:
        return importlib.import_module("pynvml")
    except ImportError as exc:
        raise ServiceError("NVML was requested but pynvml is not installed",
                           hint="pip install 'dsv4h[nvml]' (nvidia-ml-py), or use --source nvidia-smi") from exc


def _injected(env: Mapping[str, str]) -> tuple[list[GpuProcess], dict[str, str]]:
    path = env.get(OWNERS_FILE_ENV)
    if not path:
        return [], {}
    try:
        text = Path(path).read_text(encoding="utf-8")
    except OSError as exc:
        raise ServiceError(f"{OWNERS_FILE_ENV}={path} cannot be read: {exc}",
                           hint=f"point {OWNERS_FILE_ENV} at a JSON list of owners, or unset it") from exc
    return parse_injected_owners(text, path), {f"injected:{path}": text}


def _merge_processes(real: Iterable[GpuProcess], extra: Iterable[GpuProcess],
                     devices: Sequence[GpuDevice]) -> tuple[GpuProcess, ...]:
    out = list(real)
    seen = {(gpu_keys(p.gpu, devices), p.pid) for p in out}
    for p in extra:
        if (gpu_keys(p.gpu, devices), p.pid) not in seen:
            out.append(p)
    return tuple(out)


def _optional(runner: Runner, argv: Sequence[str], raw: dict[str, str]) -> str | None:
    """Run a command whose failure only loses detail (device list, memory): the error is kept in raw."""
    try:
        text = runner(argv)
    except ServiceError as exc:
        raw[" ".join(argv) + " (failed)"] = str(exc)
        return None
    raw[" ".join(argv)] = text
    return text


def read_gpu_owners(
    source: str = "auto",
    runner: Runner | None = None,
    *,
    which: Callable[[str], str | None] = shutil.which,
    nvml: Any | None = None,
    env: Mapping[str, str] | None = None,
) -> OwnersSnapshot:
    """Read who holds GPU memory now, with the devices, and keep the raw text for the archive.

    ``source`` is one of :data:`SOURCE_CHOICES`; ``runner`` runs the CLI tools (default
    :func:`subprocess_runner`); ``nvml`` is the NVML module (default: ``import pynvml`` when
    needed); ``which`` finds tools on PATH for ``auto``; ``env`` is where
    ``$DSV4H_GPU_OWNERS_FILE`` is looked up (default ``os.environ``). Raises ServiceError when the
    chosen tool fails or prints something unparseable (an unverifiable GPU is never reported free).
    """
    run = runner or subprocess_runner
    environ = os.environ if env is None else env
    nvml_ok: Callable[[], bool] = (lambda: True) if nvml is not None else nvml_importable
    resolved = resolve_source(source, which=which, nvml_available=nvml_ok)
    wall, t_ns = _now()
    raw: dict[str, str] = {}
    processes: list[GpuProcess] = []
    devices: tuple[GpuDevice, ...] = ()
    if resolved == "nvml":
        try:
            records = read_nvml_records(nvml if nvml is not None else _import_nvml())
        except ServiceError:
            if source != "auto":
                raise
            # pynvml imports but NVML does not answer (no driver): fall back as 'auto' promises
            resolved = resolve_source("auto", which=which, nvml_available=lambda: False)
        else:
            raw["nvml"] = json.dumps(records, indent=1)
            procs, devs = parse_nvml_records(records)
            processes, devices = procs, merge_devices(devs)
    if resolved == "amd-smi":
        text = run(AMD_PROCESS)
        raw[" ".join(AMD_PROCESS)] = text
        processes = parse_amd_process_json(text)
        lst, mem = _optional(run, AMD_LIST, raw), _optional(run, AMD_MEMORY, raw)
        devices = merge_devices(parse_amd_list_json(lst) if lst is not None else [],
                                parse_amd_metric_mem_json(mem) if mem is not None else [])
    elif resolved == "nvidia-smi":
        text = run(NVIDIA_APPS)
        raw[" ".join(NVIDIA_APPS)] = text
        processes = parse_nvidia_apps_csv(text)
        gpus = _optional(run, NVIDIA_GPUS, raw)
        devices = merge_devices(parse_nvidia_gpus_csv(gpus) if gpus is not None else [])
    elif resolved == "xpu-smi":
        processes, devices = xpu_smi_owners(run, raw)
    elif resolved == "drm-fdinfo":
        processes, devices = fdinfo_snapshot(raw)
    injected, injected_raw = _injected(environ)
    raw.update(injected_raw)
    return OwnersSnapshot(source=resolved, processes=_merge_processes(processes, injected, devices),
                          devices=devices, raw=raw, wall_iso=wall, t_monotonic_ns=t_ns)


def read_gpu_memory(
    source: str = "auto",
    runner: Runner | None = None,
    *,
    which: Callable[[str], str | None] = shutil.which,
    nvml: Any | None = None,
) -> OwnersSnapshot:
    """Read per-device memory used/total (bytes) now: a snapshot with ``devices`` filled and no
    ``processes``. Same sources and runner as :func:`read_gpu_owners`; one tool call per read
    (``amd-smi metric --mem-usage``, ``nvidia-smi --query-gpu`` or NVML memory info; ``xpu-smi stats``
    once per device after ``xpu-smi discovery``; DRM fdinfo: memory held by DRM clients)."""
    run = runner or subprocess_runner
    nvml_ok: Callable[[], bool] = (lambda: True) if nvml is not None else nvml_importable
    resolved = resolve_source(source, which=which, nvml_available=nvml_ok)
    wall, t_ns = _now()
    raw: dict[str, str] = {}
    devices: tuple[GpuDevice, ...] = ()
    if resolved == "nvml":
        try:
            records = read_nvml_records(nvml if nvml is not None else _import_nvml(), with_processes=False)
        except ServiceError:
            if source != "auto":
                raise
            resolved = resolve_source("auto", which=which, nvml_available=lambda: False)
        else:
            _, devs = parse_nvml_records(records)
            devices = merge_devices(devs)
    if resolved == "amd-smi":
        text = run(AMD_MEMORY)
        raw[" ".join(AMD_MEMORY)] = text
        devices = merge_devices(parse_amd_metric_mem_json(text))
    elif resolved == "nvidia-smi":
        text = run(NVIDIA_GPUS)
        raw[" ".join(NVIDIA_GPUS)] = text
        devices = merge_devices(parse_nvidia_gpus_csv(text))
    elif resolved == "xpu-smi":
        devices = xpu_smi_memory(run, raw)
    elif resolved == "drm-fdinfo":
        devices = fdinfo_snapshot(raw)[1]
    return OwnersSnapshot(source=resolved, devices=devices, raw=raw, wall_iso=wall, t_monotonic_ns=t_ns)


# ------------------------------------------------------------------------------------- owned trees


def _pairs(procs: Iterable[psutil.Process]) -> list[tuple[int, float]]:
    out = []
    for p in procs:
        try:
            out.append((p.pid, p.create_time()))
        except psutil.Error:
            continue  # exited while we looked: it holds no GPU memory any more
    return out


def owned_tree(proc: OwnedProcess) -> list[tuple[int, float]]:
    """The owned tree of ``proc`` as ``(pid, create_time)`` pairs: the recorded root (only if its
    birth time still matches, so a reused PID yields ``[]``) and its live descendants."""
    return _pairs(proc.tree())


def process_tree(pid: int) -> list[tuple[int, float]]:
    """``pid`` and its live descendants as ``(pid, create_time)`` pairs (for ``--pid``); raises
    ServiceError when no such process exists."""
    try:
        root = psutil.Process(pid)
        members = [root, *root.children(recursive=True)]
    except psutil.NoSuchProcess as exc:
        raise ServiceError(f"no process with PID {pid}", hint="pass the PID of a running service") from exc
    except psutil.Error as exc:
        raise ServiceError(f"cannot inspect PID {pid}: {exc}", hint="run as the process's user") from exc
    return _pairs(members)


def current_create_times(pids: Iterable[int]) -> dict[int, float]:
    """Create times now (seconds since the epoch) of those ``pids`` that are alive and readable."""
    out: dict[int, float] = {}
    for pid in set(pids):
        try:
            out[pid] = psutil.Process(pid).create_time()
        except psutil.Error:
            continue
    return out


def ensure_gpus_free(
    gpus: Collection[int | str] | None,
    owned: OwnedProcess | Sequence[tuple[int, float]] | None = None,
    *,
    source: str = "auto",
    runner: Runner | None = None,
    which: Callable[[str], str | None] = shutil.which,
    nvml: Any | None = None,
    env: Mapping[str, str] | None = None,
) -> OwnersSnapshot:
    """Probe the GPUs and refuse (raise :class:`~harness.errors.OwnershipError`) when an unrelated
    process holds memory on any of ``gpus``; return the snapshot (for the archive) otherwise.

    ``owned`` is the service's owned process (its tree is read now) or a ready ``(pid,
    create_time)`` list; ``None`` before launch (every owner is unrelated). Owners' current create
    times are checked against the tree, so a reused PID is not mistaken for ours.
    """
    snap = read_gpu_owners(source, runner, which=which, nvml=nvml, env=env)
    if owned is None:
        tree: list[tuple[int, float]] = []
    elif isinstance(owned, OwnedProcess):
        tree = owned_tree(owned)
    else:
        tree = list(owned)
    current = current_create_times(p.pid for p in snap.processes)
    unrelated = check_gpus_free(snap, gpus, tree, current=current)
    if unrelated:
        raise refusal(unrelated, gpus=gpus, devices=snap.devices)
    return snap
