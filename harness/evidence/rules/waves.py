"""Evidence rules of measured waves (pure; every kind): prefill requests served fresh
(``prefill-cached``), warmups kept out of measured waves and every formal cell warmed
(``warmup-in-measured``), no failed request in a measured wave (``failed-requests``), the server's own
witness of the wave's concurrency (``concurrency-witness``) and clean warmup waves (``warmup-failed``).
They apply to every kind; an archive without waves or requests of the kind they read gives none."""

from __future__ import annotations

import math
from typing import Any

from harness.errors import ArchiveError
from harness.evidence.findings import ArchiveData, Finding
from harness.evidence.findings import make_finding as _f
from harness.evidence.rules._registry import ALL, ROUND_PROTOCOLS, rule
from harness.formats import finite_float as _num
from harness.ids import round_of


def _measured_cells(d: ArchiveData) -> set[str]:
    """Cell ids with at least one measured wave."""
    return {str(w.get("cell_id")) for w in d.waves if w.get("phase") == "measured" and w.get("cell_id") is not None}


@rule("prefill-cached", kinds=ALL)
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


@rule("warmup-in-measured", kinds=ALL)
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


@rule("failed-requests", kinds=ALL)
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


_WITNESS_EDGE_STEPS = 1.0
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
    return lag, _WITNESS_EDGE_STEPS * step


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


@rule("concurrency-witness", kinds=ALL)
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


@rule("warmup-failed", kinds=ALL)
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
