"""``dsv4h bench``: a quick screen of a running server with the peers' flags (protocol class
quick-bench, never formal; harness.run.quick)."""

from __future__ import annotations

import math
from pathlib import Path
from typing import Annotated, Any, get_args

import typer
from rich.table import Table

from harness.cli.common import WorkspaceOpt, console, esc, resolve_workspace
from harness.cli.outcome import end_run, print_findings
from harness.cli.render import latency_grid, sim_label
from harness.inputs.spec import ClaimClass
from harness.load.driver import DEFAULT_TIMEOUT_S
from harness.measure import latency as lat
from harness.run.events import Event, QuickStart
from harness.run.quick import BACKENDS, DEFAULT_URL, Backend, BenchOptions, QuickOutcome, run_quick_bench

BenchPercentilesOpt = Annotated[str, typer.Option(
    "--percentiles", help="Latency percentiles to print, comma-separated numbers in (0, 100], e.g. 50,90,95,99.")]


def _num(v: Any, digits: int) -> str:
    return "—" if v is None or (isinstance(v, float) and math.isnan(v)) else f"{v:,.{digits}f}"


def throughput_table(out: QuickOutcome, concurrency: int) -> Table:
    """The peers' result block: requests, duration, tokens and throughputs."""
    t = out.summary["throughput"]
    grid = Table(title="quick screen: throughput" + sim_label(out.simulated),
                 title_justify="left", show_header=False)
    grid.add_column("what")
    grid.add_column("value", justify="right")
    for what, v, d in (("Successful requests", t["completed"], 0), ("Failed requests", t["failed"], 0),
                       ("Maximum request concurrency", concurrency, 0), ("Benchmark duration (s)", t["duration_s"], 2),
                       ("Total input tokens", t["total_input_tokens"], 0),
                       ("Total generated tokens", t["total_output_tokens"], 0),
                       ("Request throughput (req/s)", t["request_throughput"], 2),
                       ("Output token throughput (tok/s)", t["output_throughput"], 2),
                       ("Total token throughput (tok/s)", t["total_token_throughput"], 2)):
        grid.add_row(what, _num(v, d))
    return grid


def bench(
    url: Annotated[str, typer.Option("--url", help="Base URL of the running server (only this server is "
                                     "contacted).")] = DEFAULT_URL,
    num_prompts: Annotated[int, typer.Option("--num-prompts", help="Requests to send.")] = 8,
    max_concurrency: Annotated[int | None, typer.Option(
        "--max-concurrency", help="Requests in flight at most (closed loop; default: all at once).")] = None,
    random_input_len: Annotated[int, typer.Option("--random-input-len", help="Prompt length, tokens.")] = 1024,
    random_output_len: Annotated[int, typer.Option("--random-output-len",
                                                   help="Output length, tokens (ignore_eos).")] = 128,
    random_range_ratio: Annotated[float, typer.Option(
        "--random-range-ratio", help="Lengths uniform in [L*(1-r), L*(1+r)] (vllm's meaning); 0: exactly L.")] = 0.0,
    seed: Annotated[int, typer.Option("--seed", help="Seed of the random prompts.")] = 0,
    backend: Annotated[str, typer.Option("--backend", help="auto (detect), sglang (/generate with input ids) or "
                                         "openai (/v1/completions with token ids).")] = "auto",
    model: Annotated[str | None, typer.Option("--model", help="Model name (openai; default: the first of "
                                              "/v1/models).")] = None,
    vocab_size: Annotated[int | None, typer.Option(
        "--vocab-size", help="Token ids are drawn below this (default: the server's if it reports one, else "
        "ids 1000-29999).")] = None,
    percentiles: BenchPercentilesOpt = "50,90,99",
    claim_class: Annotated[str, typer.Option("--claim-class", help="What the server is claimed to run "
                                             "(checked by the evidence rules).")] = "native-ar",
    request_timeout: Annotated[float, typer.Option("--request-timeout", help="Longest silence of a request, "
                                                   "seconds.")] = DEFAULT_TIMEOUT_S,
    name: Annotated[str, typer.Option("--name", help="Name recorded as the archive's campaign.")] = "quick-bench",
    workspace: WorkspaceOpt = Path(),
) -> None:
    """Quick screen of a running server with the peers' flags: random token-ID prompts, closed loop.

    The prompts are frozen into a hashed archive (protocol class quick-bench, never a formal result)
    that is ingested into the ledgers; prints the latency table and the throughput block.

    Example: dsv4h bench --url http://127.0.0.1:30000 --num-prompts 64 --max-concurrency 16
    --random-input-len 1024 --random-output-len 128 --percentiles 50,90,95,99
    """
    ps = lat.parse_percentiles(percentiles)
    if backend not in BACKENDS:
        raise typer.BadParameter(f"{backend!r} is not one of {', '.join(BACKENDS)}", param_hint="--backend")
    if claim_class not in get_args(ClaimClass):
        raise typer.BadParameter(f"{claim_class!r} is not one of {', '.join(get_args(ClaimClass))}",
                                 param_hint="--claim-class")
    b: Backend = backend  # narrowed by the check above
    opts = BenchOptions(url=url, backend=b, num_prompts=num_prompts, max_concurrency=max_concurrency,
                        random_input_len=random_input_len, random_output_len=random_output_len,
                        random_range_ratio=random_range_ratio, seed=seed, vocab_size=vocab_size, model=model,
                        claim_class=claim_class,  # type: ignore[arg-type]  # checked above
                        percentiles=ps, request_timeout_s=request_timeout, name=name)

    def report(event: Event) -> None:
        match event:
            case QuickStart():
                console.print(f"sending {event.num_prompts} prompts to {esc(event.url)} ({event.protocol}), "
                              f"at most {event.concurrency} in flight"
                              + (" — SIMULATED server" if event.simulated else ""))

    out = run_quick_bench(opts, resolve_workspace(workspace), reporter=report)
    label = sim_label(out.simulated)
    console.print(latency_grid([("", str(opts.concurrency), out.summary["latency"])], ps,
                               title=f"quick screen: latency (ms){label}",
                               caption="Over every completed request. TPOT = (last - first token event) / tokens "
                               "after the first event; ITL per token (dsv4h definitions, harness.measure.latency; "
                               "the peers' per-chunk ITL/TPOT are in quick.json as *_bench_*)."))
    console.print(throughput_table(out, opts.concurrency))
    a = out.finished.archive
    console.print(f"archive {a.archive_id} ({a.status}) at {esc(a.path)}")
    console.print("protocol class quick-bench: a quick screen, not a formal result "
                  "(formal claims come from 'dsv4h campaign run')")
    print_findings(out.finished.findings)
    end_run(out.finished.verdict, error=out.error, status=a.status, archive_id=a.archive_id)
