"""Old archives' result names read as the current row models' names (pure).

Archives of format 1 and 2 wrote their result tables and JSON summaries with the measure code's
first names (``median``, ``http_rate``, ``round_rates``; a rate sweep's ``rate`` in requests/s
beside a formal round's ``rate`` in tokens/s). :func:`legacy_names` is the one mapping from them to
the row models' names (``harness.measure.rows``); :class:`harness.store.archive.Archive` applies it
when it reads a result file of an archive of format < 3, and the schema-2 ledger migration
applies it to rows stored under those names. Archives of format 3 and later already use the row
models' names and never pass through here.

Archives of format 1 to 3 also named some result files apart from the ledger table they become (a
rate sweep's ``cells.parquet`` / ``rounds.parquet`` were its ``sweep_cells`` / ``sweep_rounds``, an
SLA search's ``probes.parquet`` its ``sla_probes`` ...). :func:`legacy_file` is the one mapping
from a file's current name (``<table>.parquet``, format 4) to the name such an archive holds it
under; :class:`harness.store.archive.Archive` reads through it, so every reader asks for the current
name and an old archive (its files and manifest as they were written) reads the same.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import pyarrow as pa
import pyarrow.compute as pc

__all__ = ["RENAMED", "renamed", "upgrade_json"]

FIRST_CURRENT_FORMAT = 3
FIRST_TABLE_NAMED_FORMAT = 4
FIRST_CHANGE_NAMED_FORMAT = 5  # result tables' change_pct / t_*_s
FIRST_CHANGE_NAMED_JSON_FORMAT = 6  # comparison.json / matched.json results' change_pct
_THROUGHPUT = {"request_throughput": "req_s", "output_throughput": "tok_s", "input_throughput": "tok_s",
               "goodput": "req_s"}
_FORMAL = {
    "cells": {"median": "median_tok_s", "observed_min": "observed_min_tok_s", "observed_max": "observed_max_tok_s",
              "http_rate": "http_output_tok_s", "round_rates": "round_tok_s",
              "round_http_rates": "round_http_output_tok_s"},
    "rounds": {"rate": "rate_tok_s", "http_rate": "http_output_tok_s"},
    "waves": {"resident_rate": "resident_output_tok_s", "http_rate": "http_output_tok_s",
              "prefill_rate": "prefill_input_tok_s"},
    "comparisons": {f"{leg}_median": f"{leg}_median_tok_s" for leg in ("a1", "b1", "b2", "a2")} | {
        "control_mean": "control_mean_tok_s", "candidate_mean": "candidate_mean_tok_s"},
    "requests": {"anchor_wall_ns": "anchor_wall"},
}
_SWEEP = {
    "cells": {"rate": "arrival_rate_req_s"} | {f"{q}_{s}": f"{q}_{s}_{u}" for q, u in _THROUGHPUT.items()
                                               for s in ("median", "min", "max")},
    "rounds": {"rate": "arrival_rate_req_s"} | {q: f"{q}_{u}" for q, u in _THROUGHPUT.items()},
    "knee": {"rate": "arrival_rate_req_s", "goodput": "goodput_median_req_s"},
}
# Columns renamed by schema 6, per table: old name -> (new name, factor from the old unit to the new).
# A percent change was named ``*ratio_pct``; the matched run's step times were milliseconds.
RENAMED: dict[str, dict[str, tuple[str, float]]] = {
    "comparisons": {"ratio_pct": ("change_pct", 1.0), "http_ratio_pct": ("http_change_pct", 1.0)},
    "matched_sd": {"ratio_pct": ("change_pct", 1.0), "http_ratio_pct": ("http_change_pct", 1.0),
                   "t_ar_ms": ("t_ar_s", 1e-3), "t_sd_ms": ("t_sd_s", 1e-3),
                   "t_sd_implied_ms": ("t_sd_implied_s", 1e-3)},
}
# a file of the archive -> the result table its rows are
_FILES = {"cells.parquet": "cells", "rounds.parquet": "rounds", "waves.parquet": "waves",
          "comparison.parquet": "comparisons"}


# per protocol class: the current file name -> the name an archive of format < 4 holds it under
_OLD_FILES: dict[str, dict[str, str]] = {
    "rate-sweep": {"sweep_cells.parquet": "cells.parquet", "sweep_rounds.parquet": "rounds.parquet"},
    "sla-search": {"sla_cells.parquet": "cells.parquet", "sla_rounds.parquet": "rounds.parquet",
                   "sla_probes.parquet": "probes.parquet"},
    "abba-screen": {"comparisons.parquet": "comparison.parquet"},
    "matched-sd": {"matched_sd.parquet": "matched.parquet"},
    "trace-replay": {"replay_runs.parquet": "replay.parquet"},
}


def legacy_file(name: str, protocol_class: str | None) -> str:
    """The file an archive of format < 4 of ``protocol_class`` holds current file ``name`` under
    (``name`` itself when it was never named otherwise)."""
    return _OLD_FILES.get(str(protocol_class), {}).get(name, name)


def legacy_names(table: str, protocol_class: str | None) -> dict[str, str]:
    """Old name -> row-model name of the rows of result ``table`` (``cells``, ``rounds``, ``waves``,
    ``comparisons``, a sweep's ``knee``; ``requests`` as a schema-2 ledger stored them) of a run of
    ``protocol_class`` ({} when nothing was renamed)."""
    if protocol_class == "rate-sweep" and table in _SWEEP:
        return dict(_SWEEP[table])
    return dict(_FORMAL.get(table, {}))


def _rename(row: Mapping[str, Any], names: Mapping[str, str]) -> dict[str, Any]:
    return {names.get(k, k) if names.get(k, k) not in row else k: v for k, v in row.items()}


def upgrade_table(name: str, table: pa.Table, protocol_class: str | None) -> pa.Table:
    """Archive file ``name`` of an old-format archive with the row models' column names."""
    names = legacy_names(_FILES.get(name, ""), protocol_class)
    if not names:
        return table
    cols = table.column_names
    return table.rename_columns([names.get(c, c) if names.get(c, c) not in cols else c for c in cols])


def upgrade_json(name: str, obj: Any, protocol_class: str | None) -> Any:
    """``results.json`` / ``sweep.json`` of an old-format archive with the row models' names."""
    if name not in ("results.json", "sweep.json") or not isinstance(obj, dict):
        return obj
    out = dict(obj)
    for key in ("cells", "rounds"):
        if isinstance(obj.get(key), list):
            names = legacy_names(key, protocol_class)
            out[key] = [_rename(r, names) if isinstance(r, Mapping) else r for r in obj[key]]
    if isinstance(obj.get("knee"), Mapping):
        out["knee"] = _rename(obj["knee"], legacy_names("knee", protocol_class))
    return out


def renamed(table: str, t: pa.Table) -> pa.Table:
    """``t`` with the columns schema 6 renamed (:data:`RENAMED`) under their new names, values in the
    new unit: an old column fills the new one where that is null (a table holding rows of both
    schemas, as Delta schema evolution leaves it) and is dropped (pure)."""
    for old, (new, factor) in RENAMED.get(table, {}).items():
        if old not in t.column_names:
            continue
        was = pc.cast(t.column(old), pa.float64())
        was = was if factor == 1.0 else pc.multiply(was, factor)
        if new in t.column_names:
            i = t.column_names.index(new)
            t = t.set_column(i, new, pc.coalesce(pc.cast(t.column(new), pa.float64()), was))
        else:
            t = t.append_column(new, was)
        t = t.drop_columns([old])
    return t


_RESULT_DOCS = {"comparison.json": "comparisons", "matched.json": "matched_sd"}
_RENAMED_FILES = {"comparisons.parquet": "comparisons", "comparison.parquet": "comparisons",
                  "matched_sd.parquet": "matched_sd", "matched.parquet": "matched_sd"}


def upgrade_renamed_table(name: str, table: pa.Table) -> pa.Table:
    """Result file ``name`` of an archive of format < 5 with the columns schema 6 renamed under their
    new names (:func:`renamed`)."""
    return renamed(_RENAMED_FILES[name], table) if name in _RENAMED_FILES else table


def upgrade_result_json(name: str, obj: Any) -> Any:
    """``comparison.json`` / ``matched.json`` of an archive of format < 6: its ``result`` under the
    names of :data:`RENAMED`, values in the new unit (``ratio_pct`` -> ``change_pct``, ``t_ar_ms``
    -> ``t_ar_s`` ...); a new name already present wins."""
    table = _RESULT_DOCS.get(name)
    if table is None or not isinstance(obj, dict) or not isinstance(obj.get("result"), Mapping):
        return obj
    result = dict(obj["result"])
    for old, (new, factor) in RENAMED[table].items():
        if old in result:
            was = result.pop(old)
            if result.get(new) is None:
                result[new] = was * factor if isinstance(was, (int, float)) and factor != 1.0 else was
    return dict(obj) | {"result": result}
