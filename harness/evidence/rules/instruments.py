"""Evidence rules about the instruments (pure): the measuring client (receive lag, a late, saturated or
stalled event loop, a silent load worker) and the simulator (late steps). A number is only as good as
the client that timed it and, on the simulator, the model that produced it. Rule ids and severities are
listed in :mod:`harness.evidence.rules`, which runs these with the others; all four apply to every kind.

Every kind is judged per measured unit from its ``wave_checks.jsonl`` rows: a formal matrix's, ABBA
screen's or matched run's waves (rows of ``waves``), a rate sweep's or SLA search's rounds and a trace
replay's one window (:func:`open_loop_units`: rows of ``rounds`` / ``replay``, no wave row).
"""

from __future__ import annotations

import contextlib
import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from harness.errors import ArchiveError
from harness.evidence.findings import ArchiveData, Finding, Scope, Severity
from harness.evidence.findings import make_finding as _f
from harness.evidence.rules._registry import ALL, REPLAY_PROTOCOL, ROUND_PROTOCOLS, rule
from harness.formats import finite_float as _num
from harness.ids import round_of
from harness.service.identity.origin import server_is_simulator

_LAG_P50_FRACTION = 0.10
_LAG_P99_FRACTION = 0.50


def serves_simulator(service: Mapping[str, Any]) -> bool:
    """Whether a ``service.json`` entry's server identified itself as the dsv4h simulator
    (``harness.service.identity.origin.server_is_simulator`` of its ``server_info``)."""
    return server_is_simulator(service.get("server_info"))


@rule("client-lag", kinds=ALL)
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
        if float(p50) > _LAG_P50_FRACTION * step or float(p99) > _LAG_P99_FRACTION * step:
            bad.append(str(w["wave_id"]))
    if not bad:
        return []
    return [_f(d.archive_id, "client-lag", "warning",
               f"{len(bad)} wave(s) with client receive lag above {_LAG_P50_FRACTION:.0%} (median) or "
               f"{_LAG_P99_FRACTION:.0%} (p99) of a decode step: the client, not the server, may have limited the rate",
               "run the client on an idle core or with fewer concurrent streams per process", bad)]


_CLIENT_LOOP_PREFILL_FRACTION = 0.02
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
        if edge > _CLIENT_LOOP_PREFILL_FRACTION * window:
            return f"loop delay {at} {edge * 1e3:.2f} ms, above 2% of the {window:.3f} s prefill window"
        return None
    rate = _num(w.get("resident_output_tok_s"))
    step = max(int(w.get("concurrency") or 1), 1) / rate if rate > 0 else math.nan
    if p50 > _LAG_P50_FRACTION * step or edge > _LAG_P99_FRACTION * step:
        return (f"loop delay median {p50 * 1e3:.2f} ms, {at} {edge * 1e3:.2f} ms against a {step * 1e3:.2f} ms "
                f"decode step (limits {_LAG_P50_FRACTION:.0%} / {_LAG_P99_FRACTION:.0%} of it)")
    return None


@rule("client-bound", kinds=ALL)
def rule_client_bound(d: ArchiveData) -> list[Finding]:
    """The harness's own self-check (any server, ``_client_late``): measured waves during which the
    client's event loop answered late or was saturated were limited by the client, not only by
    the server. Open-loop units (sweep and SLA-search rounds, a trace replay: :func:`open_loop_units`)
    have no decode step scale, so only a loop thread busy ``CLIENT_CPU_SHARE`` of the unit applies."""
    checks = {str(c["wave_id"]): c for c in d.extra.get("wave_checks", [])}
    bad: list[tuple[str, str]] = []
    for w in d.waves:
        c = checks.get(str(w.get("wave_id")))
        why = _client_late(w, c) if w.get("phase") == "measured" and c is not None else None
        if why is not None:
            bad.append((str(w["wave_id"]), why))
    remedy = ("run the client on an idle core (nothing else busy on the machine) or with fewer concurrent "
              "streams per process")
    # open-loop units (sweep and SLA-search rounds, a replay) have no step scale: only a saturated loop thread
    busy = [(u, cpu) for w, u in open_loop_units(d).items()
            if w in checks and (cpu := _num(checks[w].get("loop_cpu_share"))) >= CLIENT_CPU_SHARE]
    out = [_f(d.archive_id, "client-bound", "warning",
              f"{len(busy)} measured {busy[0][0].noun}(s) where the client's loop thread was saturated (e.g. "
              f"{busy[0][0].name}: busy {busy[0][1]:.0%} of it): event timestamps lag the server and the "
              "latencies and rates may be the client's", remedy,
              _unit_rows([u for u, _ in busy], names=False)[0])] if busy else []
    if not bad:
        return out
    return [_f(d.archive_id, "client-bound", "warning",
               f"{len(bad)} measured wave(s) where the client itself was late or saturated (e.g. {bad[0][0]}: "
               f"{bad[0][1]}): event timestamps lag the server and the rate may be the client's",
               remedy, [b[0] for b in bad]), *out]


