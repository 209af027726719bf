"""Reading a server's Prometheus ``/metrics`` text (pure): the running and queued request gauges
that witness how many requests were resident together (SGLang and vLLM names)."""

from __future__ import annotations

from dataclasses import dataclass

from prometheus_client.parser import text_string_to_metric_families

RUNNING = ("sglang:num_running_reqs", "vllm:num_requests_running")
QUEUED = ("sglang:num_queue_reqs", "vllm:num_requests_waiting")


@dataclass(frozen=True)
class LoadGauges:
    """Requests running and queued on the server (summed over label sets); None when not exported."""

    running: float | None
    queued: float | None


def parse_gauges(text: str) -> LoadGauges:
    """Extract the running/queued gauges from Prometheus exposition text."""
    values: dict[str, float] = {}
    for family in text_string_to_metric_families(text):
        for sample in family.samples:
            if sample.name in RUNNING or sample.name in QUEUED:
                values[sample.name] = values.get(sample.name, 0.0) + float(sample.value)
    running = next((values[n] for n in RUNNING if n in values), None)
    queued = next((values[n] for n in QUEUED if n in values), None)
    return LoadGauges(running, queued)
