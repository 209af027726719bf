"""Evidence rules as findings (pure): inspect an archive's content and say what is wrong.

Each rule returns ``Finding``s with a rule id, a severity (``blocking`` findings make the affected
ledger rows ``valid = false``), a message, a remedy and the ids of the rows it is about. Rules read
plain data (``ArchiveData``), so tests build small archives by hand. Findings are deterministic:
sorted by rule, then rows.

Rule ids (docs/evidence-rules.md#rule-ids and the record notes):
  formal-rounds        formal cell with fewer than its required ok rounds, or a round not ok
  resident-short       round whose resident windows are shorter than the spec minimum or too few steps
  prefill-cached       prefill request served from the prefix cache (cached_tokens > 0) or unverified
  warmup-in-measured   warmup requests inside measured waves, or a measured wave on a cold shape
  identity-unverified  the server's own configuration was not read, or differs from the profile
  speculative-native   a speculative algorithm is active under a native-ar claim
  claim-vs-server      a speculative claim on a server that does not speculate, or a full-target claim
                       on a server that relaxes verification (rules_claims.py)
  simulated-context    simulator data not labelled simulated
  abba-drift           an ABBA screen whose drift or spread is not smaller than its effect
  failed-requests      failed requests inside a measured wave
  client-lag           client receive lag large enough that the client may have limited the rate
  oracle               oracle sentinel missing or failed
  service-restarts     a formal matrix measured on more than one service start
  concurrency-witness  the server's /metrics did not show C requests running during a resident window
                       (away from its edges: receive lag and one decode step are allowed at each edge)
  warmup-failed        failed requests in warmup waves (blocking when no warmup wave of a cell was clean)
  client-bound         the harness's own event loop was late or saturated during a measured wave (any server)
  client-stalled       the client stalled (loop delay, a loop that ran nothing, or a silent load worker)
                       for longer than the unit's own step scale allows (a sweep/SLA round or a replay:
                       1 s): the unit is invalid
  sim-lateness         the simulator fell behind its model (late steps) during a measured unit, judged per
                       unit for every kind from its wave_checks.jsonl row: a formal/ABBA/matched wave
                       (window: resident or prefill), a sweep or SLA-search round (window: its duration_s;
                       named with its round and cell), a trace replay (window: its duration_s; scope run).
                       From 1% of its window lost the unit and what is built from it are invalid; the
                       run-level warning only for archives without per-unit counters
  token-counts         output tokens counted approximately (no exact per-chunk counts from the server)
  token-count-mismatch a per-chunk count that disagrees with the server's final usage
  sd-reconcile         a matched AR/SD run whose C*a/T_SD disagrees with its resident rate (rules_speculative.py)
  sd-outputs           a full-target matched run whose greedy outputs differ from the AR legs'
  acceptance-sources   a wave whose speculative counts differ between the requests and the /metrics deltas
  mapped-libraries     live workers that, before the service stopped, no longer mapped what the profile requires
  cold-in-measured-wave a measured wave holding a cold or restarted request (first of its shape on its
                       service start; rules_cold.py, docs/coldness.md)
  replay-schedule      a trace replay with a request sent later than its tolerance after its trace time
                       (rules_replay.py, docs/replay.md)
  replay-cache         a trace replay whose reported cached tokens differ from those the trace implies
  sla-not-converged    an SLA search ended with a bracket wider than its precision (rules_sla.py)
  sla-probe-invalid    an SLA-search probe whose rounds were not ok, whose schedule was not kept, or with a
                       blocking sim-lateness or client-stalled round
  sla-not-monotone     an SLA search in which a rate passed above a failing one

Findings about a service or the whole run (identity, claim class, simulator labelling, oracles)
have ``scope = "run"``: when blocking they invalidate every ledger row of the archive. Row findings
name wave, round or cell ids; rules about cells consider only cells that ran (have waves).
"""

from __future__ import annotations

import math
from collections.abc import Callable
from typing import Any