STALL_FLOOR_S = 1.0
"""client-stalled: no stall shorter than this invalidates a wave (scheduling noise of a busy host: the
largest loop delays seen on a loaded 2-core CI machine are a few hundred ms)."""
_STALL_STEPS = 10.0
"""client-stalled: a decode wave is invalid once its client stalled for more than this many of its own
decode steps (and at least ``STALL_FLOOR_S``)."""
_STALL_PREFILL_FRACTION = 0.5
"""client-stalled: a prefill wave is invalid once its client stalled for more than this fraction of its
prefill window (and at least ``STALL_FLOOR_S``)."""


def stall_limit_s(w: dict[str, Any]) -> float:
    """The longest client stall wave ``w`` tolerates (pure): its step scale (the observed decode step,
    concurrency / resident rate, or for prefill its prefill window) times ``_STALL_STEPS`` (prefill:
    ``_STALL_PREFILL_FRACTION``), never below ``STALL_FLOOR_S``; the floor alone when the wave has no
    step scale (no resident window)."""
    if w.get("workload") == "prefill":
        window = _num(w.get("prefill_seconds"))
        scale = _STALL_PREFILL_FRACTION * window if window > 0 else math.nan
    else:
        rate = _num(w.get("resident_output_tok_s"))
        scale = _STALL_STEPS * max(int(w.get("concurrency") or 1), 1) / rate if rate > 0 else math.nan
    return STALL_FLOOR_S if math.isnan(scale) else max(STALL_FLOOR_S, scale)


@rule("client-stalled", kinds=ALL)
def rule_client_stalled(d: ArchiveData) -> list[Finding]:
    """A measured unit whose client stalled for longer than ``stall_limit_s`` is invalid (blocking):
    every stream read during the stall was stamped late by the stall's length, so the wave's rate is
    the client's, not the server's. The stall is ``client_stall_s`` of its self-check row: the longest
    event-loop delay or gap between loop callbacks of the process that read the streams (each load
    worker's own), or with load workers the longest heartbeat gap the parent saw (a stopped worker).
    Shorter delays stay the ``client-bound`` warning. A wave is named alone; an open-loop unit (a sweep
    or SLA-search round, a trace replay: :func:`open_loop_units`) tolerates ``STALL_FLOOR_S`` and is
    named with every row of it (a replay: scope ``run``)."""
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
    out = _stalled_units(d, checks)
    if not bad:
        return out
    wid, stall, limit = bad[0]
    return [_f(d.archive_id, "client-stalled", "blocking",
               f"{len(bad)} measured wave(s) where the client stalled longer than the wave's step scale allows "
               f"(e.g. {wid}: {stall:.2f} s against {limit:.2f} s): their timestamps and rates are the client's",
               "find what stopped the client (a stopped or starved load worker, a swapping or overloaded host) "
               "and rerun; the waves are kept and marked invalid", [b[0] for b in bad]), *out]


