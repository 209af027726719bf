"""Rich renderings shared by CLI commands (tables of results, plans, archives)."""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence

from rich.table import Table

from harness.cli.listing import Col, table
from harness.evidence.verdict import Verdict
from harness.inputs.plan import Plan
from harness.measure import latency as lat
from harness.measure.results import CellResult, cell_latency_at
from harness.records import RequestRecord

SIMULATED_LABEL = " [bold yellow](SIMULATED)[/]"
"""What every run's main end-of-run table adds to its title when its data is simulated (rich markup)."""


def sim_label(simulated: bool) -> str:
    """:data:`SIMULATED_LABEL` for simulated data (``archive.run.simulated``), else nothing."""
    return SIMULATED_LABEL if simulated else ""


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


INVALID_MARK = " [bold red]INVALID[/]"


def invalid_caption(verdict: Verdict | None, ids: Sequence[str]) -> str:
    """A caption line naming the rows of ``ids`` a blocking finding invalidated, with its rules
    ('' when none: a valid run's table says nothing more)."""
    if verdict is None:
        return ""
    bad = [(i, verdict.rules_for(i)) for i in ids if verdict.concerns(i)]
    if not bad:
        return ""
    rules = sorted({r for _, rs in bad for r in rs})
    return (f"\nINVALID ({len(bad)} of {len(ids)}; blocking: {', '.join(rules)}): "
            + ", ".join(i for i, _ in bad) + ". Kept in the archive, valid = false in the ledgers, "
            "excluded from every claim ('dsv4h evidence check' explains).")


def pd_table(cells: Sequence[CellResult], *, title: str, simulated: bool, verdict: Verdict | None = None) -> Table:
    """The report's Table 2: prefill input tok/s, resident output tok/s, HTTP output tok/s per C,
    three-round medians with every round's value; a cell that ``verdict``'s blocking findings
    invalidate is marked INVALID and named in the caption with its rules."""
    label = sim_label(simulated)
    t = Table(title=f"{title}{label}", title_justify="left",
              caption="P and resident D: median of round rates (each round listed); HTTP: all measured waves. "
                      "Rounds marked * are not ok (failed/short/incomplete) and excluded from medians. "
                      "Resident and HTTP decode are distinct metrics."
                      + invalid_caption(verdict, [c.cell_id for c in cells]), caption_justify="left")

    def bad(c: CellResult | None) -> str:
        return INVALID_MARK if c is not None and verdict is not None and verdict.concerns(c.cell_id) else ""

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
            pairs = zip(c.round_tok_s, c.round_status, strict=True)
            return "\n".join(fmt(r) + ("" if s == "ok" else "*") for r, s in pairs)

        def med(c: CellResult | None) -> str:
            if c is None:
                return ""
            return fmt(c.median_tok_s) + ("" if c.status == "complete" else f" ({c.status})") + bad(c)

        t.add_row(str(conc), med(pre), rounds(pre), med(dec), rounds(dec),
                  fmt(dec.http_output_tok_s) + bad(dec) if dec else "")
    return t


def _ms_of(cols: Mapping[str, float], key: str) -> str:
    """Milliseconds, short enough for 80 columns: one decimal below 100 ms, whole ms above."""
    v = cols.get(key)
    if v is None or math.isnan(v):
        return "—"
    ms = v * 1000
    return f"{ms:.1f}" if ms < 100 else f"{ms:.0f}"


def _ms(cell: CellResult, key: str) -> str:
    return _ms_of(cell.latency, key)


LATENCY_METRICS = (("ttft", "TTFT"), ("tpot", "TPOT"), ("itl", "ITL"), ("e2e", "E2E"))


