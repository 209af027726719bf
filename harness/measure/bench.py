"""Throughput of a quick screen (``dsv4h bench``), in the peers' vocabulary (pure). Units: seconds,
requests/s, tokens/s.

As ``sglang.bench_serving`` and ``vllm bench serve`` report them: the benchmark duration runs from the
first request sent to the last response ended; request throughput is completed requests over it;
output throughput the completed requests' output tokens over it; total token throughput their input
plus output tokens over it. Failed requests count in ``failed`` only. Input tokens are the server's
``prompt_tokens`` when it reported them, else the prompt's length.
"""

from __future__ import annotations

import math
from collections.abc import Sequence

from harness.records import RequestRecord

NS = 1e9


def throughput(records: Sequence[RequestRecord]) -> dict[str, float | int]:
    """``duration_s``, ``completed``, ``failed``, ``total_input_tokens``, ``total_output_tokens``,
    ``request_throughput`` (req/s), ``output_throughput`` and ``total_token_throughput`` (tok/s); NaN
    rates when nothing was sent or the duration is not positive."""
    ok = [r for r in records if r.ok]
    dur = (max(r.done_ns for r in records) - min(r.send_ns for r in records)) / NS if records else math.nan
    out_tok = sum(r.n_tokens for r in ok)
    in_tok = sum(int(r.prompt_tokens if r.prompt_tokens is not None else r.input_len) for r in ok)

    def rate(x: float) -> float:
        return x / dur if dur > 0 else math.nan

    return {"duration_s": dur, "completed": len(ok), "failed": len(records) - len(ok),
            "total_input_tokens": in_tok, "total_output_tokens": out_tok,
            "request_throughput": rate(len(ok)), "output_throughput": rate(out_tok),
            "total_token_throughput": rate(in_tok + out_tok)}
