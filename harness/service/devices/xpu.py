"""Intel GPUs: pure parsers of ``xpu-smi`` JSON and of the kernel's DRM fdinfo (docs/serving-facts.md).

Nothing here runs a program or reads a file; the edge is :mod:`harness.service.devices.xpu_probe`. Results
are the shared :class:`~harness.service.devices.gpu.GpuProcess` / :class:`~harness.service.devices.gpu.GpuDevice`
types, memory in **bytes**. Conversions, stated once:

- ``xpu-smi ps -j``: ``mem_size`` and ``shared_mem_size`` are **kB = 1000 bytes** (xpumanager
  divides Level Zero's byte count by 1000), so bytes = value * 1000 (exact to the kB).
- ``xpu-smi stats -d N -j``: ``XPUM_STATS_MEMORY_USED`` is **MiB** ("GPU Memory Used (MiB)";
  the device level is the sum of its tiles), bytes = value * 1024**2.
- ``xpu-smi discovery -j``: ``memory_physical_size_byte`` (newer builds, a string or a number) is
  bytes.
- DRM fdinfo (Documentation/gpu/drm-usage-stats.rst): ``drm-<kind>-<region>: <uint> [KiB|MiB]``,
  bytes by default, ``KiB``/``MiB`` binary (``GiB`` accepted too).

A process's device memory from fdinfo is the sum, over its distinct DRM clients on that device
(``drm-pdev`` + ``drm-client-id``; one client may sit behind several fds), of the device-local
regions (``vram*`` for xe and amdgpu, ``local*`` for i915): ``drm-total-`` where present, else
``drm-resident-``, else the legacy ``drm-memory-``. System, GTT and stolen regions are not device
memory and are not counted.
"""

from __future__ import annotations

import json
import re
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Final

from harness.errors import ServiceError
from harness.service.devices.gpu import MIB, GpuDevice, GpuProcess

KB: Final = 1000
#: The metric of ``xpu-smi stats -j`` that carries device memory used (MiB).
MEMORY_USED_METRIC: Final = "XPUM_STATS_MEMORY_USED"
#: The program name xpu-smi reports for its own query process (one row per device).
XPU_SMI_NAME: Final = "xpu-smi"
#: Environment prefixes that configure oneCCL and Level Zero (recorded with a run).
GPU_RUNTIME_ENV_PREFIXES: Final = ("CCL_", "ZE_", "ONEAPI_", "SYCL_", "FI_", "I_MPI_")

_HINT = ("run the command by hand to see its output; if the format changed, report it with that output "
         "attached, or pick another tool with --source (or the profile's devices.gpu_owners_source)")
_SIZE_UNITS: Final[dict[str, int]] = {"": 1, "b": 1, "kib": 1024, "mib": MIB, "gib": 1024**3}
_FDINFO_SIZE = re.compile(r"^([0-9]+)\s*([A-Za-z]*)$")
_MEMORY_KEY = re.compile(r"^drm-(total|shared|resident|active|purgeable|memory)-(.+)$")
_DEVICE_REGION = re.compile(r"^(vram|local)[0-9]*$")


def _err(tool: str, what: str) -> ServiceError:
    return ServiceError(f"cannot parse {tool} output: {what}", hint=_HINT)


def _json_object(text: str, tool: str) -> Mapping[str, Any]:
    try:
        data = json.loads(text)
    except json.JSONDecodeError as exc:
        raise _err(tool, f"not JSON ({exc.msg} at line {exc.lineno}); it starts with {text.strip()[:120]!r}") \
            from exc
    if not isinstance(data, Mapping):
        raise _err(tool, f"top-level JSON is {type(data).__name__}, expected an object")
    if "error" in data:  # xpu-smi reports failures as {"error": "...", "errno": N} with exit code 0 or not
        raise ServiceError(f"{tool} reported an error: {data['error']} (errno {data.get('errno')})",
                           hint="run the command by hand; check the driver, Level Zero and the user's "
                                "permissions on /dev/dri")
    return data


