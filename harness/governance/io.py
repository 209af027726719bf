"""Evidence governance at the edges (edge module: files): ledger tables and archive reads.

Ledger tables (``<workspace>/ledgers/delta/<table>/``, in append order by ``append_key``: every append is
one Delta transaction; older rows are never rewritten):

- ``records``    accepted records (one row each; ``content`` is the canonical JSON the id hashes).
- ``closures``   the closure log: ``close`` and ``reopen`` rows; a direction's state is its last row.
- ``gates``      every gate evaluation (passing or not).
- ``freezes``    ``freeze`` rows (SHA-256, size, path, wall time) and ``reveal`` rows (outcome).
- ``historical`` results measured elsewhere, with their own labels (``historical = true``,
  ``data_origin = "historical"``).

Every row carries ``ledger_schema_version``. Wall times are stored as ``timestamp[ns, UTC]`` and handed
to the rules as UTC ISO 8601 text with microseconds. The
rules themselves are in ``harness.governance.record_claims`` (pure); functions here read, decide with them and
append as one read-check-write (``harness.store.ledger.append_checked``: the rows are committed only if the
table did not change since it was read, else it is read and decided again), so two hosts sharing the
ledger cannot both close a direction or import one entry twice. Nothing here prints or exits.
"""

from __future__ import annotations

import json
import re
from collections.abc import Sequence
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from harness.errors import ArchiveError, EvidenceError, LedgerError, SpecError
from harness.evidence.io import check_archive
from harness.formats import parse_model, read_yaml
from harness.governance import record_claims as gv
from harness.governance.base import SLUG
from harness.hashing import sha256_file
from harness.store.archive import Archive, find_archive, open_verified
from harness.store.ledger import append_checked, append_rows, ledger_dir, read_table, rows_iso
from harness.store.ledger.layout import GOVERNANCE_TABLES
from harness.store.ledger.layout import SCHEMAS as LAYOUT_SCHEMAS
from harness.store.view import ArchiveView

# The canonical schemas live with the ledger layout (harness.store.ledger.layout); wall times are
# ``timestamp[ns, UTC]`` there and ISO 8601 text in the rows this module hands to the rules.
SCHEMAS = {t: LAYOUT_SCHEMAS[t] for t in GOVERNANCE_TABLES}


# --- ledger plumbing ---------------------------------------------------------------------------


def now_iso(now: datetime | None = None) -> str:
    """UTC wall time as ISO 8601 with microseconds and offset."""
    return (now or datetime.now(UTC)).astimezone(UTC).isoformat(timespec="microseconds")


def table_rows(workspace: Path, table: str) -> list[dict[str, Any]]:
    """All rows of a governance ledger table, oldest first ([] when it does not exist); wall times as
    ISO 8601 text."""
    return rows_iso(read_table(workspace, table))


def _append_rows(workspace: Path, table: str, rows: Sequence[dict[str, Any]]) -> None:
    """Append rows that depend on no check of the table (one transaction). Missing columns are null."""
    append_rows(workspace, table, list(rows))


def _resolve_archive(ref: str, workspace: Path) -> Archive:
    """The archive ``ref`` names, verified: governance records are never built on a changed archive."""
    return open_verified(find_archive(ref, workspace))


# --- records -----------------------------------------------------------------------------------


def load_proposal(path: Path) -> gv.RecordProposal:
    """Read a record proposal YAML (errors name the file and the field)."""
    return parse_model(gv.RecordProposal, read_yaml(path), str(path))


def _json_or(archive: Archive, name: str, default: Any) -> Any:
    return archive.json(name) if (archive.path / name).is_file() else default


def archive_facts(archive: Archive, metric: str, concurrency: int) -> gv.ArchiveFacts:
    """Everything the record rules need from one archive (reads its files, runs the evidence rules)."""
    run = archive.run
    spec = _json_or(archive, "spec.json", {})
    services = list(_json_or(archive, "service.json", {}).get("services", []))
    starts = tuple(((s.get("process") or {}).get("pid"), (s.get("process") or {}).get("create_time"))
                   for s in services if s.get("process"))
    cells = ArchiveView(archive).rows("cells.parquet")
    if metric == "single_stream_decode":
        value, n, detail = gv.single_stream_value(archive.records(), concurrency)
    else:
        value, n, detail = gv.cell_value(cells, gv.METRIC_WORKLOAD[metric], concurrency)
    blocking = tuple(f"{f.rule}: {f.message}" for f in check_archive(archive) if f.blocking)
    profile = spec.get("service") if isinstance(spec.get("service"), dict) else None
    return gv.ArchiveFacts(
        archive_id=archive.archive_id, status=archive.status, kind=run.kind,
        claim_class=run.claim_class, protocol_class=run.protocol_class,
        backend=run.backend, labels=run.labels,
        created_wall=run.created_wall, service_profile=profile, service_starts=starts,
        build=gv.build_identity(_json_or(archive, "environment.json", {}), services),
        metric_definition=gv.metric_definition(spec, _json_or(archive, "corpora.json", {}), metric, concurrency),
        metric_value=value, metric_n=n, metric_detail=detail, blocking=blocking,
    )


