"""``dsv4h archive verify|show|list|recover|timeline``: hashed result archives."""

from __future__ import annotations

import shlex
from pathlib import Path
from typing import Annotated, Any

import typer
from rich.table import Table

from harness.cli.common import PercentilesOpt, WorkspaceOpt, console, esc, existing_workspace, resolve_workspace
from harness.cli.listing import Col, CsvOpt, JsonOpt, as_json, emit
from harness.cli.render import cells_at, latency_table, pd_table
from harness.errors import ArchiveError
from harness.evidence.io import archive_verdict
from harness.evidence.verdict import Verdict
from harness.measure.latency import parse_percentiles
from harness.measure.results import CellResult
from harness.store.archive import Archive, find_archive, iter_archives, iter_partials, open_archive, verify_archive
from harness.store.view import ArchiveView

app = typer.Typer(help="Hashed result archives.\n\nExample: dsv4h archive verify ws/archives/<id>",
                  no_args_is_help=True)


def _ws(workspace: Path) -> Path:
    return resolve_workspace(workspace)


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
    console.print(f"archive {esc(path.name)}: OK ({n} files match the manifest)")


@app.command("show")
def show_cmd(archive: Annotated[str, typer.Argument(help="archive directory or id")],
             workspace: WorkspaceOpt = Path(), percentiles: PercentilesOpt = None) -> None:
    """Summarise an archive: run, service, status, its P/D table and, for a run with latency, its latency
    table (--percentiles: recomputed from the archive's records at those percentiles).

    Example: dsv4h archive show 3f2a9c01 --percentiles 50,90,95,99
    """
    ps = None if percentiles is None else parse_percentiles(percentiles)
    ws = _ws(workspace)
    a = open_archive(find_archive(archive, ws))
    problems = verify_archive(a.path)
    run = a.run.to_json()
    t = Table.grid(padding=(0, 2))
    for k in ("campaign", "kind", "claim_class", "protocol_class", "backend", "created_wall", "plan_id",
              "resumed_from", "error"):
        t.add_row(k, esc(run.get(k)))
    t.add_row("status", esc(a.status))
    t.add_row("files", str(len(a.manifest["files"])))
    t.add_row("verified", "yes (every file matches the manifest)" if not problems else
              "[bold red]NO[/]: " + esc("; ".join(problems[:5])))
    verdict = None if problems else archive_verdict(ws, a)
    if verdict is not None:
        t.add_row("origin", "[bold yellow]SIMULATED[/]" if verdict.simulated else esc(verdict.data_origin))
        t.add_row("evidence", _evidence_line(verdict))
    console.print(f"[bold]archive {esc(a.archive_id)}[/] ({esc(a.path)})")
    console.print(t)
    if problems:
        raise ArchiveError(f"archive {a.path} failed verification; its content is not shown:\n  "
                           + "\n  ".join(problems),
                           hint="an archive must not be edited; restore it from a copy or re-run the campaign")
    files = ArchiveView(a)  # the archive's declared files, each read once
    if files.has("results.json"):
        cells = [CellResult(**{k: tuple(v) if isinstance(v, list) else v for k, v in c.items()})  # type: ignore[arg-type]
                 for c in files.doc("results.json")["cells"]]
        if cells:
            console.print(pd_table(cells, title=esc(run.get("campaign", "")), simulated=a.run.simulated,
                                   verdict=verdict))
            if ps is not None:
                status = {str(r["round_id"]): str(r["status"]) for r in files.doc("results.json").get("rounds", [])}
                cells = cells_at(cells, a.records(), status, ps)
            lat = latency_table(cells, title=esc(run.get("campaign", "")), simulated=a.run.simulated,
                                percentiles=ps, verdict=verdict)
            if lat is not None:
                console.print(lat)
    if files.has("sweep.json"):
        from harness.cli.sweep_cmd import sweep_cell_line, sweep_latency_table

        sweep = files.doc("sweep.json")
        for c in sweep.get("cells", []):
            mark = verdict.mark(c.get("cell_id")) if verdict is not None else ""
            console.print(esc(sweep_cell_line(c)) + (f"  [bold red]{esc(mark)}[/]" if mark else ""))
        if ps is not None and sweep.get("cells"):
            console.print(sweep_latency_table(sweep["cells"], sweep.get("rounds", []), a.records(), ps,
                                              title=esc(run.get("campaign", "")), simulated=a.run.simulated))
    if files.has("external.json"):
        _show_import(files.doc("external.json"))
    svc = files.services()
    for s in svc:
        info = s.get("server_info", {})
        console.print(esc(f"service #{s.get('start_index')}: {s.get('backend')} {s.get('url')} pid "
                          f"{(s.get('process') or {}).get('pid')} model {info.get('model_path')} "
                          f"tp {info.get('tp_size')} version {info.get('version')}"))


