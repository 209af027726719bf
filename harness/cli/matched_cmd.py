"""A matched AR/SD run from ``dsv4h campaign run`` (``kind: matched-sd``): the live display and the
result as printed."""

from __future__ import annotations

import math
from collections.abc import Sequence
from pathlib import Path

from rich.table import Table

from harness.cli.common import console, esc, startup_reap
from harness.cli.outcome import end_run, print_archive, print_energy, print_findings, print_verdict
from harness.cli.progress import MatchedLive
from harness.cli.render import fmt, sim_label
from harness.inputs.spec import LoadedSpec
from harness.run.kinds import RunOptions, run_loaded
from harness.run.matched import MatchedOutcome


def _n(v: float | None, digits: int = 3) -> str:
    return "—" if v is None or (isinstance(v, float) and math.isnan(v)) else f"{v:.{digits}f}"


def render_matched(out: MatchedOutcome) -> None:
    """Print the legs in order and the result lines: rates, acceptance, step times, the break-even
    verdict (withheld when the evidence stage invalidated the run), the outputs compared."""
    r, spec = out.result, out.spec
    sim = out.archive.run.simulated  # from the run block: a sim backend or a server that said so
    t = Table(title=f"matched AR/SD {esc(spec.name)} — C{r.concurrency}" + sim_label(sim),
              title_justify="left", caption="Each leg on a freshly started service; leg value = median of its "
              "waves. Never a formal cell or an ABBA screen.", caption_justify="left")
    for col in ("leg", "service pid", "resident tok/s per wave", "leg median", "HTTP median", "step ms",
                "tokens/step"):
        t.add_column(col, justify="left" if col in ("leg", "resident tok/s per wave") else "right")
    legs = {x.leg: x for x in r.legs}
    for leg in spec.order:
        svc, x = out.leg_services.get(leg, {}), legs.get(leg)
        if x is None or not x.resident_rates:
            t.add_row(leg, str(svc.get("pid", "—")), "not run", "—", "—", "—", "—")
            continue
        a = x.counts.tokens_per_step if x.counts else None
        t.add_row(leg, str(svc.get("pid")), " / ".join(fmt(v) for v in x.resident_rates), fmt(x.median, 3),
                  fmt(x.http_median, 3), _n(x.step_s * 1e3), _n(a, 4))
    console.print(t)
    console.print(f"SD/AR resident (mean of arm medians): [bold]{_n(r.change_pct)}%[/] ({fmt(r.sd_rate, 3)} vs "
                  f"{fmt(r.ar_rate, 3)} tok/s); HTTP: {_n(r.http_change_pct)}% (a different boundary)")
    console.print(f"AR drift (last vs first AR leg): {_n(r.ar_drift_pct)}%   SD spread: {_n(r.sd_spread_pct)}%")
    src = r.counts.source if r.counts else "none reported"
    console.print(f"speculative arm: {_n(r.tokens_per_step, 4)} tokens per verify step (bonus included), "
                  f"acceptance {_n(r.acceptance_rate * 100 if r.counts else None, 2)}% of drafts (bonus excluded); "
                  f"source {esc(src)}")
    console.print(f"T_AR {_n(r.t_ar_s * 1e3)} ms, T_SD {_n(r.t_sd_s * 1e3)} ms (stream event gaps); implied "
                  f"C*a/R {_n(r.t_sd_implied_s * 1e3)} ms"
                  + ("" if r.reconciled is None else f" ({'agrees' if r.reconciled else 'DISAGREES'}: "
                     f"{_n(r.reconcile_rel * 100, 2)}%)"))
    o = r.outputs
    console.print(f"greedy outputs vs {o.reference_leg}: {o.identical} of {o.compared} identical, {o.differing} differ"
                  + ("" if not o.first_differences else " (first: " + ", ".join(
                      f"{leg} wave {w} case {esc(c)} at token {pos}" for leg, w, c, pos in o.first_differences[:3])
                     + ")"))
    print_energy(out.archive, sim)
    print_findings(out.findings)
    be = r.break_even
    print_verdict(out.blocking, be.verdict, be.reason, {"sd-faster": "green", "sd-slower": "red"}, what="the run")
    console.print("The break-even rule: SD is faster only if T_SD/T_AR < a; acceptance alone is not a speed "
                  "metric. This ratio compares only the arms of this run.")


def run_matched_cli(loaded: LoadedSpec, ws: Path, *, percentiles: Sequence[float] | None = None,
        options: RunOptions | None = None) -> None:
    """Run a loaded matched-sd spec into workspace ``ws`` through the kind registry and print it
    (after the startup recovery of what a killed dsv4h left). Raises the run's error after the
    archive is finalized."""
    startup_reap(ws)
    with MatchedLive(console) as live:
        out = run_loaded(loaded, ws, live)
    assert isinstance(out, MatchedOutcome)
    render_matched(out)
    print_archive(out.archive, out.status, out.ledger_rows)
    end_run(out.verdict, error=out.error, status=out.status, archive_id=out.archive_id)
