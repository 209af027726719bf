"""Introspection payloads (pure): ``/server_info``, ``/v1/models`` and Prometheus ``/metrics``.

A speculative profile adds SGLang's ``speculative_*`` server arguments (EAGLE with topk 1 as SGLang
reports it: ``speculative_num_steps`` = k, ``speculative_num_draft_tokens`` = k + 1), the lifetime
``avg_spec_accept_length`` in ``internal_states[0]`` (where SGLang 0.5.23 puts it:
``scheduler_components/internal_state.py``) and vLLM's ``vllm:spec_decode_*`` counters on ``/metrics``.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from harness.sim.options import SimOptions
from harness.sim.profiles import SimProfile
from harness.sim.scheduler import Scheduler

SIM_VERSION = "sim-0.1.0"


def internal_state(sched: Scheduler, generate_requests: int) -> dict[str, Any]:
    """The one DP rank's internal state, including the scheduler's lateness counters."""
    st = sched.stats
    forwards = st.prefill_forwards + st.decode_steps
    return {
        "last_gen_throughput": st.last_gen_throughput,
        "num_running_reqs": sched.num_running,
        "num_queue_reqs": sched.num_waiting,
        "token_usage": sched.token_usage(),
        "sim_generate_requests": generate_requests,
        "sim_prefill_forwards": st.prefill_forwards,
        "sim_decode_steps": st.decode_steps,
        "sim_late_steps": st.late_steps,
        "sim_late_decode_steps": st.late_decode_steps,
        "sim_lateness_total_s": st.lateness_total_s,
        "sim_decode_lateness_total_s": st.decode_lateness_total_s,
        "sim_wake_lateness_max_s": st.wake_lateness_max_s,
        "sim_emit_lateness_max_s": st.emit_lateness_max_s,
        "sim_wake_lateness_mean_s": st.wake_lateness_sum_s / forwards if forwards else 0.0,
        "sim_decode_model_s_total": st.decode_model_s_total,
    } | _spec_state(sched) | _cold_state(sched)


def _cold_state(sched: Scheduler) -> dict[str, Any]:
    if sched.cold is None:  # profiles with ``cold_shape`` only (harness.sim.cold)
        return {}
    st = sched.stats
    return {"sim_cold_compiles": st.cold_compiles, "sim_cold_compile_s_total": st.cold_compile_s_total}


def _spec_state(sched: Scheduler) -> dict[str, Any]:
    totals = sched.stats.spec
    if totals is None or totals.avg_accept_length is None:
        return {}
    return {"avg_spec_accept_length": totals.avg_accept_length, "sim_spec_verify_steps": totals.steps,
            "sim_spec_accepted_drafts": totals.accepted, "sim_spec_proposed_drafts": totals.proposed}


def _spec_args(options: SimOptions) -> dict[str, Any]:
    spec = options.resolved_profile.speculative
    if spec is None:
        return {"speculative_algorithm": None}
    return {"speculative_algorithm": spec.algorithm, "speculative_draft_model_path": spec.draft_model,
            "speculative_num_steps": spec.draft_tokens, "speculative_eagle_topk": 1,
            "speculative_num_draft_tokens": spec.draft_tokens + 1}


def _unset_blocks(p: SimProfile) -> set[str] | None:
    """Optional profile blocks left out of ``parameters`` when absent (older payloads had none of them)."""
    unset = {k for k in ("speculative", "power", "calibration") if getattr(p, k) is None}
    return unset or None


def server_info(options: SimOptions, sched: Scheduler, generate_requests: int, port: int) -> dict[str, Any]:
    """Resolved server arguments in SGLang's style (``port`` as bound), plus the analytic model."""
    p = options.resolved_profile
    return {
        "model_path": options.resolved_model_path,
        "tokenizer_path": options.resolved_model_path,
        "served_model_name": options.resolved_model_path,
        "host": options.host,
        "port": port,
        "tp_size": p.tp_size,
        "dp_size": p.dp_size,
        "ep_size": p.ep_size,
        **_spec_args(options),
        "chunked_prefill_size": p.chunk_budget,
        "max_running_requests": p.max_running,
        "max_prefill_tokens": p.chunk_budget,
        "mem_fraction_static": p.mem_fraction_static,
        "page_size": p.page_size,
        "disable_radix_cache": options.disable_radix_cache,
        "cuda_graph_bs": list(p.cuda_graph_bs),
        "cuda_graph_max_bs": max(p.cuda_graph_bs) if p.cuda_graph_bs else 0,
        "skip_tokenizer_init": options.stream_mode == "skip-tokenizer-init",
        "stream_interval": options.stream_interval,
        "incremental_streaming_output": options.stream_mode == "delta",
        "enable_metrics": True,
        "context_length": p.context_length,
        "max_total_num_tokens": p.max_total_num_tokens,
        "max_req_input_len": min(p.context_length, p.max_total_num_tokens) - 1,
        "internal_states": [internal_state(sched, generate_requests)],
        "version": SIM_VERSION,
        "dsv4h_simulator": {
            "profile": p.name,
            "parameters": p.model_dump(mode="json", exclude=_unset_blocks(p)),
            "time_scale": options.time_scale,
            "step_factor": options.step_factor,
            "stream_mode": options.stream_mode,
            "fault": options.fault,
            "fault_every": options.fault_every,
            "fault_first": options.fault_first,
            "die_after_requests": options.die_after_requests,
            "die_after_s": options.die_after_s,
            "label": "simulated",
        },
    }


