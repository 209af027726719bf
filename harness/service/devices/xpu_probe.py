"""Read Intel GPU owners and memory (edge module: runs xpu-smi, reads /proc and /sys).

Called by :mod:`harness.service.devices.gpu_probe` for the sources ``xpu-smi`` and ``drm-fdinfo``; parsing
is done by the pure :mod:`harness.service.devices.xpu`. Every reader appends the text it read to ``raw``
(command line or path -> text) for the archive.

``drm-fdinfo`` sees the processes whose ``/proc/PID/fd`` the caller may read (its own user's, or
every process when run as root); the PIDs it could not read are listed in ``raw`` under
``"drm-fdinfo unreadable pids"``. The roots (``/proc``, ``/sys``) are module attributes so tests
can point them at a fake tree.
"""

from __future__ import annotations

import json
import os
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Final

import psutil

from harness.errors import ServiceError
from harness.service.devices.gpu import GpuDevice, GpuProcess, merge_devices
from harness.service.devices.xpu import (
    DrmClient,
    drop_prober_rows,
    fdinfo_owners,
    parse_drm_fdinfo,
    parse_xpu_discovery_json,
    parse_xpu_ps_json,
    parse_xpu_stats_json,
)

#: argv in, stdout out (the same contract as :data:`harness.service.devices.gpu_probe.Runner`).
Runner = Callable[[Sequence[str]], str]

XPU_PS: Final = ("xpu-smi", "ps", "-j")
XPU_DISCOVERY: Final = ("xpu-smi", "discovery", "-j")
#: Drivers whose render nodes make ``auto`` choose ``drm-fdinfo`` when no vendor tool is present.
INTEL_DRIVERS: Final = frozenset({"xe", "i915"})
UNREADABLE_KEY: Final = "drm-fdinfo unreadable pids"

PROC_ROOT = Path("/proc")
SYS_ROOT = Path("/sys")


def xpu_stats_argv(device: int) -> tuple[str, ...]:
    """``xpu-smi stats -d N -j``."""
    return ("xpu-smi", "stats", "-d", str(device), "-j")


def pid_alive(pid: int) -> bool:
    """True while ``pid`` exists."""
    return psutil.pid_exists(pid)


def _optional(runner: Runner, argv: Sequence[str], raw: dict[str, str]) -> str | None:
    try:
        text = runner(argv)
    except ServiceError as exc:
        raw[" ".join(argv) + " (failed)"] = str(exc)
        return None
    raw[" ".join(argv)] = text
    return text


def xpu_smi_owners(runner: Runner, raw: dict[str, str], *,
                   alive: Callable[[int], bool] | None = None) -> tuple[list[GpuProcess], tuple[GpuDevice, ...]]:
    """Owners from ``xpu-smi ps -j`` (required) and devices from ``xpu-smi discovery -j``
    (optional: its failure only loses UUIDs and PCI addresses). The tool's own query rows are
    dropped (:func:`harness.service.devices.xpu.drop_prober_rows`; ``alive`` default :func:`pid_alive`)."""
    text = runner(XPU_PS)
    raw[" ".join(XPU_PS)] = text
    procs = drop_prober_rows(parse_xpu_ps_json(text), alive or pid_alive)
    disc = _optional(runner, XPU_DISCOVERY, raw)
    return procs, merge_devices(parse_xpu_discovery_json(disc) if disc is not None else [])


def xpu_smi_memory(runner: Runner, raw: dict[str, str]) -> tuple[GpuDevice, ...]:
    """Per-device memory: ``xpu-smi discovery -j`` for the devices (and total, where printed),
    then ``xpu-smi stats -d N -j`` for each device's memory used."""
    text = runner(XPU_DISCOVERY)
    raw[" ".join(XPU_DISCOVERY)] = text
    devices = parse_xpu_discovery_json(text)
    used = []
    for d in devices:
        argv = xpu_stats_argv(d.index)
        stats = runner(argv)
        raw[" ".join(argv)] = stats
        used.append(parse_xpu_stats_json(stats, d.index))
    return merge_devices(devices, used)


