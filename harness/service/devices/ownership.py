"""Who owns the service's GPUs: classify GPU owners against an owned process tree (pure).

Inputs are plain data: an :class:`~harness.service.devices.gpu.OwnersSnapshot`, the GPUs the service uses
(indices or UUIDs; ``None`` = every GPU), and the owned tree as ``(pid, create_time)`` pairs (the
recorded root and its descendants as psutil reported them; ``create_time`` in seconds since the
epoch). A GPU owner is **owned** when its PID is in that tree and, if its current birth time is
known, that birth time matches the recorded one (a reused PID is not ours); otherwise it is
**unrelated**. Owners are matched by PID, never by process name.

The edge that gathers these inputs is :mod:`harness.service.devices.gpu_probe`.
"""

from __future__ import annotations

from collections.abc import Collection, Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Final, Literal

from harness.errors import OwnershipError
from harness.service.devices.gpu import GpuDevice, GpuProcess, OwnersSnapshot, format_bytes, gpu_keys
from harness.service.devices.xpu import parse_ze_affinity_mask

Verdict = Literal["owned", "unrelated"]

#: Two create times closer than this (seconds) are the same process birth (psutil rounds them).
CREATE_TIME_TOLERANCE_S: Final = 0.05

#: Environment variables that select GPUs, in the order they are read.
VISIBLE_DEVICE_VARS: Final = ("CUDA_VISIBLE_DEVICES", "HIP_VISIBLE_DEVICES", "ROCR_VISIBLE_DEVICES",
                               "ZE_AFFINITY_MASK")


@dataclass(frozen=True)
class ClassifiedOwner:
    """One GPU owner with its verdict and whether it sits on a GPU the service uses."""

    process: GpuProcess
    verdict: Verdict
    on_service_gpu: bool

    def to_dict(self) -> dict[str, object]:
        """Plain JSON-able dict."""
        return {**self.process.to_dict(), "verdict": self.verdict, "on_service_gpu": self.on_service_gpu}


def _is_index(key: str) -> bool:
    return key.isdigit()


def _comparable(a: frozenset[str], b: frozenset[str]) -> bool:
    """True when both key sets name the GPU the same way (both have an index, or both a UUID)."""
    return (any(map(_is_index, a)) and any(map(_is_index, b))) or (
        any(not _is_index(k) for k in a) and any(not _is_index(k) for k in b))


def on_gpus(process: GpuProcess, gpus: Collection[int | str] | None, devices: Iterable[GpuDevice]) -> bool:
    """True when ``process`` sits on one of ``gpus`` (``None`` = every GPU).

    Indices and UUIDs are related through ``devices``. When they cannot be related (a UUID owner
    and index-only ``gpus`` with no device list) the answer is True: an owner that cannot be placed
    is treated as being on the service's GPUs.
    """
    if gpus is None:
        return True
    devs = tuple(devices)
    pk = gpu_keys(process.gpu, devs)
    for g in gpus:
        gk = gpu_keys(g, devs)
        if pk & gk or not _comparable(pk, gk):
            return True
    return False


def _owned_map(owned: Iterable[tuple[int, float]]) -> dict[int, float]:
    return {int(pid): float(ct) for pid, ct in owned}


def is_owned(pid: int, owned: Mapping[int, float], current: Mapping[int, float] | None = None) -> bool:
    """True when ``pid`` is in the owned tree and, if ``current`` (PID -> create time now) knows
    it, its birth matches the recorded one within :data:`CREATE_TIME_TOLERANCE_S`."""
    if pid not in owned:
        return False
    if current is None or pid not in current:
        return True
    return abs(current[pid] - owned[pid]) <= CREATE_TIME_TOLERANCE_S


def classify_owners(
    snapshot: OwnersSnapshot,
    gpus: Collection[int | str] | None,
    owned: Iterable[tuple[int, float]],
    *,
    current: Mapping[int, float] | None = None,
) -> list[ClassifiedOwner]:
    """Classify every owner of ``snapshot`` as ``owned`` or ``unrelated`` and mark whether it is on
    one of ``gpus``. ``owned`` is the tree as ``(pid, create_time)``; ``current`` optionally gives
    the owners' create times now, so a PID reused since the tree was read is ``unrelated``."""
    omap = _owned_map(owned)
    return [
        ClassifiedOwner(process=p, verdict="owned" if is_owned(p.pid, omap, current) else "unrelated",
                        on_service_gpu=on_gpus(p, gpus, snapshot.devices))
        for p in snapshot.processes
    ]