def _stalled_units(d: ArchiveData, checks: Mapping[str, dict[str, Any]]) -> list[Finding]:
    """``client-stalled`` of the open-loop units (:func:`open_loop_units`: sweep and SLA-search rounds, a
    trace replay): a unit whose client stalled longer than ``STALL_FLOOR_S`` (it has no decode step
    scale) is invalid, named with every row of it."""
    bad = [(u, *_unit_stall(checks[w])) for w, u in open_loop_units(d).items() if w in checks]
    bad = [b for b in bad if b[1] > b[2]]
    if not bad:
        return []
    u, stall, limit = bad[0]
    rows, scope = _unit_rows([b[0] for b in bad])
    return [_f(d.archive_id, "client-stalled", "blocking",
               f"{len(bad)} measured {u.noun}(s) where the client stalled longer than a {u.noun} tolerates "
               f"(e.g. {u.name}: {stall:.2f} s against {limit:.2f} s): their timestamps, latencies and rates "
               "are the client's",
               "find what stopped the client (a stopped or starved load worker, a swapping or overloaded host) "
               f"and rerun; the {u.noun}s are kept and marked invalid", rows, scope)]


@dataclass(frozen=True)
class Unit:
    """A measured unit without a wave row (an open-loop round, a trace replay's window) that has a
    self-check row: its wave id (the row's key), round id, cell id (None for a replay), its name and
    what it is called in a message (a round id and ``round``; a replay id and ``replay``), its window
    in seconds (``duration_s`` of its round or replay row; NaN when unknown), the row ids a finding
    about it names (``rows``) and that finding's scope."""

    wave_id: str
    round_id: str
    cell_id: str | None
    name: str
    noun: str
    window_s: float
    rows: tuple[str, ...]
    scope: Scope


def _unit_round(c: Mapping[str, Any]) -> str:
    """The round id of a self-check row: its ``round_id``, else its wave id's round (the wave id itself
    when it is not one)."""
    if c.get("round_id"):
        return str(c["round_id"])
    with contextlib.suppress(ArchiveError):
        return round_of(str(c.get("wave_id")))
    return str(c.get("wave_id"))


def open_loop_units(d: ArchiveData) -> dict[str, Unit]:
    """The measured units of a rate sweep or SLA search (each round: window its round row's
    ``duration_s``, a finding names the wave, the round and its cell) or of a trace replay (its one
    window: the replay row's ``duration_s``, a finding names the replay and its wave, scope ``run``),
    one per measured self-check row that no wave row has, keyed by wave id (pure). Empty for every
    other protocol class: their units are waves."""
    pc = d.run.get("protocol_class")
    if pc not in (*ROUND_PROTOCOLS, REPLAY_PROTOCOL):
        return {}
    waves = {str(w.get("wave_id")) for w in d.waves}
    rounds = {str(r["round_id"]): r for r in d.rounds if r.get("round_id") is not None}
    replay: dict[str, Any] = next(iter(d.extra.get("replay") or []), {})
    out: dict[str, Unit] = {}
    for c in d.extra.get("wave_checks", []):
        wid = str(c.get("wave_id"))
        if c.get("phase") != "measured" or wid in waves:
            continue
        rid = _unit_round(c)
        if pc == REPLAY_PROTOCOL:
            name = str(replay.get("replay_id") or c.get("replay_id") or "replay")
            out[wid] = Unit(wid, rid, None, name, "replay", _num(replay.get("duration_s")), (name, wid), "run")
            continue
        r = rounds.get(rid, {})
        cell = str(r.get("cell_id") or c.get("cell_id") or "") or None
        out[wid] = Unit(wid, rid, cell, rid, "round", _num(r.get("duration_s")),
                        tuple(x for x in (wid, rid, cell) if x), "rows")
    return out


def _unit_lost(c: Mapping[str, Any], u: Unit) -> tuple[float, bool]:
    """(model seconds unit ``u`` lost, whether that is material: at least ``SIM_LATENESS_FRACTION`` of
    its window, or its window unknown)."""
    lost = _num(c.get("sim_lateness_s"))
    return lost, not lost < SIM_LATENESS_FRACTION * u.window_s


