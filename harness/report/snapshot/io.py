"""The report snapshot's bytes: JSON normalisation, writing and reading ``results.json`` (pure).

Contract: :func:`json_value` turns frozen values into plain JSON data (NaN/inf -> ``null``, numpy ->
Python, dates -> ISO strings); :func:`snapshot_bytes` gives the snapshot's stable bytes (sorted keys,
1-space indent, UTF-8, trailing newline) and :func:`load_snapshot` parses them back, refusing
(``SpecError``) anything that is not a snapshot of a version in :data:`READABLE_VERSIONS`. What the document
holds is described in :mod:`harness.report.snapshot`.

Snapshot format history (``SNAPSHOT_FORMAT_VERSION``):
  1 - first version (2026-11-29).
  2 - (2026-12-01) ``sweeps`` (rate-sweep archives), ``archives[].host`` (from ``environment.json``),
      ``oracles[].when``/``phase`` (sentinels before/after measurement), ``corpora[]`` tokenizer SHA-256,
      vocabulary size, observed ``input_tokens``/``token_ids`` ranges and ``recorded``. Version 1 snapshots
      still load and render (the added keys read as absent).
  3 - (2026-12-02) ``valid`` and ``superseded_by`` on every ``archives``, ``formal``, ``screens`` and
      ``sweeps`` entry (``superseded_by``: the archive that resumed this one and carries its records;
      its values are never a result). Older snapshots read as valid.
  4 - (2026-12-02) ``imports``: imported peer results (harness.report.snapshot.imports), each with its tool's own
      figures and data origin; older snapshots read as having none.
  5 - (2026-12-02) ``formal[].cells`` / ``rounds`` and ``sweeps[].cells`` / ``knee`` use the row models'
      names (harness.measure.rows: ``median_tok_s``, ``http_output_tok_s``, ``arrival_rate_req_s``,
      ``goodput_median_req_s`` ...); older snapshots load under those names (:func:`load_snapshot`,
      through ``harness.store.archive_legacy``).
  6 - (2026-12-02) ``speculative``: ``matched`` (per matched AR/SD archive: legs, AR and SD rates, tokens per
      step, acceptance, T_AR/T_SD, the break-even verdict, output equality, ``valid``) and ``acceptance`` (per
      archive with ``acceptance.parquet``: counts summed per cell and source;
      harness.report.snapshot.speculative); older snapshots load with both lists empty.
  7 - (2026-12-02) ``energy``: per archive with ``energy.json`` (any run kind), one row per cell or leg and
      window kind: windows, median output tokens per joule, mean power (W, time-weighted), methods and
      sources (harness.report.snapshot.energy); older snapshots load with none.
  8 - (2026-12-02) ``replays``: per trace-replay archive its ``replay_runs`` figures (speed, schedule,
      expected and reported cached tokens; harness.report.snapshot.replay); older snapshots load with none.
  9 - (2026-12-02) ``sla``: per SLA-search archive its limits, rule, bracket (highest passing and lowest
      failing rate), end, convergence, width and every probe (harness.report.snapshot.sla); older
      snapshots load with none.
  10 - (2026-12-03) validity from each archive's one verdict (harness.evidence.verdict, read by
      ``harness.evidence.io.archive_verdict``: the findings stored with its ledger rows, else the rules run
      now), no longer from supersession alone: ``archives[]`` carry ``data_origin`` (the decided one),
      ``findings_source`` (``ledger`` or ``rules``) and ``verdict`` (``Verdict.to_json``); every entry's
      ``valid`` is False when superseded or invalidated, with ``invalid_rules`` (the blocking rules) beside it
      (archives, screens, matched runs, sweeps, SLA searches and replays: by any blocking finding; formal,
      energy and acceptance entries: as a whole); ``formal[].cells`` / ``rounds``, ``sweeps[].cells``,
      ``sla[].probes``, ``energy[].cells`` and ``speculative.acceptance[].cells`` carry their own ``valid``
      and ``invalid_rules``; ``screens[]`` and ``speculative.matched[]`` show ``verdict`` ``withheld`` on a
      run with a blocking finding and keep ``verdict_as_measured``; the top-level ``findings_source`` is
      ``harness.evidence.verdict`` for the verdicts' findings. Older snapshots load unchanged: absent marks
      read as valid (cells: as the findings name them).
  11 - (2026-12-04) ``screens[]`` and ``speculative.matched[]`` ``change_pct`` / ``http_change_pct``
      (were ``ratio_pct`` / ``http_ratio_pct``: a percent change, as the ledger names it since schema 6);
      older snapshots load under the new names.
"""

from __future__ import annotations

import json
import math
from collections.abc import Mapping
from datetime import date, datetime, time
from typing import Any

import numpy as np