from harness.errors import ArchiveError
from harness.evidence.findings import ArchiveData, Finding
from harness.evidence.findings import make_finding as _f
from harness.evidence.rules_claims import rule_claim_vs_server, rule_mapped_libraries, rule_speculative_native
from harness.evidence.rules_client import (
    ROUND_PROTOCOLS,
    rule_client_bound,
    rule_client_lag,
    rule_client_stalled,
    rule_sim_lateness,
    serves_simulator,
)
from harness.evidence.rules_cold import rule_cold_in_measured
from harness.evidence.rules_provenance import rule_external_claim, rule_token_counts
from harness.evidence.rules_replay import rule_replay_cache, rule_replay_saturated, rule_replay_schedule
from harness.evidence.rules_sla import rule_sla_not_converged, rule_sla_not_monotone, rule_sla_probe_invalid
from harness.evidence.rules_speculative import rule_acceptance_sources, rule_sd_outputs, rule_sd_reconcile
from harness.evidence.rules_sweep import rule_sweep_rounds, rule_sweep_saturated, rule_sweep_schedule
from harness.formats import finite_float as _num
from harness.ids import round_of

MIN_RESIDENT_STEPS = 16


def _cells_that_ran(d: ArchiveData) -> set[str]:
    """Cell ids with at least one wave (warmup or measured) in the archive."""
    return {str(w.get("cell_id")) for w in d.waves if w.get("cell_id") is not None}


def _measured_cells(d: ArchiveData) -> set[str]:
    """Cell ids with at least one measured wave."""
    return {str(w.get("cell_id")) for w in d.waves if w.get("phase") == "measured" and w.get("cell_id") is not None}



def rule_formal_rounds(d: ArchiveData) -> list[Finding]:
    """Formal cells need all their rounds ok; a round that is not ok is kept but flagged."""
    out: list[Finding] = []
    if not d.formal:
        return out
    ran = _cells_that_ran(d)
    not_run: list[str] = []
    for c in d.cells:
        statuses = list(c.get("round_status") or [])
        ok = statuses.count("ok")
        need = int(c.get("rounds_required", 3))
        if ok >= need:
            continue
        if c["cell_id"] not in ran:
            not_run.append(str(c["cell_id"]))
            continue
        out.append(_f(d.archive_id, "formal-rounds", "blocking",
                      f"cell {c['cell_id']} has {ok} ok rounds of {need} required",
                      "resume the campaign (dsv4h campaign run SPEC --resume ARCHIVE) to complete it",
                      [c["cell_id"]]))
    if not_run:
        out.append(_f(d.archive_id, "formal-rounds", "blocking",
                      f"{len(not_run)} cell(s) not run: the run stopped before them",
                      "resume the campaign (dsv4h campaign run SPEC --resume ARCHIVE) to run them", not_run))
    bad = [r for r in d.rounds if r.get("status") != "ok"]
    if bad:
        out.append(_f(d.archive_id, "formal-rounds", "warning",
                      f"{len(bad)} round(s) not ok (kept, excluded from medians): "
                      + ", ".join(f"{r['round_id']}={r.get('status')}" for r in bad[:6]),
                      "look at the failed attempts' errors; never drop them from the archive",
                      [r["round_id"] for r in bad]))
    return out


def rule_resident_short(d: ArchiveData) -> list[Finding]:
    """Decode rounds must reach the spec's resident minimum; waves must span enough steps."""
    out: list[Finding] = []
    if not d.formal:
        return out
    min_s = float((d.spec.get("decode") or {}).get("min_resident_seconds") or 0.0)
    short = [r for r in d.rounds if r.get("workload") == "decode" and r.get("status") in ("ok", "short")
             and float(r.get("seconds") or 0.0) < min_s]
    if short:
        out.append(_f(d.archive_id, "resident-short", "blocking",
                      f"{len(short)} decode round(s) below the {min_s:g} s resident minimum: "
                      + ", ".join(f"{r['round_id']} {float(r.get('seconds') or 0):.2f} s" for r in short[:6]),
                      "raise max_waves_per_round or max_new_tokens so rounds reach the minimum",
                      [r["round_id"] for r in short]))
    few = []
    for w in d.waves:
        if w.get("phase") != "measured" or w.get("workload") != "decode":
            continue
        conc = max(int(w.get("concurrency") or 1), 1)
        steps = float(w.get("resident_tokens") or 0) / conc
        if float(w.get("resident_seconds") or 0) > 0 and steps < MIN_RESIDENT_STEPS:
            few.append(w["wave_id"])
    if few:
        out.append(_f(d.archive_id, "resident-short", "warning",
                      f"{len(few)} measured wave(s) span fewer than {MIN_RESIDENT_STEPS} decode steps in their "
                      "resident window", "use longer answers (max_new_tokens) so resident windows cover "
                      "enough steps", few))
    return out


