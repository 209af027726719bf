"""Row models (harness.measure.rows): every ledger schema derived from one model per table."""

from __future__ import annotations

import dataclasses

import pyarrow as pa
import pytest

from harness.measure.results import CellResult
from harness.measure.rows import (
    LATENCY_COLUMNS,
    ROW_MODELS,
    RunRow,
    arrow_schema,
    build,
    check_row,
    row_dict,
    rows_table,
)
from harness.measure.sweep import SweepCellRow, SweepRoundRow
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
    assert formal & sweep == {"cell_id", "workload", "concurrency", "latency"}  # latency: the flat latency columns


def test_a_row_literal_can_only_use_the_models_names() -> None:
    assert check_row("sweep_cells", {"arrival_rate_req_s": 4.0, "ttft_p50_s": 0.1}) == {
        "arrival_rate_req_s": 4.0, "ttft_p50_s": 0.1}
    with pytest.raises(ValueError, match="no column\\(s\\) goodput_median, rate in its row model"):
        check_row("sweep_cells", {"rate": 4.0, "goodput_median": 1.0})


SWEEP_CELL = {"cell_id": "sweep-4rps", "workload": "sweep", "concurrency": 0, "arrival_rate_req_s": 4.0,
              "rounds_ok": 3, "rounds_planned": 3}


def test_a_row_model_without_a_required_field_is_refused() -> None:
    with pytest.raises(TypeError, match="missing 1 required keyword-only argument: 'cell_id'"):
        build("sweep_cells", {k: v for k, v in SWEEP_CELL.items() if k != "cell_id"})
    with pytest.raises(TypeError, match="required keyword-only argument"):
        SweepRoundRow(round_id="sweep-4rps.r0", cell_id="sweep-4rps")  # type: ignore[call-arg]
    with pytest.raises(TypeError, match="'kind'"):
        RunRow(plan_id="p", service="sim", n_cells=1, archive_path="a")  # type: ignore[call-arg]
    with pytest.raises(TypeError, match="'verdict'"):  # a matched run's row without its break-even verdict
        build("matched_sd", {"run": "m", "order": "AR SD SD AR", "concurrency": 2, "reason": "", "sd_claim": "c",
                             "status": "complete"})
    with pytest.raises(ValueError, match="no column\\(s\\) rate in its row model"):
        build("sweep_cells", SWEEP_CELL | {"rate": 4.0})
    # every table keeps a required identity; a genuinely optional column stays optional
    required = {t: [f.name for f in dataclasses.fields(m.model) if f.default is dataclasses.MISSING
                    and f.default_factory is dataclasses.MISSING] for t, m in ROW_MODELS.items()}
    assert required["sweep_rounds"][:5] == ["round_id", "cell_id", "round_index", "arrival_rate_req_s", "status"]
    assert required["sla_probes"][:2] == ["probe_index", "arrival_rate_req_s"]
    assert "cell_id" not in required["sla_probes"]  # null for a probe that measured no round
    assert "goodput_median_req_s" not in required["sweep_cells"] and "resumed_from" not in required["runs"]


def test_a_built_row_is_flat_and_typed_by_its_model() -> None:
    row = build("sweep_cells", SWEEP_CELL | {"ttft_p50_s": 0.1, "ttft_n": 8})
    assert isinstance(row, SweepCellRow) and row.latency == {"ttft_p50_s": 0.1, "ttft_n": 8}
    flat = row_dict(row)
    assert list(flat)[:6] == list(SWEEP_CELL) and flat["ttft_p50_s"] == 0.1 and flat["goodput_median_req_s"] is None
    t = rows_table("sweep_cells", [row], {"campaign": "c"})
    assert t.schema.field("goodput_median_req_s").type == pa.float64()  # null everywhere, still its model's type
    assert t.schema.field("rounds_ok").type == pa.int64() and t.schema.field("ttft_n").type == pa.int64()
    assert t.column_names[-1] == "campaign" and t.to_pylist()[0]["cell_id"] == "sweep-4rps"
    assert build("sweep_cells", flat) == row  # a flattened row builds back to the same instance
