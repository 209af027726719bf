"""Loading archive content for the evidence rules and deciding its ledger rows' validity (edge module: files)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.compute as pc

from harness.evidence.findings import ArchiveData, Finding
from harness.evidence.rules import check
from harness.measure.results import round_key
from harness.store.archive import Archive
from harness.store.finished import FinishedArchive, view_of
from harness.store.ledger import Mark, archive_rows, ingest_view, replace_archive_rows
from harness.store.ledger.layout import canonical


def _rows(archive: Archive, name: str) -> list[dict[str, Any]]:
    path = archive.path / name
    return archive.table(name).to_pylist() if path.exists() else []


def archive_data(source: Archive | FinishedArchive) -> ArchiveData:
    """Everything the rules read from one archive; a :class:`FinishedArchive` is used as it is (its
    records and request rows are not read or computed again), an :class:`Archive` is read once."""
    view = view_of(source)
    archive = view.archive
    spec = archive.json("spec.json") if (archive.path / "spec.json").exists() else {}
    services = archive.json("service.json").get("services", []) if (archive.path / "service.json").exists() else []
    profile = spec.get("service") or {}
    services = [s | {"profile": s.get("profile") or profile} for s in services]
    wanted = ["rid", "wave_id", "phase", "workload", "cached_tokens", "ok", "error", "round_index",
              "count_method", "completion_tokens", "n_tokens"]
    rows_t = view.requests
    requests = rows_t.select([c for c in wanted if c in rows_t.column_names]).to_pylist() \
        if rows_t is not None else []
    comparison = archive.json("comparison.json") if (archive.path / "comparison.json").exists() else None
    oracles = archive.json("oracles.json") if (archive.path / "oracles.json").exists() else None
    if isinstance(oracles, dict):
        oracles = oracles.get("results", [])
    return ArchiveData(
        archive_id=archive.archive_id, run=view.run.to_json(), spec=spec,
        cells=_rows(archive, "cells.parquet"), rounds=_rows(archive, "rounds.parquet"),
        waves=_rows(archive, "waves.parquet"), requests=requests, services=services,
        comparison=comparison, oracles=oracles,
        extra={"server_metrics": _jsonl(archive, "server_metrics.jsonl"),
               "wave_checks": _jsonl(archive, "wave_checks.jsonl"),
               "matched": archive.json("matched.json") if (archive.path / "matched.json").exists() else None,
               "acceptance": _rows(archive, "acceptance.parquet"),
               "replay": _rows(archive, "replay.parquet"),
               "cycles": archive.json("cycles.json") if (archive.path / "cycles.json").exists() else None,
               "coldness": archive.json("coldness.json") if (archive.path / "coldness.json").exists() else None,
               "sla": archive.json("sla.json") if (archive.path / "sla.json").exists() else None},
    )


def _jsonl(archive: Archive, name: str) -> list[dict[str, Any]]:
    path = archive.path / name
    if not path.exists():
        return []
    return [json.loads(line) for line in path.read_text().splitlines() if line.strip()]


def concerned_rows(findings: list[Finding], waves: list[dict[str, Any]], rounds: list[dict[str, Any]]
                   ) -> tuple[bool, set[str]]:
    """(whole archive, row ids) that the blocking ``findings`` invalidate (pure).

    A run-scope finding, or a blocking finding without rows, concerns the whole archive. Row ids
    spread upward to the figures built from them: a measured wave to its round, a round to its
    cell when the round is ``ok`` (only ok rounds enter a cell's median). Requests follow their
    wave (they are matched by wave id)."""
    blocking = [f for f in findings if f.blocking]
    if any(f.scope == "run" or not f.rows for f in blocking):
        return True, set()
    ids = {r for f in blocking for r in f.rows}
    round_of = {str(r["round_id"]): r for r in rounds}
    for w in waves:
        if str(w.get("wave_id")) in ids and w.get("phase") == "measured":
            rid = round_key(str(w["wave_id"]))
            if rid in round_of:
                ids.add(rid)
    for rid in [i for i in ids if i in round_of]:
        if round_of[rid].get("status") == "ok" and round_of[rid].get("cell_id") is not None:
            ids.add(str(round_of[rid]["cell_id"]))
    return False, ids


_ROW_KEYS = {"cells": "cell_id", "rounds": "round_id", "waves": "wave_id", "requests": "wave_id",
             "acceptance": "wave_id"}
# one row per run: any blocking finding hits it
_WHOLE_RUN_TABLES = ("comparisons", "matched_sd", "replay_runs", "runs")


def _rows_of(t: pa.Table | None) -> list[dict[str, Any]]:
    return [] if t is None else list(t.to_pylist())


def marked(tables: dict[str, pa.Table], archive_id: str, findings: list[Finding]
           ) -> tuple[dict[str, pa.Table], dict[str, int]]:
    """An archive's ledger rows (table -> rows) with ``valid`` decided by ``findings`` (pure): rows
    named by a blocking finding (``concerned_rows``: a run-scope finding, or a blocking one without
    rows, concerns the whole archive; wave and round ids spread to the figures built from them) are
    invalid, the others valid unless a resume superseded them; plus the ``findings`` table. Returns
    (the tables, rows invalidated per table)."""
    blocking = [f for f in findings if f.blocking]
    whole, ids = concerned_rows(findings, _rows_of(tables.get("waves")), _rows_of(tables.get("rounds")))
    out = dict(tables)
    changed: dict[str, int] = {}
    for table, key in [*_ROW_KEYS.items(), *((t, "") for t in _WHOLE_RUN_TABLES)]:
        t = tables.get(table)
        if t is None:
            continue
        if whole or (table in _WHOLE_RUN_TABLES and blocking):
            hit = pa.array([True] * t.num_rows)
        elif key:
            hit = pc.fill_null(pc.is_in(t.column(key), value_set=pa.array(sorted(ids), pa.string())), False)
        else:
            continue
        new = pc.and_(pc.invert(hit), pc.is_null(t.column("superseded_by")))
        n = int(pc.sum(pc.cast(hit, pa.int64())).as_py() or 0)
        out[table] = t.set_column(t.column_names.index("valid"), "valid", new)
        if n:
            changed[table] = n
    rows = [{"archive_id": archive_id, "rule": f.rule, "severity": f.severity, "message": f.message,
             "remedy": f.remedy, "rows": json.dumps(list(f.rows))} for f in findings]
    out["findings"] = canonical("findings", pa.Table.from_pylist(
        rows, schema=pa.schema([(n, pa.string()) for n in ("archive_id", "rule", "severity", "message",
                                                          "remedy", "rows")])))
    return out, changed


def marker(archive_id: str, findings: list[Finding]) -> Mark:
    """What ``harness.store.ledger.ingest_view`` applies to an archive's rows before writing them:
    :func:`marked` by ``findings``."""
    return lambda tables: marked(tables, archive_id, findings)[0]


def ingest_checked(workspace: Path, view: FinishedArchive, findings: list[Finding]) -> dict[str, int]:
    """Ingest a verified archive with its rows' validity decided by its findings (one write per
    table; the caller holds the critical section). Rows added per table."""
    return ingest_view(workspace, view, marker(view.archive_id, findings))


def apply_findings(workspace: Path, archive_id: str, findings: list[Finding]) -> dict[str, int]:
    """Decide the validity of an ingested archive's ledger rows again from ``findings`` (:func:`marked`)
    and store the findings (replacing earlier ones of the archive): only its tables whose rows change
    are rewritten, one transaction each. Returns rows invalidated per table."""
    tables = {t: rows for t in (*_ROW_KEYS, *_WHOLE_RUN_TABLES)
              if (rows := archive_rows(workspace, t, archive_id)) is not None}
    new, changed = marked(tables, archive_id, findings)
    writes = {t: rows for t, rows in new.items()
              if t == "findings" or rows.column("valid").to_pylist() != tables[t].column("valid").to_pylist()}
    replace_archive_rows(workspace, writes, archive_id)
    return changed


def check_archive(archive: Archive | FinishedArchive) -> list[Finding]:
    """Load an archive's content (:func:`archive_data`) and run every rule over it (reads files)."""
    return check(archive_data(archive))