def rule_prefill_cached(d: ArchiveData) -> list[Finding]:
    """Every prefill request must report cached_tokens == 0 from the server itself."""
    hit = [r for r in d.requests if r.get("workload") == "prefill" and r.get("phase") == "measured"
           and r.get("ok") and (r.get("cached_tokens") or 0) > 0]
    unknown = [r for r in d.requests if r.get("workload") == "prefill" and r.get("phase") == "measured"
               and r.get("ok") and r.get("cached_tokens") is None]
    out: list[Finding] = []
    if hit:
        waves = sorted({r["wave_id"] for r in hit})
        out.append(_f(d.archive_id, "prefill-cached", "blocking",
                      f"{len(hit)} prefill request(s) were served partly from the prefix cache "
                      f"(cached_tokens > 0) in {len(waves)} wave(s)",
                      "use a fresh cache salt per request or flush the cache between waves", waves))
    if unknown:
        waves = sorted({r["wave_id"] for r in unknown})
        out.append(_f(d.archive_id, "prefill-cached", "warning",
                      f"{len(unknown)} prefill request(s) have no cached_tokens report; freshness unverified",
                      "enable the server's cached-token report (vLLM: --enable-prompt-tokens-details)", waves))
    return out


def rule_warmup_in_measured(d: ArchiveData) -> list[Finding]:
    """Warmup requests never inside measured waves; every measured cell is preceded by a warmup."""
    out: list[Finding] = []
    mixed = sorted({r["wave_id"] for r in d.requests
                    if r.get("phase") == "warmup" and ".warmup" not in str(r.get("wave_id", ""))})
    if mixed:
        out.append(_f(d.archive_id, "warmup-in-measured", "blocking",
                      f"warmup requests inside {len(mixed)} measured wave(s)",
                      "keep warmups in their own waves", mixed))
    if d.formal:
        measured = _measured_cells(d)
        cold = [c["cell_id"] for c in d.cells if c["cell_id"] in measured and not any(
            w.get("phase") == "warmup" and w.get("cell_id") == c["cell_id"] for w in d.waves)]
        if cold:
            out.append(_f(d.archive_id, "warmup-in-measured", "warning",
                          f"{len(cold)} cell(s) measured without a warmup wave of their shape (cold shape "
                          "in the first measured wave)", "set warmup_waves >= 1", cold))
    return out


def rule_identity(d: ArchiveData) -> list[Finding]:
    """The served configuration must come from the server itself and match the profile."""
    out: list[Finding] = []
    for i, s in enumerate(d.services):
        info = s.get("server_info") or {}
        name = f"service#{s.get('start_index', i + 1)}"
        if not info:
            out.append(_f(d.archive_id, "identity-unverified", "blocking",
                          f"{name} ({s.get('url')}): no server configuration was read",
                          "the server must answer /server_info (SGLang) or /v1/models (vLLM)", [name], "run"))
            continue
        if info.get("_source") == "/v1/models":
            out.append(_f(d.archive_id, "identity-unverified", "warning",
                          f"{name}: only /v1/models was available; TP size, pool and graphs are unverified",
                          "record the launch arguments and check them against the profile", [name], "run"))
        expect = ((s.get("profile") or {}).get("expect")) or {}
        diffs = [k for k, v in expect.items() if k in info and info[k] != v]
        if diffs:
            out.append(_f(d.archive_id, "identity-unverified", "blocking",
                          f"{name}: server reports different {', '.join(sorted(diffs))} than the profile expects",
                          "fix the launch flags or the profile; logged flags prove nothing", [name], "run"))
    return out


