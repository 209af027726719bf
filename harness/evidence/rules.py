"""Evidence rules as findings (pure): inspect an archive's content and say what is wrong.

Each rule returns ``Finding``s with a rule id, a severity (``blocking`` findings make the affected
ledger rows ``valid = false``), a message, a remedy and the ids of the rows it is about. Rules read
plain data (``ArchiveData``), so tests build small archives by hand. Findings are deterministic:
sorted by rule, then rows.

Rule ids (GUIDE section 3 and the record notes):
  formal-rounds        formal cell with fewer than its required ok rounds, or a round not ok
  resident-short       round whose resident windows are shorter than the spec minimum or too few steps
  prefill-cached       prefill request served from the prefix cache (cached_tokens > 0) or unverified
  warmup-in-measured   warmup requests inside measured waves, or a measured wave on a cold shape
  identity-unverified  the server's own configuration was not read, or differs from the profile
  speculative-native   a speculative algorithm is active under a native-ar claim
  simulated-context    simulator data not labelled simulated
  abba-drift           an ABBA screen whose drift or spread is not smaller than its effect
  failed-requests      failed requests inside a measured wave
  client-lag           client receive lag large enough that the client may have limited the rate
  oracle               oracle sentinel missing or failed
  service-restarts     a formal matrix measured on more than one service start
  concurrency-witness  the server's /metrics did not show C requests running during a resident window
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any, Literal

Severity = Literal["blocking", "warning", "info"]


@dataclass(frozen=True, order=True)
class Finding:
    """One rule's verdict about some rows of one archive."""

    rule: str
    severity: Severity
    message: str
    remedy: str
    archive_id: str = ""
    rows: tuple[str, ...] = ()

    @property
    def blocking(self) -> bool:
        """True when the affected rows must be marked invalid."""
        return self.severity == "blocking"


@dataclass(frozen=True)
class ArchiveData:
    """What the rules read from an archive, as plain Python data.

    ``cells``/``rounds``/``waves`` are the result-table rows (dicts); ``requests`` per-request
    summary rows (``rid, wave_id, phase, workload, cached_tokens, ok, error, round_index``);
    ``services`` the ``service.json`` entries; ``comparison`` the ABBA ``comparison.json``.
    """

    archive_id: str
    run: dict[str, Any]
    spec: dict[str, Any]
    cells: Sequence[dict[str, Any]] = ()
    rounds: Sequence[dict[str, Any]] = ()
    waves: Sequence[dict[str, Any]] = ()
    requests: Sequence[dict[str, Any]] = ()
    services: Sequence[dict[str, Any]] = ()
    comparison: dict[str, Any] | None = None
    oracles: Sequence[dict[str, Any]] | None = None
    extra: dict[str, Any] = field(default_factory=dict)

    @property
    def formal(self) -> bool:
        """True for a formal matrix archive."""
        return self.run.get("protocol_class") == "formal"


MIN_RESIDENT_STEPS = 16
LAG_P50_FRACTION = 0.10
LAG_P99_FRACTION = 0.50


def _f(aid: str, rule: str, sev: Severity, msg: str, remedy: str, rows: Sequence[str] = ()) -> Finding:
    return Finding(rule, sev, msg, remedy, aid, tuple(sorted(rows)))


def rule_formal_rounds(d: ArchiveData) -> list[Finding]:
    """Formal cells need all their rounds ok; a round that is not ok is kept but flagged."""
    out: list[Finding] = []
    if not d.formal:
        return out
    for c in d.cells:
        statuses = list(c.get("round_status") or [])
        ok = statuses.count("ok")
        need = int(c.get("rounds_required", 3))
        if ok < need:
            out.append(_f(d.archive_id, "formal-rounds", "blocking",
                          f"cell {c['cell_id']} has {ok} ok rounds of {need} required",
                          "resume the campaign (dsv4h campaign run SPEC --resume ARCHIVE) to complete it",
                          [c["cell_id"]]))
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
        cold = [c["cell_id"] for c in d.cells if not any(
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
                          "the server must answer /server_info (SGLang) or /v1/models (vLLM)", [name]))
            continue
        if info.get("_source") == "/v1/models":
            out.append(_f(d.archive_id, "identity-unverified", "warning",
                          f"{name}: only /v1/models was available; TP size, pool and graphs are unverified",
                          "record the launch arguments and check them against the profile", [name]))
        expect = ((s.get("profile") or {}).get("expect")) or {}
        diffs = [k for k, v in expect.items() if k in info and info[k] != v]
        if diffs:
            out.append(_f(d.archive_id, "identity-unverified", "blocking",
                          f"{name}: server reports different {', '.join(sorted(diffs))} than the profile expects",
                          "fix the launch flags or the profile; logged flags prove nothing", [name]))
    return out


def rule_speculative_native(d: ArchiveData) -> list[Finding]:
    """A native-ar claim is refused when the server reports a speculative algorithm."""
    if d.run.get("claim_class") != "native-ar":
        return []
    bad = [f"service#{s.get('start_index', i + 1)}" for i, s in enumerate(d.services)
           if (s.get("server_info") or {}).get("speculative_algorithm") not in (None, "", "null", "NONE", "none")]
    if not bad:
        return []
    return [_f(d.archive_id, "speculative-native", "blocking",
               "a speculative algorithm is active under a native-ar claim (rule 1: native, full-target "
               "speculative and approximate-target results are different claims)",
               "relaunch without speculative decoding or declare the correct claim class", bad)]