def _unit_stall(c: Mapping[str, Any]) -> tuple[float, float]:
    """(the client's worst stall in a unit's self-check row, the stall it tolerates): a unit without a
    decode step scale tolerates ``STALL_FLOOR_S`` (:func:`stall_limit_s` of no window)."""
    return _num(c.get("client_stall_s")), stall_limit_s({})


def unit_problems(d: ArchiveData) -> dict[str, list[str]]:
    """Per round id of an open-loop unit (:func:`open_loop_units`), why ``sim-lateness`` or
    ``client-stalled`` makes it invalid (pure; units without a blocking reason are absent): the
    simulator lost at least ``SIM_LATENESS_FRACTION`` of its window, or the client stalled longer
    than it tolerates. What ``sla-probe-invalid`` adds to a probe's round."""
    units = open_loop_units(d)
    out: dict[str, list[str]] = {}
    for c in d.extra.get("wave_checks", []):
        u = units.get(str(c.get("wave_id")))
        if u is None:
            continue
        if c.get("sim_late_steps") is not None and int(c["sim_late_steps"]) > 0:
            lost, material = _unit_lost(c, u)
            if material:
                out.setdefault(u.round_id, []).append(
                    f"the simulator lost {lost:.3f} s of model time ({int(c['sim_late_steps'])} late step(s); "
                    f"{_window(u)})")
        stall, limit = _unit_stall(c)
        if stall > limit:
            out.setdefault(u.round_id, []).append(f"the client stalled {stall:.2f} s (limit {limit:.2f} s)")
    return out


def _window(u: Unit) -> str:
    return f"window {u.window_s:.3f} s" if not math.isnan(u.window_s) else "window unknown"


def _unit_rows(units: Sequence[Unit], *, names: bool = True) -> tuple[list[str], Scope]:
    """The row ids findings about ``units`` name (with ``names=False``: their waves and rounds only,
    not cells) and the findings' scope (``run`` when any unit is a whole run's one window)."""
    rows = [r for u in units for r in u.rows if names or r != u.cell_id]
    return rows, "run" if any(u.scope == "run" for u in units) else "rows"


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


@rule("sim-lateness", kinds=ALL)
def rule_sim_lateness(d: ArchiveData) -> list[Finding]:
    """Measured units during which the simulator fell behind its own model (it counts late steps and
    the model time they lost, ``sim_lateness_s``), judged per unit for every kind. A unit that lost at
    least ``SIM_LATENESS_FRACTION`` of its window (or whose window is unknown) is invalid: blocking.
    A wave (formal matrix, ABBA screen, matched run; window: its resident or prefill window) is named
    with its cell, so the round and cell built from it are invalid and every other cell stays valid;
    a decode wave counts only late decode steps (:func:`_decode_only`). A sweep or SLA-search round
    (window: its round's ``duration_s``) is named with its wave, round and cell; a trace replay
    (window: its ``duration_s``) with the replay and its wave, scope ``run`` (:func:`open_loop_units`).
    Below the tolerance the finding is info: a valid figure is then off by less than that fraction.
    Archives without per-unit counters (older archives) are judged from the simulator's counters
    before and after the run (a warning: no unit can be named)."""
    decode_waves = {str(w["wave_id"]) for w in d.waves if w.get("workload") == "decode"}
    units = open_loop_units(d)
    rows = [_decode_only(c, decode_waves) for c in d.extra.get("wave_checks", [])
            if c.get("sim_late_steps") is not None]
    late = [c for c in rows if c.get("phase") == "measured" and int(c["sim_late_steps"]) > 0]
    remedy = (f"a wave whose simulator lost {_TOL} or more of its window is invalid (its rate can be off by that "
              f"much, so it is not the model's); below {_TOL} a valid cell's rate is within about {_TOL} of the "
              "model. Rerun on an idle machine (or raise the simulator's time_scale)")
    out = _late_waves(d, [c for c in late if str(c["wave_id"]) not in units], remedy)
    out += _late_units(d, [c for c in late if str(c["wave_id"]) in units], units)
    if late or rows:
        return out
    for i, s in enumerate(d.services):
        before, after = _late_steps(s.get("server_info")), _late_steps(s.get("server_info_at_stop"))
        if serves_simulator(s) and before is not None and after is not None and after > before:
            out.append(_f(d.archive_id, "sim-lateness", "warning",
                          f"service#{s.get('start_index', i + 1)}: the simulator recorded {after - before} late "
                          "step(s) during the run (per-wave lateness was not recorded)", remedy, []))
    return out