def _evidence_line(v: Verdict) -> str:
    """The archive's decided evidence in one line: valid, or which rules invalidated what."""
    where = "from the ledger" if v.source == "ledger" else "rules run now: not in this workspace's ledger"
    if v.blocking:
        rules = ", ".join(sorted({f.rule for f in v.blocking}))
        scope = "every row" if v.whole else f"{len(v.invalid)} row id(s): " + ", ".join(sorted(v.invalid)[:6]) \
            + (" ..." if len(v.invalid) > 6 else "")
        return f"[bold red]INVALID[/] ({esc(rules)}; {esc(scope)}); {len(v.findings)} finding(s), {esc(where)}"
    tail = f"superseded by {v.superseded_by}" if v.superseded_by else "valid"
    return f"{esc(tail)}; {len(v.findings)} finding(s), none blocking ({esc(where)})"


def _show_import(ext: dict[str, Any]) -> None:
    """An import's figures as the peer tool computed them (harness.store.peers.figures)."""
    from harness.store.peers.figures import FIGURES, import_figures

    f = import_figures(ext)
    t = Table.grid(padding=(0, 2))
    for k in ("tool", "source_file", "n_requests", "duration_s", "data_origin", "server_version"):
        t.add_row(k, esc(f[k]))
    for k in FIGURES:
        t.add_row(k, "-" if f[k] is None else f"{f[k]:.4g}", esc(f"({f['keys'][k]})" if k in f["keys"] else ""))
    console.print(f"[bold]imported result[/] (numbers as {esc(f['tool'])} computed them; not a dsv4h measurement)")
    console.print(t)


@app.command("list")
def list_cmd(workspace: WorkspaceOpt = Path(), json_out: JsonOpt = False, csv_out: CsvOpt = False) -> None:
    """List the archives of a workspace, oldest first, then any unfinalized (partial) archive
    directory: 'running' while a dsv4h still writes it, 'stranded' when the dsv4h that wrote it
    ended before finalizing ('dsv4h archive recover' finalizes it; '--resume' continues it).
    Each archive's data origin (simulated, measured, or an import's external/unknown) and its
    validity as the workspace's ledger recorded it (null, in the table 'no ledger', when it is not in
    the ledger); the table shows both under the status.
    Archive ids are never cut; --json and --csv print every field.

    Example: dsv4h archive list -w ./ws --csv > archives.csv
    """
    ws = existing_workspace(workspace)
    valid = ledger_validity(ws)
    rows: list[dict[str, Any]] = [{"archive_id": a.archive_id, "status": a.status, **a.run.to_json(),
                                   "data_origin": archive_origin(a), "valid": valid.get(a.archive_id)}
                                  for a in iter_archives(ws)]
    partials = list(iter_partials(ws))
    rows += [{"archive_id": None, "partial": str(p.path), "status": "running" if p.live else "stranded"}
             for p in partials]
    shown = [_two_line(r) for r in rows]
    emit(console, shown if not (json_out or csv_out) else rows, _ARCHIVE_COLS, json_out=json_out,
         csv_out=csv_out, title=f"archives in {esc(ws)}", lines=True)
    if any(not p.live for p in partials) and not (json_out or csv_out):
        q = esc(shlex.quote(str(ws)))
        console.print(f"stranded partial archives hold measured waves: finalize them with 'dsv4h archive recover "
                      f"-w {q}', or continue one: its spec's 'dsv4h campaign run' with --resume and the "
                      f"partial's path (above) and -w {q}")


