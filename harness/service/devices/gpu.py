"""GPU owners and device memory: data types and pure parsers of the vendor tools' output.

Nothing here runs a program or reads a file: every function takes the text (or parsed JSON) a tool
printed and returns frozen data, or raises :class:`harness.errors.ServiceError` naming the tool and
what could not be parsed. The edge that runs the tools is :mod:`harness.service.devices.gpu_probe`.

Units: every memory figure in these types is **bytes** (``int``), ``None`` when the tool did not
report it. Conversions, stated once:

- ``nvidia-smi`` CSV with ``nounits`` prints MiB: bytes = value * 1024**2.
- ``amd-smi`` prints ``{"value": N, "unit": U}``; its ``KB``/``MB``/``GB`` are binary (the tool
  divides by 1024), so ``MB`` means MiB. A bare number takes the field's documented unit
  (bytes for per-process memory, MiB for ``metric --mem-usage``).
- NVML reports bytes.

A GPU is named by its index (``int``) or its UUID (``str``), whichever the tool reports;
:func:`gpu_keys` relates the two through the device list of the same snapshot.
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Final

from harness.errors import ServiceError

MIB: Final = 1024**2

#: Labels of the sources a process or device can come from.
SOURCES: Final = ("amd-smi", "nvidia-smi", "nvml", "xpu-smi", "drm-fdinfo", "injected", "none")

_NO_PROCESSES = "no running processes detected"
_NA_NAMES = frozenset({"", "n/a", "[n/a]", "[not supported]", "not supported"})
# amd-smi's unit strings; its K/M/G are binary (the CLI divides by 1024).
_AMD_UNITS: Final[dict[str, int]] = {
    "b": 1, "kb": 1024, "kib": 1024, "mb": MIB, "mib": MIB, "gb": 1024**3, "gib": 1024**3,
    "tb": 1024**4, "tib": 1024**4,
}
_NUM_UNIT = re.compile(r"^\s*([0-9]+(?:\.[0-9]+)?)\s*([A-Za-z]*)\s*$")
_HINT = ("run the command by hand to see its output; if the format changed, report it with that output "
         "attached, or pick another tool with --source (or the profile's devices.gpu_owners_source)")


@dataclass(frozen=True)
class GpuProcess:
    """One process holding memory on one GPU, as a tool reported it.

    ``gpu`` is the GPU index (``int``: amd-smi, NVML, injected) or UUID (``str``: nvidia-smi).
    ``name`` is the tool's short process name, ``None`` when it printed ``N/A`` or nothing (amd-smi
    hides names from non-root callers); never match owners by name. ``vram_bytes`` is the memory the
    tool attributes to the process on that GPU, ``None`` if unknown. ``source`` is the tool label
    (one of :data:`SOURCES`). A process on several GPUs is one ``GpuProcess`` per GPU.
    """

    gpu: int | str
    pid: int
    name: str | None
    vram_bytes: int | None
    source: str

    def to_dict(self) -> dict[str, Any]:
        """Plain JSON-able dict (for archives and ``--json``)."""
        return {"gpu": self.gpu, "pid": self.pid, "name": self.name, "vram_bytes": self.vram_bytes,
                "source": self.source}


@dataclass(frozen=True)
class GpuDevice:
    """One GPU: index as the tool numbers it, UUID and PCI address when known, memory in bytes."""

    index: int
    uuid: str | None = None
    bdf: str | None = None
    memory_used_bytes: int | None = None
    memory_total_bytes: int | None = None

    def to_dict(self) -> dict[str, Any]:
        """Plain JSON-able dict."""
        return {"index": self.index, "uuid": self.uuid, "bdf": self.bdf,
                "memory_used_bytes": self.memory_used_bytes, "memory_total_bytes": self.memory_total_bytes}


@dataclass(frozen=True)
class OwnersSnapshot:
    """What one probe saw: GPU owners and devices, the tool used, and the raw text for the archive.

    ``source`` is the tool (``"none"`` when no GPU tool exists on the machine); ``raw`` maps each
    command line that ran (or ``"injected:<path>"``) to the text it printed; ``wall_iso`` is the
    wall-clock time (UTC, ISO 8601) and ``t_monotonic_ns`` the ``time.monotonic_ns()`` of the probe.
    """

    source: str
    processes: tuple[GpuProcess, ...] = ()
    devices: tuple[GpuDevice, ...] = ()
    raw: Mapping[str, str] = field(default_factory=dict)
    wall_iso: str = ""
    t_monotonic_ns: int = 0

    @property
    def available(self) -> bool:
        """False when no GPU tool was found (source ``"none"``) and nothing was injected."""
        return self.source != "none" or bool(self.processes)

    def to_dict(self) -> dict[str, Any]:
        """Plain JSON-able dict, raw text included."""
        return {"source": self.source, "wall_iso": self.wall_iso, "t_monotonic_ns": self.t_monotonic_ns,
                "processes": [p.to_dict() for p in self.processes],
                "devices": [d.to_dict() for d in self.devices], "raw": dict(self.raw)}


# --------------------------------------------------------------------------------------------- helpers


def _err(tool: str, what: str) -> ServiceError:
    return ServiceError(f"cannot parse {tool} output: {what}", hint=_HINT)


def _load_json(text: str, tool: str) -> Any:
    try:
        return json.loads(text)
    except json.JSONDecodeError as exc:
        head = text.strip()[:120]
        raise _err(tool, f"not JSON ({exc.msg} at line {exc.lineno}); it starts with {head!r}") from exc


def _name(value: Any) -> str | None:
    if value is None:
        return None
    s = str(value)
    return None if s.strip().lower() in _NA_NAMES else s


def _int(value: Any, tool: str, what: str) -> int:
    if isinstance(value, bool):
        raise _err(tool, f"{what} is a boolean ({value!r}), expected an integer")
    if isinstance(value, int):
        return value
    if isinstance(value, str) and value.strip().isdigit():
        return int(value.strip())
    if isinstance(value, Mapping) and "value" in value:
        return _int(value["value"], tool, what)
    raise _err(tool, f"{what} is {value!r}, expected an integer")


def _is_no_processes(value: Any) -> bool:
    return isinstance(value, str) and value.strip().lower().rstrip(".") == _NO_PROCESSES


def amd_bytes(value: Any, *, default_unit: str, tool: str, what: str) -> int | None:
    """Bytes of one amd-smi memory value, ``None`` when it says ``N/A`` (or is missing).

    Accepts ``{"value": N, "unit": U}``, a bare number (read in ``default_unit``) or a string like
    ``"512 MB"``. Units ``B``, ``KB``/``KiB``, ``MB``/``MiB``, ``GB``/``GiB`` (binary, as amd-smi
    computes them). Any other unit (e.g. ``ns``) raises ServiceError naming ``tool`` and ``what``.
    """
    unit = default_unit
    if isinstance(value, Mapping):
        if "value" not in value:
            raise _err(tool, f"{what} is {value!r}: a dict without 'value'")
        unit = str(value.get("unit") or default_unit)
        value = value["value"]
    if value is None:
        return None
    if isinstance(value, bool):
        raise _err(tool, f"{what} is a boolean ({value!r})")
    if isinstance(value, str):
        if value.strip().lower() in _NA_NAMES:
            return None
        m = _NUM_UNIT.match(value)
        if m is None:
            raise _err(tool, f"{what} is {value!r}, expected a number with an optional unit")
        value = float(m.group(1))
        unit = m.group(2) or unit
    if not isinstance(value, int | float):
        raise _err(tool, f"{what} is {value!r}, expected a number")
    factor = _AMD_UNITS.get(unit.strip().lower())
    if factor is None:
        raise _err(tool, f"{what} has unit {unit!r}, expected one of B, KB, MB, GB")
    if value < 0:
        raise _err(tool, f"{what} is negative ({value!r})")
    return round(value * factor)


def _amd_gpu_list(data: Any, tool: str) -> list[Any]:
    """The per-GPU list of an amd-smi JSON document: a bare list, ``{"gpu_data": [...]}`` or one
    per-GPU object."""
    if isinstance(data, list):
        return data
    if isinstance(data, Mapping):
        for key in ("gpu_data", "gpus", "data"):
            if isinstance(data.get(key), list):
                return list(data[key])
        if "gpu" in data:
            return [data]
        raise _err(tool, f"a JSON object with keys {sorted(data)[:8]}; expected a list of per-GPU objects "
                         "or {\"gpu_data\": [...]}")
    raise _err(tool, f"top-level JSON is {type(data).__name__}, expected a list of per-GPU objects")


def _amd_gpu_index(entry: Any, tool: str) -> int:
    if not isinstance(entry, Mapping):
        raise _err(tool, f"a per-GPU element is {type(entry).__name__} ({entry!r:.80}), expected an object")
    if "gpu" not in entry:
        raise _err(tool, f"a per-GPU object has no 'gpu' key (keys: {sorted(entry)[:8]})")
    return _int(entry["gpu"], tool, "'gpu'")


# ------------------------------------------------------------------------------------------------ AMD


def parse_amd_process_json(text: str) -> list[GpuProcess]:
    """Parse ``amd-smi process --json`` into one :class:`GpuProcess` per (GPU, PID).

    Shape: a list of ``{"gpu": N, "process_list": [...]}`` (or that list under ``"gpu_data"``); each
    list entry is ``{"process_info": {"name", "pid", "memory_usage": {"vram_mem", ...},
    "mem_usage", ...}}``. Idle GPUs say ``"No running processes detected"`` as the ``process_info``
    value, as the list element, or as ``process_list`` itself. Unknown keys are ignored. The VRAM
    figure is ``memory_usage.vram_mem`` (bytes), else ``mem_usage``, else ``None``. A name of
    ``N/A`` (non-root callers) becomes ``None``. Fails closed: an entry without an integer ``pid``
    or a GPU object without ``process_list`` raises ServiceError rather than reading as "no owners".
    """
    tool = "amd-smi process --json"
    if not text.strip():
        raise _err(tool, "empty output (an idle machine still prints one object per GPU)")
    out: dict[tuple[int, int], GpuProcess] = {}
    for entry in _amd_gpu_list(_load_json(text, tool), tool):
        gpu = _amd_gpu_index(entry, tool)
        if "process_list" not in entry:
            raise _err(tool, f"GPU {gpu} has no 'process_list' (keys: {sorted(entry)[:8]})")
        plist = entry["process_list"]
        if plist is None or _is_no_processes(plist):
            continue
        if not isinstance(plist, list):
            raise _err(tool, f"GPU {gpu} 'process_list' is {plist!r:.80}, expected a list")
        for item in plist:
            if _is_no_processes(item):
                continue
            if not isinstance(item, Mapping):
                raise _err(tool, f"GPU {gpu}: a process entry is {item!r:.80}, expected an object")
            info = item.get("process_info", item if "pid" in item else None)
            if _is_no_processes(info):
                continue
            if not isinstance(info, Mapping):
                raise _err(tool, f"GPU {gpu}: 'process_info' is {info!r:.80}, expected an object or "
                                 "'No running processes detected'")
            if "pid" not in info:
                raise _err(tool, f"GPU {gpu}: a process has no 'pid' (keys: {sorted(info)[:8]})")
            pid = _int(info["pid"], tool, f"GPU {gpu} 'pid'")
            vram: int | None = None
            usage = info.get("memory_usage")
            if isinstance(usage, Mapping) and "vram_mem" in usage:
                vram = amd_bytes(usage["vram_mem"], default_unit="B", tool=tool,
                                 what=f"GPU {gpu} PID {pid} vram_mem")
            elif "mem_usage" in info:
                vram = amd_bytes(info["mem_usage"], default_unit="B", tool=tool,
                                 what=f"GPU {gpu} PID {pid} mem_usage")
            name = _name(info.get("name", info.get("process_name")))
            out[(gpu, pid)] = GpuProcess(gpu=gpu, pid=pid, name=name, vram_bytes=vram, source="amd-smi")
    return list(out.values())


def parse_amd_metric_mem_json(text: str) -> list[GpuDevice]:
    """Parse ``amd-smi metric --mem-usage --json`` into devices with memory used/total (bytes).

    Shape: a bare list (older builds) or ``{"gpu_data": [...]}`` (newer), each element
    ``{"gpu": N, "mem_usage": {"total_vram": {"value", "unit": "MB"}, "used_vram": ...,
    "free_vram": ...}}``; ``MB`` is MiB. ``used`` falls back to ``total - free``; ``N/A`` is ``None``.
    """
    tool = "amd-smi metric --mem-usage --json"
    out: list[GpuDevice] = []
    for entry in _amd_gpu_list(_load_json(text, tool), tool):
        gpu = _amd_gpu_index(entry, tool)
        mem = entry.get("mem_usage")
        if mem is None or (isinstance(mem, str) and _name(mem) is None):  # missing or "N/A"
            out.append(GpuDevice(index=gpu))
            continue
        if not isinstance(mem, Mapping):
            raise _err(tool, f"GPU {gpu} 'mem_usage' is {mem!r:.80}, expected an object")

        def get(key: str, gpu: int = gpu, mem: Mapping[str, Any] = mem) -> int | None:
            return amd_bytes(mem.get(key), default_unit="MB", tool=tool, what=f"GPU {gpu} {key}")

        total, used, free = get("total_vram"), get("used_vram"), get("free_vram")
        if used is None and total is not None and free is not None:
            used = total - free
        out.append(GpuDevice(index=gpu, memory_used_bytes=used, memory_total_bytes=total))
    return out


def parse_amd_list_json(text: str) -> list[GpuDevice]:
    """Parse ``amd-smi list --json``: one device per element with ``gpu``, ``bdf`` and ``uuid``
    (extra keys such as ``kfd_id``, ``node_id``, ``partition_id`` are ignored)."""
    tool = "amd-smi list --json"
    out: list[GpuDevice] = []
    for entry in _amd_gpu_list(_load_json(text, tool), tool):
        gpu = _amd_gpu_index(entry, tool)
        out.append(GpuDevice(index=gpu, uuid=_name(entry.get("uuid")), bdf=_name(entry.get("bdf"))))
    return out


def merge_devices(*lists: Iterable[GpuDevice]) -> tuple[GpuDevice, ...]:
    """Merge device lists by index: for each field the first non-``None`` value wins; sorted by index."""
    merged: dict[int, GpuDevice] = {}
    for devices in lists:
        for d in devices:
            old = merged.get(d.index)
            if old is None:
                merged[d.index] = d
                continue
            merged[d.index] = GpuDevice(
                index=d.index,
                uuid=old.uuid if old.uuid is not None else d.uuid,
                bdf=old.bdf if old.bdf is not None else d.bdf,
                memory_used_bytes=old.memory_used_bytes if old.memory_used_bytes is not None
                else d.memory_used_bytes,
                memory_total_bytes=old.memory_total_bytes if old.memory_total_bytes is not None
                else d.memory_total_bytes,
            )
    return tuple(merged[i] for i in sorted(merged))


# --------------------------------------------------------------------------------------------- NVIDIA


def _csv_lines(text: str, header_first_field: str) -> list[str]:
    lines = []
    for raw in text.split("\n"):  # not splitlines(): a process name may hold \x85, \u2028, ...
        line = raw.rstrip("\r")
        if not line.strip():
            continue
        if line.split(",", 1)[0].strip().lower() == header_first_field:
            continue  # a header line (``--format=csv`` without ``noheader``)
        lines.append(line)
    return lines


def _mib(value: str, tool: str, what: str) -> int | None:
    v = value.strip()
    if v.lower() in _NA_NAMES:
        return None
    if v.lower().endswith("mib"):
        v = v[:-3].strip()
    try:
        return round(float(v) * MIB)
    except ValueError as exc:
        raise _err(tool, f"{what} is {value!r}, expected MiB or [N/A]") from exc


def parse_nvidia_apps_csv(text: str) -> list[GpuProcess]:
    """Parse ``nvidia-smi --query-compute-apps=gpu_uuid,pid,process_name,used_memory
    --format=csv,noheader,nounits``.

    One ``, ``-separated line per (process, GPU); empty output means no compute process. The
    process name may contain ``, `` or be empty: the GPU UUID and PID are split from the left and the
    memory (MiB) from the right, and everything between is the name, kept verbatim. Tolerates a
    header line, ``[N/A]`` memory (``None``) and values with a `` MiB`` suffix.
    """
    tool = "nvidia-smi --query-compute-apps"
    out: list[GpuProcess] = []
    for line in _csv_lines(text, "gpu_uuid"):
        parts = line.split(", ", 2)
        if len(parts) != 3 or ", " not in parts[2]:
            raise _err(tool, f"line {line!r} does not have 4 fields (gpu_uuid, pid, process_name, "
                             "used_memory)")
        uuid, pid_s, rest = parts
        name, mem = rest.rsplit(", ", 1)  # an empty name leaves rest == ", <mem>" -> ("", "<mem>")
        pid_s = pid_s.strip()
        if not pid_s.isdigit():
            raise _err(tool, f"line {line!r}: pid {pid_s!r} is not an integer")
        out.append(GpuProcess(gpu=uuid.strip(), pid=int(pid_s), name=_name(name),
                              vram_bytes=_mib(mem, tool, f"used_memory of PID {pid_s}"), source="nvidia-smi"))
    return out


def parse_nvidia_gpus_csv(text: str) -> list[GpuDevice]:
    """Parse ``nvidia-smi --query-gpu=index,uuid,memory.used,memory.total --format=csv,noheader,nounits``
    (MiB) into devices; a fifth field, if queried, is read as ``pci.bus_id``."""
    tool = "nvidia-smi --query-gpu"
    out: list[GpuDevice] = []
    for line in _csv_lines(text, "index"):
        parts = [p.strip() for p in line.split(",")]
        if len(parts) not in (4, 5):
            raise _err(tool, f"line {line!r} does not have 4 fields (index, uuid, memory.used, memory.total)")
        if not parts[0].isdigit():
            raise _err(tool, f"line {line!r}: index {parts[0]!r} is not an integer")
        out.append(GpuDevice(
            index=int(parts[0]), uuid=_name(parts[1]),
            bdf=_name(parts[4]) if len(parts) == 5 else None,
            memory_used_bytes=_mib(parts[2], tool, f"memory.used of GPU {parts[0]}"),
            memory_total_bytes=_mib(parts[3], tool, f"memory.total of GPU {parts[0]}"),
        ))
    return out


# NVML's "value not available" sentinel for usedGpuMemory (nvidia-ml-py maps it to None itself).
NVML_VALUE_NOT_AVAILABLE: Final = 2**64 - 1


def parse_nvml_records(records: Sequence[Any]) -> tuple[list[GpuProcess], list[GpuDevice]]:
    """Convert NVML readings, as plain records, into processes and devices.

    Each record is ``{"index", "uuid", "bdf"?, "total", "used", "procs": [{"pid", "usedGpuMemory",
    "name"?}]}`` with bytes, which is what :mod:`harness.service.devices.gpu_probe` builds from
    ``nvmlDeviceGetMemoryInfo`` and ``nvmlDeviceGetComputeRunningProcesses`` (and what it archives).
    ``usedGpuMemory`` of ``None`` or NVML's not-available sentinel becomes ``None``.
    """
    tool = "NVML"
    if not isinstance(records, Sequence) or isinstance(records, str | bytes):
        raise _err(tool, f"records are {type(records).__name__}, expected a list")
    procs: list[GpuProcess] = []
    devices: list[GpuDevice] = []
    for rec in records:
        if not isinstance(rec, Mapping) or "index" not in rec:
            raise _err(tool, f"a device record is {rec!r:.80}, expected an object with 'index'")
        index = _int(rec["index"], tool, "device 'index'")
        used, total = rec.get("used"), rec.get("total")
        devices.append(GpuDevice(
            index=index, uuid=_name(rec.get("uuid")), bdf=_name(rec.get("bdf")),
            memory_used_bytes=None if used is None else _int(used, tool, f"GPU {index} 'used'"),
            memory_total_bytes=None if total is None else _int(total, tool, f"GPU {index} 'total'"),
        ))
        plist = rec.get("procs") or []
        if not isinstance(plist, list):
            raise _err(tool, f"GPU {index} 'procs' is {plist!r:.80}, expected a list")
        for p in plist:
            if not isinstance(p, Mapping) or "pid" not in p:
                raise _err(tool, f"GPU {index}: a process is {p!r:.80}, expected an object with 'pid'")
            pid = _int(p["pid"], tool, f"GPU {index} 'pid'")
            mem = p.get("usedGpuMemory")
            vram = None if mem is None else _int(mem, tool, f"GPU {index} PID {pid} usedGpuMemory")
            if vram == NVML_VALUE_NOT_AVAILABLE:
                vram = None
            procs.append(GpuProcess(gpu=index, pid=pid, name=_name(p.get("name")), vram_bytes=vram,
                                    source="nvml"))
    return procs, devices


def parse_nvml_json(text: str) -> tuple[list[GpuProcess], list[GpuDevice]]:
    """:func:`parse_nvml_records` over the JSON text of the records (as archived)."""
    return parse_nvml_records(_load_json(text, "NVML"))


# ---------------------------------------------------------------------------------------- injected


def parse_injected_owners(text: str, origin: str) -> list[GpuProcess]:
    """Parse an injected-owners JSON file: a list of ``{"gpu", "pid", "name"?, "vram_bytes"?}``.

    Used to register a decoy process as a GPU owner (tests, CI); ``origin`` (the file path) names
    the file in errors. ``gpu`` is an index (int or digit string) or a UUID string.
    """
    tool = f"injected GPU owners file {origin}"
    data = _load_json(text, tool)
    if not isinstance(data, list):
        raise _err(tool, f"top-level JSON is {type(data).__name__}, expected a list of owners")
    out: list[GpuProcess] = []
    for item in data:
        if not isinstance(item, Mapping) or "pid" not in item or "gpu" not in item:
            raise _err(tool, f"an owner is {item!r:.80}, expected an object with 'gpu' and 'pid'")
        gpu_v = item["gpu"]
        gpu: int | str
        if isinstance(gpu_v, int) and not isinstance(gpu_v, bool):
            gpu = gpu_v
        elif isinstance(gpu_v, str) and gpu_v.strip():
            gpu = int(gpu_v) if gpu_v.strip().isdigit() else gpu_v.strip()
        else:
            raise _err(tool, f"'gpu' is {gpu_v!r}, expected an index or a UUID")
        vram_v = item.get("vram_bytes")
        out.append(GpuProcess(
            gpu=gpu, pid=_int(item["pid"], tool, "'pid'"), name=_name(item.get("name")),
            vram_bytes=None if vram_v is None else _int(vram_v, tool, "'vram_bytes'"), source="injected",
        ))
    return out


# ------------------------------------------------------------------------------------ GPU identity


def _norm_key(gpu: int | str) -> str:
    if isinstance(gpu, int):
        return str(gpu)
    s = gpu.strip()
    return str(int(s)) if s.isdigit() else s.lower()


def gpu_keys(gpu: int | str, devices: Iterable[GpuDevice]) -> frozenset[str]:
    """Every key naming the same GPU: its index as a decimal string and its lower-cased UUID,
    related through ``devices`` (a GPU absent from ``devices`` has only its own key)."""
    keys = {_norm_key(gpu)}
    for d in devices:
        dk = {str(d.index)} | ({d.uuid.strip().lower()} if d.uuid else set())
        if keys & dk:
            keys |= dk
    return frozenset(keys)


def format_bytes(n: int | None) -> str:
    """Human-readable bytes in binary units (``"3.39 GiB"``); ``"?"`` when unknown."""
    if n is None:
        return "?"
    value = float(n)
    for unit in ("B", "KiB", "MiB", "GiB"):
        if value < 1024 or unit == "GiB":
            return f"{value:.0f} {unit}" if unit == "B" else f"{value:.2f} {unit}"
        value /= 1024
    return f"{value:.2f} GiB"  # pragma: no cover