def check_gpus_free(
    snapshot: OwnersSnapshot,
    gpus: Collection[int | str] | None,
    owned: Iterable[tuple[int, float]] = (),
    *,
    current: Mapping[int, float] | None = None,
) -> list[GpuProcess]:
    """The unrelated owners on the service's GPUs (empty list: the GPUs are free of strangers).

    Before launch pass ``owned=()``: every owner on the GPUs is unrelated. After launch pass the
    service's tree: only processes outside it are returned.
    """
    return [c.process for c in classify_owners(snapshot, gpus, owned, current=current)
            if c.on_service_gpu and c.verdict == "unrelated"]


def gpu_label(gpu: int | str, devices: Iterable[GpuDevice] = ()) -> str:
    """``"GPU 0"``, ``"GPU-8731..."`` or, when ``devices`` relate them, ``"GPU 0 (GPU-8731...)"``."""
    for d in devices:
        if gpu_keys(gpu, (d,)) & ({str(d.index)} | ({d.uuid.lower()} if d.uuid else set())):
            return f"GPU {d.index}" + (f" ({d.uuid})" if d.uuid else "")
    return gpu if isinstance(gpu, str) and gpu.upper().startswith("GPU-") else f"GPU {gpu}"


def refusal(unrelated: Sequence[GpuProcess], *, gpus: Collection[int | str] | None = None,
            devices: Iterable[GpuDevice] = ()) -> OwnershipError:
    """The error that refuses a run because of ``unrelated`` owners.

    The message names every PID with its process name, GPU(s) (index and UUID when ``devices``
    relate them) and memory; the hint says which PIDs to stop, or how to choose other GPUs
    (``CUDA_VISIBLE_DEVICES`` / ``HIP_VISIBLE_DEVICES`` in the profile's env).
    """
    devs = tuple(devices)
    by_pid: dict[int, list[GpuProcess]] = {}
    for p in unrelated:
        by_pid.setdefault(p.pid, []).append(p)
    lines = []
    for pid, ps in by_pid.items():
        name = next((p.name for p in ps if p.name), None) or "name hidden (N/A)"
        where = ", ".join(f"{gpu_label(p.gpu, devs)} ({format_bytes(p.vram_bytes)})" for p in ps)
        lines.append(f"  PID {pid} ({name}) holds {where} [via {ps[0].source}]")
    wanted = "every GPU" if gpus is None else "GPU(s) " + ", ".join(str(g) for g in gpus)
    message = (f"{len(by_pid)} unrelated process(es) hold memory on {wanted} the service needs:\n"
               + "\n".join(lines))
    pids = " ".join(str(pid) for pid in by_pid)
    hint = (f"stop PID(s) {pids} if they are yours (e.g. 'kill {pids}'), or choose other GPUs by setting "
            "CUDA_VISIBLE_DEVICES (NVIDIA), HIP_VISIBLE_DEVICES (AMD) or ZE_AFFINITY_MASK (Intel) in the "
            "profile's launch.env; "
            "'dsv4h gpu owners' lists every owner")
    return OwnershipError(message, hint=hint)


def visible_devices(env: Mapping[str, str]) -> list[int | str] | None:
    """The GPUs a service with environment ``env`` may use, from the visible-devices variables.

    Reads :data:`VISIBLE_DEVICE_VARS`; entries are indices or UUIDs (``GPU-...``). Returns ``None``
    (= every GPU) when none is set, or when several are set to different values (nested masks are
    not composed here, so the answer errs towards checking every GPU). An empty value means no GPU.
    ``ZE_AFFINITY_MASK`` entries may name tiles (``"0.0,1.0"``): each maps to its device index.
    """
    values = {var: env[var] for var in VISIBLE_DEVICE_VARS if var in env}
    if not values or len(set(values.values())) > 1:
        return None
    var, raw = next(iter(values.items()))
    if var == "ZE_AFFINITY_MASK":
        return parse_ze_affinity_mask(raw)
    out: list[int | str] = []
    for item in raw.split(","):
        s = item.strip()
        if not s:
            continue
        out.append(int(s) if s.isdigit() else s)
    return out


def service_gpus(gpus: Sequence[int | str] | None, env: Mapping[str, str]) -> list[int | str] | None:
    """The GPUs a service uses: its declared ``gpus``, else the visible-devices variables of ``env``
    (the caller passes the launch environment: the process's own plus the profile's overrides),
    else None (every GPU)."""
    if gpus is not None:
        return list(gpus)
    vis = visible_devices(env)
    return list(vis) if vis is not None else None
