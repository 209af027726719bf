"""The energy section of a report snapshot (pure; definitions in docs/metrics.md, Power and energy).

Contract: :func:`energy_entry` turns an archive's ``energy.json`` (harness.run.energy: one row per
measurement window, a measured wave's resident window or a sweep round's window) into an ``energy``
entry with one row per (cell or leg, window kind): how many windows and how many of them have an energy,
the **median output tokens per joule** over those windows, the **mean power** (W, total energy over total
window seconds: time-weighted), total J and s, the methods (``energy-counter``, ``power-integral``) and
the sources (``nvml``, ``amd-smi``, ``xpu-smi``, ``sim``: the simulator's power model, never a
measurement) that measured them. A window without energy (not bracketed by samples) counts in
``windows`` only: nothing is estimated. Absent ``energy.json`` gives ``None``. The entry is marked as a
whole, each row by the wave and round ids of its windows (``valid``, ``invalid_rules``: a row is invalid
when a blocking finding concerns any of its windows; :mod:`harness.report.snapshot.validity`).
"""

from __future__ import annotations

import statistics
from collections.abc import Mapping
from typing import Any

from harness.evidence.verdict import Verdict
from harness.report.snapshot.archives import ArchiveContent
from harness.report.snapshot.io import finite_or_none as _num
from harness.report.snapshot.validity import content_verdict, mark_row, mark_rows

__all__ = ["energy_entry"]


def _sources(doc: Mapping[str, Any]) -> list[Mapping[str, Any]]:
    raw = doc.get("samplers") or ([doc["sampler"]] if isinstance(doc.get("sampler"), Mapping) else [])
    return [s if isinstance(s, Mapping) else {} for s in raw]


def energy_entry(c: ArchiveContent, base: Mapping[str, Any],
                 verdict: Verdict | None = None) -> dict[str, Any] | None:
    """One ``energy`` entry (module docstring); None without ``energy.json`` or without windows. ``base``
    is the archive's snapshot entry (campaign, kind, protocol and claim class, status, simulated)."""
    verdict = content_verdict(c) if verdict is None else verdict  # default: the content's own
    doc = c.energy
    if not isinstance(doc, Mapping) or not isinstance(doc.get("waves"), list) or not doc["waves"]:
        return None
    samplers = _sources(doc)
    groups: dict[tuple[str, str], list[Mapping[str, Any]]] = {}
    for w in doc["waves"]:
        if isinstance(w, Mapping):
            groups.setdefault((str(w.get("cell_id") or ""), str(w.get("window") or "resident")), []).append(w)
    cells = []
    for (cell_id, kind), rows in groups.items():
        ok = [w for w in rows if _num(w.get("energy_j")) is not None and (_num(w.get("seconds")) or 0) > 0]
        tpj = [v for v in (_num(w.get("tokens_per_joule")) for w in ok) if v is not None]
        joules = sum(_num(w.get("energy_j")) or 0.0 for w in ok)
        seconds = sum(_num(w.get("seconds")) or 0.0 for w in ok)
        idx = {int(w.get("service") or 0) for w in rows}
        sources = sorted({str(samplers[i].get("source")) for i in idx
                          if i < len(samplers) and samplers[i].get("source")})
        intervals = sorted({float(samplers[i]["interval_s"]) for i in idx
                            if i < len(samplers) and _num(samplers[i].get("interval_s")) is not None})
        concurrency = rows[0].get("concurrency")
        ids = [w.get(k) for w in rows for k in ("wave_id", "round_id")]
        cells.append(mark_row({
            "cell_id": cell_id, "window_kind": kind, "concurrency": concurrency, "windows": len(rows),
            "windows_measured": len(ok), "median_tokens_per_j": statistics.median(tpj) if tpj else None,
            "mean_power_w": joules / seconds if seconds > 0 else None, "energy_j": joules if ok else None,
            "seconds": seconds if ok else None,
            "methods": sorted({str(w.get("method")) for w in ok if w.get("method")}),
            "sources": sources, "interval_s": intervals,
            "unmeasured_reason": next((str(w.get("reason")) for w in rows if w not in ok and w.get("reason")), None),
        }, verdict, ids))
    return mark_rows({"archive_id": c.archive_id, "campaign": base["campaign"], "kind": base["kind"],
            "protocol_class": base["protocol_class"], "claim_class": base["claim_class"], "status": base["status"],
            "simulated": base["simulated"] or any(s.get("source") == "sim" for s in samplers),
            "created_wall": base["created_wall"], "cells": cells}, verdict)