def _facts(refs: Sequence[str], workspace: Path, metric: str, concurrency: int) -> dict[str, gv.ArchiveFacts | str]:
    out: dict[str, gv.ArchiveFacts | str] = {}
    for ref in refs:
        try:
            out[ref] = archive_facts(_resolve_archive(ref, workspace), metric, concurrency)
        except (ArchiveError, OSError, ValueError) as exc:
            out[ref] = f"cannot be read: {exc}"
    return out


def propose_record(path: Path, workspace: Path, *, now: datetime | None = None) -> dict[str, Any]:
    """Check a proposal file against its evidence and append the record to the ``records`` table.

    Returns the new row. Raises ``SpecError`` for a malformed file and ``EvidenceError`` listing
    every missing or failing piece of evidence (nothing is appended then).
    """
    proposal = load_proposal(path)
    suites = _facts(proposal.suites, workspace, proposal.metric, proposal.concurrency)
    controls = _facts(proposal.control.archives, workspace, proposal.metric, proposal.concurrency)
    def decide(records: list[dict[str, Any]]) -> list[dict[str, Any]]:
        draft = gv.evaluate_proposal(proposal, suites, controls, table_rows(workspace, "gates"), records)
        c = draft.content
        return [{
            "record_id": draft.record_id, "name": c["name"], "scope": c["scope"], "description": c["description"],
            "metric": c["metric"], "unit": c["unit"], "concurrency": c["concurrency"],
            "claim_class": c["claim_class"], "protocol_class": c["protocol_class"], "data_origin": c["data_origin"],
            "candidate": c["candidate"], "value": c["value"],
            "suite_ids": [s["archive_id"] for s in c["suites"]], "suite_values": [s["value"] for s in c["suites"]],
            "control_ids": [s["archive_id"] for s in c["control"]["archives"]],
            "control_values": [s["value"] for s in c["control"]["archives"]],
            "declared_change": c["control"]["declared_change"], "gates": [g["gate"] for g in c["gates"]],
            "previous_record_id": draft.previous_record_id, "previous_value": draft.previous_value,
            "over_previous_pct": draft.over_previous_pct, "over_control_pct": draft.over_control_pct,
            "proposal_file": str(path.resolve()), "proposal_sha256": sha256_file(path),
            "recorded_at": now_iso(now), "content": json.dumps(c, sort_keys=True),
        }]

    (row,) = append_checked(workspace, "records", decide)
    return row


def get_record(workspace: Path, ref: str) -> dict[str, Any]:
    """One record by id or unique id prefix (``content`` decoded into ``content_json``)."""
    rows = [r for r in table_rows(workspace, "records") if str(r["record_id"]).startswith(ref)]
    if not rows:
        raise LedgerError(f"no record '{ref}' in {ledger_dir(workspace) / 'records'}",
                          hint="list records with 'dsv4h record list'")
    if len({r["record_id"] for r in rows}) > 1:
        raise LedgerError(f"record id prefix '{ref}' is ambiguous: " + ", ".join(r["record_id"] for r in rows),
                          hint="give more digits of the id")
    row = rows[-1]
    return row | {"content_json": json.loads(row["content"])}


# --- closures ----------------------------------------------------------------------------------


def _check_slug(direction: str) -> None:
    if not re.match(SLUG, direction):
        raise SpecError(f"direction '{direction}' is not a slug", hint="use lowercase letters, digits, '.', '_', '-'")


def _created(workspace: Path, archive_id: str) -> str | None:
    try:
        run = _resolve_archive(archive_id, workspace).run
    except ArchiveError:
        return None
    return run.created_wall or None


