"""Public alias for notebooks and scripts: ``harness.metrics.resident_decode_rate`` and friends.

The definitions live in :mod:`harness.measure.metrics` (the measure stage); this module re-exports
them so code written against earlier layouts keeps working. Nothing inside the package imports it.
"""

from harness.measure.metrics import (
    NS,
    Rate,
    RequestTimings,
    Summary,
    Wave,
    WaveRate,
    decode_rate_1_100,
    e2e_seconds,
    http_output_rate,
    http_window,
    itl_seconds,
    median_of_rounds,
    prefill_rate,
    prefill_window,
    receive_lag_seconds,
    request_timings,
    resident_decode_rate,
    resident_window,
    single_stream_decode,
    token_time_ns,
    tokens_at,
    ttft_seconds,
)

__all__ = [
    "NS", "Rate", "RequestTimings", "Summary", "Wave", "WaveRate", "decode_rate_1_100", "e2e_seconds",
    "http_output_rate", "http_window", "itl_seconds", "median_of_rounds", "prefill_rate", "prefill_window",
    "receive_lag_seconds", "request_timings", "resident_decode_rate", "resident_window", "single_stream_decode",
    "token_time_ns", "tokens_at", "ttft_seconds",
]
