"""Rows of the ``energy`` ledger table from an archive's ``energy.json`` (pure).

``energy.json`` (harness.run.energy) names a window's figures as :class:`harness.measure.energy.EnergyWindow`
does (``seconds``, ``tokens``, ``tokens_per_joule``, ``joules_per_token``); the ledger row model
(:class:`harness.measure.rows.EnergyRow`) names them with their units (``window_s``, ``output_tokens``,
``output_tokens_per_j``, ``j_per_output_token``). Each row's ``source`` and ``resolution_s`` (sampling
interval) are those of the sampler that measured it (``service``: its index; format-1 files have one
sampler, ``sampler``).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from harness.measure.rows import build, row_dict

__all__ = ["energy_rows"]

_RENAMED = {"seconds": "window_s", "tokens": "output_tokens", "tokens_per_joule": "output_tokens_per_j",
            "joules_per_token": "j_per_output_token", "window": "window_kind", "service": "service_index"}
_KEPT = ("wave_id", "cell_id", "round_id", "concurrency", "arrival_rate_req_s", "start_ns", "end_ns", "energy_j",
         "mean_power_w", "method", "reason")


def energy_rows(doc: Mapping[str, Any]) -> list[dict[str, Any]]:
    """One ``energy`` row per window of ``doc`` (an ``energy.json``), in its order."""
    samplers = list(doc.get("samplers") or ([doc["sampler"]] if doc.get("sampler") else []))
    out = []
    for w in doc.get("waves") or []:
        idx = int(w.get("service") or 0)
        info = samplers[idx] if idx < len(samplers) else {}
        row: dict[str, Any] = {k: w.get(k) for k in _KEPT} | {new: w.get(old) for old, new in _RENAMED.items()}
        row["window_kind"] = row["window_kind"] or "resident"
        row["service_index"] = idx
        row |= {"source": info.get("source"), "resolution_s": info.get("interval_s"),
                "devices": len(w.get("devices") or []) or None}
        out.append(row_dict(build("energy", row)))
    return out