def _count(value: Any, tool: str, what: str) -> int:
    """A non-negative integer from an int, an integral float or a digit string."""
    if isinstance(value, bool):
        raise _err(tool, f"{what} is a boolean ({value!r})")
    if isinstance(value, float) and value.is_integer():
        value = int(value)
    if isinstance(value, str) and value.strip().isdigit():
        value = int(value.strip())
    if not isinstance(value, int) or value < 0:
        raise _err(tool, f"{what} is {value!r}, expected a non-negative integer")
    return value


def _name(value: Any) -> str | None:
    s = "" if value is None else str(value).strip()
    return s or None


# ------------------------------------------------------------------------------------------- xpu-smi


def parse_xpu_ps_json(text: str) -> list[GpuProcess]:
    """Parse ``xpu-smi ps -j`` into one :class:`GpuProcess` per (device, PID).

    Shape: ``{"device_util_by_proc_list": [{"process_id", "process_name", "device_id", "mem_size",
    "shared_mem_size", ...}]}`` (older builds also print per-engine utilisations, newer ones an
    ``engines`` field; both ignored). ``vram_bytes`` is ``mem_size`` (kB) * 1000. An empty list
    means no process; a missing list, or a row without an integer ``process_id`` / ``device_id``,
    raises ServiceError (fail closed). The tool's own rows are kept here (see
    :func:`drop_prober_rows`).
    """
    tool = "xpu-smi ps -j"
    data = _json_object(text, tool)
    rows = data.get("device_util_by_proc_list")
    if not isinstance(rows, list):
        raise _err(tool, f"no 'device_util_by_proc_list' list (keys: {sorted(data)[:8]})")
    out: dict[tuple[int, int], GpuProcess] = {}
    for row in rows:
        if not isinstance(row, Mapping) or "process_id" not in row or "device_id" not in row:
            raise _err(tool, f"a row is {row!r:.120}, expected an object with 'process_id' and 'device_id'")
        pid = _count(row["process_id"], tool, "'process_id'")
        dev = _count(row["device_id"], tool, f"PID {pid} 'device_id'")
        mem = row.get("mem_size")
        vram = None if mem is None else _count(mem, tool, f"PID {pid} 'mem_size'") * KB
        out[(dev, pid)] = GpuProcess(gpu=dev, pid=pid, name=_name(row.get("process_name")), vram_bytes=vram,
                                     source="xpu-smi")
    return list(out.values())


def drop_prober_rows(processes: Iterable[GpuProcess], alive: Callable[[int], bool]) -> list[GpuProcess]:
    """The rows of ``xpu-smi ps`` minus the tool's own query process: a row named ``xpu-smi``
    whose PID no longer exists (``alive(pid)`` is False) once the command has returned. A live
    process of that name is kept: only a process that exited provably holds nothing."""
    return [p for p in processes if not (p.name == XPU_SMI_NAME and not alive(p.pid))]


def parse_xpu_discovery_json(text: str) -> list[GpuDevice]:
    """Parse ``xpu-smi discovery -j``: ``{"device_list": [{"device_id", "uuid", "pci_bdf_address",
    "device_name", ...}]}`` into devices (index = ``device_id``); ``memory_physical_size_byte``,
    when a build prints it, is the total memory (bytes)."""
    tool = "xpu-smi discovery -j"
    data = _json_object(text, tool)
    rows = data.get("device_list")
    if not isinstance(rows, list):
        raise _err(tool, f"no 'device_list' list (keys: {sorted(data)[:8]})")
    out = []
    for row in rows:
        if not isinstance(row, Mapping) or "device_id" not in row:
            raise _err(tool, f"a device is {row!r:.120}, expected an object with 'device_id'")
        dev = _count(row["device_id"], tool, "'device_id'")
        size = row.get("memory_physical_size_byte")
        total = None if _name(size) is None else _count(size, tool, f"device {dev} 'memory_physical_size_byte'")
        out.append(GpuDevice(index=dev, uuid=_name(row.get("uuid")), bdf=_name(row.get("pci_bdf_address")),
                             memory_total_bytes=total))
    return out