def rule_simulated_context(d: ArchiveData) -> list[Finding]:
    """Simulator data must say so: backend sim, or a server that identifies itself as the simulator."""
    labels = set(d.run.get("labels") or [])
    sim_servers = [s for s in d.services if serves_simulator(s)]
    out: list[Finding] = []
    if sim_servers and d.run.get("backend") != "sim" and "simulated" not in labels:
        out.append(_f(d.archive_id, "simulated-context", "blocking",
                      f"the server is the dsv4h simulator but the run is labelled backend "
                      f"'{d.run.get('backend')}' without 'simulated'",
                      "use backend: sim (or label the run simulated); never present simulator numbers as measured",
                      [str(s.get("url")) for s in sim_servers], "run"))
    if d.run.get("backend") == "sim" and "simulated" not in labels:
        out.append(_f(d.archive_id, "simulated-context", "blocking", "simulator run without the 'simulated' label",
                      "re-run with this dsv4h version, which labels simulator runs", [], "run"))
    return out


def rule_abba_drift(d: ArchiveData) -> list[Finding]:
    """An ABBA screen whose drift or spread is at least its effect is inconclusive."""
    res = (d.comparison or {}).get("result")
    if not res:
        return []
    ratio, drift, spread = (float(res.get(k, math.nan)) for k in ("ratio_pct", "drift_pct", "spread_pct"))
    if any(math.isnan(x) for x in (ratio, drift, spread)):
        return [_f(d.archive_id, "abba-drift", "blocking", "the screen is missing legs; no comparison exists",
                   "run all four legs A1 -> B1 -> B2 -> A2", ["comparison"])]
    if abs(drift) >= abs(ratio) or abs(spread) >= abs(ratio):
        return [_f(d.archive_id, "abba-drift", "warning",
                   f"drift {drift:+.3f}% / spread {spread:+.3f}% not smaller than the effect {ratio:+.3f}%: "
                   "inconclusive", "repeat the screen or use more waves per leg; do not report a gain",
                   ["comparison"])]
    return []


def rule_failed_requests(d: ArchiveData) -> list[Finding]:
    """Failed requests inside measured waves invalidate those waves (named; the rounds and cells built
    from them follow through ``evidence.io.concerned_rows`` where a wave row exists). A rate sweep's or
    SLA search's round has no wave row, so its round is named beside its wave."""
    bad = [r for r in d.requests if r.get("phase") == "measured" and not r.get("ok")]
    if not bad:
        return []
    waves = sorted({str(r["wave_id"]) for r in bad})
    first = next((r.get("error") for r in bad if r.get("error")), "")
    rounds = [_round_of_wave(w) for w in waves] if d.run.get("protocol_class") in ROUND_PROTOCOLS else []
    return [_f(d.archive_id, "failed-requests", "blocking",
               f"{len(bad)} failed request(s) in {len(waves)} measured wave(s) (first: {first})",
               "find the cause in the service log; the rounds are kept and marked failed",
               [*waves, *(r for r in rounds if r)])]


def _round_of_wave(wave: str) -> str | None:
    """The round id of a wave id, None when it is not one."""
    try:
        return round_of(wave)
    except ArchiveError:
        return None


def rule_oracle(d: ArchiveData) -> list[Finding]:
    """Oracle sentinels declared by the spec must have run and passed on every service."""
    declared = list(d.spec.get("oracles") or [])
    results = list(d.oracles or [])
    out: list[Finding] = []
    failed = [r for r in results if not r.get("passed")]
    if failed:
        out.append(_f(d.archive_id, "oracle", "blocking",
                      f"{len(failed)} oracle check(s) failed: " + ", ".join(
                          f"{r.get('oracle')} on {r.get('service')} (first divergence {r.get('first_divergence')})"
                          for r in failed[:4]),
                      "find the numerical change before publishing any rate from this service",
                      [str(r.get("service")) for r in failed], "run"))
    if declared and not results:
        out.append(_f(d.archive_id, "oracle", "blocking", "oracles were declared but no oracle result is archived",
                      "re-run; sentinels run before and after measurement on every service", [], "run"))
    if not declared and not results:
        out.append(_f(d.archive_id, "oracle", "info", "no oracle sentinel ran for this archive",
                      "declare oracles (e.g. oracles/france.yaml) in the spec", []))
    return out


def rule_service_restarts(d: ArchiveData) -> list[Finding]:
    """A formal matrix is one fresh service; a resumed matrix spans several and says so."""
    if not d.formal:
        return []
    n = int(d.run.get("service_starts") or len(d.services) or 1)
    if n <= 1:
        return []
    return [_f(d.archive_id, "service-restarts", "warning",
               f"the matrix was measured on {n} service starts (resumed); cells are not all from one process",
               "for a publishable formal matrix run every cell on one fresh service", [])]


