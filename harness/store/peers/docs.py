"""Peer result documents typed strictly, and the one-line refusals (pure): the models and limits
:mod:`harness.store.peers.importer` checks every imported file against (its docstring says which rules apply).
"""

from __future__ import annotations

from pathlib import Path
from typing import Annotated, Any, TypeVar

import pydantic_core
from pydantic import BaseModel, ConfigDict, Field, StrictInt, ValidationError

from harness.errors import ArchiveError

MAX_LENGTH = 2**31 - 1  # token counts (the int32 columns of ROW_SCHEMA)
MAX_SECONDS = 1e7  # about 116 days: any longer TTFT, latency or gap is not a benchmark's
MAX_REQUESTS = 2**31 - 1

# ----------------------------------------------------------------------------------------------------
# Typed documents (strict: no coercion of text, booleans or floats into other types)

T = TypeVar("T")
M = TypeVar("M", bound=BaseModel)
Finite = Annotated[float, Field(strict=True, allow_inf_nan=False)]
Seconds = Annotated[float, Field(strict=True, allow_inf_nan=False, ge=0.0, le=MAX_SECONDS)]
Millis = Annotated[float, Field(strict=True, allow_inf_nan=False, ge=0.0, le=MAX_SECONDS * 1e3)]
Length = Annotated[int, Field(strict=True, ge=0, le=MAX_LENGTH)]
Count = Annotated[int, Field(strict=True, ge=0, le=MAX_REQUESTS)]
Text = Annotated[str, Field(strict=True)]
FList = Annotated[list[T], Field(fail_fast=True)]  # stops at the first bad item: one error, not millions
_MetricValue = StrictInt | Finite | FList[Finite] | None


class _Doc(BaseModel):
    """A peer document's part: keys it does not name are ignored, every named one is typed strictly."""

    model_config = ConfigDict(extra="ignore", frozen=True, strict=True)


class BenchResult(_Doc):
    """One sglang.bench_serving / vllm bench serve run with its per-request detail lists; the other
    top-level keys are its summary (kept, ``extra``)."""

    model_config = ConfigDict(extra="allow", frozen=True, strict=True)
    completed: Count
    failed: Count | None = None
    ttfts: FList[Seconds | None]
    input_lens: FList[Length]
    output_lens: FList[Length]
    itls: FList[FList[Seconds]]
    errors: FList[Text | None]
    latencies: FList[Seconds | None] | None = None
    start_times: FList[Finite | None] | None = None


class GuideLLMTimings(_Doc):
    request_start: Finite | None = None
    first_token_iteration: Finite | None = None
    request_end: Finite | None = None


class _GInfo(_Doc):
    error: Text | None = None
    timings: GuideLLMTimings | None = None


class GuideLLMRequest(_Doc):
    """One request of a GuideLLM report (the numbers dsv4h reads; :data:`GUIDELLM_REQUEST_KEYS`)."""

    prompt_tokens: Length | None = None
    output_tokens: Length | None = None
    request_start_time: Finite | None = None
    request_end_time: Finite | None = None
    request_latency: Seconds | None = None
    time_to_first_token_ms: Millis | None = None
    inter_token_latency_ms: Millis | None = None
    time_per_output_token_ms: Millis | None = None
    error: Text | None = None
    info: _GInfo | None = None


class _GRequests(_Doc):
    successful: FList[GuideLLMRequest] = []
    errored: FList[GuideLLMRequest] = []
    incomplete: FList[GuideLLMRequest] = []


class _GStats(_Doc):
    model_config = ConfigDict(extra="ignore", frozen=True, strict=True)
    mean: Finite | None = None
    median: Finite | None = None
    std_dev: Finite | None = None
    min: Finite | None = None
    max: Finite | None = None
    count: Count | None = None
    total_sum: Finite | None = None
    percentiles: Annotated[dict[str, Finite | None], Field(fail_fast=True)] | None = None


class _GMetric(_Doc):
    successful: _GStats | None = None


class _GTotals(_Doc):
    successful: Count | None = None
    errored: Count | None = None
    incomplete: Count | None = None


class _GMetrics(_Doc):
    request_totals: _GTotals | None = None
    requests_per_second: _GMetric | None = None
    request_concurrency: _GMetric | None = None
    request_latency: _GMetric | None = None
    time_to_first_token_ms: _GMetric | None = None
    inter_token_latency_ms: _GMetric | None = None
    time_per_output_token_ms: _GMetric | None = None
    output_tokens_per_second: _GMetric | None = None
    prompt_token_count: _GMetric | None = None
    output_token_count: _GMetric | None = None


class _GBenchmark(_Doc):
    duration: Finite | None = None
    start_time: Finite | None = None
    end_time: Finite | None = None
    metrics: _GMetrics | None = None
    requests: _GRequests = _GRequests()


class GuideLLMReport(_Doc):
    """A GuideLLM report (``benchmarks.json``)."""

    benchmarks: FList[_GBenchmark]


class _AMetric(_Doc):
    value: _MetricValue = None
    unit: Text | None = None


class _AMeta(_Doc):
    request_start_ns: StrictInt | Finite | None = None


class AIPerfRecord(_Doc):
    """One line of AIPerf's ``profile_export.jsonl``."""

    metadata: _AMeta | None = None
    metrics: Annotated[dict[str, _AMetric], Field(fail_fast=True)]
    error: Text | dict[str, Any] | None = None


# ----------------------------------------------------------------------------------------------------
# Refusals


_WHAT = {"sglang-bench": "sglang-bench result", "vllm-bench": "vllm-bench result", "guidellm": "GuideLLM report",
         "aiperf": "AIPerf profile export"}


def refuse(path: Path, tool: str, reason: str, hint: str | None = None) -> ArchiveError:
    return ArchiveError(f"{path}: not a {_WHAT.get(tool, tool)}: {reason}",
                        hint=hint or "pass the result file the tool wrote, unchanged")


def _invalid(path: Path, tool: str, exc: ValidationError, where: str = "") -> ArchiveError:
    """One line: the first problem's field path and reason (and how many more there are)."""
    errs = exc.errors(include_url=False)
    first = errs[0]
    loc = ".".join(str(p) for p in first["loc"])
    if first["type"] == "json_invalid":
        reason = f"{where}{first['msg']} (not JSON, invalid UTF-8 or a lone surrogate escape)"
    else:
        shown = repr(first.get("input"))
        got = "" if first["type"] == "missing" else f" (got {shown[:60] + '...' if len(shown) > 60 else shown})"
        reason = f"{where}field {loc or '(top level)'}: {first['msg'].lower()}{got}"
    more = f"; {len(errs) - 1} more problem(s)" if len(errs) > 1 else ""
    return refuse(path, tool, reason + more)


def validated(model: type[M], obj: Any, path: Path, tool: str, where: str = "") -> M:
    try:
        return model.model_validate(obj)
    except ValidationError as exc:
        raise _invalid(path, tool, exc, where) from None


def json_value(data: bytes, path: Path, tool: str, where: str = "") -> Any:
    """A JSON document as Python values (strict UTF-8, no lone surrogates, bounded nesting), built
    straight from the bytes (about half the memory of a typed parse of the JSON text)."""
    try:
        return pydantic_core.from_json(data)
    except ValueError as exc:
        raise refuse(path, tool, f"{where}{exc} (not JSON, invalid UTF-8 or a lone surrogate escape)") from None