def _metric_mib(entries: Any, tool: str, where: str) -> float | None:
    if entries is None:
        return None
    if not isinstance(entries, list):
        raise _err(tool, f"{where} is {entries!r:.80}, expected a list of metrics")
    for m in entries:
        if isinstance(m, Mapping) and m.get("metrics_type") == MEMORY_USED_METRIC:
            value = m.get("value")
            if isinstance(value, bool) or not isinstance(value, int | float) or value < 0:
                raise _err(tool, f"{where} {MEMORY_USED_METRIC} is {value!r}, expected MiB")
            return float(value)
    return None


def parse_xpu_stats_json(text: str, device: int | None = None) -> GpuDevice:
    """Parse ``xpu-smi stats -d N -j`` into one device with ``memory_used_bytes``.

    Shape: ``{"device_id": N, "device_level": [{"metrics_type", "value"}, ...], "tile_level":
    [{"tile_id", "data_list": [...]}]}``. Memory used is the device-level ``XPUM_STATS_MEMORY_USED``
    (MiB), else the sum of the tiles' values, else ``None``. ``device`` is the index asked for
    (used when the output has no ``device_id``).
    """
    tool = "xpu-smi stats -j"
    data = _json_object(text, tool)
    if "device_id" in data:
        index = _count(data["device_id"], tool, "'device_id'")
    elif device is not None:
        index = device
    else:
        raise _err(tool, f"no 'device_id' (keys: {sorted(data)[:8]})")
    if "device_level" not in data and "tile_level" not in data:
        raise _err(tool, f"neither 'device_level' nor 'tile_level' (keys: {sorted(data)[:8]})")
    mib = _metric_mib(data.get("device_level"), tool, "device_level")
    if mib is None and isinstance(data.get("tile_level"), list):
        tiles = [_metric_mib(t.get("data_list"), tool, f"tile {t.get('tile_id')}")
                 for t in data["tile_level"] if isinstance(t, Mapping)]
        known = [t for t in tiles if t is not None]
        mib = sum(known) if known else None
    return GpuDevice(index=index, memory_used_bytes=None if mib is None else round(mib * MIB))


# -------------------------------------------------------------------------------------------- fdinfo


@dataclass(frozen=True)
class DrmClient:
    """One DRM file descriptor of one process, from ``/proc/PID/fdinfo/FD``.

    ``pdev`` is the PCI address (``drm-pdev``), ``client_id`` the ``drm-client-id`` (unique per
    open DRM file, shared by dup'ed or inherited fds); ``regions`` maps a memory region (``vram0``,
    ``gtt``, ``system``, ``local0``...) to its sizes by kind (``total``, ``resident``, ``shared``,
    ``active``, ``purgeable``, ``memory``), bytes.
    """

    pid: int
    fd: int
    driver: str
    pdev: str | None
    client_id: str | None
    regions: Mapping[str, Mapping[str, int]] = field(default_factory=dict)

    @property
    def device_bytes(self) -> int:
        """Device-local memory of this client (module docstring), bytes."""
        total = 0
        for region, kinds in self.regions.items():
            if _DEVICE_REGION.match(region):
                for kind in ("total", "resident", "memory"):
                    if kind in kinds:
                        total += kinds[kind]
                        break
        return total


def fdinfo_size(value: str, what: str) -> int:
    """Bytes of one fdinfo size (``"23992 KiB"``, ``"16 MiB"``, ``"0"``); ServiceError otherwise."""
    m = _FDINFO_SIZE.match(value.strip())
    factor = _SIZE_UNITS.get(m.group(2).lower()) if m else None
    if m is None or factor is None:
        raise _err("DRM fdinfo", f"{what} is {value!r}, expected '<uint> [KiB|MiB]'")
    return int(m.group(1)) * factor


