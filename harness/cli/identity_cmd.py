"""``dsv4h identity show|diff|model``: the runtime identity of what a run served (docs/identity.md)."""

from __future__ import annotations

import json
from collections.abc import Mapping
from pathlib import Path
from typing import Annotated, Any

import typer

from harness.cli.common import WorkspaceOpt, console, esc, resolve_workspace
from harness.cli.listing import Col, table
from harness.errors import ArchiveError
from harness.hashing import sha256_json
from harness.service.identity.runtime_identity import COMPONENTS, entry_differences, identity_diff, runtime_identity
from harness.store.archive import Archive, find_archive, open_verified
from harness.store.view import ArchiveView

app = typer.Typer(help="Runtime identity: what a run served (model, source trees, launch, packages, server "
                  "config, mapped libraries, patches, speculation), shown and compared.\n\n"
                  "Example: dsv4h identity diff 3f2a9c01 77b1e0aa -w ws", no_args_is_help=True)

JsonOpt = Annotated[bool, typer.Option("--json", help="print the result as one JSON object (every field)")]
ServiceOpt = Annotated[int | None, typer.Option("--service", help="the service's start index in a multi-service "
                                                "archive (as 'dsv4h archive show' numbers them; default: the first)")]


def _service(a: Archive, start_index: int | None) -> Mapping[str, Any]:
    files = ArchiveView(a)
    if not files.has("service.json"):
        raise ArchiveError(f"archive {a.archive_id} has no service.json: it records no service",
                           hint="compare archives of runs that started or attached a service")
    services = [s for s in files.doc("service.json").get("services") or [] if isinstance(s, Mapping)]
    if not services:
        raise ArchiveError(f"archive {a.archive_id}: service.json lists no service",
                           hint="compare archives of runs that started or attached a service")
    if start_index is None:
        return services[0]
    for s in services:
        if s.get("start_index") == start_index:
            return s
    have = ", ".join(str(s.get("start_index")) for s in services)
    raise ArchiveError(f"archive {a.archive_id} has no service with start index {start_index} (it has: {have})",
                       hint="pick one of those with --service (in a diff: --service-a / --service-b)")


def _packages(a: Archive) -> Mapping[str, Any] | None:
    pkgs = ArchiveView(a).doc("environment.json", {}).get("packages")
    return pkgs if isinstance(pkgs, Mapping) else None


def _identity(record: Mapping[str, Any], packages: Mapping[str, Any] | None) -> tuple[dict[str, Any], str]:
    """The recorded ``stack.runtime_identity`` when there is one, else computed from the record."""
    stack = record.get("stack")
    stored = stack.get("runtime_identity") if isinstance(stack, Mapping) else None
    if isinstance(stored, Mapping) and isinstance(stored.get("components"), Mapping):
        return dict(stored), "recorded"
    return runtime_identity(record, packages=packages), "computed from the service record"


def _open(ref: str, workspace: Path, start_index: int | None) -> tuple[Archive, Mapping[str, Any]]:
    a = open_verified(find_archive(ref, resolve_workspace(workspace)))
    return a, _service(a, start_index)


@app.command("show")
def show_cmd(archive: Annotated[str, typer.Argument(help="archive directory or id")],
             workspace: WorkspaceOpt = Path(), service: ServiceOpt = None, json_out: JsonOpt = False) -> None:
    """Show one service's runtime identity and the hash of each of its components.

    The recorded identity (service.json stack.runtime_identity), or one computed from the service
    record of an archive written before identities were recorded; 'source' says which.

    Example: dsv4h identity show 3f2a9c01 --service 2 -w ws
    """
    a, rec = _open(archive, workspace, service)
    ident, source = _identity(rec, _packages(a))
    out = {"archive_id": a.archive_id, "service": rec.get("start_index"), "name": rec.get("name"),
           "source": source, **ident}
    if json_out:
        typer.echo(json.dumps(out, indent=2, sort_keys=True))
        return
    console.print(f"[bold]runtime identity[/] of service #{esc(rec.get('start_index'))} ({esc(rec.get('name'))}) "
                  f"in archive {esc(a.archive_id)}: {esc(ident.get('hash'))} ({esc(source)})")
    comps = ident.get("components") or {}
    names = [*COMPONENTS, *sorted(set(comps) - set(COMPONENTS))]
    rows = [{"component": n, "sha256": comps.get(n)} for n in names]
    console.print(table(rows, (Col("component", "component"), Col("sha256", "sha256", ident=True))))
    empty = [n for n in names if comps.get(n) == sha256_json(None)]
    if empty:
        console.print(f"none recorded (the hash of null): {esc(', '.join(empty))}")


