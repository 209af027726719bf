"""``dsv4h sim``: run the embedded SGLang-compatible simulator and list its profiles."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer
from rich.console import Console
from rich.table import Table

from harness.aio import new_event_loop
from harness.sim import PROFILES, SimOptions, analytic_decode_rate, analytic_prefill_rate, serve

app = typer.Typer(
    help="Run the built-in SGLang-compatible simulator (results against it are labelled 'simulated').\n\n"
    "Example: dsv4h sim serve --profile paper-tp8 --port 30021",
    no_args_is_help=True,
)


@app.command("serve")
def serve_cmd(
    host: Annotated[str, typer.Option(help="Address to bind.")] = "127.0.0.1",
    port: Annotated[int, typer.Option(help="Port to bind (0 picks a free one; the URL is printed).")] = 0,
    profile: Annotated[str, typer.Option(help="Simulator profile (see `dsv4h sim profiles`).")] = "paper-tp8",
    stream_mode: Annotated[
        str, typer.Option(help="cumulative | delta | skip-tokenizer-init.")
    ] = "cumulative",
    stream_interval: Annotated[int, typer.Option(help="One streamed event every N decode steps.")] = 1,
    time_scale: Annotated[float, typer.Option(help="Multiply every model duration by this.")] = 1.0,
    step_factor: Annotated[float, typer.Option(help="Multiply decode step time (1/1.1 = +10% faster).")] = 1.0,
    startup_delay: Annotated[float, typer.Option(help="Seconds during which /health answers 503.")] = 0.0,
    die_after_requests: Annotated[
        int | None, typer.Option(help="Die (cut every connection, exit) when request N+1 arrives.")
    ] = None,
    die_after_s: Annotated[float | None, typer.Option(help="Die this many seconds after ready.")] = None,
    fault: Annotated[
        str | None, typer.Option(help="Inject a fault: close_mid_stream[:k] | error_event[:k] | "
                                 "slow_first_byte[:ms] | http_500.")
    ] = None,
    fault_every: Annotated[int, typer.Option(help="Apply --fault to every N-th /generate request.")] = 1,
    disable_radix_cache: Annotated[bool, typer.Option(help="Never report cached tokens.")] = False,
    ready_file: Annotated[Path | None, typer.Option(help="Write the URL here once listening.")] = None,
) -> None:
    """Serve until Ctrl-C / SIGTERM; prints `dsv4h-sim listening on URL` once listening.

    Example: dsv4h sim serve --profile fast --port 0 --stream-mode delta --fault close_mid_stream:3
    """
    options = SimOptions.build(
        host=host, port=port, profile=profile, stream_mode=stream_mode, stream_interval=stream_interval,
        time_scale=time_scale, step_factor=step_factor, startup_delay_s=startup_delay,
        die_after_requests=die_after_requests, die_after_s=die_after_s, fault=fault,
        fault_every=fault_every, disable_radix_cache=disable_radix_cache,
    )

    def announce(url: str) -> None:
        typer.echo(f"dsv4h-sim listening on {url}")

    loop = new_event_loop()
    try:
        loop.run_until_complete(serve(options, ready_file=ready_file, on_ready=announce))
    finally:
        loop.close()


@app.command("profiles")
def profiles_cmd() -> None:
    """List the simulator profiles with their decode tiers and prefill model.

    Example: dsv4h sim profiles
    """
    console = Console()
    for prof in PROFILES.values():
        table = Table(title=f"{prof.name}: {prof.description}", title_justify="left")
        table.add_column("tier")
        table.add_column("resident decode tok/s", justify="right")
        table.add_column("step ms", justify="right")
        table.add_column("prefill tok/s (8K prompts)", justify="right")
        for batch, _ in prof.decode_tiers:
            rate = analytic_decode_rate(prof, batch)
            table.add_row(
                f"C{batch}", f"{rate:.2f}", f"{1000 * batch / rate:.3f}",
                f"{analytic_prefill_rate(prof, batch, 8192):.2f}",
            )
        console.print(table)
        console.print(
            f"prefill a={prof.prefill_a_s} s, p={prof.prefill_rate_tps:g} tok/s, admission "
            f"{prof.prefill_admission}, chunk budget {prof.chunk_budget}, max running {prof.max_running}, "
            f"natural EOS {prof.eos_min}..{prof.eos_max} tokens\n"
        )
