"""Evidence rules of open-loop rate sweeps (pure): a round whose client could not keep the planned arrival
schedule (``sweep-schedule``), rate cells with missing or failed rounds (``sweep-rounds``) and rates at
which the server was over-saturated (``sweep-saturated``, docs/saturation.md). All three apply to kind
``rate-sweep`` only."""

from __future__ import annotations

from harness.evidence.findings import ArchiveData, Finding
from harness.evidence.findings import make_finding as _f
from harness.evidence.rules._registry import rule


@rule("sweep-schedule", kinds=("rate-sweep",))
def rule_sweep_schedule(d: ArchiveData) -> list[Finding]:
    """Rounds whose client could not keep the planned arrival schedule."""
    tol = float(d.spec.get("schedule_tolerance_ms", 50.0)) / 1000
    late = [r for r in d.rounds if r.get("client_schedule_kept") is False]
    return [_f(d.archive_id, "sweep-schedule", "blocking",
               f"{r['round_id']}: the client sent requests up to {float(r['client_lag_p99_s']) * 1e3:.1f} ms (p99) "
               f"after their planned time (tolerance {tol * 1e3:.0f} ms); the offered rate was not the planned one",
               "lower the rate or run the client on a less loaded machine; the achieved schedule is in "
               "schedule.jsonl", [str(r["round_id"]), str(r["cell_id"])]) for r in late]


@rule("sweep-rounds", kinds=("rate-sweep",))
def rule_sweep_rounds(d: ArchiveData) -> list[Finding]:
    """Rate cells with missing or failed rounds."""
    out = []
    for c in d.cells:
        ok, planned = int(c.get("rounds_ok", 0)), int(c.get("rounds_planned", 3))
        if ok < planned:
            out.append(_f(d.archive_id, "sweep-rounds", "blocking",
                          f"{c['cell_id']}: {ok} of {planned} rounds ok", "find the failed requests in the "
                          "archive and run the sweep again", [str(c["cell_id"])]))
    return out


@rule("sweep-saturated", kinds=("rate-sweep",))
def rule_sweep_saturated(d: ArchiveData) -> list[Finding]:
    """Rates with an over-saturated round: requests in flight and TTFT both kept rising over the
    sending period (harness.measure.saturation), so the rate's throughput and latency are those of a
    growing queue, not of a steady state at that offered rate."""
    out = []
    for c in d.cells:
        hit = [r for r in d.rounds if r.get("cell_id") == c.get("cell_id") and r.get("saturated") is True]
        if not hit:
            continue
        worst = max(hit, key=lambda r: float(r.get("ttft_slope_s_per_s") or 0.0))
        out.append(_f(d.archive_id, "sweep-saturated", "warning",
                      f"{c['cell_id']}: over-saturated in {len(hit)} of {c.get('rounds_planned', '?')} rounds at "
                      f"{float(c['arrival_rate_req_s']):g} req/s: in flight rose "
                      f"{float(worst['inflight_slope_req_per_s']):.2f} +/- "
                      f"{float(worst['inflight_slope_se_req_per_s']):.2f} "
                      f"requests/s and TTFT {float(worst['ttft_slope_s_per_s']) * 1e3:.0f} +/- "
                      f"{float(worst['ttft_slope_se_s_per_s']) * 1e3:.0f} ms per s ({worst['round_id']}); the server "
                      "did not keep up with the offered rate, so this rate's figures are not a steady state",
                      "quote the highest rate below it that is not saturated; 'stop_at_saturation: true' ends a "
                      "sweep at the first such rate", [str(c["cell_id"]), *(str(r["round_id"]) for r in hit)]))
    return out
