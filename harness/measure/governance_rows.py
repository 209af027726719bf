"""The row models of the governance ledger tables (pure): ``records``, ``closures``, ``gates``,
``freezes`` and ``historical`` (one frozen dataclass per table, fields in column order; the tables'
Arrow schemas come from them through :data:`harness.measure.rows.ROW_MODELS`). Governance rows carry
``append_key`` (their order in the table) and no archive columns."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime


@dataclass(frozen=True)
class RecordRow:
    """``records``: one accepted record (``content``: the canonical JSON its id hashes)."""

    record_id: str | None = None
    name: str | None = None
    scope: str | None = None
    description: str | None = None
    metric: str | None = None
    unit: str | None = None
    concurrency: int | None = None
    claim_class: str | None = None
    protocol_class: str | None = None
    data_origin: str | None = None
    candidate: str | None = None
    value: float | None = None
    suite_ids: list[str] | None = None
    suite_values: list[float] | None = None
    control_ids: list[str] | None = None
    control_values: list[float] | None = None
    declared_change: list[str] | None = None
    gates: list[str] | None = None
    previous_record_id: str | None = None
    previous_value: float | None = None
    over_previous_pct: float | None = None
    over_control_pct: float | None = None
    proposal_file: str | None = None
    proposal_sha256: str | None = None
    recorded_at: datetime | None = None
    content: str | None = None
    append_key: str | None = None
    ledger_schema_version: int | None = None


@dataclass(frozen=True)
class ClosureRow:
    """``closures``: one direction closed or reopened."""

    direction: str | None = None
    action: str | None = None
    evidence_archive_id: str | None = None
    reason: str | None = None
    at: datetime | None = None
    closing_archive_id: str | None = None
    source: str | None = None
    append_key: str | None = None
    ledger_schema_version: int | None = None


@dataclass(frozen=True)
class GateRow:
    """``gates``: one gate checked against one archive."""

    gate: str | None = None
    description: str | None = None
    quantity: str | None = None
    op: str | None = None
    threshold: float | None = None
    unit: str | None = None
    selectors: str | None = None
    archive_id: str | None = None
    candidate: str | None = None
    value: float | None = None
    n: int | None = None
    passed: bool | None = None
    detail: str | None = None
    checked_at: datetime | None = None
    gate_file: str | None = None
    gate_sha256: str | None = None
    claim_class: str | None = None
    protocol_class: str | None = None
    data_origin: str | None = None
    append_key: str | None = None
    ledger_schema_version: int | None = None


@dataclass(frozen=True)
class FreezeRow:
    """``freezes``: one freeze action on a results file."""

    action: str | None = None
    path: str | None = None
    sha256: str | None = None
    bytes: int | None = None
    at: datetime | None = None
    outcome: str | None = None
    passed: bool | None = None
    reason: str | None = None
    freeze_at: datetime | None = None
    results_archive_id: str | None = None
    results_created_wall: datetime | None = None
    append_key: str | None = None
    ledger_schema_version: int | None = None


@dataclass(frozen=True)
class HistoricalRow:
    """``historical``: one imported published figure."""

    entry_id: str | None = None
    source: str | None = None
    published_date: str | None = None
    measured_date: str | None = None
    protocol_label: str | None = None
    claim_class: str | None = None
    protocol_class: str | None = None
    metric: str | None = None
    concurrency: int | None = None
    value: float | None = None
    range_max: float | None = None
    unit: str | None = None
    tp: int | None = None
    label: str | None = None
    not_claims: list[str] | None = None
    quote: str | None = None
    section: str | None = None
    locator: str | None = None
    experiment: str | None = None
    leg: str | None = None
    historical: bool | None = None
    data_origin: str | None = None
    content_sha256: str | None = None
    import_file: str | None = None
    import_sha256: str | None = None
    imported_at: datetime | None = None
    append_key: str | None = None
    ledger_schema_version: int | None = None
