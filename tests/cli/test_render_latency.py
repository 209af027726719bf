"""The console latency table: the historic layout by default, the chosen percentiles on request."""

from __future__ import annotations

import io

from rich.console import Console

from harness.cli.render import latency_grid, latency_table
from harness.measure.results import CellResult


def _cell(latency: dict[str, float]) -> CellResult:
    return CellResult(cell_id="decode-c4", workload="decode", concurrency=4, status="complete", rounds_required=3,
                      round_tok_s=(1.0,), round_status=("ok",), median_tok_s=1.0, observed_min_tok_s=1.0,
                      observed_max_tok_s=1.0, http_output_tok_s=1.0, latency=latency)


LAT = {"ttft_n": 8.0, "ttft_p50_s": 0.0125, "ttft_p90_s": 0.02, "ttft_p99_s": 0.25, "ttft_mean_s": 0.015,
       "tpot_n": 8.0, "tpot_p50_s": 0.005, "itl_n": 120.0, "itl_p50_s": 0.0055, "e2e_n": 8.0, "e2e_p50_s": 0.097}


def _text(renderable: object) -> str:
    buf = io.StringIO()
    Console(file=buf, width=200, color_system=None).print(renderable)
    return buf.getvalue()


def test_default_layout_is_unchanged() -> None:
    t = latency_table([_cell(LAT)], title="m", simulated=False)
    assert t is not None
    assert [c.header for c in t.columns] == ["", "C", "TTFT\np50", "TTFT\np99", "TPOT\np50", "ITL\np50", "ITL\np99",
                                             "E2E\np50", "E2E\np99"]


def test_chosen_percentiles_one_line_per_metric() -> None:
    t = latency_table([_cell(LAT)], title="m", simulated=True, percentiles=(50, 90, 99.9))
    assert t is not None
    assert [c.header for c in t.columns] == ["", "C", "metric", "p50", "p90", "p99.9", "mean", "n"]
    lines = [ln.split() for ln in _text(t).splitlines() if "TTFT" in ln or "ITL" in ln]
    # 12.5 ms, 20.0 ms, p99.9 not computed, mean 15.0 ms, n 8; ITL has only p50
    assert ["D", "4", "TTFT", "12.5", "20.0", "—", "15.0", "8"] in [[x for x in ln if x not in {"│", "┃"}]
                                                                 for ln in lines]
    assert any("ITL" in ln and "5.5" in ln and "120" in ln for ln in lines)


def test_grid_without_workloads_drops_that_column() -> None:
    t = latency_grid([("", "4", LAT)], (50, 95), title="q", caption="c")
    assert [c.header for c in t.columns] == ["C", "metric", "p50", "p95", "mean", "n"]
    assert t.row_count == 4
