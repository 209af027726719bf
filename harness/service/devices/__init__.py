"""GPUs and samplers.

- :mod:`.gpu` (pure parsers), :mod:`.gpu_probe` (the probes: owners, memory, ``ensure_gpus_free``),
  :mod:`.ownership` (GPU owners classified against the owned tree); :mod:`.xpu` (pure) and
  :mod:`.xpu_probe` for Intel GPUs.
- :mod:`.memory` and :mod:`.power`: samplers on the one loop of :mod:`.sampler`.

Imports only ``service.process`` and ``service.http`` of ``service``; importing this package imports
none of its modules (the samplers run on device images without pydantic).

Public surface (``__all__``): the names other packages import from these modules, re-exported here
lazily (importing the package imports none of its modules); they may equally be imported from their
defining modules.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from harness.service._lazy import lazy_getattr

if TYPE_CHECKING:
    from harness.service.devices.gpu import OwnersSnapshot, format_bytes, gpu_keys
    from harness.service.devices.gpu_probe import (
        OWNERS_FILE_ENV,
        SOURCE_CHOICES,
        current_create_times,
        ensure_gpus_free,
        process_tree,
        read_gpu_memory,
        read_gpu_owners,
        resolve_source,
        subprocess_runner,
    )
    from harness.service.devices.memory import MemorySampler, samples_from_snapshot
    from harness.service.devices.ownership import CREATE_TIME_TOLERANCE_S, classify_owners, service_gpus
    from harness.service.devices.power import PowerSample, PowerSampler
    from harness.service.devices.xpu import runtime_env

_HOME: dict[str, str] = {
    "CREATE_TIME_TOLERANCE_S": "ownership",
    "OWNERS_FILE_ENV": "gpu_probe",
    "SOURCE_CHOICES": "gpu_probe",
    "MemorySampler": "memory",
    "OwnersSnapshot": "gpu",
    "PowerSample": "power",
    "PowerSampler": "power",
    "classify_owners": "ownership",
    "current_create_times": "gpu_probe",
    "ensure_gpus_free": "gpu_probe",
    "format_bytes": "gpu",
    "gpu_keys": "gpu",
    "process_tree": "gpu_probe",
    "read_gpu_memory": "gpu_probe",
    "read_gpu_owners": "gpu_probe",
    "resolve_source": "gpu_probe",
    "runtime_env": "xpu",
    "samples_from_snapshot": "memory",
    "service_gpus": "ownership",
    "subprocess_runner": "gpu_probe",
}
"""Each public name and the module that defines it."""

__all__ = [
    "CREATE_TIME_TOLERANCE_S",
    "OWNERS_FILE_ENV",
    "SOURCE_CHOICES",
    "MemorySampler",
    "OwnersSnapshot",
    "PowerSample",
    "PowerSampler",
    "classify_owners",
    "current_create_times",
    "ensure_gpus_free",
    "format_bytes",
    "gpu_keys",
    "process_tree",
    "read_gpu_memory",
    "read_gpu_owners",
    "resolve_source",
    "runtime_env",
    "samples_from_snapshot",
    "service_gpus",
    "subprocess_runner",
]


__getattr__ = lazy_getattr(__name__, _HOME)  # a public name imported from its module on first use