WITNESS_EDGE_STEPS = 1.0
"""Decode steps allowed at each edge of a resident window before a /metrics sample counts (a server
may update its running count one step before or after the client sees the step's tokens)."""


def _witness_allowance_s(wave: dict[str, Any] | None, check: dict[str, Any] | None) -> tuple[float, float]:
    """(receive lag, one decode step) in seconds allowed at each window edge of a wave: the lag is
    the larger of the measured receive lag p99 (simulator emit stamps) and the client's event-loop
    delay p99 (any server); the step is the wave's observed step (concurrency / resident rate)."""
    step = lag = 0.0
    if wave is not None:
        rate = _num(wave.get("resident_output_tok_s"))
        if rate > 0:
            step = max(int(wave.get("concurrency") or 1), 1) / rate
        emit_lag = _num(wave.get("lag_p99_s"))
        lag = emit_lag if emit_lag > 0 else lag
    if check is not None:
        loop_lag = _num(check.get("loop_lag_p99_s"))
        lag = max(lag, loop_lag) if loop_lag > 0 else lag
    return lag, WITNESS_EDGE_STEPS * step


def _witness_view(row: dict[str, Any], margin_s: float) -> tuple[int, float | None, float]:
    """(samples inside the window shrunk by ``margin_s`` at each edge, fewest running among them,
    most queued among the samples that showed fewer than the concurrency)."""
    samples = row.get("samples")
    if samples is None:  # summary rows without their samples: no margin can be applied
        low = row.get("running_min_in_window")
        return int(row.get("samples_in_window") or 0), (float(low) if low is not None else None), math.nan
    margin = int(margin_s * 1e9)
    lo, hi = int(row["window_start_ns"]) + margin, int(row["window_end_ns"]) - margin
    inside = [s for s in samples if s[2] is not None and int(s[0]) >= lo and int(s[1]) <= hi]
    if not inside:
        return 0, None, math.nan
    conc = int(row.get("concurrency") or 0)
    queued = [q for s in inside if float(s[2]) < conc and len(s) > 3 and not math.isnan(q := _num(s[3]))]
    return len(inside), min(float(s[2]) for s in inside), max(queued, default=math.nan)


def rule_concurrency_witness(d: ArchiveData) -> list[Finding]:
    """The server itself must show C requests running while a measured decode window is open.

    Samples count only when taken wholly inside the window shrunk at each edge by the wave's
    receive lag and one decode step; waves with failed requests are left to ``failed-requests``.
    A shortfall with requests queued means the server held some back (admission limits,
    retraction); one with nothing queued means requests had ended on the server before the
    client received their end (the client read late)."""
    waves = {str(w["wave_id"]): w for w in d.waves}
    checks = {str(c["wave_id"]): c for c in d.extra.get("wave_checks", [])}
    decode_waves = {k for k, w in waves.items() if w.get("workload") == "decode" and w.get("phase") == "measured"
                    and not int(w.get("n_failed") or 0)}  # a failed request left the server: failed-requests
    rows = [w for w in d.extra.get("server_metrics", []) if w.get("phase") == "measured"
            and (not waves or w.get("wave_id") in decode_waves)]
    seen = 0
    held: list[tuple[str, float, int, float]] = []
    late: list[tuple[str, float, int, float, float]] = []
    for row in rows:
        wid = str(row["wave_id"])
        lag, step = _witness_allowance_s(waves.get(wid), checks.get(wid))
        n, low, queued = _witness_view(row, lag + step)
        seen += n > 0
        conc = int(row.get("concurrency") or 0)
        if low is None or low >= conc:
            continue
        if queued > 0:
            held.append((wid, low, conc, queued))
        else:
            late.append((wid, low, conc, lag, step))
    out: list[Finding] = []
    if held:
        wid, low, conc, queued = held[0]
        out.append(_f(d.archive_id, "concurrency-witness", "warning",
                      f"{len(held)} measured wave(s) where the server held requests back (queued or retracted) "
                      f"while the wave was resident (e.g. {wid}: min {low:g} of {conc} running, {queued:g} queued)",
                      "the server did not keep the whole wave running: check its admission limits for this "
                      "concurrency (max running requests, KV pool size, retraction)", [h[0] for h in held]))
    if late:
        wid, low, conc, lag, step = late[0]
        out.append(_f(d.archive_id, "concurrency-witness", "warning",
                      f"{len(late)} measured wave(s) where the server reported fewer running requests than the "
                      f"wave's concurrency with none queued, more than the receive lag ({lag * 1e3:.1f} ms) plus "
                      f"one decode step ({step * 1e3:.1f} ms) inside the window edges (e.g. {wid}: min {low:g} of "
                      f"{conc}): requests had ended on the server before the client received their end",
                      "the client read the streams late: see the client-bound and client-lag findings; run the "
                      "client on an idle core or with fewer streams per process", [x[0] for x in late]))
    if decode_waves and not seen:
        out.append(_f(d.archive_id, "concurrency-witness", "info",
                      "the server's /metrics did not witness concurrency during resident windows (not exported "
                      "or windows shorter than the sampling interval plus their edge allowance)",
                      "start SGLang with --enable-metrics so residency is witnessed by the server", []))
    return out