_TOL = f"{SIM_LATENESS_FRACTION:.0%}"
_LEVELS: tuple[tuple[Severity, bool], ...] = (("blocking", True), ("info", False))


def _late_waves(d: ArchiveData, late: list[dict[str, Any]], remedy: str) -> list[Finding]:
    """``sim-lateness`` of the late measured waves' self-check rows ``late`` (rows of ``waves``)."""
    windows = {str(w["wave_id"]): _num(w.get("prefill_seconds") if w.get("workload") == "prefill"
                                       else w.get("resident_seconds")) for w in d.waves}
    cell_of = {str(w["wave_id"]): str(w["cell_id"]) for w in d.waves if w.get("cell_id") is not None}

    def material(c: dict[str, Any]) -> bool:  # NaN windows count as material
        return not _num(c.get("sim_lateness_s")) < SIM_LATENESS_FRACTION * windows.get(str(c["wave_id"]), math.nan)

    out: list[Finding] = []
    for severity, is_material in _LEVELS:
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
                          what + f"at least {_TOL} of the window; e.g. {mine[0]['wave_id']}): their rates are not "
                          f"the model's; invalid cell(s): {', '.join(cells) or 'none named'}", remedy,
                          [*waves, *cells]))
        else:
            out.append(_f(d.archive_id, "sim-lateness", severity,
                          what + f"under {_TOL} of the window; e.g. {mine[0]['wave_id']}): within the tolerance",
                          remedy, waves))
    return out


def _late_units(d: ArchiveData, late: list[dict[str, Any]], units: Mapping[str, Unit]) -> list[Finding]:
    """``sim-lateness`` of the late open-loop units' self-check rows ``late`` (:func:`open_loop_units`):
    blocking naming every row of each unit that lost at least the tolerance, info naming the others'
    waves and rounds."""
    out: list[Finding] = []
    for severity, is_material in _LEVELS:
        mine = [(c, u) for c in late if _unit_lost(c, u := units[str(c["wave_id"])])[1] == is_material]
        if not mine:
            continue
        noun = mine[0][1].noun
        steps = sum(int(c["sim_late_steps"]) for c, _ in mine)
        lost = sum(_num(c.get("sim_lateness_s")) or 0.0 for c, _ in mine)
        c0, u0 = mine[0]
        first = f"e.g. {u0.name}: {_num(c0.get('sim_lateness_s')):.3f} s lost, {_window(u0)}"
        what = (f"{len(mine)} measured {noun}(s) ran while the simulator fell behind its model ({steps} late "
                f"step(s), {lost:.3f} s of model time lost, ")
        remedy = (f"a {noun} whose simulator lost {_TOL} or more of its window is invalid (its rates and latencies "
                  f"are not the model's); below {_TOL} they are within about {_TOL} of it. Rerun on an idle "
                  "machine (or raise the simulator's time_scale)")
        if is_material:
            rows, scope = _unit_rows([u for _, u in mine])
            named = sorted({r for _, u in mine for r in u.rows if r != u.wave_id})
            out.append(_f(d.archive_id, "sim-lateness", severity,
                          what + f"at least {_TOL} of the {noun}'s window; {first}): their rates and latencies are "
                          f"not the model's; invalid: {', '.join(named)}", remedy, rows, scope))
        else:
            rows, _ = _unit_rows([u for _, u in mine], names=False)
            out.append(_f(d.archive_id, "sim-lateness", severity,
                          what + f"under {_TOL} of the {noun}'s window; {first}): within the tolerance", remedy,
                          rows))
    return out
