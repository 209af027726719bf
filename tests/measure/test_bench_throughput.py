"""Throughput of a quick screen in the peers' vocabulary, literal answers."""

from __future__ import annotations

import math

import numpy as np
import pytest

from harness.measure.bench import throughput
from harness.records import RequestRecord

S = 1_000_000_000


def rec(send_s: float, done_s: float, tokens: int, *, prompt: int | None = 100, error: str | None = None,
        input_len: int = 90) -> RequestRecord:
    return RequestRecord(rid=f"r{send_s}", send_ns=int(send_s * S), done_ns=int(done_s * S),
                         event_ns=np.array([int(done_s * S)], dtype=np.int64),
                         event_tokens=np.array([tokens], dtype=np.int32), prompt_tokens=prompt, error=error,
                         input_len=input_len)


def test_throughput_over_first_send_to_last_end() -> None:
    recs = [rec(1.0, 2.0, 10), rec(1.5, 3.0, 30, prompt=None), rec(2.0, 5.0, 7, error="http 500")]
    t = throughput(recs)
    # duration 1.0 -> 5.0 s (the failed request's end included); 2 completed, 40 output tokens,
    # input 100 (reported) + 90 (prompt length, none reported)
    assert t == pytest.approx({"duration_s": 4.0, "completed": 2, "failed": 1, "total_input_tokens": 190,
                               "total_output_tokens": 40, "request_throughput": 0.5, "output_throughput": 10.0,
                               "total_token_throughput": 57.5})


def test_no_records_gives_nan_rates() -> None:
    t = throughput([])
    assert t["completed"] == 0 and t["failed"] == 0
    assert math.isnan(t["duration_s"]) and math.isnan(t["request_throughput"])