def rule_warmup_failed(d: ArchiveData) -> list[Finding]:
    """Failed warmup requests are findings; a cell none of whose warmup waves was clean is blocked
    (with every wave and round it measured: its shape was never warmed on a healthy server)."""
    warmups: dict[str, list[dict[str, Any]]] = {}
    for w in d.waves:
        if w.get("phase") == "warmup":
            warmups.setdefault(str(w.get("cell_id")), []).append(w)
    partial: list[str] = []
    out: list[Finding] = []
    for cell, ws in sorted(warmups.items()):
        bad = [w for w in ws if int(w.get("n_failed") or 0) > 0]
        if not bad:
            continue
        if len(bad) < len(ws):
            partial.extend(str(w["wave_id"]) for w in bad)
            continue
        n_failed = sum(int(w.get("n_failed") or 0) for w in ws)
        n_req = sum(int(w.get("n_requests") or 0) for w in ws)
        mine = [str(w["wave_id"]) for w in d.waves if str(w.get("cell_id")) == cell]
        rounds = [str(r["round_id"]) for r in d.rounds if str(r.get("cell_id")) == cell]
        measured = any(w.get("phase") == "measured" for w in d.waves if str(w.get("cell_id")) == cell)
        out.append(_f(d.archive_id, "warmup-failed", "blocking",
                      f"{cell}: every warmup wave had failed requests ({n_failed} of {n_req} warmup requests "
                      f"failed)" + ("; it was measured anyway" if measured else "; measurement did not start"),
                      "find the cause in the service log; a cell is measured only after a clean warmup wave",
                      [cell, *mine, *rounds]))
    if partial:
        out.append(_f(d.archive_id, "warmup-failed", "warning",
                      f"{len(partial)} warmup wave(s) with failed requests (a later warmup wave of the same cell "
                      "was clean, so measurement went ahead)",
                      "find the cause in the service log before trusting the service", partial))
    return out


# --- rate sweeps (harness.run.sweep) and imported peer results (harness.store.peers) ---


RULES: tuple[Callable[[ArchiveData], list[Finding]], ...] = (
    rule_formal_rounds, rule_resident_short, rule_prefill_cached, rule_warmup_in_measured, rule_identity,
    rule_speculative_native, rule_simulated_context, rule_abba_drift, rule_failed_requests, rule_client_lag,
    rule_oracle, rule_service_restarts, rule_concurrency_witness, rule_warmup_failed, rule_client_bound,
    rule_client_stalled, rule_sim_lateness, rule_sweep_schedule, rule_sweep_rounds, rule_external_claim,
    rule_token_counts, rule_claim_vs_server, rule_sd_reconcile, rule_sd_outputs, rule_acceptance_sources,
    rule_mapped_libraries, rule_cold_in_measured, rule_sweep_saturated, rule_replay_schedule, rule_replay_cache,
    rule_replay_saturated,
    rule_sla_not_converged, rule_sla_probe_invalid, rule_sla_not_monotone,
)


def check(d: ArchiveData) -> list[Finding]:
    """Every rule over one archive's data, sorted (rule, severity, rows)."""
    out: list[Finding] = []
    for rule in RULES:
        out.extend(rule(d))
    return sorted(out, key=lambda f: (f.rule, f.severity, f.rows, f.message))