def rule_simulated_context(d: ArchiveData) -> list[Finding]:
    """Simulator data must say so: backend sim, or a server that identifies itself as the simulator."""
    labels = set(d.run.get("labels") or [])
    sim_servers = [s for s in d.services if "dsv4h_simulator" in (s.get("server_info") or {})
                   or str((s.get("server_info") or {}).get("version", "")).startswith("sim-")]
    out: list[Finding] = []
    if sim_servers and d.run.get("backend") != "sim" and "simulated" not in labels:
        out.append(_f(d.archive_id, "simulated-context", "blocking",
                      f"the server is the dsv4h simulator but the run is labelled backend "
                      f"'{d.run.get('backend')}' without 'simulated'",
                      "use backend: sim (or label the run simulated); never present simulator numbers as measured",
                      [str(s.get("url")) for s in sim_servers]))
    if d.run.get("backend") == "sim" and "simulated" not in labels:
        out.append(_f(d.archive_id, "simulated-context", "blocking", "simulator run without the 'simulated' label",
                      "re-run with this dsv4h version, which labels simulator runs", []))
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
    """Failed requests inside measured waves invalidate those waves."""
    bad = [r for r in d.requests if r.get("phase") == "measured" and not r.get("ok")]
    if not bad:
        return []
    waves = sorted({str(r["wave_id"]) for r in bad})
    first = next((r.get("error") for r in bad if r.get("error")), "")
    return [_f(d.archive_id, "failed-requests", "blocking",
               f"{len(bad)} failed request(s) in {len(waves)} measured wave(s) (first: {first})",
               "find the cause in the service log; the rounds are kept and marked failed", waves)]


def rule_client_lag(d: ArchiveData) -> list[Finding]:
    """Receive lag (simulator emit stamps only): a median above 10% of the decode step, or a p99
    above half a step, means the client was falling behind and may have limited the rate."""
    bad = []
    for w in d.waves:
        p50, p99 = w.get("lag_p50_s"), w.get("lag_p99_s")
        if w.get("phase") != "measured" or p50 is None or p99 is None or math.isnan(float(p99)):
            continue
        conc = max(int(w.get("concurrency") or 1), 1)
        rate = float(w.get("resident_rate") or math.nan)
        if math.isnan(rate) or rate <= 0:
            continue
        step = conc / rate
        if float(p50) > LAG_P50_FRACTION * step or float(p99) > LAG_P99_FRACTION * step:
            bad.append(str(w["wave_id"]))
    if not bad:
        return []
    return [_f(d.archive_id, "client-lag", "warning",
               f"{len(bad)} wave(s) with client receive lag above {LAG_P50_FRACTION:.0%} (median) or "
               f"{LAG_P99_FRACTION:.0%} (p99) of a decode step: the client, not the server, may have limited the rate",
               "run the client on an idle core or with fewer concurrent streams per process", bad)]


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
                      [str(r.get("service")) for r in failed]))
    if declared and not results:
        out.append(_f(d.archive_id, "oracle", "blocking", "oracles were declared but no oracle result is archived",
                      "re-run; sentinels run before and after measurement on every service", []))
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


def rule_concurrency_witness(d: ArchiveData) -> list[Finding]:
    """The server itself must show C requests running while a measured decode window is open."""
    rows = [w for w in d.extra.get("server_metrics", []) if w.get("phase") == "measured"]
    decode_waves = {w["wave_id"] for w in d.waves if w.get("workload") == "decode" and w.get("phase") == "measured"}
    rows = [w for w in rows if not decode_waves or w.get("wave_id") in decode_waves]
    seen = [w for w in rows if (w.get("samples_in_window") or 0) > 0]
    short = [w for w in seen if float(w.get("running_min_in_window") or 0) < int(w.get("concurrency") or 0)]
    out: list[Finding] = []
    if short:
        out.append(_f(d.archive_id, "concurrency-witness", "warning",
                      f"{len(short)} measured wave(s) where the server reported fewer running requests than the "
                      "wave's concurrency inside its resident window (e.g. "
                      f"{short[0]['wave_id']}: min {short[0].get('running_min_in_window')} of "
                      f"{short[0].get('concurrency')})",
                      "check admission limits (max running requests, KV pool) for this concurrency",
                      [str(w["wave_id"]) for w in short]))
    if decode_waves and not seen:
        out.append(_f(d.archive_id, "concurrency-witness", "info",
                      "the server's /metrics did not witness concurrency during resident windows (not exported "
                      "or windows shorter than the sampling interval)",
                      "start SGLang with --enable-metrics so residency is witnessed by the server", []))
    return out


RULES: tuple[Callable[[ArchiveData], list[Finding]], ...] = (
    rule_formal_rounds, rule_resident_short, rule_prefill_cached, rule_warmup_in_measured, rule_identity,
    rule_speculative_native, rule_simulated_context, rule_abba_drift, rule_failed_requests, rule_client_lag,
    rule_oracle, rule_service_restarts, rule_concurrency_witness,
)


def check(d: ArchiveData) -> list[Finding]:
    """Every rule over one archive's data, sorted (rule, severity, rows)."""
    out: list[Finding] = []
    for rule in RULES:
        out.extend(rule(d))
    return sorted(out, key=lambda f: (f.rule, f.severity, f.rows, f.message))