def add_closure(workspace: Path, direction: str, evidence: str, reason: str, *, now: datetime | None = None,
                source: str = "cli") -> dict[str, Any]:
    """Close a direction with its evidence archive and reason (a ``close`` row).

    Raises ``EvidenceError`` when the direction is already closed, ``ArchiveError`` when the
    evidence archive does not exist."""
    _check_slug(direction)
    if not reason.strip():
        raise SpecError("a closure needs a reason", hint="say why the direction was rejected (--reason TEXT)")
    archive = _resolve_archive(evidence, workspace)
    def decide(rows: list[dict[str, Any]]) -> list[dict[str, Any]]:
        if gv.is_closed(rows, direction):
            last = gv.direction_state(rows, direction) or {}
            raise EvidenceError(f"{gv.closed_message(last)} (already closed)",
                                hint=f"see 'dsv4h closure list'; reopen with 'dsv4h closure reopen {direction} "
                                "--evidence ARCHIVE --reason TEXT'")
        return [{"direction": direction, "action": "close", "evidence_archive_id": archive.archive_id,
                 "reason": reason.strip(), "at": now_iso(now), "closing_archive_id": archive.archive_id,
                 "source": source}]

    (row,) = append_checked(workspace, "closures", decide)
    return row


def reopen_direction(workspace: Path, direction: str, evidence: str, reason: str, *,
                     now: datetime | None = None, source: str = "cli") -> dict[str, Any]:
    """Reopen a closed direction with new evidence (a ``reopen`` row).

    Raises ``EvidenceError`` when the direction is not closed or the evidence is not new (the
    closing archive itself, or an archive older than it)."""
    _check_slug(direction)
    archive = _resolve_archive(evidence, workspace)
    def decide(rows: list[dict[str, Any]]) -> list[dict[str, Any]]:
        last = gv.direction_state(rows, direction)
        if last is None or last.get("action") != "close":
            raise EvidenceError(f"direction {direction} is not closed; nothing to reopen",
                                hint="see 'dsv4h closure list'")
        closing = str(last["evidence_archive_id"])
        gv.check_new_evidence(rows, direction, archive.archive_id,
                              archive.run.created_wall or None,
                              _created(workspace, closing))
        return [{"direction": direction, "action": "reopen", "evidence_archive_id": archive.archive_id,
                 "reason": reason.strip() or f"reopened with new evidence {archive.archive_id}", "at": now_iso(now),
                 "closing_archive_id": closing, "source": source}]

    (row,) = append_checked(workspace, "closures", decide)
    return row


def closure_states(workspace: Path) -> list[dict[str, Any]]:
    """The current state (last row) of every direction, in order of first appearance."""
    rows = table_rows(workspace, "closures")
    order = list(dict.fromkeys(r["direction"] for r in rows))
    return [dict(gv.direction_state(rows, d) or {}) for d in order]


def check_direction(workspace: Path, direction: str, reopen_evidence: str | None, reason: str | None = None,
                    *, source: str = "campaign") -> dict[str, Any]:
    """Pipeline hook for a spec declaring ``direction: SLUG`` (and optionally ``reopen``).

    Returns ``{"direction", "state": "open" | "reopened", "closed": False, ...}``: ``open`` when the
    direction was never closed or is already reopened, ``reopened`` (with the appended reopen row)
    when it was closed and ``reopen_evidence`` is new evidence. Raises ``EvidenceError``
    ("direction X was closed on DATE by archive Y: REASON; reopen it only with new evidence") when
    it is closed and no reopening evidence is given, or the evidence is not new.
    """
    rows = table_rows(workspace, "closures")
    last = gv.direction_state(rows, direction)
    if last is None or last.get("action") != "close":
        out: dict[str, Any] = {"direction": direction, "state": "open", "closed": False,
                               "last_action": last.get("action") if last else None}
        if reopen_evidence is not None:
            out["note"] = "reopen evidence ignored: the direction is not closed"
        return out
    if reopen_evidence is None:
        raise EvidenceError(gv.closed_message(last),
                            hint="add 'reopen: {evidence: ARCHIVE, reason: TEXT}' naming a new archive to the spec, "
                            f"or 'dsv4h closure reopen {direction} --evidence ARCHIVE --reason TEXT'")
    row = reopen_direction(workspace, direction, reopen_evidence,
                           reason or f"reopened by a run declaring new evidence {reopen_evidence}", source=source)
    return {"direction": direction, "state": "reopened", "closed": False, "reopen": row,
            "closed_by": last.get("evidence_archive_id"), "closed_reason": last.get("reason")}


# --- gates ---------------------------------------------------------------------------------------


def load_gate(path: Path) -> gv.GateSpec:
    """Read a gate YAML file (errors name the file and the field)."""
    return parse_model(gv.GateSpec, read_yaml(path), str(path))