# -------------------------------------------------------------------------------------------- fdinfo


def render_nodes(sys_root: Path | None = None) -> list[tuple[str, str, str | None]]:
    """``(node, pci_address, driver)`` of every ``/sys/class/drm/renderD*`` (driver ``None`` when
    its link cannot be read), sorted by node name."""
    base = (sys_root or SYS_ROOT) / "class" / "drm"
    out = []
    try:
        nodes = sorted(p for p in base.iterdir() if p.name.startswith("renderD"))
    except OSError:
        return []
    for node in nodes:
        try:
            bdf = os.path.basename(os.readlink(node / "device"))
        except OSError:
            continue
        try:
            driver: str | None = os.path.basename(os.readlink(node / "device" / "driver"))
        except OSError:
            driver = None
        out.append((node.name, bdf.lower(), driver))
    return out


def has_intel_render_nodes(sys_root: Path | None = None) -> bool:
    """True when a render node is driven by ``xe`` or ``i915``."""
    return any(driver in INTEL_DRIVERS for _, _, driver in render_nodes(sys_root))


def read_drm_clients(proc_root: Path | None = None) -> tuple[list[DrmClient], list[int]]:
    """Every DRM client of every readable process under ``proc_root`` (default ``/proc``): the fds
    whose link points into ``/dev/dri/``, parsed from ``fdinfo``. Returns the clients and the PIDs
    whose fds could not be read (permission); processes that exit meanwhile are skipped."""
    root = proc_root or PROC_ROOT
    clients: list[DrmClient] = []
    unreadable: list[int] = []
    try:
        entries = sorted(int(p.name) for p in root.iterdir() if p.name.isdigit())
    except OSError as exc:
        raise ServiceError(f"cannot list {root}: {exc}", hint="drm-fdinfo needs a Linux /proc") from exc
    for pid in entries:
        fd_dir = root / str(pid) / "fd"
        try:
            fds = sorted(int(f.name) for f in fd_dir.iterdir() if f.name.isdigit())
        except PermissionError:
            unreadable.append(pid)
            continue
        except OSError:
            continue  # exited while we looked
        for fd in fds:
            try:
                if not os.readlink(fd_dir / str(fd)).startswith("/dev/dri/"):
                    continue
                text = (root / str(pid) / "fdinfo" / str(fd)).read_text(encoding="utf-8", errors="replace")
            except PermissionError:
                unreadable.append(pid)
                break
            except OSError:
                continue
            client = parse_drm_fdinfo(text, pid, fd)
            if client is not None:
                clients.append(client)
    return clients, sorted(set(unreadable))


def fdinfo_snapshot(raw: dict[str, str], *, proc_root: Path | None = None,
                    sys_root: Path | None = None) -> tuple[list[GpuProcess], tuple[GpuDevice, ...]]:
    """Owners and devices from DRM fdinfo (devices numbered in PCI order of the render nodes);
    the clients read and the unreadable PIDs are kept in ``raw`` as JSON."""
    clients, unreadable = read_drm_clients(proc_root)
    nodes = render_nodes(sys_root)
    raw["drm-fdinfo clients"] = json.dumps(
        [{"pid": c.pid, "fd": c.fd, "driver": c.driver, "pdev": c.pdev, "client_id": c.client_id,
          "regions": {r: dict(k) for r, k in sorted(c.regions.items())}} for c in clients], indent=1)
    raw["drm-fdinfo render nodes"] = json.dumps(nodes)
    if unreadable:
        raw[UNREADABLE_KEY] = json.dumps(unreadable)
    root = proc_root or PROC_ROOT
    names: dict[int, str] = {}
    for pid in {c.pid for c in clients}:
        try:
            names[pid] = (root / str(pid) / "comm").read_text(encoding="utf-8", errors="replace").strip()
        except OSError:
            continue
    procs, devices = fdinfo_owners(clients, [bdf for _, bdf, _ in nodes], names)
    return procs, merge_devices(devices)
