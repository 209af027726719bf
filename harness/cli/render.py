"""Rich renderings shared by CLI commands (tables of results, plans, archives)."""

from __future__ import annotations

import math
from collections.abc import Sequence

from rich.table import Table

from harness.cli.listing import Col, table
from harness.inputs.plan import Plan
from harness.measure.results import CellResult


def fmt(x: float, digits: int = 2) -> str:
    """A rate with fixed decimals; an em dash for NaN/missing."""
    return "—" if x is None or (isinstance(x, float) and math.isnan(x)) else f"{x:,.{digits}f}"


def plan_rows(plan: Plan) -> list[dict[str, object]]:
    """One row per cell of a plan, every field (``each_round`` summarises a round's work)."""
    rows: list[dict[str, object]] = []
    for c in plan.cells:
        per_round = (f"{c.waves_per_round} wave" + ("s" if (c.waves_per_round or 1) > 1 else "")
                     if c.workload == "prefill" else f">={c.min_resident_seconds:g} s res.")
        rows.append({"index": c.index, "cell_id": c.cell_id, "workload": c.workload, "concurrency": c.concurrency,
                     "rounds": c.rounds, "warmup_waves": c.warmup_waves, "each_round": per_round,
                     "max_new_tokens": c.max_new_tokens, "cache": c.cache, "corpus": c.corpus,
                     "corpus_sha256": c.corpus_sha256, "plan_id": plan.plan_id})
    return rows


PLAN_COLS = (Col("cell_id", "cell id", ident=True), Col("concurrency", "C", "right"),
             Col("rounds", "rounds", "right"), Col("warmup_waves", "warmup", "right"),
             Col("each_round", "per round"), Col("max_new_tokens", "max tok", "right"), Col("cache", "cache"))


def plan_table(plan: Plan) -> Table:
    """The ordered cells of a plan (one row per cell; cell ids whole)."""
    return table(plan_rows(plan), PLAN_COLS, title=f"plan {plan.plan_id} — campaign {plan.campaign}")


def pd_table(cells: Sequence[CellResult], *, title: str, simulated: bool) -> Table:
    """The report's Table 2: prefill input tok/s, resident output tok/s, HTTP output tok/s per C,
    three-round medians with every round's value."""
    label = " [bold yellow](SIMULATED)[/]" if simulated else ""
    t = Table(title=f"{title}{label}", title_justify="left",
              caption="P and resident D: median of round rates (each round listed); HTTP: all measured waves. "
                      "Rounds marked * are not ok (failed/short/incomplete) and excluded from medians. "
                      "Resident and HTTP decode are distinct metrics.", caption_justify="left")
    t.add_column("C", justify="right")
    t.add_column("Prefill input tok/s", justify="right")
    t.add_column("rounds", style="dim")
    t.add_column("Resident output tok/s", justify="right")
    t.add_column("rounds", style="dim")
    t.add_column("HTTP output tok/s", justify="right")
    tiers = sorted({c.concurrency for c in cells})
    for conc in tiers:
        pre = next((c for c in cells if c.concurrency == conc and c.workload == "prefill"), None)
        dec = next((c for c in cells if c.concurrency == conc and c.workload == "decode"), None)

        def rounds(c: CellResult | None) -> str:
            if c is None:
                return ""
            pairs = zip(c.round_rates, c.round_status, strict=True)
            return "\n".join(fmt(r) + ("" if s == "ok" else "*") for r, s in pairs)

        def med(c: CellResult | None) -> str:
            if c is None:
                return ""
            return fmt(c.median) + ("" if c.status == "complete" else f" ({c.status})")

        t.add_row(str(conc), med(pre), rounds(pre), med(dec), rounds(dec), fmt(dec.http_rate) if dec else "")
    return t


def _ms(cell: CellResult, key: str) -> str:
    """Milliseconds, short enough for 80 columns: one decimal below 100 ms, whole ms above."""
    v = cell.latency.get(key)
    if v is None or math.isnan(v):
        return "—"
    ms = v * 1000
    return f"{ms:.1f}" if ms < 100 else f"{ms:.0f}"


def latency_table(cells: Sequence[CellResult], *, title: str, simulated: bool) -> Table | None:
    """The companion to Table 2: latency percentiles (milliseconds) of each cell's measured requests
    (harness.measure.latency: dsv4h definitions, ITL per token). None when no cell has latency."""
    rows = [c for c in cells if c.latency and c.latency.get("ttft_n")]
    if not rows:
        return None
    label = " [bold yellow](SIMULATED)[/]" if simulated else ""
    t = Table(title=f"{title}: latency (ms){label}", title_justify="left",
              caption="D decode, P prefill cells. Over every measured request of the cell's ok rounds. "
                      "TPOT = (last - first token event) "
                      "/ tokens after the first event; ITL per token. max is observed, not a bound. "
                      "Peer (bench-serving) ITL/TPOT are in the ledgers as *_bench_*.", caption_justify="left")
    for col in ("", "C", "TTFT\np50", "TTFT\np99", "TPOT\np50", "ITL\np50", "ITL\np99", "E2E\np50", "E2E\np99"):
        t.add_column(col, justify="left" if not col else "right", no_wrap=True)
    for c in sorted(rows, key=lambda c: (c.workload, c.concurrency)):
        t.add_row(c.workload[0].upper(), str(c.concurrency), _ms(c, "ttft_p50_s"), _ms(c, "ttft_p99_s"),
                  _ms(c, "tpot_p50_s"), _ms(c, "itl_p50_s"), _ms(c, "itl_p99_s"), _ms(c, "e2e_p50_s"),
                  _ms(c, "e2e_p99_s"))
    return t
