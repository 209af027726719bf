"""Evidence rules about the instruments (pure): the measuring client (receive lag, a late, saturated or
stalled event loop, a silent load worker) and the simulator (late steps). A number is only as good as
the client that timed it and, on the simulator, the model that produced it. Rule ids and severities are
listed in :mod:`harness.evidence.rules`, which runs these with the others.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from typing import Any

from harness.evidence.findings import ArchiveData, Finding, Severity
from harness.evidence.findings import make_finding as _f
from harness.formats import finite_float as _num
from harness.service.origin import server_is_simulator

LAG_P50_FRACTION = 0.10
LAG_P99_FRACTION = 0.50


def serves_simulator(service: Mapping[str, Any]) -> bool:
    """Whether a ``service.json`` entry's server identified itself as the dsv4h simulator
    (``harness.service.origin.server_is_simulator`` of its ``server_info``)."""
    return server_is_simulator(service.get("server_info"))


def rule_client_lag(d: ArchiveData) -> list[Finding]:
    """Receive lag (simulator emit stamps only): a median above 10% of the decode step, or a p99
    above half a step, means the client was falling behind and may have limited the rate."""
    bad = []
    for w in d.waves:
        p50, p99 = w.get("lag_p50_s"), w.get("lag_p99_s")
        if w.get("phase") != "measured" or p50 is None or p99 is None or math.isnan(float(p99)):
            continue
        conc = max(int(w.get("concurrency") or 1), 1)
        rate = float(w.get("resident_output_tok_s") or math.nan)
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


CLIENT_LOOP_PREFILL_FRACTION = 0.02
"""client-bound: event-loop delay p99 above this fraction of the prefill window (prefill waves)."""
CLIENT_CPU_SHARE = 0.90
"""client-bound: the event-loop thread busy (CPU time / wall time) at least this share of the wave."""


def _client_late(w: dict[str, Any], c: dict[str, Any]) -> str | None:
    """Why the client limited wave ``w`` (self-check row ``c``), or None. Any wave: the loop thread
    busy 90% of the wave's wall time. Decode: loop delay median above 10% of the observed step (a
    backlog), or a delay spanning a window edge above half a step (the fractions ``client-lag``
    applies to emit stamps). Prefill: a delay spanning a window edge above 2% of the window. Rows
    without edge delays (load workers, older archives) use the delay p99 instead."""
    p50, cpu = _num(c.get("loop_lag_p50_s")), _num(c.get("loop_cpu_share"))
    edge = _num(c.get("loop_lag_edge_s"))
    at, edge = ("at a window edge", edge) if not math.isnan(edge) else ("p99", _num(c.get("loop_lag_p99_s")))
    if cpu >= CLIENT_CPU_SHARE:
        return f"loop thread busy {cpu:.0%} of the wave"
    if w.get("workload") == "prefill":
        window = _num(w.get("prefill_seconds"))
        if edge > CLIENT_LOOP_PREFILL_FRACTION * window:
            return f"loop delay {at} {edge * 1e3:.2f} ms, above 2% of the {window:.3f} s prefill window"
        return None
    rate = _num(w.get("resident_output_tok_s"))
    step = max(int(w.get("concurrency") or 1), 1) / rate if rate > 0 else math.nan
    if p50 > LAG_P50_FRACTION * step or edge > LAG_P99_FRACTION * step:
        return (f"loop delay median {p50 * 1e3:.2f} ms, {at} {edge * 1e3:.2f} ms against a {step * 1e3:.2f} ms "
                f"decode step (limits {LAG_P50_FRACTION:.0%} / {LAG_P99_FRACTION:.0%} of it)")
    return None


def rule_client_bound(d: ArchiveData) -> list[Finding]:
    """The harness's own self-check (any server, ``_client_late``): measured waves during which the
    client's event loop answered late or was saturated were limited by the client, not only by
    the server."""
    checks = {str(c["wave_id"]): c for c in d.extra.get("wave_checks", [])}
    bad: list[tuple[str, str]] = []
    for w in d.waves:
        c = checks.get(str(w.get("wave_id")))
        why = _client_late(w, c) if w.get("phase") == "measured" and c is not None else None
        if why is not None:
            bad.append((str(w["wave_id"]), why))
    if not bad:
        return []
    return [_f(d.archive_id, "client-bound", "warning",
               f"{len(bad)} measured wave(s) where the client itself was late or saturated (e.g. {bad[0][0]}: "
               f"{bad[0][1]}): event timestamps lag the server and the rate may be the client's",
               "run the client on an idle core (nothing else busy on the machine) or with fewer concurrent "
               "streams per process", [b[0] for b in bad])]


STALL_FLOOR_S = 1.0
"""client-stalled: no stall shorter than this invalidates a wave (scheduling noise of a busy host: the
largest loop delays seen on a loaded 2-core CI machine are a few hundred ms)."""
STALL_STEPS = 10.0
"""client-stalled: a decode wave is invalid once its client stalled for more than this many of its own
decode steps (and at least ``STALL_FLOOR_S``)."""
STALL_PREFILL_FRACTION = 0.5
"""client-stalled: a prefill wave is invalid once its client stalled for more than this fraction of its
prefill window (and at least ``STALL_FLOOR_S``)."""


def stall_limit_s(w: dict[str, Any]) -> float:
    """The longest client stall wave ``w`` tolerates (pure): its step scale (the observed decode step,
    concurrency / resident rate, or for prefill its prefill window) times ``STALL_STEPS`` (prefill:
    ``STALL_PREFILL_FRACTION``), never below ``STALL_FLOOR_S``; the floor alone when the wave has no
    step scale (no resident window)."""
    if w.get("workload") == "prefill":
        window = _num(w.get("prefill_seconds"))
        scale = STALL_PREFILL_FRACTION * window if window > 0 else math.nan
    else:
        rate = _num(w.get("resident_output_tok_s"))
        scale = STALL_STEPS * max(int(w.get("concurrency") or 1), 1) / rate if rate > 0 else math.nan
    return STALL_FLOOR_S if math.isnan(scale) else max(STALL_FLOOR_S, scale)


def rule_client_stalled(d: ArchiveData) -> list[Finding]:
    """A measured wave whose client stalled for longer than ``stall_limit_s`` is invalid (blocking):
    every stream read during the stall was stamped late by the stall's length, so the wave's rate is
    the client's, not the server's. The stall is ``client_stall_s`` of its self-check row: the longest
    event-loop delay or gap between loop callbacks of the process that read the streams (each load
    worker's own), or with load workers the longest heartbeat gap the parent saw (a stopped worker).
    Shorter delays stay the ``client-bound`` warning."""
    checks = {str(c["wave_id"]): c for c in d.extra.get("wave_checks", [])}
    bad: list[tuple[str, float, float]] = []
    for w in d.waves:
        c = checks.get(str(w.get("wave_id")))
        if w.get("phase") != "measured" or c is None:
            continue
        stall = _num(c.get("client_stall_s"))
        limit = stall_limit_s(w)
        if stall > limit:
            bad.append((str(w["wave_id"]), stall, limit))
    if not bad:
        return []
    wid, stall, limit = bad[0]
    return [_f(d.archive_id, "client-stalled", "blocking",
               f"{len(bad)} measured wave(s) where the client stalled longer than the wave's step scale allows "
               f"(e.g. {wid}: {stall:.2f} s against {limit:.2f} s): their timestamps and rates are the client's",
               "find what stopped the client (a stopped or starved load worker, a swapping or overloaded host) "
               "and rerun; the waves are kept and marked invalid", [b[0] for b in bad])]


def _late_steps(info: Any) -> int | None:
    states = info.get("internal_states") if isinstance(info, dict) else None
    if not isinstance(states, list) or not states or not isinstance(states[0], dict):
        return None
    late = states[0].get("sim_late_steps")
    return int(late) if isinstance(late, int) else None


SIM_LATENESS_FRACTION = 0.01
"""sim-lateness tolerance: the model time a measured wave may lose to a late simulator, as a fraction of
its window (resident window for decode, prefill window for prefill). Lost model time stretches the
window it falls in, so it is the most the wave's rate can be off (1% lost: the rate is at most about
1% low). A wave that lost at least this much is invalid (blocking, with its cell); below, info."""


def _decode_only(c: dict[str, Any], decode_waves: set[str]) -> dict[str, Any]:
    """A decode wave's self-check row judged by its late *decode* steps only: a late first-token
    forward (admission at the wave's start) moves TTFT, not the resident window's rate. Rows
    without the decode counters keep every late step."""
    if str(c.get("wave_id")) not in decode_waves or c.get("sim_late_decode_steps") is None:
        return c
    return c | {"sim_late_steps": c["sim_late_decode_steps"], "sim_lateness_s": c.get("sim_decode_lateness_s")}


def rule_sim_lateness(d: ArchiveData) -> list[Finding]:
    """Measured waves during which the simulator fell behind its own model (it counts late steps and
    the model time they lost, ``sim_lateness_s``). A wave that lost at least ``SIM_LATENESS_FRACTION``
    of its window (or whose window is unknown) is invalid: blocking, naming the wave and its cell, so
    the round and cell built from it are invalid and every other cell stays valid. Below the tolerance
    the finding is info: a valid cell's rate is then off by less than that fraction. A decode wave
    counts only late decode steps (:func:`_decode_only`). Archives without per-wave counters are
    judged from the simulator's counters before and after the run (a warning: no wave can be named)."""
    decode_waves = {str(w["wave_id"]) for w in d.waves if w.get("workload") == "decode"}
    rows = [_decode_only(c, decode_waves) for c in d.extra.get("wave_checks", [])
            if c.get("sim_late_steps") is not None]
    late = [c for c in rows if c.get("phase") == "measured" and int(c["sim_late_steps"]) > 0]
    tol = f"{SIM_LATENESS_FRACTION:.0%}"
    remedy = (f"a wave whose simulator lost {tol} or more of its window is invalid (its rate can be off by that "
              f"much, so it is not the model's); below {tol} a valid cell's rate is within about {tol} of the model. "
              "Rerun on an idle machine (or raise the simulator's time_scale)")
    windows = {str(w["wave_id"]): _num(w.get("prefill_seconds") if w.get("workload") == "prefill"
                                       else w.get("resident_seconds")) for w in d.waves}
    cell_of = {str(w["wave_id"]): str(w["cell_id"]) for w in d.waves if w.get("cell_id") is not None}

    def material(c: dict[str, Any]) -> bool:  # NaN windows count as material
        return not _num(c.get("sim_lateness_s")) < SIM_LATENESS_FRACTION * windows.get(str(c["wave_id"]), math.nan)

    out: list[Finding] = []
    levels: tuple[tuple[Severity, bool], ...] = (("blocking", True), ("info", False))
    for severity, is_material in levels:
        mine = [c for c in late if material(c) == is_material]
        if not mine:
            continue
        steps = sum(int(c["sim_late_steps"]) for c in mine)
        lost = sum(_num(c.get("sim_lateness_s")) or 0.0 for c in mine)
        waves = [str(c["wave_id"]) for c in mine]
        cells = sorted({cell_of[w] for w in waves if w in cell_of})
        what = (f"{len(mine)} measured wave(s) ran while the simulator fell behind its model ({steps} late step(s), "
                f"{lost:.3f} s of model time lost, ")
        if is_material:
            out.append(_f(d.archive_id, "sim-lateness", severity,
                          what + f"at least {tol} of the window; e.g. {mine[0]['wave_id']}): their rates are not "
                          f"the model's; invalid cell(s): {', '.join(cells) or 'none named'}", remedy,
                          [*waves, *cells]))
        else:
            out.append(_f(d.archive_id, "sim-lateness", severity,
                          what + f"under {tol} of the window; e.g. {mine[0]['wave_id']}): within the tolerance",
                          remedy, waves))
    if late or rows:
        return out
    for i, s in enumerate(d.services):
        before, after = _late_steps(s.get("server_info")), _late_steps(s.get("server_info_at_stop"))
        if serves_simulator(s) and before is not None and after is not None and after > before:
            out.append(_f(d.archive_id, "sim-lateness", "warning",
                          f"service#{s.get('start_index', i + 1)}: the simulator recorded {after - before} late "
                          "step(s) during the run (per-wave lateness was not recorded)", remedy, []))
    return out
