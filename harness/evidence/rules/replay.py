"""Evidence rules of trace replays (pure): a replay whose client sent requests later than the tolerance
after their scheduled time (``replay-schedule``) and prefix-cache hits that differ from those the trace
implies (``replay-cache``; harness.measure.replay defines both), and a replay over the server's
capacity (``replay-saturated``, docs/saturation.md). All three apply to kind ``trace-replay`` only; they
read its ``replay.parquet`` rows (``ArchiveData.extra["replay"]``)."""

from __future__ import annotations

from typing import Any

from harness.evidence.findings import ArchiveData, Finding
from harness.evidence.findings import make_finding as _f
from harness.evidence.rules._registry import rule


def _rows(d: ArchiveData) -> list[dict[str, Any]]:
    """The replay's rows (one per replay)."""
    return list(d.extra.get("replay") or [])


@rule("replay-schedule", kinds=("trace-replay",))
def rule_replay_schedule(d: ArchiveData) -> list[Finding]:
    """Replays with a request the client sent later than ``lateness_tolerance_ms`` after its schedule."""
    out = []
    for r in _rows(d):
        if r.get("schedule_kept") is False:
            tol = float(r.get("lateness_tolerance_s") or 0.0)
            out.append(_f(d.archive_id, "replay-schedule", "blocking",
                          f"{r['late_requests']} of {r['n_requests']} requests were sent more than {tol * 1e3:.0f} ms "
                          f"after their trace time (client lateness max {float(r['client_lateness_max_s']) * 1e3:.1f}"
                          f" ms, p99 {float(r['client_lateness_p99_s']) * 1e3:.1f} ms); the replayed arrivals were "
                          "not the trace's", "lower 'speed' or run the client on a less loaded machine; each "
                          "request's lateness is in schedule.jsonl", [str(r["replay_id"])], scope="run"))
    return out


@rule("replay-cache", kinds=("trace-replay",))
def rule_replay_cache(d: ArchiveData) -> list[Finding]:
    """Replays whose server reported prefix-cache hits other than the trace implies (beyond
    ``cached_tolerance_pct``), or reported none."""
    out = []
    for r in _rows(d):
        if r.get("cached_agree") is not False:
            continue
        exp = int(r.get("expected_cached_tokens") or 0)
        if not r.get("cached_reported_requests"):
            out.append(_f(d.archive_id, "replay-cache", "warning",
                          f"the server reported no cached_tokens; the trace implies {exp} cached prompt tokens",
                          "serve with a backend that reports cached_tokens (SGLang meta_info, OpenAI usage "
                          "prompt_tokens_details) to check the replay's prefix hits", [str(r["replay_id"])]))
            continue
        got = int(r.get("reported_cached_tokens") or 0)
        out.append(_f(d.archive_id, "replay-cache", "blocking",
                      f"the server reported {got} cached prompt tokens, the trace implies {exp} (tolerance "
                      f"{float(r['cached_tolerance_pct']):g}%; {r['cached_mismatch_requests']} requests differ): the "
                      "replay did not reproduce the trace's prefix sharing",
                      "a smaller cache than the trace's working set, a prefix still in prefill when the next "
                      "request came (a higher speed) or a cache salt per request all lower the hits; cache.jsonl "
                      "has both counts per request", [str(r["replay_id"])], scope="run"))
    return out


@rule("replay-saturated", kinds=("trace-replay",))
def rule_replay_saturated(d: ArchiveData) -> list[Finding]:
    """Replays during which requests in flight and TTFT both kept rising (harness.measure.saturation):
    the trace at this speed offered more than the server completes."""
    out = []
    for r in _rows(d):
        if r.get("saturated") is True:
            out.append(_f(d.archive_id, "replay-saturated", "warning",
                          f"{r.get('replay_id')}: over-saturated: in flight rose "
                          f"{float(r['inflight_slope_req_per_s']):.2f} +/- "
                          f"{float(r['inflight_slope_se_req_per_s']):.2f} "
                          f"requests/s and TTFT {float(r['ttft_slope_s_per_s']) * 1e3:.0f} +/- "
                          f"{float(r['ttft_slope_se_s_per_s']) * 1e3:.0f} ms per s over the sending period; the server "
                          "did not keep up with the trace at this speed, so latency grew with the queue",
                          "replay at a lower 'speed' (or cap 'max_concurrency') to measure a steady state",
                          [str(r.get("replay_id"))]))
    return out
