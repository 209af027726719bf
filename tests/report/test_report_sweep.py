"""The rate-sweep section's Markdown (harness/report/sweep.py): fixed-point numbers, the SLO in words
(issue 24: no ``1.28e+03`` ms, no Python dict)."""

from __future__ import annotations

from harness.report.sweep import slo_text, sweep_markdown


def test_slo_reads_as_objectives_in_ms() -> None:
    assert slo_text({"ttft_s": 1.0, "tpot_s": 0.05, "e2e_s": None}) == "TTFT <= 1,000 ms, TPOT <= 50 ms"
    assert slo_text({"ttft_s": None, "tpot_s": None, "e2e_s": 12.5}) == "E2E <= 12,500 ms"
    assert slo_text({"ttft_s": 0.0125}) == "TTFT <= 12.50 ms"
    assert slo_text({}) == "none" and slo_text(None) == "none"


def test_sweep_table_prints_fixed_point_values() -> None:
    cell = {"arrival_rate_req_s": 16.0, "request_throughput_median_req_s": 7.912,
            "output_throughput_median_tok_s": 1264.04,
            "goodput_median_req_s": 7.5, "ttft_p50_s": 1.2804, "ttft_p99_s": 2.5, "tpot_p50_s": 0.0512,
            "e2e_p50_s": None, "schedule_kept": True}
    entry = {"campaign": "sw", "archive_id": "a" * 16, "simulated": True,
             "knee": {"arrival_rate_req_s": 8.0, "goodput_median_req_s": 7.912},
             "slo": {"ttft_s": 1.0, "tpot_s": 0.05, "e2e_s": None}, "cells": [cell]}
    lines = sweep_markdown(entry, None)
    assert lines[0] == f"## sw ({'a' * 16}) SIMULATED"
    assert lines[2] == "SLO: TTFT <= 1,000 ms, TPOT <= 50 ms; knee: 8 req/s offered, goodput 7.91 req/s"
    assert lines[-1] == "| 16 | 7.91 | 1,264 | 7.50 | 1,280 | 2,500 | 51.2 | - | kept | - |"
    assert not any("e+" in line or "{" in line for line in lines)