def ledger_validity(workspace: Path) -> dict[str, bool | None]:
    """Archive id -> its ``runs`` row's ``valid`` in the workspace's ledger (one read of the table);
    an archive without a row is absent."""
    from harness.store.ledger import read_table

    runs = read_table(workspace, "runs")
    if runs is None:
        return {}
    return {str(r["archive_id"]): r["valid"] for r in runs.select(["archive_id", "valid"]).to_pylist()
            if r["archive_id"] is not None}


def archive_origin(archive: Archive) -> str | None:
    """The archive's data origin as the ledger computes it (``harness.store.ledger.data_origin``), None
    when a file it is read from does not parse (``dsv4h archive verify`` names it)."""
    from harness.store.ledger import data_origin

    try:
        return data_origin(archive, archive.run)
    except ArchiveError:
        return None


def _valid(value: Any) -> str:
    """The ledger's validity of an archive in a table cell."""
    return "no ledger" if value is None else "valid" if value else "INVALID"


def _two_line(row: dict[str, Any]) -> dict[str, Any]:
    """A table row that fits 80 columns with the id whole: status over data origin over the ledger's
    validity, campaign over kind, claim class over backend, date over time (JSON and CSV keep every
    field as it is)."""
    if row["archive_id"] is None:
        return {"archive_id": Path(row["partial"]).name, "status": row["status"]}
    when = str(row.get("created_wall") or "")
    origin = row.get("data_origin") or "?"
    return {"archive_id": row["archive_id"], "status": f"{row['status']}\n{origin}\n{_valid(row.get('valid'))}",
            "what": f"{row.get('campaign', '')}\n{row.get('kind', '')}",
            "claim": f"{row.get('claim_class', '')}\n{row.get('backend', '')}",
            "created": f"{when[:10]}\n{when[11:16]}" if len(when) >= 16 else when}


_ARCHIVE_COLS = (Col("archive_id", "archive id", ident=True), Col("status", "status"),
                 Col("what", "campaign / kind"), Col("claim", "claim / backend"), Col("created", "created (UTC)"))


@app.command("recover")
def recover_cmd(workspace: WorkspaceOpt = Path()) -> None:
    """Finalize every stranded partial archive of a workspace (left by a dsv4h that was killed before
    finalizing) and append archives missing from the ledgers. A partial still written by a running
    dsv4h is left alone; one whose manifest does not match its files is refused (exit 6).

    Example: dsv4h archive recover -w ./ws
    """
    from harness.run.recover import recover_workspace

    ws = existing_workspace(workspace)
    report = recover_workspace(ws)
    for r in report.recovered:
        console.print(f"{esc(r.partial.name)}: {r.how} into archive {r.done.archive.archive_id} "
                      f"({esc(r.done.archive.status)}); ledgers: "
                      + (", ".join(f"{k} +{v}" for k, v in sorted(r.done.ledger_rows.items())) or "nothing new"))
    for aid in report.settled:
        console.print(f"archive {aid}: appended to the ledgers")
    for path in report.live:
        console.print(f"{esc(path.name)}: still written by a running dsv4h; left alone")
    if report.empty:
        console.print(f"nothing to recover in {esc(ws)}")
    if report.refused:
        raise ArchiveError("left as they are:\n  " + "\n  ".join(f"{p}: {why}" for p, why in report.refused),
                           hint="these were changed after dsv4h wrote them; inspect them by hand")


_WaveOpt = Annotated[str | None, typer.Option("--wave", help="wave id (default: the first measured wave of each cell)")]
_OutOpt = Annotated[Path | None, typer.Option(
    "--out", help="FILE.png or FILE.svg for one wave, or a directory (default: the current one)")]


