"""``dsv4h archive verify|show|list``: hashed result archives."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Annotated

import typer
from rich.table import Table

from harness.cli.common import WorkspaceOpt, console, default_workspace
from harness.cli.render import pd_table
from harness.errors import ArchiveError
from harness.measure.results import CellResult
from harness.store.archive import find_archive, iter_archives, open_archive, verify_archive

app = typer.Typer(help="Hashed result archives.\n\nExample: dsv4h archive verify ws/archives/<id>",
                  no_args_is_help=True)


def _ws(workspace: Path) -> Path:
    return workspace if str(workspace) != "." else default_workspace()


@app.command("verify")
def verify_cmd(archive: Annotated[str, typer.Argument(help="archive directory or id")],
               workspace: WorkspaceOpt = Path()) -> None:
    """Re-hash every file of an archive; name any changed, missing or extra file (exit 6).

    Example: dsv4h archive verify archives/3f2a9c01d4e5b6a7
    """
    path = find_archive(archive, _ws(workspace))
    problems = verify_archive(path)
    if problems:
        raise ArchiveError(f"archive {path} failed verification:\n  " + "\n  ".join(problems),
                           hint="an archive must not be edited; restore it from a copy or re-run the campaign")
    n = len(open_archive(path).manifest["files"])
    console.print(f"archive {path.name}: OK ({n} files match the manifest)")


@app.command("show")
def show_cmd(archive: Annotated[str, typer.Argument(help="archive directory or id")],
             workspace: WorkspaceOpt = Path()) -> None:
    """Summarise an archive: run, service, status and its P/D table.

    Example: dsv4h archive show 3f2a9c01
    """
    a = open_archive(find_archive(archive, _ws(workspace)))
    run = a.run.to_json()
    t = Table.grid(padding=(0, 2))
    for k in ("campaign", "kind", "claim_class", "protocol_class", "backend", "created_wall", "plan_id",
              "resumed_from", "error"):
        t.add_row(k, str(run.get(k)))
    t.add_row("status", a.status)
    t.add_row("files", str(len(a.manifest["files"])))
    console.print(f"[bold]archive {a.archive_id}[/] ({a.path})")
    console.print(t)
    if (a.path / "results.json").exists():
        cells = [CellResult(**{k: tuple(v) if isinstance(v, list) else v for k, v in c.items()})  # type: ignore[arg-type]
                 for c in a.json("results.json")["cells"]]
        if cells:
            console.print(pd_table(cells, title=run.get("campaign", ""), simulated=a.run.simulated))
    svc = a.json("service.json").get("services", []) if (a.path / "service.json").exists() else []
    for s in svc:
        info = s.get("server_info", {})
        console.print(f"service #{s.get('start_index')}: {s.get('backend')} {s.get('url')} pid "
                      f"{(s.get('process') or {}).get('pid')} model {info.get('model_path')} tp {info.get('tp_size')} "
                      f"version {info.get('version')}")


@app.command("list")
def list_cmd(workspace: WorkspaceOpt = Path(), as_json: Annotated[bool, typer.Option("--json")] = False) -> None:
    """List the archives of a workspace, oldest first.

    Example: dsv4h archive list -w ./ws
    """
    rows = [(a.archive_id, a.status, a.run.to_json()) for a in iter_archives(_ws(workspace))]
    if as_json:
        console.print_json(json.dumps([{"archive_id": i, "status": s, **r} for i, s, r in rows]))
        return
    t = Table(title="archives")
    for col in ("id", "status", "campaign", "kind", "claim", "protocol", "backend", "created"):
        t.add_column(col)
    for i, s, r in rows:
        t.add_row(i, s, r.get("campaign", ""), r.get("kind", ""), r.get("claim_class", ""),
                  r.get("protocol_class", ""), r.get("backend", ""), r.get("created_wall", ""))
    console.print(t)
