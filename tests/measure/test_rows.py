"""Row models (harness.measure.rows): every ledger schema derived from one model per table."""

from __future__ import annotations

import dataclasses

import pyarrow as pa
import pytest

from harness.measure.results import CellResult
from harness.measure.rows import LATENCY_COLUMNS, ROW_MODELS, SweepCellRow, arrow_schema, check_row
from harness.store.ledger.layout import SCHEMAS, TABLES


def test_every_ledger_schema_is_its_row_models() -> None:
    assert set(ROW_MODELS) == set(TABLES)
    for table, spec in ROW_MODELS.items():
        own = [f.name for f in dataclasses.fields(spec.model) if f.name != "latency"]
        assert SCHEMAS[table].names[:len(own)] == own, table
        assert SCHEMAS[table].equals(arrow_schema(table)), table
        assert ("extra" in SCHEMAS[table].names) == spec.archive, table
        assert ("ttft_p50_s" in SCHEMAS[table].names) == spec.latency, table


def test_types_come_from_the_annotations() -> None:
    cells = SCHEMAS["cells"]
    assert cells.field("round_tok_s").type == pa.list_(pa.float64())  # tuple[float, ...]
    assert cells.field("concurrency").type == pa.int64() and cells.field("median_tok_s").type == pa.float64()
    assert cells.field("ttft_n").type == pa.int64() and len(LATENCY_COLUMNS) == 36
    assert "kind" not in cells.names and "kind" in SCHEMAS["runs"].names and "protocol_class" in cells.names
    # no column null by design for a whole protocol: formal and sweep cells share only identity and latency
    formal = {f.name for f in dataclasses.fields(CellResult)}
    sweep = {f.name for f in dataclasses.fields(SweepCellRow)}
    assert formal & sweep == {"cell_id", "workload", "concurrency"}


def test_a_row_literal_can_only_use_the_models_names() -> None:
    assert check_row("sweep_cells", {"arrival_rate_req_s": 4.0, "ttft_p50_s": 0.1}) == {
        "arrival_rate_req_s": 4.0, "ttft_p50_s": 0.1}
    with pytest.raises(ValueError, match="no column\\(s\\) goodput_median, rate in its row model"):
        check_row("sweep_cells", {"rate": 4.0, "goodput_median": 1.0})
