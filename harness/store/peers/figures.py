"""An imported result's key figures as the peer tool computed them (pure).

Read from an import's ``external.json`` (harness.store.peers): the tool's own summary keys, never
recomputed and never a dsv4h measurement. Times in ms, rates per second; None where the tool's file has
no such number. ``keys`` names the summary key each figure came from (each tool's own definition:
``external.json`` ``metric_definitions``); AIPerf's ``inter_token_latency`` is its per-request TPOT.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

__all__ = ["FIGURES", "import_figures"]

FIGURES = ("request_throughput", "output_throughput", "ttft_p50_ms", "ttft_p99_ms", "tpot_p50_ms", "tpot_p99_ms",
           "itl_p50_ms", "itl_p99_ms")

_KEYS: dict[str, dict[str, str]] = {
    "sglang-bench": {"request_throughput": "request_throughput", "output_throughput": "output_throughput",
                     "ttft_p50_ms": "median_ttft_ms", "ttft_p99_ms": "p99_ttft_ms", "tpot_p50_ms": "median_tpot_ms",
                     "tpot_p99_ms": "p99_tpot_ms", "itl_p50_ms": "median_itl_ms", "itl_p99_ms": "p99_itl_ms"},
    "guidellm": {"request_throughput": "requests_per_second.mean", "output_throughput": "output_tokens_per_second.mean",
                 "ttft_p50_ms": "time_to_first_token_ms.p50", "ttft_p99_ms": "time_to_first_token_ms.p99",
                 "tpot_p50_ms": "time_per_output_token_ms.p50", "tpot_p99_ms": "time_per_output_token_ms.p99",
                 "itl_p50_ms": "inter_token_latency_ms.p50", "itl_p99_ms": "inter_token_latency_ms.p99"},
    "aiperf": {"request_throughput": "request_throughput.avg", "output_throughput": "output_token_throughput.avg",
               "ttft_p50_ms": "time_to_first_token.p50", "ttft_p99_ms": "time_to_first_token.p99",
               "tpot_p50_ms": "inter_token_latency.p50", "tpot_p99_ms": "inter_token_latency.p99"},
}
_KEYS["vllm-bench"] = _KEYS["sglang-bench"]
_TO_MS = {"ms": 1.0, "s": 1e3, "sec": 1e3, "us": 1e-3, "ns": 1e-6}


def _number(v: Any) -> float | None:
    return float(v) if isinstance(v, (int, float)) and not isinstance(v, bool) else None


def import_figures(ext: Mapping[str, Any]) -> dict[str, Any]:
    """tool, source file, request count, duration (s), data origin, server version and :data:`FIGURES`
    of one import's ``external.json``, as the tool wrote them (AIPerf times scaled to ms by their unit)."""
    tool = str(ext.get("tool") or "")
    summary = ext.get("summary") or {}
    keys = _KEYS.get(tool, {})
    out: dict[str, Any] = {"tool": tool, "source_file": ext.get("source_file"), "n_requests": ext.get("n_requests"),
                           "duration_s": _number(ext.get("duration_s")),
                           "data_origin": ext.get("data_origin") or "unknown",
                           "server_version": (ext.get("server") or {}).get("version")}
    for fig in FIGURES:
        key = keys.get(fig)
        v = _number(summary.get(key)) if key else None
        if v is not None and key and tool == "aiperf" and fig.endswith("_ms"):
            scale = _TO_MS.get(str(summary.get(key.rsplit(".", 1)[0] + ".unit", "ms")))
            v = v * scale if scale is not None else None
        out[fig] = v
    return out | {"keys": {f: k for f, k in keys.items()}}