def models_list(options: SimOptions, created: int) -> dict[str, Any]:
    """``/v1/models`` payload (``created`` is a Unix time in seconds)."""
    path = options.resolved_model_path
    return {
        "object": "list",
        "data": [
            {
                "id": path,
                "object": "model",
                "created": created,
                "owned_by": "sglang",
                "root": path,
                "max_model_len": options.resolved_profile.context_length,
            }
        ],
    }


_METRICS = (
    ("num_running_reqs", "gauge", "The number of running requests."),
    ("num_queue_reqs", "gauge", "The number of requests in the waiting queue."),
    ("token_usage", "gauge", "The token usage."),
    ("prompt_tokens_total", "counter", "Number of prefill tokens processed."),
    ("generation_tokens_total", "counter", "Number of generation tokens processed."),
    ("cached_tokens_total", "counter", "Number of cached prompt tokens."),
)


def metrics_text(options: SimOptions, sched: Scheduler, totals: Mapping[str, float] | None = None) -> str:
    """Prometheus exposition text with SGLang's metric names and a ``model_name`` label; ``totals``
    replaces this process's values (a simulator cluster's sums over its processes)."""
    st = sched.stats
    values = {
        "num_running_reqs": sched.num_running,
        "num_queue_reqs": sched.num_waiting,
        "token_usage": sched.token_usage(),
        "prompt_tokens_total": st.prompt_tokens_total,
        "generation_tokens_total": st.generation_tokens_total,
        "cached_tokens_total": st.cached_tokens_total,
    } | dict(totals or {})
    label = options.resolved_model_path.replace("\\", "\\\\").replace('"', '\\"')
    lines: list[str] = []
    for name, kind, help_text in _METRICS:
        lines += [
            f"# HELP sglang:{name} {help_text}",
            f"# TYPE sglang:{name} {kind}",
            f'sglang:{name}{{model_name="{label}"}} {float(values[name])}',
        ]
    return "\n".join(lines + _spec_metric_lines(sched, label)) + "\n"


_SPEC_COUNTERS = (
    ("num_drafts", "Number of spec decoding drafts.", "steps"),
    ("num_draft_tokens", "Number of draft tokens.", "proposed"),
    ("num_accepted_tokens", "Number of accepted tokens.", "accepted"),
)


def _spec_metric_lines(sched: Scheduler, label: str) -> list[str]:
    """vLLM 0.32.0's speculative counters (``vllm/v1/spec_decode/metrics.py``), this process's lifetime
    counts, labelled as vLLM labels them (``model_name``, ``engine``; ``position`` per draft slot)."""
    totals = sched.stats.spec
    if totals is None:
        return []
    labels = f'engine="0",model_name="{label}"'
    lines: list[str] = []
    for name, help_text, attr in _SPEC_COUNTERS:
        lines += [f"# HELP vllm:spec_decode_{name}_total {help_text}",
                  f"# TYPE vllm:spec_decode_{name}_total counter",
                  f"vllm:spec_decode_{name}_total{{{labels}}} {float(getattr(totals, attr))}"]
    lines += ["# HELP vllm:spec_decode_num_accepted_tokens_per_pos_total Accepted tokens per draft position.",
              "# TYPE vllm:spec_decode_num_accepted_tokens_per_pos_total counter"]
    lines += [f'vllm:spec_decode_num_accepted_tokens_per_pos_total{{{labels},position="{i}"}} {float(n)}'
              for i, n in enumerate(totals.per_pos)]
    return lines