def gate_inputs(archive: Archive) -> gv.GateInputs:
    """What the gate quantities read from one archive."""
    cells = ArchiveView(archive).rows("cells.parquet")
    comparison = _json_or(archive, "comparison.json", None)
    spec = _json_or(archive, "spec.json", {})
    conc = (spec.get("workload") or {}).get("concurrency") if isinstance(spec, dict) else None
    services = _json_or(archive, "service.json", {}).get("services") or []
    return gv.GateInputs(archive.archive_id, cells, comparison, int(conc) if conc is not None else None,
                         archive.records(), services)


def check_gate(gate_path: Path, archive_ref: str, workspace: Path, *, candidate: str | None = None,
               now: datetime | None = None) -> dict[str, Any]:
    """Evaluate a gate file on an archive and append the result to the ``gates`` table (passing or
    not). Returns the row; the caller decides what a failure means (the CLI exits non-zero)."""
    spec = load_gate(gate_path)
    archive = _resolve_archive(archive_ref, workspace)
    measure = gv.gate_value(spec, gate_inputs(archive))
    run = archive.run
    sim = run.simulated
    row = {
        "gate": spec.name, "description": spec.description, "quantity": spec.quantity, "op": spec.op,
        "threshold": spec.threshold, "unit": spec.unit,
        "selectors": json.dumps(spec.selectors.model_dump(mode="json"), sort_keys=True),
        "archive_id": archive.archive_id, "candidate": candidate, "value": measure.value, "n": measure.n,
        "passed": gv.gate_passes(spec.op, measure.value, spec.threshold), "detail": measure.detail,
        "checked_at": now_iso(now), "gate_file": str(gate_path.resolve()), "gate_sha256": sha256_file(gate_path),
        "claim_class": run.claim_class, "protocol_class": run.protocol_class,
        "data_origin": "simulated" if sim else "measured",
    }
    _append_rows(workspace, "gates", [row])
    return row


def gate_failure(row: dict[str, Any]) -> EvidenceError:
    """The error a failed gate result raises in the CLI."""
    val = "no value" if row["value"] is None else f"{row['value']:.6g}"
    return EvidenceError(f"gate {row['gate']} failed on archive {row['archive_id']}: {row['quantity']} = {val} "
                         f"{row['unit']}, required {row['op']} {row['threshold']:g} ({row['detail']})",
                         hint="the failing result is kept in the gates ledger; fix the candidate, not the gate")


# --- freeze-before-reveal ---------------------------------------------------------------------------


def _file_identity(path: Path) -> tuple[str, str, int]:
    if not path.is_file():
        raise SpecError(f"{path}: no such file", hint="check the path")
    return str(path.resolve()), sha256_file(path), path.stat().st_size


def freeze_file(path: Path, workspace: Path, *, now: datetime | None = None) -> tuple[dict[str, Any], bool]:
    """Record a freeze of ``path`` (SHA-256, size, absolute path, wall time).

    Returns (row, created): when the same content was frozen before (under any path) nothing is
    appended and the existing freeze row is returned with ``created = False``."""
    apath, sha, size = _file_identity(path)
    found: list[dict[str, Any]] = []

    def decide(rows: list[dict[str, Any]]) -> list[dict[str, Any]] | None:
        found[:] = [dict(old)] if (old := gv.existing_freeze(rows, sha)) is not None else []
        if found:
            return None
        return [{"action": "freeze", "path": apath, "sha256": sha, "bytes": size, "at": now_iso(now),
                 "outcome": "frozen", "passed": True, "reason": "content frozen"}]

    added = append_checked(workspace, "freezes", decide)
    return (added[0], True) if added else (found[0], False)


def reveal_file(path: Path, results: str, workspace: Path, *, now: datetime | None = None) -> dict[str, Any]:
    """Check freeze-before-reveal for ``path`` against a results archive and append a ``reveal`` row
    with the outcome (``passed``, ``changed since freeze``, ``never frozen`` or ``frozen after the
    results``). Returns the row; ``row["passed"]`` tells whether the reveal may proceed."""
    apath, sha, size = _file_identity(path)
    archive = _resolve_archive(results, workspace)
    created = archive.run.created_wall
    if not created:
        raise ArchiveError(f"archive {archive.archive_id} has no created_wall in its manifest",
                           hint="reveal against an archive written by dsv4h")
    def decide(rows: list[dict[str, Any]]) -> list[dict[str, Any]]:
        decision = gv.reveal_decision(rows, apath, sha, str(created))
        return [{"action": "reveal", "path": apath, "sha256": sha, "bytes": size, "at": now_iso(now),
               "outcome": decision.outcome, "passed": decision.passed, "reason": decision.reason,
               "freeze_at": (decision.freeze or {}).get("at"), "results_archive_id": archive.archive_id,
               "results_created_wall": str(created)}]

    (row,) = append_checked(workspace, "freezes", decide)
    return row


