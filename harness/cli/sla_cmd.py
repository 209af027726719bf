"""``dsv4h sla run``: the SLA search (kind and protocol class sla-search; docs/sla-search.md)."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Annotated, Any

import typer
from rich.table import Table

from harness.cli.common import WorkspaceOpt, console, esc, resolve_workspace, startup_reap
from harness.cli.listing import ms, num
from harness.cli.outcome import end_run, print_energy, print_findings
from harness.cli.render import sim_label
from harness.errors import SpecError
from harness.inputs.spec import LoadedSpec, SlaSpec, load_spec
from harness.run.events import Event, SlaProbeDone
from harness.run.kinds import RunOptions, run_loaded
from harness.run.sla import SlaOutcome

app = typer.Typer(help="SLA search: the highest request rate whose p99 TTFT/TPOT/E2E meet declared limits.\n\n"
                  "Example: dsv4h sla run campaigns/sla-demo.yaml -w ws", no_args_is_help=True)


@app.command("run")
def run_cmd(spec: Annotated[Path, typer.Argument(help="sla-search YAML file")],
            workspace: WorkspaceOpt = Path()) -> None:
    """Run an SLA search into a hashed archive and the ledgers: probe the start rate, double until a
    probe fails, then bisect to the declared precision (or stop at the probe cap); print every probe
    and the bracket (highest passing rate, lowest failing rate).

    Example: dsv4h sla run campaigns/sla-demo.yaml -w ws
    """
    run_sla_loaded_cli(load_spec(spec), resolve_workspace(workspace))


def _probe_line(event: Event) -> None:
    if isinstance(event, SlaProbeDone):
        r = event.row
        console.print(f"probe {r['probe_index']}: {num(r['arrival_rate_req_s'])} req/s "
                      f"{_verdict(r)}; TTFT p99 "
                      f"{ms(r['ttft_p99_worst_s'])} ms, TPOT p99 {ms(r['tpot_bench_p99_worst_s'])} ms, "
                      f"E2E p99 {ms(r['e2e_p99_worst_s'])} ms (worst round)")


def run_sla_loaded_cli(loaded: LoadedSpec, ws: Path, *, percentiles: Sequence[float] | None = None,
        options: RunOptions | None = None) -> None:
    """Run a loaded sla-search spec into ``ws`` through the kind registry and print its probes and
    bracket (the one path of 'dsv4h sla run' and of 'dsv4h campaign run' given a ``kind: sla-search``
    spec), after the startup recovery. Raises the run's error after the archive is finalized."""
    if not isinstance(loaded.spec, SlaSpec):
        raise SpecError(f"{loaded.source}: kind '{loaded.kind}' is not an SLA search",
                        hint="run other kinds with 'dsv4h campaign run'")
    startup_reap(ws)
    out = run_loaded(loaded, ws, _probe_line)
    assert isinstance(out, SlaOutcome)
    archive = out.finished.archive
    console.print(probe_table(out.probes, out.result, title=esc(archive.run.campaign),
                              simulated=archive.run.simulated))
    console.print(bracket_line(out.result))
    print_energy(archive, archive.run.simulated)
    print_findings(out.finished.findings, all_severities=True)
    console.print(f"archive {archive.archive_id} ({archive.status})")
    end_run(out.finished.verdict, error=out.error, status=archive.status, archive_id=archive.archive_id)


def _verdict(r: Mapping[str, Any]) -> str:
    """PASS, FAIL with its reasons, or INVALID (no verdict: the client or simulator fell behind) with why."""
    if r["passed"] is None:
        return "INVALID " + "; ".join(str(x).removeprefix("invalid-load: ") for x in r.get("reasons") or [])
    return "PASS" if r["passed"] else "FAIL " + ",".join(r.get("reasons") or [])


def _limit(v: Any) -> str:
    return "-" if v is None else ms(v)


def probe_table(probes: Sequence[Mapping[str, Any]], result: Mapping[str, Any], *, title: str,
                simulated: bool = False) -> Table:
    """Every probe in probe order: rate, verdict, the worst round's p99 of each metric against its
    limit (ms), rounds ok, schedule, and which end of the bracket it is; the title says SIMULATED for
    ``simulated`` data."""
    t = Table(title=f"{title}: SLA search probes{sim_label(simulated)}", caption=str(result.get("rule", "")))
    for head in ("#", "rate req/s", "verdict", "TTFT p99 / limit ms", "TPOT p99 / limit ms", "E2E p99 / limit ms",
                 "rounds ok", "schedule", "bracket"):
        t.add_column(head, justify="right" if head not in ("verdict", "schedule", "bracket") else "left")
    for r in probes:
        t.add_row(str(r["probe_index"]), num(r["arrival_rate_req_s"]),
                  _verdict(r).replace("PASS", "pass"),
                  f"{ms(r['ttft_p99_worst_s'])} / {_limit(r['ttft_limit_s'])}",
                  f"{ms(r['tpot_bench_p99_worst_s'])} / {_limit(r['tpot_limit_s'])}",
                  f"{ms(r['e2e_p99_worst_s'])} / {_limit(r['e2e_limit_s'])}",
                  f"{r['rounds_ok']}/{r['rounds_planned']}", "kept" if r["schedule_kept"] else "NOT kept",
                  str(r.get("bracket_end") or ""))
    return t


def bracket_line(result: Mapping[str, Any]) -> str:
    """The search's result in one line: the bracket, how it ended and its width (never one number)."""
    b = result["bracket"]
    lo, hi = b.get("highest_passing_req_s"), b.get("lowest_failing_req_s")
    width = result.get("width")
    unit = "" if result.get("width_unit") == "ratio" else " req/s"
    return (f"bracket: highest passing {num(lo) if lo is not None else 'none'} req/s, lowest failing "
            f"{num(hi) if hi is not None else 'none'} req/s; {result['end']}"
            f"{'' if width is None else f', width {num(width, 3)}{unit}'} "
            f"(precision {num(result['settings']['precision'], 3)}{unit}, {result['n_probes']} probes"
            f"{'' if b.get('monotone', True) else '; NOT monotone: a rate passed above a failing one'})"
            f"{_load_note(result)}")


def _load_note(result: Mapping[str, Any]) -> str:
    """The measurements the load invalidated and, when the result is withheld, why (empty when none)."""
    bad = int(result.get("n_invalid") or 0)
    note = f"; {bad} measurement(s) invalid for load, {int(result.get('n_remeasured') or 0)} re-measured" if bad else ""
    why = result.get("withheld")
    return note + (f"; NOT CONVERGED (load): {why}" if why else "")
