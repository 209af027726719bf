"""``dsv4h spec targets``: the record note's target arithmetic for speculative decoding
(docs/speculative.md#targets)."""

from __future__ import annotations

import json
import math
from dataclasses import asdict
from typing import Annotated

import typer
from rich.table import Table

from harness.cli.common import console
from harness.errors import SpecError
from harness.formats import json_safe
from harness.measure.speculative import Targets, targets

app = typer.Typer(help="Speculative decoding: targets for a measured decode rate (docs/speculative.md).\n\n"
                  "Example: dsv4h spec targets --rate 63.851301 --tokens-per-cycle 1.7768 --goal 100 --goal 200",
                  no_args_is_help=True)


@app.callback()
def _spec() -> None:
    """Speculative decoding: targets for a measured decode rate."""


def _check(rate: float, tokens_per_cycle: float | None, goals: list[float]) -> None:
    """Refuse bad numbers naming the option (exit 2), before the arithmetic."""
    if not (math.isfinite(rate) and rate > 0):
        raise SpecError(f"--rate must be > 0 tok/s, got {rate:g}", hint="e.g. --rate 63.851301")
    if tokens_per_cycle is not None and not (math.isfinite(tokens_per_cycle) and tokens_per_cycle >= 1):
        raise SpecError(f"--tokens-per-cycle must be >= 1 (the bonus token alone is 1), got {tokens_per_cycle:g}",
                        hint="e.g. --tokens-per-cycle 1.7768")
    if not goals:
        raise SpecError("--goal is required (at least one goal rate in tok/s)", hint="e.g. --goal 100 --goal 200")
    for goal in goals:
        if not (math.isfinite(goal) and goal > 0):
            raise SpecError(f"--goal must be > 0 tok/s, got {goal:g}", hint="e.g. --goal 100")


def _num(value: float | None, fmt: str) -> str:
    return "-" if value is None else format(value, fmt)


def _print(t: Targets) -> None:
    head = f"rate {t.rate} tok/s: {t.time_per_token_ms:.3f} ms per emitted token"
    if t.cycle_ms is not None:
        head += f"; cycle {t.cycle_ms:.2f} ms at {t.tokens_per_cycle} tokens/cycle"
    console.print(head)
    table = Table(title_justify="left")
    table.add_column("goal tok/s", justify="right")
    table.add_column("ms/token", justify="right")
    table.add_column("time cut", justify="right")
    if t.cycle_ms is not None:
        table.add_column("cycle ms", justify="right")
        table.add_column("cycle cut ms", justify="right")
        table.add_column("tokens/cycle", justify="right")
    for g in t.goals:
        cells = [f"{g.goal:g}", f"{g.time_per_token_ms:.3f}", f"{g.time_cut:.1%}" if g.time_cut > 0 else "met"]
        if t.cycle_ms is not None:
            cells += [_num(g.cycle_needed_ms, ".2f"), _num(g.cycle_cut_ms, ".2f"),
                      _num(g.tokens_per_cycle_needed, ".3f")]
        table.add_row(*cells)
    console.print(table)
    console.print("time cut: less time per emitted token at unchanged acceptance; cycle ms / cycle cut ms: "
                  "the cycle that gives the goal at unchanged tokens per cycle; tokens/cycle: what the goal "
                  "needs at the unchanged cycle time.")


@app.command("targets")
def targets_cmd(
    rate: Annotated[float, typer.Option("--rate", help="measured decode rate of one generation, tok/s")],
    goal: Annotated[list[float], typer.Option("--goal", help="goal rate in tok/s (repeat for several)")],
    tokens_per_cycle: Annotated[float | None, typer.Option(
        "--tokens-per-cycle", help="emitted tokens per verify step, bonus included (e.g. 1 + accepted/steps)")] = None,
    json_out: Annotated[bool, typer.Option("--json", help="print the targets as JSON")] = False,
) -> None:
    """For each goal rate: the cut in time per emitted token needed at unchanged acceptance, and
    (with --tokens-per-cycle) the cycle time that reaches it and the tokens per cycle it needs at
    the unchanged cycle time (cycle = tokens per cycle / rate).

    Example: dsv4h spec targets --rate 63.851301 --tokens-per-cycle 1.7768 --goal 100 --goal 200
    """
    _check(rate, tokens_per_cycle, goal)
    result = targets(rate, tokens_per_cycle, goal)
    if json_out:
        typer.echo(json.dumps(json_safe(asdict(result)), indent=2))
    else:
        _print(result)
