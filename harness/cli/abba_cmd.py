"""``dsv4h abba``: an ABBA screen (A1 -> B1 -> B2 -> A2) between two service profiles."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import Annotated

import typer
from rich.table import Table

from harness.cli.common import WorkspaceOpt, console, esc, resolve_workspace, startup_reap
from harness.cli.outcome import end_run, print_archive, print_energy, print_findings, print_verdict
from harness.cli.progress import AbbaLive
from harness.cli.render import fmt, sim_label
from harness.inputs.spec import LoadedSpec, abba_from_files, loaded_abba
from harness.measure.abba import LEGS
from harness.run.abba import AbbaOutcome
from harness.run.kinds import RunOptions, run_loaded


def render_abba(out: AbbaOutcome) -> None:
    """Print the four legs in order and the honest result lines."""
    r = out.result
    sim = out.archive.run.simulated  # from the run block: a sim backend or a server that said so
    title = (f"ABBA screen {esc(out.spec.name)} — C{out.spec.workload.concurrency}, {r.boundary} boundary"
             + sim_label(sim))
    t = Table(title=title, title_justify="left",
              caption="Screen, not a formal matrix cell. Each wave listed; leg value = median of its waves.",
              caption_justify="left")
    for col in ("leg", "service pid", f"{r.boundary} tok/s per wave", "leg median", "HTTP median"):
        t.add_column(col, justify="left" if col in ("leg", f"{r.boundary} tok/s per wave") else "right")
    legs = {s.leg: s for s in r.legs}
    for leg in LEGS:
        s = legs.get(leg)
        svc = out.leg_services.get(leg, {})
        if s is None:
            t.add_row(leg, str(svc.get("pid", "—")), "not run", "—", "—")
            continue
        t.add_row(leg, str(svc.get("pid")), " / ".join(fmt(x) for x in s.wave_rates), fmt(s.median, 3),
                  fmt(s.http_median, 3))
    console.print(t)
    shared = "B1 and B2 shared one candidate service" if not out.spec.fresh_candidate else \
        "B2 ran on a freshly started candidate service"
    console.print(f"A1 and A2: independently started control services; {shared}.")
    console.print(f"candidate/control (mean of arm medians): [bold]{r.change_pct:+.3f}%[/] "
                  f"({fmt(r.candidate_mean, 3)} vs {fmt(r.control_mean, 3)} tok/s, {r.boundary})")
    console.print(f"return-control drift A2 vs A1: {r.drift_pct:+.3f}%   candidate spread B2 vs B1: "
                  f"{r.spread_pct:+.3f}%   HTTP ratio: {r.http_change_pct:+.3f}% (a different boundary)")
    console.print(f"every candidate wave beats every control wave: {'yes' if r.separated else 'no'}")
    o = out.outputs
    console.print(f"completions (same request across legs): {o.identical_all_legs} of {o.compared} identical in "
                  f"all four legs, {o.differing} differ; within control {o.identical_within_control}, within "
                  f"candidate {o.identical_within_candidate}, A1 vs B1 {o.identical_across_arms}")
    if out.declared_differences:
        console.print("declared change: " + esc("; ".join(out.declared_differences)))
    if out.undeclared_differences:
        console.print("[bold yellow]identity change allowed by --allow-identity-change:[/] "
                      + esc("; ".join(out.undeclared_differences)))
    print_energy(out.archive, sim)
    print_findings(out.findings)
    print_verdict(out.blocking, r.verdict, r.reason, {"faster": "green", "slower": "red"}, what="the screen",
                  withheld_tail=". Rerun before claiming anything.")
    console.print("Min/max across waves are observed ranges, not confidence intervals; this percentage must "
                  "not be added to or multiplied with percentages from other experiments.")


def abba(
    control: Annotated[Path, typer.Option("--control", help="control service profile (YAML)")],
    candidate: Annotated[Path, typer.Option("--candidate", help="candidate service profile (YAML)")],
    workload: Annotated[Path, typer.Option("--workload", help="workload YAML: corpus, concurrency, waves per leg")],
    workspace: WorkspaceOpt = Path(),
    fresh_candidate: Annotated[bool, typer.Option("--fresh-candidate", help="start B2 on a new candidate "
                                                  "service instead of sharing B1's")] = False,
    allow_identity_change: Annotated[bool, typer.Option("--allow-identity-change", help="run even when the "
                                                        "profiles differ in undeclared keys (recorded)")] = False,
) -> None:
    """Run an ABBA screen: A1 -> B1 -> B2 -> A2 with independently started control services.

    Example: dsv4h abba --control campaigns/profiles/sim-control.yaml
    --candidate campaigns/profiles/sim-candidate-10pct.yaml --workload campaigns/abba-c32.yaml
    """
    ws = resolve_workspace(workspace)
    spec = abba_from_files(control, candidate, workload, fresh_candidate=fresh_candidate,
                           allow_identity_change=allow_identity_change)
    run_abba_cli(loaded_abba(spec, workload.parent), ws)


def run_abba_cli(loaded: LoadedSpec, ws: Path, *, percentiles: Sequence[float] | None = None,
        options: RunOptions | None = None) -> None:
    """Run a loaded ABBA spec into workspace ``ws`` through the kind registry and print the screen
    (the one path of 'dsv4h abba' and of 'dsv4h campaign run' given a ``kind: abba`` spec): first
    the startup recovery of what a killed dsv4h left. Raises the run's error after the archive is
    finalized."""
    startup_reap(ws)
    with AbbaLive(console) as live:
        out = run_loaded(loaded, ws, live)
    assert isinstance(out, AbbaOutcome)
    render_abba(out)
    print_archive(out.archive, out.status)
    end_run(out.verdict, error=out.error, status=out.status, archive_id=out.archive_id)
