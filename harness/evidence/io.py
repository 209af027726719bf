"""Loading archive content for the evidence rules and deciding its ledger rows' validity (edge module: files)."""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.compute as pc

from harness.evidence.findings import ArchiveData, Finding
from harness.evidence.rules import check
from harness.evidence.verdict import WITHHELD, Verdict, concerned, decide, has_verdict, row_keys
from harness.kinds import KINDS
from harness.store.archive import Archive
from harness.store.finished import FinishedArchive, view_of
from harness.store.ledger import (
    ARCHIVE_TABLES,
    Mark,
    archive_rows,
    data_origin,
    ingest_view,
    ledger_dir,
    replace_archive_rows,
)
from harness.store.ledger.layout import canonical
from harness.store.view import verdict_rows

_SPEC_COLUMNS = ("spec_steps", "spec_proposed", "spec_accepted", "spec_source", "spec_histogram")
"""The speculative counts each request's server reported (record schema 4), read beside its request row."""


def archive_data(source: Archive | FinishedArchive) -> ArchiveData:
    """Everything the rules read from one archive, through its typed view (``FinishedArchive.files``:
    each declared file read once); a :class:`FinishedArchive` is used as it is (its records and request
    rows are not read or computed again), an :class:`Archive` is read once."""
    view = view_of(source)
    f = view.files
    spec = f.doc("spec.json", {})
    profile = spec.get("service") or {}
    services = [s | {"profile": s.get("profile") or profile} for s in f.services()]
    wanted = ["rid", "wave_id", "phase", "workload", "cached_tokens", "ok", "error", "round_index",
              "count_method", "completion_tokens", "n_tokens", "prompt_tokens"]
    rows_t = view.requests
    requests = rows_t.select([c for c in wanted if c in rows_t.column_names]).to_pylist() \
        if rows_t is not None else []
    spec_cols = [c for c in _SPEC_COLUMNS if c in view.records.column_names]
    if requests and spec_cols:  # request_rows keeps the records' order: row i is record i
        for row, counts in zip(requests, view.records.select(spec_cols).to_pylist(), strict=True):
            row.update(counts)
    oracles = f.doc("oracles.json")
    if isinstance(oracles, dict):
        oracles = oracles.get("results", [])
    return ArchiveData(
        archive_id=view.archive_id, run=view.run.to_json(), spec=spec,
        cells=f.kind_rows("cells"), rounds=f.kind_rows("rounds"), waves=f.rows("waves.parquet"),
        requests=requests, services=services, comparison=f.doc("comparison.json"), oracles=oracles,
        extra={"server_metrics": f.lines("server_metrics.jsonl"), "wave_checks": f.lines("wave_checks.jsonl"),
               "matched": f.doc("matched.json"), "acceptance": f.rows("acceptance.parquet"),
               "replay": f.rows("replay_runs.parquet"), "cycles": f.doc("cycles.json"),
               "coldness": f.doc("coldness.json"), "sla": f.doc("sla.json")},
    )


def concerned_rows(findings: Sequence[Finding], waves: Sequence[Mapping[str, Any]],
                   rounds: Sequence[Mapping[str, Any]]) -> tuple[bool, set[str]]:
    """(whole archive, row ids) the blocking ``findings`` invalidate: the one decision,
    :func:`harness.evidence.verdict.concerned`, as a mutable set."""
    whole, ids = concerned(findings, waves, rounds)
    return whole, set(ids)


def _rows_of(t: pa.Table | None) -> list[dict[str, Any]]:
    keep = ("wave_id", "round_id", "cell_id", "phase", "status", "probe_id")
    return [] if t is None else list(t.select([c for c in keep if c in t.column_names]).to_pylist())


def _round_rows(tables: Mapping[str, pa.Table]) -> list[dict[str, Any]]:
    """Every round row of an archive's ledger tables (formal, sweep and SLA rounds)."""
    names = dict.fromkeys(k.rounds for k in KINDS.values() if k.rounds)  # harness.kinds: read when called
    return [r for name in names for r in _rows_of(tables.get(name))]


def verdict_of_tables(tables: Mapping[str, pa.Table], archive_id: str, findings: Sequence[Finding],
                      data_origin: str, superseded_by: str | None = None, source: str = "rules") -> Verdict:
    """The archive's :class:`Verdict` from its ledger tables (waves and rounds spread) and ``findings``."""
    return decide(archive_id, data_origin, findings, _rows_of(tables.get("waves")), _round_rows(tables),
                  superseded_by=superseded_by, source=source)


def _hit(t: pa.Table, table: str, verdict: Verdict) -> pa.Array:
    """Per row of ``t``: whether the verdict's blocking findings concern it (module verdict docstring)."""
    if not verdict.blocking:
        return pa.array([False] * t.num_rows)
    keys = [k for k in row_keys(table) if k in t.column_names]
    if verdict.whole or not row_keys(table):
        return pa.array([True] * t.num_rows)
    hit = pa.array([False] * t.num_rows)
    ids = pa.array(sorted(verdict.invalid), pa.string())
    for k in keys:
        hit = pc.or_(hit, pc.fill_null(pc.is_in(pc.cast(t.column(k), pa.string()), value_set=ids), False))
    return hit