def latency_grid(rows: Sequence[tuple[str, str, Mapping[str, float]]], percentiles: Sequence[float], *,
                 title: str, caption: str, head: str = "C") -> Table:
    """Latency (milliseconds) one line per metric of each row group: ``rows`` are (workload letter or
    "", concurrency, latency columns of harness.measure.latency), columns the chosen ``percentiles``
    (``p<value>``), mean and n; ``head`` heads the second column. A percentile the columns lack reads as
    an em dash."""
    t = Table(title=title, title_justify="left", caption=caption, caption_justify="left")
    names = [lat.percentile_name(p) for p in percentiles]
    letters = any(letter for letter, _, _ in rows)  # no workload column when no row has one
    for col in ("", head, "metric", *names, "mean", "n")[0 if letters else 1:]:
        t.add_column(col, justify="left" if col in ("", "metric") else "right", no_wrap=True)
    for letter, conc, cols in rows:
        for key, label in LATENCY_METRICS:
            n = cols.get(f"{key}_n")
            cells = [conc, label, *(_ms_of(cols, f"{key}_{name}_s") for name in names),
                     _ms_of(cols, f"{key}_mean_s"), "—" if n is None or math.isnan(n) else f"{n:.0f}"]
            t.add_row(*([letter] if letters else []), *cells)
    return t


def latency_table(cells: Sequence[CellResult], *, title: str, simulated: bool,
                  percentiles: Sequence[float] | None = None, verdict: Verdict | None = None) -> Table | None:
    """The companion to Table 2: latency percentiles (milliseconds) of each cell's measured requests
    (harness.measure.latency: dsv4h definitions, ITL per token). None when no cell has latency. With
    ``percentiles`` one line per metric and cell (:func:`latency_grid`): those percentiles, mean and n,
    read from the cells' latency columns (stored: p50 p90 p99; others must have been computed)."""
    rows = [c for c in cells if c.latency and c.latency.get("ttft_n")]
    if not rows:
        return None
    label = sim_label(simulated)
    caption = ("D decode, P prefill cells. Over every measured request of the cell's ok rounds. "
               "TPOT = (last - first token event) "
               "/ tokens after the first event; ITL per token. max is observed, not a bound. "
               "Peer (bench-serving) ITL/TPOT are in the ledgers as *_bench_*."
               + (" C marked ! is an INVALID cell." if invalid_caption(verdict, [c.cell_id for c in rows]) else "")
               + invalid_caption(verdict, [c.cell_id for c in rows]))
    ordered = sorted(rows, key=lambda c: (c.workload, c.concurrency))

    def conc(c: CellResult) -> str:
        return f"{c.concurrency}" + ("!" if verdict is not None and verdict.concerns(c.cell_id) else "")

    if percentiles is not None:
        return latency_grid([(c.workload[0].upper(), conc(c), c.latency) for c in ordered], percentiles,
                            title=f"{title}: latency (ms){label}", caption=caption)
    t = Table(title=f"{title}: latency (ms){label}", title_justify="left", caption=caption, caption_justify="left")
    for col in ("", "C", "TTFT\np50", "TTFT\np99", "TPOT\np50", "ITL\np50", "ITL\np99", "E2E\np50", "E2E\np99"):
        t.add_column(col, justify="left" if not col else "right", no_wrap=True)
    for c in ordered:
        t.add_row(c.workload[0].upper(), conc(c), _ms(c, "ttft_p50_s"), _ms(c, "ttft_p99_s"),
                  _ms(c, "tpot_p50_s"), _ms(c, "itl_p50_s"), _ms(c, "itl_p99_s"), _ms(c, "e2e_p50_s"),
                  _ms(c, "e2e_p99_s"))
    return t


def cells_at(cells: Sequence[CellResult], records: Sequence[RequestRecord], round_status: Mapping[str, str],
             percentiles: Sequence[float]) -> list[CellResult]:
    """``cells`` with their latency recomputed at ``percentiles`` from the run's records (measured
    requests of ok rounds, as stored), for ``--percentiles`` on tables printed after a run or from an
    archive; a cell without such requests keeps its stored columns."""
    from dataclasses import replace

    at = cell_latency_at(records, round_status, percentiles)
    return [replace(c, latency=at[c.cell_id]) if c.cell_id in at else c for c in cells]