def reveal_failure(row: dict[str, Any]) -> EvidenceError:
    """The error a failed reveal raises in the CLI."""
    return EvidenceError(f"reveal of {row['path']} against archive {row['results_archive_id']} refused: "
                         f"{row['outcome']} ({row['reason']})",
                         hint="freeze a prediction before the results exist; a late or changed prediction is "
                         "exploratory, not a preregistered test")


def analysis_plan_status(workspace: Path, path: Path, run_started: str | None = None) -> dict[str, Any]:
    """Pipeline hook for a formal spec naming ``analysis_plan: FILE``: reads the file and the
    ``freezes`` table, writes nothing. Returns ``{frozen, sha256, frozen_at, label, reason, path}``
    with label ``preregistered`` (current content frozen, strictly before ``run_started`` — the
    run's ``created_wall`` — when given) or ``exploratory`` (missing, never frozen, changed since
    its freeze, or frozen too late)."""
    if not path.is_file():
        return {"frozen": False, "sha256": None, "frozen_at": None, "label": "exploratory",
                "reason": f"{path}: no such file", "path": str(path)}
    apath, sha, _ = _file_identity(path)
    return gv.plan_status(table_rows(workspace, "freezes"), apath, sha, run_started) | {"path": apath}


# --- historical evidence ----------------------------------------------------------------------------


def load_historical(path: Path) -> list[gv.HistoricalEntry]:
    """Read a historical-evidence YAML file; each entry is ``defaults`` updated by the entry.
    Errors name the file, the entry index/id and the field."""
    doc = parse_model(gv.HistoricalFile, read_yaml(path), str(path))
    out: list[gv.HistoricalEntry] = []
    errors: list[str] = []
    for i, raw in enumerate(doc.entries):
        merged = dict(doc.defaults) | dict(raw)
        try:
            out.append(parse_model(gv.HistoricalEntry, merged, f"{path}: entries[{i}] ({raw.get('entry_id', '?')})"))
        except SpecError as exc:
            errors.append(exc.message)
    if errors:
        raise SpecError("\n".join(errors), hint="fix the named fields of the named entries")
    return out


def import_historical_file(path: Path, workspace: Path, *, now: datetime | None = None) -> dict[str, Any]:
    """Import a historical-evidence file into the ``historical`` table, idempotently by entry id.

    Returns ``{"added": [...ids], "unchanged": [...ids], "file", "sha256"}``. Raises
    ``EvidenceError`` (nothing appended) when an entry id is already imported with other content."""
    entries = load_historical(path)
    file_sha = sha256_file(path)
    planned: list[gv.HistoricalPlan] = []

    def decide(current: list[dict[str, Any]]) -> list[dict[str, Any]]:
        existing = {str(r["entry_id"]): str(r["content_sha256"]) for r in current}
        plan = gv.plan_historical_import(entries, existing)
        planned[:] = [plan]
        if plan.conflicts:
            raise EvidenceError(f"{path}: historical import refused ({gv.RULE_4}):\n  " + "\n  ".join(plan.conflicts),
                                hint="give a corrected entry a new entry_id; imported rows are never rewritten")
        at = now_iso(now)
        rows = [e.model_dump(mode="json") | {"historical": True, "data_origin": "historical",
                                             "content_sha256": gv.entry_content_sha(e),
                                             "import_file": str(path.resolve()), "import_sha256": file_sha,
                                             "imported_at": at} for e in plan.add]
        return rows

    append_checked(workspace, "historical", decide)
    plan = planned[0]
    return {"added": [e.entry_id for e in plan.add], "unchanged": list(plan.unchanged), "file": str(path),
            "sha256": file_sha}


__all__ = [
    "SCHEMAS", "add_closure", "analysis_plan_status", "archive_facts", "check_direction", "check_gate",
    "closure_states", "freeze_file", "gate_failure", "gate_inputs", "get_record", "import_historical_file",
    "load_gate", "load_historical", "load_proposal", "now_iso", "propose_record", "reopen_direction",
    "reveal_failure", "reveal_file", "table_rows",
]