@app.command("timeline")
def timeline_cmd(archive: Annotated[str, typer.Argument(help="archive directory or id")],
                 wave: _WaveOpt = None, out: _OutOpt = None, workspace: WorkspaceOpt = Path(),
                 json_out: JsonOpt = False) -> None:
    """Draw a wave's requests as bars from send to end of response (first and last token marked, the
    resident window shaded, failed requests hatched). Without --wave: the first measured wave of each
    cell. --out FILE.png (or .svg) takes one wave; a directory gets <stem>.png and <stem>.svg per wave,
    stem timeline-<archive id>-<wave id>. --json prints the timelines (rows in seconds since the wave's
    first send) and writes a figure only when --out is given. The archive is verified first (exit 6).
    A wave the archive's verdict invalidates (the wave, its round or its cell) is titled INVALID with
    its rules (--json: "invalid_rules"), and a warning line names each such wave and cell.

    Example: dsv4h archive timeline 3f2a9c01 --wave decode-c08.r0.w0 --out c08.png
    """
    from harness.cli.validity import reasons, verdict_of, wave_ids
    from harness.measure.timeline import first_measured_waves, group_waves, wave_timeline
    from harness.report.figures import render_figure, timeline_figure
    from harness.report.timeline_figure import timeline_stem
    from harness.report.timelines import ttft_classes_of

    ws = _ws(workspace)
    a = open_archive(find_archive(archive, ws))
    problems = verify_archive(a.path)
    if problems:
        raise ArchiveError(f"archive {a.path} failed verification; no timeline is drawn:\n  " + "\n  ".join(problems),
                           hint="an archive must not be edited; restore it from a copy or re-run the campaign")
    records = a.records()
    waves = group_waves(records)
    if wave is not None and wave not in waves:
        known = list(waves)
        raise ArchiveError(f"archive {a.archive_id} has no wave {wave!r}; its first waves: "
                           + (", ".join(known[:5]) or "none") + (f" (and {len(known) - 5} more)" if len(known) > 5
                                                                 else ""),
                           hint="give one of its wave ids (dsv4h archive timeline ARCHIVE --json lists each "
                                "cell's first measured wave)")
    ids = [wave] if wave is not None else first_measured_waves(records)
    if not ids:
        raise ArchiveError(f"archive {a.archive_id} holds no measured wave", hint="give a wave id with --wave")
    classes = ttft_classes_of(a)
    verdict = verdict_of(ws, a)
    entries = []
    for w in ids:
        e = wave_timeline(waves[w], classes).to_json()
        entries.append(e | {"archive_id": a.archive_id, "simulated": verdict.simulated,
                            "data_origin": verdict.data_origin,
                            "invalid_rules": list(reasons(verdict, *wave_ids(w, e["cell_id"])))})
    single = out is not None and out.suffix.lower() in (".png", ".svg")
    if single and len(entries) > 1:
        raise ArchiveError(f"--out {out} names one file but {len(entries)} waves are drawn (one per cell)",
                           hint="give --wave WAVE_ID, or a directory for --out")
    written: list[Path] = []
    if out is not None or not json_out:
        for e in entries:
            fig = timeline_figure(e)
            if single:
                assert out is not None
                fmts: tuple[str, ...] = (out.suffix.lower()[1:],)
                paths = [out]
            else:
                fmts = ("png", "svg")
                paths = [(out or Path()) / f"{timeline_stem(e)}.{f}" for f in fmts]
            data = render_figure(fig, fmts)
            fig.fig.clear()
            for p, f in zip(paths, fmts, strict=True):
                p.parent.mkdir(parents=True, exist_ok=True)
                p.write_bytes(data[f])
                written.append(p)
    invalid = [e for e in entries if e["invalid_rules"]]
    warning = ("warning: invalid by the archive's evidence, drawn and titled INVALID: "
               + "; ".join(f"wave {e['wave_id']} of cell {e['cell_id']} ({', '.join(e['invalid_rules'])})"
                           for e in invalid)) if invalid else None
    if json_out:
        typer.echo(as_json(entries))
        if warning:
            typer.echo(warning, err=True)
        return
    for e, p in zip(entries, written[:: 1 if single else 2], strict=True):
        bad = sum(1 for r in e["rows"] if not r["ok"])
        flag = f" INVALID ({', '.join(e['invalid_rules'])})" if e["invalid_rules"] else ""
        console.print(f"wave {esc(e['wave_id'])} (cell {esc(e['cell_id'])}, C{e['concurrency']}, "
                      f"{len(e['rows'])} requests, {bad} failed){esc(flag)}: {esc(p)}")
    if warning:
        console.print(f"[yellow]{esc(warning)}[/]")