def _withheld(t: pa.Table, hit: pa.Array) -> pa.Table:
    """``t`` with ``verdict`` withheld on the rows ``hit`` (``verdict_as_measured`` keeps the measured one)."""
    measured = t.column("verdict_as_measured") if "verdict_as_measured" in t.column_names else None
    measured = t.column("verdict") if measured is None else pc.coalesce(measured, t.column("verdict"))
    shown = pc.if_else(pc.and_(hit, pc.is_valid(measured)), pa.scalar(WITHHELD), measured)
    t = t.set_column(t.column_names.index("verdict"), "verdict", shown)
    if "verdict_as_measured" in t.column_names:
        return t.set_column(t.column_names.index("verdict_as_measured"), "verdict_as_measured", measured)
    return t.append_column("verdict_as_measured", measured)


def marked(tables: dict[str, pa.Table], archive_id: str, findings: list[Finding]
           ) -> tuple[dict[str, pa.Table], dict[str, int]]:
    """An archive's ledger rows (table -> rows) with ``valid`` decided by ``findings`` (pure): the rows
    a blocking finding concerns in every table of the archive (:func:`harness.evidence.verdict.decide`;
    one-row-per-run tables by any blocking finding) are invalid, the others valid unless a resume
    superseded them; verdicts on an invalid run withheld; plus the ``findings`` table. Returns (the
    tables, rows invalidated per table)."""
    verdict = verdict_of_tables(tables, archive_id, findings, "")
    out = dict(tables)
    changed: dict[str, int] = {}
    for table, rows in tables.items():
        if table == "findings" or rows is None or "valid" not in rows.column_names:
            continue
        hit = _hit(rows, table, verdict)
        new = pc.and_(pc.invert(hit), pc.is_null(rows.column("superseded_by")))
        n = int(pc.sum(pc.cast(hit, pa.int64())).as_py() or 0)
        t = rows.set_column(rows.column_names.index("valid"), "valid", new)
        out[table] = _withheld(t, hit) if has_verdict(table) and "verdict" in t.column_names else t
        if n:
            changed[table] = n
    rows = [{"archive_id": archive_id, "rule": f.rule, "severity": f.severity, "message": f.message,
             "remedy": f.remedy, "rows": json.dumps(list(f.rows)), "scope": f.scope} for f in findings]
    out["findings"] = canonical("findings", pa.Table.from_pylist(
        rows, schema=pa.schema([(n, pa.string()) for n in ("archive_id", "rule", "severity", "message",
                                                          "remedy", "rows", "scope")])))
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
    tables = {t: rows for t in ARCHIVE_TABLES
              if (rows := archive_rows(workspace, t, archive_id)) is not None and rows.num_rows}
    new, changed = marked(tables, archive_id, findings)
    writes = {t: rows for t, rows in new.items() if t == "findings" or _differs(rows, tables[t])}
    replace_archive_rows(workspace, writes, archive_id)
    return changed


def _differs(new: pa.Table, old: pa.Table) -> bool:
    return any(c in old.column_names and new.column(c).to_pylist() != old.column(c).to_pylist()
               for c in ("valid", "verdict", "verdict_as_measured"))


def stored_findings(rows: pa.Table) -> list[Finding] | None:
    """Findings back from their ``findings`` ledger rows; None when a row predates the stored scope
    (its verdict is then decided by the rules again)."""
    out: list[Finding] = []
    for r in rows.to_pylist():
        if r.get("scope") not in ("rows", "run"):
            return None
        out.append(Finding(str(r["rule"]), r["severity"], str(r["message"]), str(r["remedy"]), str(r["archive_id"]),
                           tuple(json.loads(r["rows"] or "[]")), r["scope"]))
    return sorted(out)


def verdict_of_view(view: FinishedArchive, findings: Sequence[Finding]) -> Verdict:
    """The :class:`Verdict` that ``findings`` (the rules just run at finish) decide for ``view``."""
    a = view.archive
    return decide(a.archive_id, data_origin(a, view.run), findings, *verdict_rows(a))


def archive_verdict(workspace: Path | None, archive: Archive | FinishedArchive) -> Verdict:
    """The :class:`Verdict` of an archive as it was decided: from the findings stored with its
    ledger rows when ``workspace``'s ledger holds it (``source = "ledger"``; no record is read), else
    by running the rules now (``source = "rules"``: an archive outside this workspace's ledger).
    Every surface that shows an archive's validity asks this."""
    a = archive.archive if isinstance(archive, FinishedArchive) else archive
    waves, rounds = verdict_rows(a)
    run_row = None
    if workspace is not None and ledger_dir(workspace).is_dir():
        runs = archive_rows(workspace, "runs", a.archive_id)
        run_row = runs.to_pylist()[0] if runs is not None and runs.num_rows else None
    if run_row is not None and workspace is not None:
        stored = archive_rows(workspace, "findings", a.archive_id)
        findings = stored_findings(stored) if stored is not None else []
        if findings is not None:
            return decide(a.archive_id, str(run_row.get("data_origin") or data_origin(a)), findings, waves, rounds,
                          superseded_by=run_row.get("superseded_by"), source="ledger")
    view = view_of(archive)
    return decide(a.archive_id, data_origin(a, view.run), check_archive(view), waves, rounds,
                  superseded_by=None if run_row is None else run_row.get("superseded_by"))


def check_archive(archive: Archive | FinishedArchive) -> list[Finding]:
    """Load an archive's content (:func:`archive_data`) and run every rule over it (reads files)."""
    return check(archive_data(archive))
