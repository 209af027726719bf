"""Parquet ledgers (edge: files): one file per archive or append, committed all or nothing.

- :mod:`.core`: locking, the commit journal, ingesting archives, appending governance rows and
  reading tables back; its module docstring keeps the ledger schema history. Its public names used
  elsewhere are re-exported here (``from harness.store.ledger import ingest_archive``).
- :mod:`.layout`: where ledger files live and the canonical schema of every table, derived from the
  row models of ``harness.measure.rows`` (pure, except listing a table's files).
- :mod:`.migrate`: the one-time migrations of schema-1/2/3 ledgers to the current schema (4).
- :mod:`.merge`: merging another host's workspace into this one (storage pieces; the driver is
  :mod:`harness.run.merge`).
"""

from __future__ import annotations

from harness.store.ledger.core import (
    JOURNAL,
    append_rows,
    archive_rows,
    commit_files,
    data_origin,
    ingest_archive,
    ingest_view,
    ingested,
    ingested_ids,
    locked,
    read_table,
    recover,
    request_rows,
    rows_iso,
    successor_of,
)
from harness.store.ledger.layout import ARCHIVE_TABLES, TABLES, ledger_dir

__all__ = [
    "ARCHIVE_TABLES",
    "JOURNAL",
    "TABLES",
    "append_rows",
    "archive_rows",
    "commit_files",
    "data_origin",
    "ingest_archive",
    "ingest_view",
    "ingested",
    "ingested_ids",
    "ledger_dir",
    "locked",
    "read_table",
    "recover",
    "request_rows",
    "rows_iso",
    "successor_of",
]