from harness.errors import SpecError
from harness.store.archive_legacy import upgrade_json

__all__ = ["SNAPSHOT_FORMAT", "SNAPSHOT_FORMAT_VERSION", "finite_or_none", "json_value", "load_snapshot",
           "snapshot_bytes"]

SNAPSHOT_FORMAT_VERSION = 11
READABLE_VERSIONS = (1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11)
SNAPSHOT_FORMAT = "dsv4h-report-snapshot"
_REQUIRED_KEYS = ("snapshot_format_version", "title", "archives", "formal", "screens", "memory", "historical",
                  "historical_figure", "findings", "services", "corpora", "oracles", "limits")


def finite_or_none(x: Any) -> float | None:
    """A finite float or None (None, booleans, text, NaN and infinities alike): a snapshot number."""
    if x is None or isinstance(x, bool):
        return None
    try:
        v = float(x)
    except (TypeError, ValueError):
        return None
    return v if math.isfinite(v) else None


def json_value(obj: Any) -> Any:
    """Plain JSON data from ``obj``: NaN/inf -> None, dates -> ISO strings, numpy -> Python, tuples
    -> lists, mapping keys -> str, bytes -> hex. Raises ``TypeError`` for anything else."""
    if obj is None or isinstance(obj, bool | str | int):
        return obj
    if isinstance(obj, float):
        return obj if math.isfinite(obj) else None
    if isinstance(obj, np.generic):
        return json_value(obj.item())
    if isinstance(obj, datetime | date | time):
        return obj.isoformat()
    if isinstance(obj, bytes):
        return obj.hex()
    if isinstance(obj, Mapping):
        return {str(k): json_value(v) for k, v in obj.items()}
    if isinstance(obj, list | tuple | np.ndarray):
        return [json_value(v) for v in obj]
    raise TypeError(f"cannot freeze a value of type {type(obj).__name__} into the report snapshot")


def snapshot_bytes(snapshot: Mapping[str, Any]) -> bytes:
    """The snapshot's stable bytes: sorted keys, 1-space indent, UTF-8, trailing newline."""
    text = json.dumps(json_value(snapshot), indent=1, sort_keys=True, ensure_ascii=False, allow_nan=False)
    return (text + "\n").encode("utf-8")


def load_snapshot(data: bytes, source: str) -> dict[str, Any]:
    """Parse snapshot bytes and check its format version and keys. Raises ``SpecError`` naming
    ``source`` when it is not a snapshot this version can render."""
    try:
        obj = json.loads(data.decode("utf-8"))
    except (UnicodeDecodeError, ValueError) as exc:
        raise SpecError(f"{source}: not a report snapshot (invalid JSON: {exc})",
                        hint="give the results.json written by 'dsv4h report build'") from exc
    if not isinstance(obj, dict) or obj.get("format") != SNAPSHOT_FORMAT:
        raise SpecError(f"{source}: not a report snapshot (format is not '{SNAPSHOT_FORMAT}')",
                        hint="give the results.json of a report directory, not an archive's results.json")
    version = obj.get("snapshot_format_version")
    if version not in READABLE_VERSIONS:
        raise SpecError(f"{source}: snapshot_format_version {version!r} is not supported "
                        f"(this dsv4h renders versions {', '.join(map(str, READABLE_VERSIONS))})",
                        hint="rebuild the snapshot from its archives with this dsv4h version")
    missing = [k for k in _REQUIRED_KEYS if k not in obj]
    if missing:
        raise SpecError(f"{source}: snapshot lacks keys: {', '.join(missing)}",
                        hint="the file was edited or truncated; rebuild it from the archives")
    if version < 5:  # the first result names, as the archives of format 1/2 hold them
        for key, name, cls in (("formal", "results.json", "formal"), ("sweeps", "sweep.json", "rate-sweep")):
            if isinstance(obj.get(key), list):
                obj[key] = [upgrade_json(name, e, cls) for e in obj[key]]
    if version < 6:
        obj["speculative"] = {"matched": [], "acceptance": []}
    if version < 7:
        obj["energy"] = []
    if version < 8:
        obj["replays"] = []
    if version < 9:
        obj["sla"] = []
    if version < 11:
        _change_named(obj)
    return obj


def _change_named(obj: dict[str, Any]) -> None:
    """A snapshot of format < 11 with its screens' and matched runs' percent changes under their new
    names (``ratio_pct`` -> ``change_pct``), in place."""
    spec = obj.get("speculative")
    for entries in (obj.get("screens"), spec.get("matched") if isinstance(spec, dict) else None):
        for e in entries if isinstance(entries, list) else []:
            for old, new in (("ratio_pct", "change_pct"), ("http_ratio_pct", "http_change_pct")):
                if isinstance(e, dict) and old in e:
                    e.setdefault(new, e.pop(old))
