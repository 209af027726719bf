"""``dsv4h import`` / ``dsv4h export``: peer tools' result formats in and out."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer

from harness.cli.common import WorkspaceOpt, console, esc, resolve_workspace
from harness.cli.outcome import end_run, print_findings
from harness.store.archive import find_archive, open_verified
from harness.store.peers import MAX_IMPORT_BYTES, TOOLS, Tool, import_peer
from harness.store.peers.export import EXPORTS, INDEX, export_cells
from harness.store.view import ArchiveView


def import_(source: Annotated[Path, typer.Argument(help="the peer tool's result file (AIPerf: its profile_export.jsonl "
                                                       "or artifact directory)")],
            tool: Annotated[str, typer.Option("--tool", help=f"one of {', '.join(TOOLS)}")],
            workspace: WorkspaceOpt = Path(),
            name: Annotated[str | None, typer.Option("--name", help="campaign name of the archive")] = None,
            max_bytes: Annotated[int, typer.Option("--max-bytes", min=1, help="refuse a source file larger than "
                                                   "this many bytes")] = MAX_IMPORT_BYTES) -> None:
    """Import a peer tool's result as an archive of claim class 'external' (its own metric definitions
    named, the source file hashed and kept; never combined with measured claims). A file that is not the
    tool's result, or whose fields have the wrong types, ranges or counts, is refused with one error
    naming the field; nothing is written then.

    Example: dsv4h import result.jsonl --tool sglang-bench -w ws
    """
    if tool not in TOOLS:
        raise typer.BadParameter(f"--tool must be one of {', '.join(TOOLS)}")
    from harness.run.skeleton import settle

    tool_name: Tool = tool
    ws = resolve_workspace(workspace)
    arch = import_peer(source, tool_name, ws, name=name, max_bytes=max_bytes)
    done = settle(ws, arch.path)  # ledger rows and evidence at once, as after a campaign run
    ext = ArchiveView(arch).doc("external.json", {})
    server = ext.get("server") or {}
    who = (f"the server reported {server.get('version')} (dsv4h simulator)" if ext.get("data_origin") == "simulated"
           else f"the server reported {server.get('version')}" if server.get("reported_by")
           else "the file does not say which server it measured")
    console.print(f"imported {esc(source)} as external archive {arch.archive_id}")
    console.print(f"data origin: {ext.get('data_origin')} ({esc(who)}); ledgers: "
                  + (", ".join(f"{k} +{v}" for k, v in sorted(done.ledger_rows.items())) or "nothing new"))
    print_findings(done.findings)
    end_run(done.verdict, error=None, status=arch.status, archive_id=arch.archive_id)


def export(archive: Annotated[str, typer.Argument(help="archive id or path")],
           fmt: Annotated[str, typer.Option("--format", help=f"one of {', '.join(EXPORTS)}")],
           out: Annotated[Path, typer.Option("--out", help="file to write (a directory for one file per cell)")],
           workspace: WorkspaceOpt = Path(),
           cell: Annotated[str | None, typer.Option("--cell", help="export only this cell (its id)")] = None,
           files_per_cell: Annotated[bool, typer.Option("--files-per-cell", help="one file per cell into the "
                                                        "directory --out, plus index.json")] = False) -> None:
    """Write an archive (measured or imported) in a peer tool's format or as CSV.

    Each cell is its own run (never one summary over a whole matrix): sglang-bench one JSONL line per cell, guidellm one
    benchmark per cell, CSV rows with cell_id, workload, concurrency and data_origin; vllm-bench (or
    --files-per-cell) one file per cell into the directory --out, plus index.json. Every run carries
    the archive id, claim class, data origin (simulated, measured, or an import's external/unknown) and
    its validity from the archive's verdict (dsv4h_valid and dsv4h_invalid_rules; CSV valid and
    invalid_rules per request; the index the archive's verdict); invalid cells are named in a warning.

    Example: dsv4h export ARCHIVE --format vllm-bench --out exported/ -w ws
    """
    if fmt not in EXPORTS:
        raise typer.BadParameter(f"--format must be one of {', '.join(EXPORTS)}")
    from harness.cli.validity import export_verdict, mark, verdict_of

    ws = resolve_workspace(workspace)
    arch = open_verified(find_archive(archive, ws))
    done = export_cells(arch, fmt, out, cell=cell, files_per_cell=files_per_cell,
                        verdict=export_verdict(verdict_of(ws, arch)))
    origins = sorted({str(c["data_origin"]) for c in done.cells})
    what = "1 run" if len(done.cells) == 1 else f"{len(done.cells)} cells ({done.layout})"
    console.print(f"wrote {esc(done.path)}: {what}, data origin {', '.join(origins)}")
    if done.layout == "directory":
        console.print(f"index: {esc(done.path / INDEX)}")
    bad = [c for c in done.cells if c["valid"] is False]
    if bad:
        console.print(f"[yellow]warning:[/] {len(bad)} of {len(done.cells)} exported run(s) marked invalid by the "
                      "archive's evidence: "
                      + esc("; ".join(f"{c['cell_id'] or 'the run'} {mark(c['invalid_rules'])}" for c in bad)))
