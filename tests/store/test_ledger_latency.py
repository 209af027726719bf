"""The ledgers carry latency percentiles per wave, round and cell, and the requests table carries
the four instants and the wall anchor: a notebook recomputes TTFT, E2E, TPOT and the HTTP rate
from it alone, equal to dsv4h's own numbers."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
from ledger_helpers import ledger_df
from testkit import quick_decode_run

from harness.measure import latency as L


@pytest.mark.slow
def test_requests_ledger_recomputes_latency_and_http_rate(tmp_path: Path) -> None:
    out, ws = quick_decode_run(tmp_path, "lat", 4)
    req = ledger_df(ws, "requests")
    req = req[req.archive_id == out.archive.archive_id]
    assert (req.anchor_wall.dt.year >= 2026).all() and (req.anchor_perf_ns > 0).all()
    assert set(req.count_method) == {"server-cumulative"}
    ok = req[req.ok & (req.n_tokens > 0)]
    assert (ok.send_ns < ok.first_token_ns).all() and (ok.first_token_ns <= ok.last_token_ns).all()
    assert (ok.last_token_ns <= ok.done_ns).all()
    np.testing.assert_allclose(ok.ttft_s, (ok.first_token_ns - ok.send_ns) / 1e9)

    measured = ok[ok.phase == "measured"]
    recs = [r for r in out.archive.records() if r.phase == "measured"]
    # TTFT / E2E / TPOT from the ledger's instants equal dsv4h's definitions over the raw records
    assert sorted((measured.first_token_ns - measured.send_ns) / 1e9) == pytest.approx(sorted(L.ttft(recs)))
    assert sorted((measured.done_ns - measured.send_ns) / 1e9) == pytest.approx(sorted(L.e2e(recs)))
    after = measured.n_tokens - measured.first_event_tokens
    tpot = ((measured.last_token_ns - measured.first_token_ns) / 1e9 / after)[after > 0]
    assert sorted(tpot) == pytest.approx(sorted(L.tpot(recs)))
    # whole-wave HTTP rate of each wave from the ledger alone equals the waves table's
    waves = ledger_df(ws, "waves")
    for wid, g in measured.groupby("wave_id"):
        rate = g.n_tokens.sum() / ((g.done_ns.max() - g.send_ns.min()) / 1e9)
        assert rate == pytest.approx(float(waves[waves.wave_id == wid].http_output_tok_s.iloc[0]), rel=1e-9)

    cells = ledger_df(ws, "cells")
    cell = cells[cells.archive_id == out.archive.archive_id].iloc[0]
    for col in ("ttft_p50_s", "ttft_p90_s", "ttft_p99_s", "ttft_mean_s", "ttft_max_s", "ttft_n", "itl_p99_s",
                "tpot_p50_s", "e2e_p99_s", "itl_bench_p50_s", "tpot_bench_p50_s"):
        assert col in cells.columns, col
    assert cell.ttft_n == len(measured)
    assert cell.ttft_p50_s == pytest.approx(float(np.percentile(L.ttft(recs), 50)))
    rounds = ledger_df(ws, "rounds")
    assert {"ttft_p99_s", "itl_n"} <= set(rounds.columns) and {"ttft_p99_s", "itl_n"} <= set(waves.columns)