@app.command("diff")
def diff_cmd(a_ref: Annotated[str, typer.Argument(metavar="A", help="archive directory or id")],
             b_ref: Annotated[str, typer.Argument(metavar="B", help="archive directory or id")],
             workspace: WorkspaceOpt = Path(),
             service_a: Annotated[int | None, typer.Option("--service-a", help="service start index in A")] = None,
             service_b: Annotated[int | None, typer.Option("--service-b", help="service start index in B")] = None,
             json_out: JsonOpt = False) -> None:
    """Name the runtime-identity components, and the entries inside them, that differ between A and B.

    Entries are source trees, mapped libraries' basenames, model files and shards, packages, server
    arguments and environment variables (docs/identity.md). Exit 0 whether they differ or not.

    Example: dsv4h identity diff 3f2a9c01 77b1e0aa --service-b 2 -w ws --json
    """
    a, ra = _open(a_ref, workspace, service_a)
    b, rb = _open(b_ref, workspace, service_b)
    pa, pb = _packages(a), _packages(b)
    ia, _ = _identity(ra, pa)
    ib, _ = _identity(rb, pb)
    entries = entry_differences(ra, rb, packages_a=pa, packages_b=pb)
    rows: list[dict[str, Any]] = [{"component": comp, "a": ha, "b": hb,
                                   "entries": [e for e in entries.get(comp, []) if e]}
            for comp, ha, hb in identity_diff(ia, ib)]
    out = {"a": {"archive_id": a.archive_id, "service": ra.get("start_index"), "hash": ia.get("hash")},
           "b": {"archive_id": b.archive_id, "service": rb.get("start_index"), "hash": ib.get("hash")},
           "same": ia.get("hash") == ib.get("hash") and not rows, "differences": rows}
    if json_out:
        typer.echo(json.dumps(out, indent=2, sort_keys=True))
        return
    console.print(f"A: archive {esc(a.archive_id)} service #{esc(ra.get('start_index'))}: {esc(ia.get('hash'))}")
    console.print(f"B: archive {esc(b.archive_id)} service #{esc(rb.get('start_index'))}: {esc(ib.get('hash'))}")
    if not rows:
        console.print("same runtime identity: every component matches")
        return
    shown = [{"component": r["component"], "entries": ", ".join(r["entries"]) or "(the component as a whole)",
              "a": (r["a"] or "—")[:16], "b": (r["b"] or "—")[:16]} for r in rows]
    console.print(table(shown, (Col("component", "component", ident=True), Col("entries", "differing entries"),
                                Col("a", "A sha256[:16]", ident=True), Col("b", "B sha256[:16]", ident=True)),
                        title=f"{len(rows)} of {len(COMPONENTS)} components differ"))


@app.command("model")
def model_cmd(path: Annotated[Path, typer.Argument(help="model directory (config.json, tokenizer, safetensors)")],
              hash_weights: Annotated[bool, typer.Option("--hash-weights", help="also hash every weight byte of "
                                                         "every shard (slow: reads the whole model; cached "
                                                         "in the workspace by path, size and mtime)")] = False,
              workspace: WorkspaceOpt = Path(),
              json_out: JsonOpt = False) -> None:
    """Hash a model directory as a run records it (every weight byte only with --hash-weights).

    Config, generation config, tokenizer files, the shard index and each shard's safetensors header.
    A directory that does not exist is refused (exit 4); an unreadable file is named in the output.

    Example: dsv4h identity model /models/DeepSeek-V4-Flash --hash-weights -w ws
    """
    from harness.service.identity.model_identity import model_identity, model_statement

    cache = resolve_workspace(workspace) / ".cache" / "weight-hashes.json"  # the one a run uses
    if hash_weights and not json_out:
        from rich.progress import BarColumn, DownloadColumn, Progress, TimeRemainingColumn, TransferSpeedColumn

        with Progress("hashing weights", BarColumn(), DownloadColumn(), TransferSpeedColumn(), TimeRemainingColumn(),
                      console=console, transient=True) as bar:
            task = bar.add_task("weights", total=None)
            ident = model_identity(path, hash_weights=True, cache_file=cache,
                                   progress=lambda done, total: bar.update(task, completed=done, total=total))
    else:
        ident = model_identity(path, hash_weights=hash_weights, cache_file=cache)
    if json_out:
        typer.echo(json.dumps(ident, indent=2, sort_keys=True))
        return
    console.print(f"[bold]model[/] {esc(ident.get('path', path))}")
    console.print(esc(ident.get("statement") or model_statement(ident)))
    rows = [{"file": k, "sha256": v} for k, v in sorted((ident.get("files") or {}).items())]
    rows += [{"file": f"{k} (header)", "sha256": v.get("header_sha256")}
             for k, v in sorted((ident.get("shard_headers") or {}).items())]
    rows += [{"file": f"{k} (weights)", "sha256": v} for k, v in sorted((ident.get("weights") or {}).items())]
    console.print(table(rows, (Col("file", "file"), Col("sha256", "sha256", ident=True))))
