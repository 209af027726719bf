"""Introspection payloads (pure): ``/server_info``, ``/v1/models`` and Prometheus ``/metrics``."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from harness.sim.options import SimOptions
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
    }


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
        "speculative_algorithm": None,
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
            "parameters": p.model_dump(mode="json"),
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
    return "\n".join(lines) + "\n"
