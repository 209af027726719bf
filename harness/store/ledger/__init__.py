"""Ledgers (edge: files): Delta Lake tables, one per ledger table, appended per archive.

- :mod:`.core`: ingesting archives, appending governance rows, reading tables back, and the one-time
  move of an older ledger; its module docstring keeps the ledger schema history. Its public names used
  elsewhere are re-exported here (``from harness.store.ledger import ingest_archive``).
- :mod:`.delta`: the Delta tables themselves (transactions, versions, optimize).
- :mod:`.durable`: every commit fsynced; a table's newest log entries checked before it is used.
- :mod:`.repair`: ``dsv4h ledger repair`` (damaged entries aside, archive tables re-derived).
- :mod:`.export`: ``dsv4h ledger export --parquet`` (plain Parquet, one file per table).
- :mod:`.layout`: the canonical schema of every table, derived from the row models of
  ``harness.measure.rows`` (pure).
- :mod:`.parquet_layout` and :mod:`.migrate`: the Parquet layout of schemas 2-4, read to move it.
- :mod:`.merge`: merging another host's workspace into this one (storage pieces; the driver is
  :mod:`harness.run.merge`).
"""

from __future__ import annotations

from harness.store.ledger.core import (
    Mark,
    append_checked,
    append_rows,
    archive_rows,
    data_origin,
    ensure_current,
    ingest_archive,
    ingest_view,
    ingested,
    ingested_ids,
    is_current,
    read_table,
    replace_archive_rows,
    request_rows,
    rows_iso,
    successor_of,
)
from harness.store.ledger.layout import ARCHIVE_TABLES, TABLES, ledger_dir

__all__ = [
    "ARCHIVE_TABLES",
    "TABLES",
    "Mark",
    "append_checked",
    "append_rows",
    "archive_rows",
    "data_origin",
    "ensure_current",
    "ingest_archive",
    "ingest_view",
    "ingested",
    "ingested_ids",
    "is_current",
    "ledger_dir",
    "read_table",
    "replace_archive_rows",
    "request_rows",
    "rows_iso",
    "successor_of",
]
