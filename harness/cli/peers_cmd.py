"""``dsv4h import`` / ``dsv4h export``: peer tools' result formats in and out."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer

from harness.cli.common import WorkspaceOpt, console, resolve_workspace
from harness.store.archive import find_archive, open_verified
from harness.store.peers import MAX_IMPORT_BYTES, TOOLS, Tool, import_peer
from harness.store.peers_export import EXPORTS, export_archive


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
    tool_name: Tool = tool
    arch = import_peer(source, tool_name, resolve_workspace(workspace), name=name, max_bytes=max_bytes)
    console.print(f"imported {source} as external archive {arch.archive_id}")


def export(archive: Annotated[str, typer.Argument(help="archive id or path")],
           fmt: Annotated[str, typer.Option("--format", help=f"one of {', '.join(EXPORTS)}")],
           out: Annotated[Path, typer.Option("--out", help="file to write")],
           workspace: WorkspaceOpt = Path()) -> None:
    """Write an archive (measured or imported) in a peer tool's format or as CSV.

    Example: dsv4h export ARCHIVE --format sglang-bench --out result.jsonl -w ws
    """
    if fmt not in EXPORTS:
        raise typer.BadParameter(f"--format must be one of {', '.join(EXPORTS)}")
    arch = open_verified(find_archive(archive, resolve_workspace(workspace)))
    console.print(f"wrote {export_archive(arch, fmt, out)}")