def parse_drm_fdinfo(text: str, pid: int, fd: int) -> DrmClient | None:
    """Parse one ``/proc/PID/fdinfo/FD``: a :class:`DrmClient`, or ``None`` when the text has no
    ``drm-driver`` key (not a DRM file, or a driver without usage stats). Engine and cycle keys
    (``drm-engine-*``, ``drm-cycles-*``, ``drm-total-cycles-*``) are ignored."""
    keys: dict[str, str] = {}
    for line in text.splitlines():
        key, sep, value = line.partition(":")
        if sep:
            keys[key.strip()] = value.strip()
    driver = keys.get("drm-driver")
    if not driver:
        return None
    regions: dict[str, dict[str, int]] = {}
    for key, value in keys.items():
        m = _MEMORY_KEY.match(key)
        if m is None or m.group(2).startswith("cycles-"):
            continue
        kind, region = m.group(1), m.group(2)
        regions.setdefault(region, {})[kind] = fdinfo_size(value, f"PID {pid} fd {fd} {key}")
    pdev = keys.get("drm-pdev")
    return DrmClient(pid=pid, fd=fd, driver=driver, pdev=pdev.lower() if pdev else None,
                     client_id=keys.get("drm-client-id") or None, regions=regions)


def _client_key(c: DrmClient) -> tuple[str | None, str]:
    return c.pdev, c.client_id if c.client_id is not None else f"pid{c.pid}/fd{c.fd}"


def fdinfo_owners(clients: Iterable[DrmClient], bdfs: Sequence[str] = (), names: Mapping[int, str] | None = None,
                  ) -> tuple[list[GpuProcess], list[GpuDevice]]:
    """GPU owners and devices from DRM clients.

    Devices are numbered in PCI order over ``bdfs`` (the render nodes' PCI addresses) plus any
    ``drm-pdev`` seen; a client without ``drm-pdev`` counts on every device (it cannot be placed).
    Each process holding a client on a device is one owner there, even with no device memory (a
    DRM client holds the GPU). ``vram_bytes`` sums the process's distinct clients; a device's
    ``memory_used_bytes`` sums all distinct clients (memory held by DRM clients, not a device
    counter). ``names`` gives process names (``/proc/PID/comm``) where known. Processes sorted by PID.
    """
    items = list(clients)
    order = sorted({b.lower() for b in bdfs} | {c.pdev for c in items if c.pdev})
    index = {b: i for i, b in enumerate(order)}
    per_pid: dict[tuple[int, int], dict[tuple[str | None, str], int]] = {}
    per_dev: dict[int, dict[tuple[str | None, str], int]] = {i: {} for i in index.values()}
    for c in items:
        targets = [index[c.pdev]] if c.pdev else list(index.values())
        for dev in targets:
            per_pid.setdefault((dev, c.pid), {})[_client_key(c)] = c.device_bytes
            per_dev[dev][_client_key(c)] = c.device_bytes
    known = names or {}
    procs = [GpuProcess(gpu=dev, pid=pid, name=_name(known.get(pid)), vram_bytes=sum(cl.values()), source="drm-fdinfo")
             for (dev, pid), cl in sorted(per_pid.items(), key=lambda kv: (kv[0][1], kv[0][0]))]
    devices = [GpuDevice(index=i, bdf=b, memory_used_bytes=sum(per_dev[i].values())) for b, i in index.items()]
    return procs, devices


# ---------------------------------------------------------------------------------- device selection


def parse_ze_affinity_mask(value: str) -> list[int | str]:
    """The devices ``ZE_AFFINITY_MASK`` exposes, as device indices in first-seen order.

    Entries are ``N`` (device N) or ``N.M`` (sub-device / tile M of device N); the device of a tile
    is N, so ``"0.0,0.1,1.0"`` -> ``[0, 1]``. An entry that is not of that form is kept verbatim as
    a string (the ownership check then cannot place it and checks every owner). Empty -> ``[]``.
    """
    out: list[int | str] = []
    for item in value.split(","):
        s = item.strip()
        if not s:
            continue
        head, _, tail = s.partition(".")
        entry: int | str = int(head) if head.isdigit() and (not tail or tail.isdigit()) else s
        if entry not in out:
            out.append(entry)
    return out


def runtime_env(environ: Mapping[str, str]) -> dict[str, str]:
    """The variables of ``environ`` that configure oneCCL / Level Zero / oneAPI
    (:data:`GPU_RUNTIME_ENV_PREFIXES`), sorted by name."""
    return {k: environ[k] for k in sorted(environ) if k.startswith(GPU_RUNTIME_ENV_PREFIXES)}
