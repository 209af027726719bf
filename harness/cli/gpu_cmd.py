"""``dsv4h gpu owners|memory``: who holds GPU memory, and how much memory each GPU uses."""

from __future__ import annotations

import json
from typing import Annotated, Any

import typer
from rich.table import Table

from harness.cli.common import console
from harness.cli.listing import CsvOpt, as_csv
from harness.service.devices.gpu import OwnersSnapshot, format_bytes, gpu_keys
from harness.service.devices.gpu_probe import (
    OWNERS_FILE_ENV,
    SOURCE_CHOICES,
    current_create_times,
    process_tree,
    read_gpu_memory,
    read_gpu_owners,
)
from harness.service.devices.memory import samples_from_snapshot
from harness.service.devices.ownership import classify_owners

app = typer.Typer(
    help="GPU owners and memory, read with amd-smi, NVML (pynvml) or nvidia-smi.\n\n"
    "Example: dsv4h gpu owners --pid 12345   # which owners belong to PID 12345's tree",
    no_args_is_help=True,
)

SourceOpt = Annotated[str, typer.Option(
    "--source", help=f"tool to read: {'|'.join(SOURCE_CHOICES)} (auto: amd-smi, else NVML, else nvidia-smi)")]
JsonOpt = Annotated[bool, typer.Option("--json", help="print JSON (raw tool output included) instead of a table")]

_NO_TOOLS = ("no GPU tool found on this machine (looked for amd-smi, NVML via pynvml, nvidia-smi): "
             "no GPU owners or memory to report")


def _echo_json(obj: Any) -> None:
    typer.echo(json.dumps(obj, indent=1))


def _check_source(source: str) -> None:
    if source not in SOURCE_CHOICES:
        raise typer.BadParameter(f"{source!r} is not one of {', '.join(SOURCE_CHOICES)}",
                                 param_hint="--source")


def _gpu_cell(gpu: int | str, snap: OwnersSnapshot) -> str:
    """The GPU's index when the snapshot's devices know it (nvidia-smi reports UUIDs), else as reported."""
    keys = gpu_keys(gpu, snap.devices)
    return next((str(d.index) for d in snap.devices if str(d.index) in keys), str(gpu))


def _devices_caption(snap: OwnersSnapshot) -> str:
    return f"source {snap.source}, {len(snap.devices)} device(s), read {snap.wall_iso}"


@app.command("owners")
def owners_cmd(
    as_json: JsonOpt = False,
    csv_out: CsvOpt = False,
    source: SourceOpt = "auto",
    pid: Annotated[int | None, typer.Option(
        "--pid", help="classify owners as owned/unrelated relative to this PID and its descendants")] = None,
) -> None:
    """List the processes holding GPU memory (GPU, PID, name, memory).

    With --pid, each owner is marked owned (in that PID's process tree) or unrelated. Owners are
    matched by PID and process birth time, never by name. Owners listed in $DSV4H_GPU_OWNERS_FILE
    are added. Without any GPU tool it says so and exits 0.

    --csv prints one row per owner.

    Example: dsv4h gpu owners --json --source nvidia-smi
    """
    _check_source(source)
    snap = read_gpu_owners(source)
    tree = process_tree(pid) if pid is not None else None
    classified = (classify_owners(snap, None, tree, current=current_create_times(p.pid for p in snap.processes))
                  if tree is not None else None)
    if csv_out:
        verdicts = [c.verdict for c in classified] if classified is not None else [None] * len(snap.processes)
        typer.echo(as_csv([{**p.to_dict(), "verdict": v, "source_tool": snap.source, "wall_iso": snap.wall_iso}
                           for p, v in zip(snap.processes, verdicts, strict=True)]), nl=False)
        return
    if as_json:
        owners = ([c.to_dict() for c in classified] if classified is not None
                  else [{**p.to_dict(), "verdict": None} for p in snap.processes])
        _echo_json({"source": snap.source, "wall_iso": snap.wall_iso, "relative_to_pid": pid,
                    "owned_tree": [list(t) for t in tree] if tree is not None else None,
                    "owners": owners, "devices": [d.to_dict() for d in snap.devices],
                    "available": snap.available, "raw": dict(snap.raw)})
        return
    if not snap.available:
        console.print(_NO_TOOLS)
        return
    if not snap.processes:
        console.print(f"no process holds GPU memory ({_devices_caption(snap)})")
        return
    table = Table(title="GPU owners", caption=_devices_caption(snap))
    for col in ("GPU", "PID", "name", "memory", f"vs PID {pid}" if pid is not None else "class"):
        table.add_column(col, justify="right" if col in ("PID", "memory") else "left")
    rows = (classified if classified is not None else [None] * len(snap.processes))
    for p, c in zip(snap.processes, rows, strict=True):
        verdict = "-" if c is None else ("[green]owned[/]" if c.verdict == "owned" else "[red]unrelated[/]")
        table.add_row(_gpu_cell(p.gpu, snap), str(p.pid), p.name or "N/A", format_bytes(p.vram_bytes),
                      verdict + (" (injected)" if p.source == "injected" else ""))
    console.print(table)
    if any(p.source == "injected" for p in snap.processes):
        console.print(f"(injected owners come from ${OWNERS_FILE_ENV})")


@app.command("memory")
def memory_cmd(as_json: JsonOpt = False, csv_out: CsvOpt = False, source: SourceOpt = "auto") -> None:
    """Take one memory sample of every GPU (used and total).

    JSON and CSV (one row per device) give bytes; the table gives binary units. Without any GPU tool
    it says so and exits 0.

    Example: dsv4h gpu memory --json
    """
    _check_source(source)
    snap = read_gpu_memory(source)
    samples = samples_from_snapshot(snap)
    if csv_out:
        typer.echo(as_csv([{"t_monotonic_ns": x.t_monotonic_ns, "wall_iso": x.wall_iso, "device": x.device,
                            "used_bytes": x.used_bytes, "total_bytes": x.total_bytes, "source_tool": snap.source}
                           for x in samples]), nl=False)
        return
    if as_json:
        _echo_json({"source": snap.source, "available": snap.source != "none",
                    "samples": [{"t_monotonic_ns": s.t_monotonic_ns, "wall_iso": s.wall_iso, "device": s.device,
                                 "used_bytes": s.used_bytes, "total_bytes": s.total_bytes} for s in samples],
                    "devices": [d.to_dict() for d in snap.devices], "raw": dict(snap.raw)})
        return
    if snap.source == "none":
        console.print(_NO_TOOLS)
        return
    table = Table(title="GPU memory (one sample)", caption=_devices_caption(snap))
    for col in ("GPU", "UUID", "used", "total", "used %"):
        table.add_column(col, justify="right" if col in ("used", "total", "used %") else "left")
    for d in snap.devices:
        pct = (f"{100 * d.memory_used_bytes / d.memory_total_bytes:.1f}"
               if d.memory_used_bytes is not None and d.memory_total_bytes else "?")
        table.add_row(str(d.index), d.uuid or "?", format_bytes(d.memory_used_bytes),
                      format_bytes(d.memory_total_bytes), pct)
    console.print(table)
