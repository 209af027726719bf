"""Ledgers: rows per archive with labels; re-ingesting adds nothing; pandas can read them."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pyarrow as pa
from ledger_helpers import ledger_df
from testkit import run_block

from harness.records import RequestRecord
from harness.store.archive import ArchiveWriter, open_archive
from harness.store.ledger import ingest_archive, read_table


def make(tmp_path: Path, campaign: str, backend: str) -> Path:
    w = ArchiveWriter(tmp_path)
    w.write_wave([RequestRecord(rid="r", send_ns=0, done_ns=10, event_ns=np.array([1]), event_tokens=np.array([1]),
                                output_ids=np.array([671, 6102, 294, 8760, 344, 2619, 51119, 42499, 1]))])
    w.write_table("cells.parquet", pa.Table.from_pylist([{"cell_id": "c1", "median_tok_s": 88.6}]))
    return w.finalize(status="complete", run=run_block(campaign=campaign, backend=backend,
                                                        claim_class="native-ar", protocol_class="formal"))


def test_ingest_once_and_labels(tmp_path: Path) -> None:
    a = open_archive(make(tmp_path, "one", "sim"))
    added = ingest_archive(tmp_path, a)
    assert added == {"cells": 1, "requests": 1, "runs": 1}
    assert ingest_archive(tmp_path, a) == {}
    b = open_archive(make(tmp_path, "two", "sglang"))
    ingest_archive(tmp_path, b)
    cells = ledger_df(tmp_path, "cells")
    assert len(cells) == 2
    assert cells.set_index("campaign").loc["one", "data_origin"] == "simulated"
    assert cells.set_index("campaign").loc["two", "data_origin"] == "measured"
    assert (cells["ledger_schema_version"] == 6).all()  # schema 6: Delta tables, typed columns, row models
    req = read_table(tmp_path, "requests")
    assert req is not None
    assert req.column("output_hash16").to_pylist()[0] == "6f41fe2f01d52507"
