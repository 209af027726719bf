"""``dsv4h sim``: run the embedded SGLang-compatible simulator and list its profiles."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Annotated

import typer
from pydantic import ValidationError
from rich.table import Table

from harness.aio import new_event_loop
from harness.cli.common import PlainConsole
from harness.cli.listing import CsvOpt, JsonOpt, emit
from harness.errors import ArchiveError, SpecError
from harness.sim import (
    PROFILES,
    SimOptions,
    analytic_decode_rate,
    analytic_prefill_rate,
    profile_for,
)
from harness.sim.cluster import serve_cluster
from harness.sim.profiles import SimProfile
from harness.sim.speculation import SpeculativeSpec

app = typer.Typer(
    help="Run the built-in SGLang-compatible simulator (results against it are labelled 'simulated').\n\n"
    "Example: dsv4h sim serve --profile paper-tp8 --port 30021",
    no_args_is_help=True,
)


def with_speculation(prof: SimProfile, block: str | None) -> SimProfile:
    """``prof`` with the ``--speculative`` JSON block (``SpecError`` naming what is wrong)."""
    if block is None:
        return prof
    try:
        spec = SpeculativeSpec.model_validate(json.loads(block))
    except (ValueError, ValidationError) as exc:
        raise SpecError(f"--speculative: {' '.join(str(exc).split())[:300]}",
                        hint="give a JSON object with draft_tokens, accept_probs and verify_cost") from None
    return prof.model_copy(update={"speculative": spec})


@app.command("serve")
def serve_cmd(
    host: Annotated[str, typer.Option(help="Address to bind.")] = "127.0.0.1",
    port: Annotated[int, typer.Option(help="Port to bind (0 picks a free one; the URL is printed).")] = 0,
    profile: Annotated[str, typer.Option(help="Simulator profile (see `dsv4h sim profiles`).")] = "paper-tp8",
    profile_file: Annotated[Path | None, typer.Option(
        help="Simulator profile YAML file (replaces --profile; built-ins: harness/sim/profile_files/).")] = None,
    stream_mode: Annotated[
        str, typer.Option(help="cumulative | delta | skip-tokenizer-init.")
    ] = "cumulative",
    stream_interval: Annotated[int, typer.Option(help="One streamed event every N decode steps.")] = 1,
    openai_usage: Annotated[str, typer.Option(
        help="Usage in OpenAI streams: honor (per chunk when asked, like vLLM) | final-only | none.")] = "honor",
    time_scale: Annotated[float, typer.Option(help="Multiply every model duration by this.")] = 1.0,
    step_factor: Annotated[float, typer.Option(help="Multiply decode step time (1/1.1 = +10% faster).")] = 1.0,
    startup_delay: Annotated[float, typer.Option(help="Seconds during which /health answers 503.")] = 0.0,
    die_after_requests: Annotated[
        int | None, typer.Option(help="Die (cut every connection, exit) when request N+1 arrives.")
    ] = None,
    die_after_s: Annotated[float | None, typer.Option(help="Die this many seconds after ready.")] = None,
    fault: Annotated[
        str | None, typer.Option(help="Inject a fault: close_mid_stream[:k] | error_event[:k] | "
                                 "slow_first_byte[:ms] | http_500 | stall[:k] | stall_loop[:ms] | retract[:k] | "
                                 "ignore_salt.")
    ] = None,
    fault_every: Annotated[int, typer.Option(help="Apply --fault to every N-th /generate request.")] = 1,
    fault_first: Annotated[
        int | None, typer.Option(help="Apply --fault only among the first N /generate requests.")
    ] = None,
    allow_request_faults: Annotated[bool, typer.Option(
        help="Honour a request body's sim_fault field (test hook; refused with HTTP 400 without it).")] = False,
    disable_radix_cache: Annotated[bool, typer.Option(help="Never report cached tokens.")] = False,
    ready_file: Annotated[Path | None, typer.Option(help="Write the URL here once listening.")] = None,
    processes: Annotated[int, typer.Option(
        help="Simulator processes sharing the port (SO_REUSEPORT; harness.sim.cluster).")] = 1,
    model_path: Annotated[str | None, typer.Option(
        help="The model path the server reports (a local model directory the run records; default: the "
        "profile's sim:// name).")] = None,
    speculative: Annotated[str | None, typer.Option(
        help="Speculative decoding on top of the profile, as JSON (docs/simulator.md), e.g. "
        '\'{"draft_tokens": 3, "accept_probs": [0.8, 0.6, 0.4], "verify_cost": 1.25}\'')] = None,
    nnodes: Annotated[int, typer.Option(
        help="Nodes of a simulated multi-node service (SGLang's --nnodes; harness.sim.rendezvous).", min=1)] = 1,
    node_rank: Annotated[int, typer.Option(
        help="This process's node rank (0 serves HTTP once every rank joined).", min=0)] = 0,
    dist_init_addr: Annotated[str | None, typer.Option(
        help="HOST:PORT where rank 0 gathers the other ranks (needed with --nnodes > 1).")] = None,
) -> None:
    """Serve until Ctrl-C / SIGTERM; prints `dsv4h-sim listening on URL` once listening.

    Example: dsv4h sim serve --profile fast --port 0 --stream-mode delta --fault close_mid_stream:3

    Example (two ranks): dsv4h sim serve --profile fast --nnodes 2 --node-rank 0 --dist-init-addr
    127.0.0.1:25000, and the same with --node-rank 1
    """
    options = SimOptions.build(
        host=host, port=port, profile=with_speculation(profile_for(profile, profile_file), speculative),
        stream_mode=stream_mode,
        stream_interval=stream_interval,
        time_scale=time_scale, step_factor=step_factor, startup_delay_s=startup_delay,
        die_after_requests=die_after_requests, die_after_s=die_after_s, fault=fault,
        fault_every=fault_every, fault_first=fault_first, disable_radix_cache=disable_radix_cache,
        openai_usage=openai_usage, request_faults=allow_request_faults, model_path=model_path,
    )

    def announce(url: str) -> None:
        typer.echo(f"dsv4h-sim listening on {url}")

    loop = new_event_loop()
    if nnodes > 1 or node_rank or dist_init_addr:
        if processes != 1:
            raise SpecError("--processes and --nnodes cannot be combined", hint="simulate one process per rank")
        from harness.sim.rendezvous import serve_multinode

        try:
            loop.run_until_complete(serve_multinode(options, nnodes, node_rank, dist_init_addr,
                                                    ready_file=ready_file, on_ready=announce))
        finally:
            loop.close()
        return
    try:
        loop.run_until_complete(serve_cluster(options, processes, ready_file=ready_file, on_ready=announce))
    finally:
        loop.close()


@app.command("profiles")
def profiles_cmd(json_out: JsonOpt = False, csv_out: CsvOpt = False) -> None:
    """List the simulator profiles with their decode tiers and prefill model (--json / --csv: one
    row per profile and tier).

    Example: dsv4h sim profiles
    """
    console = PlainConsole()
    if json_out or csv_out:
        rows = [{"profile": prof.name, "tier": batch, "resident_decode_tok_s": analytic_decode_rate(prof, batch),
                 "step_ms": 1000 * batch / analytic_decode_rate(prof, batch),
                 "prefill_tok_s_8k": analytic_prefill_rate(prof, batch, 8192), "prefill_a_s": prof.prefill_a_s,
                 "prefill_rate_tok_s": prof.prefill_rate_tps, "max_running": prof.max_running}
                for prof in PROFILES.values() for batch, _ in prof.decode_tiers]
        emit(console, rows, (), json_out=json_out, csv_out=csv_out)
        return
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


@app.command("calibrate")
def calibrate_cmd(
    archive: Annotated[str, typer.Argument(help="formal-matrix archive (path, or id inside --workspace)")],
    out: Annotated[Path, typer.Option("--out", help="profile YAML file to write")],
    workspace: Annotated[Path, typer.Option("--workspace", "-w", help="workspace holding the archive")] = Path(),
    name: Annotated[str | None, typer.Option(help="profile name (default: calibrated-<archive id>)")] = None,
    gather_s: Annotated[float, typer.Option(help="the server's batching window (s), not fitted")] = 0.020,
    admission: Annotated[int, typer.Option(help="max requests in one prefill forward")] = 16,
    chunk_budget: Annotated[int | None, typer.Option(
        help="max prompt tokens per forward (default: the server's chunked_prefill_size)")] = None,
    allow_invalid: Annotated[bool, typer.Option(
        "--allow-invalid", help="fit from cells the archive's verdict marks invalid too (a warning is printed "
        "and the profile records them under calibration.invalid_cells)")] = False,
) -> None:
    """Fit a simulator profile (decode rate per tier, prefill fixed cost and rate, admission) from a
    formal-matrix archive, so CI can replay the measured hardware. Only cells the archive's verdict
    holds valid are used: a cell the evidence invalidates is refused (exit 7, naming it and its
    rules) unless --allow-invalid is given. The profile records the archive, its data origin and
    any invalid cell it was fitted from (calibration).

    Example: dsv4h sim calibrate ws/archives/<id> --out campaigns/profiles/my-host.yaml
    """
    import json

    from harness.cli.validity import invalid_reasons, verdict_of
    from harness.formats import atomic_write
    from harness.sim.calibrate import calibrate_profile, check_cells, invalid_line, profile_yaml
    from harness.sim.profiles import CalibrationSource
    from harness.store.archive import find_archive, open_verified
    from harness.store.view import ArchiveView

    arch = open_verified(find_archive(archive, workspace))
    files = ArchiveView(arch)
    if not files.has("results.json"):
        raise ArchiveError(f"archive {arch.archive_id} has no results.json: it is not a formal matrix",
                           hint="calibrate from the archive of a formal P/D matrix")
    cells = [c for c in files.doc("results.json").get("cells", []) if c.get("median_tok_s", 0) > 0
             and c["workload"] in ("decode", "prefill")]
    verdict = verdict_of(workspace, arch)
    invalid = invalid_reasons(verdict, [str(c["cell_id"]) for c in cells])
    check_cells(arch.archive_id, invalid, allow_invalid=allow_invalid)
    decode = {int(c["concurrency"]): float(c["median_tok_s"]) for c in cells if c["workload"] == "decode"}
    prefill = {int(c["concurrency"]): float(c["median_tok_s"]) for c in cells if c["workload"] == "prefill"}
    recs = arch.records_table().to_pydict()
    lens = [n for n, w in zip(recs["input_len"], recs["workload"], strict=True) if w == "prefill"]
    budget = chunk_budget
    if budget is None:
        found = json.dumps(files.doc("service.json")) if files.has("service.json") else ""
        key = '"chunked_prefill_size": '
        value = found.split(key, 1)[1].split(",", 1)[0].split("}", 1)[0] if key in found else ""
        budget = int(value) if value.isdigit() else 32768
    prof = calibrate_profile(name or f"calibrated-{arch.archive_id}", decode, prefill,
                             prompt_len=sum(lens) / len(lens) if lens else 8192, gather_s=gather_s,
                             chunk_budget=budget, admission=admission, source=f"archive {arch.archive_id}",
                             calibration=CalibrationSource(archive_id=arch.archive_id,
                                                           data_origin=verdict.data_origin,
                                                           invalid_cells={k: tuple(v) for k, v in invalid.items()}))
    atomic_write(out, profile_yaml(prof).encode())
    for batch, rate in prof.decode_tiers:
        typer.echo(f"decode C{batch}: {rate:.2f} tok/s")
    typer.echo(f"prefill a={prof.prefill_a_s:.4f} s, p={prof.prefill_rate_tps:.1f} tok/s; wrote {out}")
    if invalid:
        typer.echo(f"warning: fitted from {len(invalid)} invalid cell(s) (--allow-invalid): {invalid_line(invalid)}; "
                   "the profile records them")
