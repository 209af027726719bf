"""The ``energy`` ledger table: rows from an archive's ``energy.json`` (harness.measure.energy_rows) in
the table's canonical schema (harness.store.ledger.layout), known answers from literal files."""

from __future__ import annotations

from typing import Any

import pyarrow as pa
import pytest

from harness.measure.energy_rows import energy_rows
from harness.measure.rows import columns
from harness.store.ledger.layout import SCHEMAS, canonical, with_common

DOC: dict[str, Any] = {
    "format": 2,
    "sampler": {"source": "sim", "interval_s": 0.02},
    "samplers": [{"source": "sim", "interval_s": 0.02}, {"source": "nvml", "interval_s": 0.5}],
    "waves": [
        {"wave_id": "A1.measured.w000", "cell_id": "A1", "concurrency": 4, "window": "resident", "service": 0,
         "start_ns": 1_000_000_000, "end_ns": 3_000_000_000, "seconds": 2.0, "method": "energy-counter",
         "energy_j": 1920.0, "mean_power_w": 960.0, "tokens": 480, "tokens_per_joule": 0.25,
         "joules_per_token": 4.0, "reason": None,
         "devices": [{"device": d, "energy_j": 240.0} for d in range(8)]},
        {"wave_id": "c.r0000.w000", "cell_id": "c", "round_id": "c.r0000", "arrival_rate_req_s": 20.0,
         "concurrency": 4, "window": "round", "service": 1, "start_ns": 5, "end_ns": 6, "seconds": 1e-9,
         "method": None, "energy_j": None, "mean_power_w": None, "tokens": 10, "tokens_per_joule": None,
         "joules_per_token": None, "reason": "window not bracketed: ...", "devices": []},
    ],
}


def test_rows_carry_units_in_their_names_and_their_sampler() -> None:
    a, b = energy_rows(DOC)
    assert a == a | {"wave_id": "A1.measured.w000", "cell_id": "A1", "window_kind": "resident", "service_index": 0,
                     "window_s": 2.0, "output_tokens": 480, "energy_j": 1920.0, "mean_power_w": 960.0,
                     "output_tokens_per_j": 0.25, "j_per_output_token": 4.0, "method": "energy-counter",
                     "source": "sim", "resolution_s": 0.02, "devices": 8}
    assert b["source"] == "nvml" and b["resolution_s"] == 0.5 and b["round_id"] == "c.r0000"
    assert b["energy_j"] is None and b["reason"].startswith("window not bracketed") and b["devices"] is None
    assert set(a) <= set(columns("energy"))


def test_a_format_1_file_has_one_sampler_and_resident_windows() -> None:
    doc = {"sampler": {"source": "nvml", "interval_s": 0.1},
           "waves": [{k: v for k, v in DOC["waves"][0].items() if k not in ("window", "service")}]}
    (row,) = energy_rows(doc)
    assert row["window_kind"] == "resident" and row["service_index"] == 0 and row["source"] == "nvml"


def test_rows_fit_the_canonical_schema_with_nothing_in_extra() -> None:
    t = canonical("energy", with_common(pa.Table.from_pylist(energy_rows(DOC)),
                                        {"archive_id": "0123456789abcdef", "protocol_class": "abba-screen",
                                         "valid": True}))
    assert t.schema.equals(SCHEMAS["energy"].with_metadata(t.schema.metadata))
    rows = t.to_pylist()
    assert [r["extra"] for r in rows] == [None, None]
    assert rows[0]["output_tokens_per_j"] == pytest.approx(480 / 1920.0)
    assert t.schema.field("start_ns").type == pa.int64() and t.schema.field("energy_j").type == pa.float64()
