"""``dsv4h ledger show|ingest|...``: the Delta Lake ledgers."""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import Annotated, Any

import pandas as pd
import typer
from rich.table import Table

from harness.cli.common import WorkspaceOpt, console, esc, existing_workspace
from harness.cli.listing import MISSING, Col, CsvOpt, JsonOpt, emit, ms, num
from harness.cli.listing import table as render_table
from harness.errors import LedgerError
from harness.store.archive import find_archive, iter_archives, open_archive
from harness.store.ledger import TABLES, read_table
from harness.store.ledger.merge import DEFAULT_MAX_COMMITS, DEFAULT_MAX_ROWS, MergeLimits

app = typer.Typer(help="Delta Lake ledgers (ledgers/delta/<table>/). Read a table with harness.ledger.read(ws, "
                  "table), deltalake.DeltaTable(dir).to_pandas(), polars.read_delta(dir) or DuckDB delta_scan(dir) "
                  "(ledgers/README.md). A plain Parquet read of a table directory (pandas.read_parquet(dir)) "
                  "fails on purpose, naming a marker file: the directory also holds the files later versions "
                  "replaced, whose rows it would count twice; 'dsv4h ledger export --parquet DIR' writes one plain "
                  "Parquet file per table. A crash-damaged ledger (exit 6 naming a log entry): 'dsv4h ledger "
                  "repair'.\n\n"
                  "Example: dsv4h ledger show --table cells", no_args_is_help=True)

# what fits 80 columns with the archive id whole; --columns, --json and --csv show the rest
_DEFAULT_COLS = {
    "cells": ["archive_id", "workload", "concurrency", "status", "median_tok_s", "http_output_tok_s", "data_origin",
              "valid"],
    "rounds": ["archive_id", "workload", "concurrency", "round_index", "status", "rate_tok_s",
               "http_output_tok_s", "valid"],
    "waves": ["wave_id", "phase", "n_requests", "n_failed", "valid"],
    "sweep_cells": ["archive_id", "arrival_rate_req_s", "rounds_ok", "output_throughput_median_tok_s",
                    "goodput_median_req_s", "valid"],
    "sweep_rounds": ["archive_id", "arrival_rate_req_s", "round_index", "status", "output_throughput_tok_s",
                     "goodput_req_s", "valid"],
    "runs": ["archive_id", "campaign", "kind", "claim_class", "data_origin", "archive_status"],
    "replay_runs": ["archive_id", "speed", "n_ok", "output_throughput_tok_s", "late_requests",
                    "expected_cached_tokens", "reported_cached_tokens", "cached_agree", "valid"],
    "sla_probes": ["archive_id", "probe_index", "attempt", "arrival_rate_req_s", "passed", "ttft_p99_worst_s",
                   "bracket_end", "valid"],
}

_ID = Col("archive_id", "archive id", ident=True)
_VALID = Col("valid", "valid")


def _r(key: str, header: str, fmt: Callable[[Any], str] = num) -> Col:
    return Col(key, header, "right", fmt=fmt)


def _req_s(value: Any) -> str:
    return num(value, 2)


# cells, rounds and waves, one table per row kind: each kind's rates under their own names (a prefill cell's
# median is an input rate; its HTTP output rate of one token per request is not shown)
_KIND_COLS: dict[tuple[str, str], tuple[Col, ...]] = {
    ("cells", "decode"): (_ID, _r("concurrency", "C"), Col("status", "status"),
                          _r("median_tok_s", "resident tok/s median"), _r("http_output_tok_s", "HTTP output tok/s"),
                          Col("data_origin", "origin"), _VALID),
    ("cells", "prefill"): (_ID, _r("concurrency", "C"), Col("status", "status"),
                           _r("median_tok_s", "input tok/s median"), _r("observed_min_tok_s", "min"),
                           _r("observed_max_tok_s", "max"), Col("data_origin", "origin"), _VALID),
    ("sweep_cells", "sweep"): (_r("arrival_rate_req_s", "rate"), Col("status", "status"),
                         _r("output_throughput_median_tok_s", "out tok/s"),
                         _r("request_throughput_median_req_s", "req/s", _req_s),
                         _r("goodput_median_req_s", "goodput", _req_s),
                         _r("ttft_p50_s", "TTFT p50", ms), _r("tpot_p50_s", "TPOT p50", ms),
                         _r("itl_p50_s", "ITL p50", ms), _r("e2e_p50_s", "E2E p50", ms), _VALID),
    ("rounds", "decode"): (_ID, _r("concurrency", "C"), _r("round_index", "round"), Col("status", "status"),
                           _r("rate_tok_s", "resident tok/s"), _r("http_output_tok_s", "HTTP output tok/s"),
                           _VALID),
    ("rounds", "prefill"): (_ID, _r("concurrency", "C"), _r("round_index", "round"), Col("status", "status"),
                            _r("rate_tok_s", "input tok/s"), _VALID),
    ("sweep_rounds", "sweep"): (_r("arrival_rate_req_s", "rate"), _r("round_index", "round"),
                          Col("status", "status"), _r("output_throughput_tok_s", "out tok/s"),
                          _r("request_throughput_req_s", "req/s", _req_s), _r("goodput_req_s", "goodput", _req_s),
                          _r("ttft_p50_s", "TTFT p50", ms), _r("tpot_p50_s", "TPOT p50", ms),
                          _r("e2e_p50_s", "E2E p50", ms), _VALID),  # a round's ITL: --columns itl_p50_s
    ("waves", "decode"): (_ID, Col("wave_id", "wave id", ident=True), Col("phase", "phase"),
                          _r("resident_output_tok_s", "resident tok/s"), _r("http_output_tok_s", "HTTP output tok/s"),
                          _VALID),
    ("waves", "prefill"): (_ID, Col("wave_id", "wave id", ident=True), Col("phase", "phase"),
                           _r("prefill_input_tok_s", "input tok/s"), _VALID),
}
MEASURED = ("cells", "rounds", "waves", "sweep_cells", "sweep_rounds")
_KIND_TITLES = {"decode": "decode (resident and HTTP output tok/s)", "prefill": "prefill (input tok/s)"}


SWEEP_TABLES = ("sweep_cells", "sweep_rounds")


def row_kind(row: Mapping[str, Any], table: str = "") -> str:
    """A measured row's kind: ``sweep`` (a row of a sweep table, a rate sweep's or an SLA search's
    ingested before it had tables of its own, or a sweep cell anywhere), ``prefill``, ``decode`` or
    ``other``."""
    if table in SWEEP_TABLES or row.get("workload") == "sweep":  # a sweep cell's workload is "sweep"
        return "sweep"
    return str(row.get("workload")) if row.get("workload") in ("prefill", "decode") else "other"


def sweep_status(row: Mapping[str, Any]) -> str:
    """A sweep cell's status: the recorded one, else ``ok/planned ok`` from its round counts; a
    schedule not kept is said."""
    status = row.get("status")
    if status is None and row.get("rounds_ok") is not None and row.get("rounds_planned") is not None:
        status = f"{int(row['rounds_ok'])}/{int(row['rounds_planned'])} ok"
    text = MISSING if status is None else str(status)
    return text + ("; schedule NOT kept" if row.get("schedule_kept") is False else "")


def kind_tables(table_name: str, rows: Sequence[Mapping[str, Any]]) -> list[tuple[str, tuple[Col, ...],
                                                                                  list[dict[str, Any]]]]:
    """``rows`` of a measured table (:data:`MEASURED`) as (title, columns, rows) tables, one per row kind
    (:func:`row_kind`: decode, prefill, sweep, other); a rate sweep's rows one table per archive, its id
    in the title (so the sweep's columns fit 80); ``other`` rows keep the table's default columns."""
    groups: dict[tuple[str, str], list[dict[str, Any]]] = {}
    for r in rows:
        kind = row_kind(r, table_name)
        key = (kind, str(r.get("archive_id")) if kind == "sweep" else "")
        groups.setdefault(key, []).append(dict(r) | ({"status": sweep_status(r)} if kind == "sweep" else {}))
    out = []
    order = {"decode": 0, "prefill": 1, "sweep": 2}
    for (kind, archive), mine in sorted(groups.items(), key=lambda kv: order.get(kv[0][0], 3)):
        cols = _KIND_COLS.get((table_name, kind)) or tuple(
            Col(c, _HEADERS.get(c, c), ident=c in _IDS) for c in _DEFAULT_COLS.get(table_name, []))
        n = f"{len(mine)} row" + ("s" if len(mine) != 1 else "")
        title = (f"{table_name}: rate sweep {archive} ({mine[0].get('campaign')}), {n}" if kind == "sweep"
                 else f"{table_name}: {_KIND_TITLES.get(kind, kind)}, {n}")
        out.append((title, cols, mine))
    return out


_SEVERITY_STYLE = {"blocking": "bold red", "warning": "yellow", "info": "dim"}


def findings_blocks(rows: Sequence[Mapping[str, Any]], title: str) -> Table:
    """``findings`` ledger rows as one block per finding that reads at 80 columns: the severity, then
    the rule and the archive id, the message, the remedy and the rows it concerns (each folded to
    the width, never cut)."""
    t = Table.grid(padding=(0, 1))
    t.title, t.title_justify = title, "left"
    t.add_column(no_wrap=True)
    t.add_column(overflow="fold")
    for r in rows:
        sev = str(r.get("severity") or "—")
        detail = f"[bold]{esc(r.get('rule') or '—')}[/] archive {esc(r.get('archive_id') or '—')}"
        if r.get("scope") == "run":
            detail += " (the whole run)"
        detail += f"\n{esc(r.get('message') or '')}"
        if r.get("remedy"):
            detail += f"\n[dim]remedy:[/] {esc(r['remedy'])}"
        if named := _finding_rows(r.get("rows")):
            detail += f"\n[dim]rows:[/] {esc(named)}"
        t.add_row(f"[{_SEVERITY_STYLE.get(sev, 'default')}]{esc(sev)}[/]", detail)
    return t


def _finding_rows(stored: object) -> str:
    """A finding's ``rows`` column (a JSON list of ids) as the first four ids and a count of the rest;
    text that is not such a list as it is."""
    import json

    try:
        ids = json.loads(stored) if isinstance(stored, str) else []
    except ValueError:
        return str(stored)
    if not isinstance(ids, list):
        return str(stored)
    return ", ".join(map(str, ids[:4])) + (f" (+{len(ids) - 4})" if len(ids) > 4 else "")


def _ws(workspace: Path) -> Path:
    return existing_workspace(workspace)


@app.command("show")
def show_cmd(
    table: Annotated[str, typer.Option("--table", "-t", help=f"one of {', '.join(TABLES)}")] = "cells",
    workspace: WorkspaceOpt = Path(),
    limit: Annotated[int, typer.Option("--limit", "-n", help="most recent rows to show (0: all)")] = 20,
    columns: Annotated[str | None, typer.Option("--columns", "-c", help="comma-separated columns")] = None,
    json_out: JsonOpt = False,
    csv_out: CsvOpt = False,
    as_of: Annotated[int | None, typer.Option("--as-of", help="read this earlier version of the table's Delta "
                                              "table ('dsv4h ledger history' lists them)")] = None,
) -> None:
    """Print the most recent rows of a ledger table (ids are never cut; --json and --csv print every
    column of those rows unless --columns picks some). Cells, rounds and waves print one table per
    kind, each with its own rates: decode (resident and HTTP output tok/s), prefill (input tok/s);
    a rate sweep's are in sweep_cells and sweep_rounds (per archive: offered rate, status, output
    tok/s, req/s, goodput, latency p50 in ms).
    Numbers never in exponent form; a missing value prints as an em dash. Findings print one block
    per finding (severity, rule, archive, message, remedy, rows), readable at 80 columns.

    --as-of VERSION reads the table as it was at that version of its Delta table ('dsv4h ledger
    history' lists them).

    Example: dsv4h ledger show --table rounds -n 30
    """
    ws = _ws(workspace)
    if as_of is not None:
        from harness.store.ledger import delta

        t = delta.read(ws, table, as_of)
    else:
        t = read_table(ws, table)
    if t is None:
        if json_out or csv_out:
            emit(console, [], [], json_out=json_out, csv_out=csv_out)
            return
        console.print(f"ledger table '{esc(table)}' is empty (no archives ingested in {esc(ws)})")
        return
    df = t.to_pandas()
    df = df.tail(limit) if limit > 0 else df
    machine = json_out or csv_out
    default = list(df.columns) if machine else [c for c in _DEFAULT_COLS.get(table, df.columns[:8]) if c in df.columns]
    cols = [c.strip() for c in columns.split(",")] if columns else default
    missing = [c for c in cols if c not in df.columns]
    if missing:
        raise LedgerError(f"ledger table '{table}' has no column(s) {', '.join(missing)}",
                          hint=f"columns: {', '.join(map(str, df.columns))}")
    title = f"{esc(table)}: {t.num_rows} rows, last {len(df)} shown"
    if not (machine or columns) and table == "findings":
        console.print(findings_blocks([{c: _plain(v) for c, v in rec.items()} for rec in df.to_dict("records")],
                                      title))
        return
    if not (machine or columns) and table in MEASURED:
        every = [{c: _plain(v) for c, v in rec.items()} for rec in df.to_dict("records")]
        console.print(title)
        for ktitle, kcols, krows in kind_tables(table, every):
            note = "rate: offered req/s; latency p50 in ms" if "rate sweep" in ktitle else None
            console.print(render_table(krows, kcols, title=esc(ktitle), caption=note))
        return
    rows = [{c: _plain(v) for c, v in rec.items()} for rec in df[cols].to_dict("records")]
    spec = [Col(c, _HEADERS.get(c, c), ident=c in _IDS,
                justify="right" if pd.api.types.is_numeric_dtype(df[c]) and df[c].dtype != bool else "left")
            for c in cols]
    emit(console, rows, spec, json_out=json_out, csv_out=csv_out, title=title)


_IDS = {"archive_id", "cell_id", "round_id", "wave_id", "rid", "plan_id", "superseded_by", "entry_id", "record_id"}
_HEADERS = {"archive_id": "archive id", "concurrency": "C", "data_origin": "origin", "claim_class": "claim",
            "protocol_class": "protocol", "round_index": "round", "archive_status": "status",
            "median_tok_s": "median tok/s", "http_output_tok_s": "HTTP tok/s", "rate_tok_s": "tok/s"}


def _plain(value: object) -> object:
    """A pandas/numpy cell as a plain Python value (for JSON/CSV and the table)."""
    if hasattr(value, "tolist"):
        return value.tolist()
    if hasattr(value, "isoformat"):
        return value.isoformat()
    if isinstance(value, float) and math.isnan(value):
        return None
    return value


@app.command("ingest")
def ingest_cmd(
    archives: Annotated[list[str] | None, typer.Argument(help="archive paths or ids (default: all)")] = None,
    workspace: WorkspaceOpt = Path(),
) -> None:
    """Append archives to the ledgers (an archive already ingested adds nothing). Every archive is
    verified first: a changed, missing or extra file refuses it (exit 6), naming the file; the
    evidence rules then decide its rows' validity before they are written, as at the end of a run.

    Example: dsv4h ledger ingest   # every archive of the workspace
    """
    from harness.run.skeleton import settle

    ws = _ws(workspace)
    targets = [open_archive(find_archive(a, ws)) for a in archives] if archives else list(iter_archives(ws))
    for a in targets:
        added = settle(ws, a.path).ledger_rows
        msg = ", ".join(f"{k} +{v}" for k, v in sorted(added.items())) if added else "already ingested"
        console.print(f"{esc(a.archive_id)}: {msg}")


from harness.cli.historical_cmd import import_historical  # noqa: E402 - mounted under `dsv4h ledger`

app.command("import-historical")(import_historical)


@app.command("merge")
def merge_cmd(
    others: Annotated[list[Path], typer.Argument(help="other workspaces (directories holding archives/ and ledgers/)")],
    workspace: WorkspaceOpt = Path(),
    max_rows: Annotated[int, typer.Option("--max-rows", min=1, help="most rows of one of the other host's "
                                          "governance tables")] = DEFAULT_MAX_ROWS,
    max_commits: Annotated[int, typer.Option("--max-commits", min=1, help="most log entries (or data files) "
                                             "of one of the other host's Delta tables")] = DEFAULT_MAX_COMMITS,
) -> None:
    """Merge other hosts' workspaces into this one, trusting archives, never rows: each archive of
    OTHER/archives/ not yet here is verified (hashes, manifest, no links or special files), copied,
    ingested and checked by the evidence rules, so its rows and their validity are re-derived here;
    governance rows (records, closures, gates, freezes, historical) are parsed and validated, their
    archive references included, before they land. The other directory is only read: its commit
    journal is never replayed, its Delta tables are read only from a checked copy, no link in it is
    followed, no ledger row of it is copied. Idempotent:
    merging the same workspace again adds nothing.

    Prints what was added and one line per refusal (file: reason). Exit 0 when nothing was refused;
    otherwise everything valid is merged and the exit status is 6. A table over --max-rows or
    --max-commits is not read: the merge stops there with an error (exit 6) naming it.

    Example: dsv4h ledger merge /data/host-a /data/host-b -w ws
    """
    from harness.run.merge import merge_workspace

    ws = _ws(workspace)
    refused = 0
    limits = MergeLimits(max_rows=max_rows, max_commits=max_commits)
    for other in others:
        res = merge_workspace(ws, existing_workspace(other), limits)
        gov = ", ".join(f"{k} +{v}" for k, v in sorted(res.governance.items())) or "none"
        console.print(f"{esc(other)}: {len(res.archives)} archive(s) added, {res.present} already present; "
                      f"governance rows added: {esc(gov)}; {len(res.refusals)} refused", soft_wrap=True)
        for r in res.refusals:
            console.print(f"refused: {esc(str(r))}", soft_wrap=True, highlight=False)
        refused += len(res.refusals)
    if refused:
        raise LedgerError(f"{refused} item(s) refused (listed above); everything else was merged",
                          hint="refused archives and files stay out of this workspace; fix or re-copy them on "
                          "their host and merge again")


@app.command("migrate")
def migrate_cmd(
    workspace: WorkspaceOpt = Path(),
) -> None:
    """Move an older ledger (the Parquet layout of schemas 2-4: one file per table, or one file per
    archive with a commit journal) into the Delta tables of schema 6 (ledgers/delta/<table>/,
    docs/ledger-format.md): every row kept, counted per table and archive before and after; the old
    files moved to ledgers/.parquet-backup/. A schema-5 ledger's tables with columns schema 6 renamed
    (ratio_pct -> change_pct, t_ar_ms -> t_ar_s, ...) are rewritten under the new names. The first
    write to an older ledger does the same (a read never does); running it again does nothing.

    Example: dsv4h ledger migrate -w ws
    """
    from harness.store.ledger import ensure_current, is_current
    from harness.store.ledger.layout import LEDGER_SCHEMA_VERSION, ledger_dir
    from harness.store.ledger.migrate import schema_version

    ws = _ws(workspace)
    directory = ledger_dir(ws)
    if is_current(ws):
        console.print(f"{esc(directory)}: already schema {LEDGER_SCHEMA_VERSION} (Delta tables), nothing to migrate")
        return
    older = schema_version(directory) if directory.is_dir() else None
    moved = ensure_current(ws)
    what = ", ".join(f"{k} {v}" for k, v in sorted(moved.items())) or "no rows"
    origin = f"schema {older}" if older is not None and older < LEDGER_SCHEMA_VERSION else "a new ledger"
    if older == 5:
        console.print(f"{esc(directory)}: schema 5 -> schema {LEDGER_SCHEMA_VERSION}; rows rewritten under the "
                      f"renamed columns: {esc(what)} (earlier Delta versions keep the old names)")
        return
    console.print(f"{esc(directory)}: {origin} -> schema {LEDGER_SCHEMA_VERSION} Delta tables; rows moved: "
                  f"{esc(what)} (old files in .parquet-backup/)")


@app.command("optimize")
def optimize_cmd(
    workspace: WorkspaceOpt = Path(),
    retention_hours: Annotated[int, typer.Option("--retention-hours", help="vacuum files unreferenced for longer "
                                                 "than this (default 168 = 7 days: --as-of reaches that far back)"
                                                 )] = 168,
) -> None:
    """Compact the Delta ledger tables (many small files, one per append, into few), checkpoint them and
    vacuum files no version younger than --retention-hours needs. Rows do not change. Every table
    directory also gets the marker file that makes a plain Parquet read of it fail, naming the marker
    (the directory still holds the files compaction replaced: such a read would count rows twice).

    Example: dsv4h ledger optimize -w ws
    """
    from harness.store.ledger import delta, ensure_current

    ws = _ws(workspace)
    ensure_current(ws)
    done = delta.optimize(ws, retention_hours)
    for table, d in done.items():
        console.print(f"{esc(table)}: {d['files_before']} -> {d['files_after']} file(s), {d['vacuumed']} vacuumed, "
                      f"{d['rows']} rows, version {d['version']}")


def _utc_ms(epoch_ms: object) -> str | None:
    """Delta's commit timestamp (epoch milliseconds) as ISO-8601 UTC with milliseconds
    (``2026-12-04T01:53:31.123Z``); None when the log carries none."""
    from datetime import UTC, datetime, timedelta

    if not isinstance(epoch_ms, int) or isinstance(epoch_ms, bool):
        return None
    # integer arithmetic: a float division can land a millisecond low (…123 -> …122.9999)
    t = datetime.fromtimestamp(epoch_ms // 1000, UTC) + timedelta(milliseconds=epoch_ms % 1000)
    return t.isoformat(timespec="milliseconds").replace("+00:00", "Z")


@app.command("history")
def history_cmd(
    table: Annotated[str, typer.Option("--table", "-t", help=f"one of {', '.join(TABLES)}")] = "cells",
    workspace: WorkspaceOpt = Path(),
    json_out: JsonOpt = False,
    csv_out: CsvOpt = False,
) -> None:
    """List the versions of a table's Delta table, newest first (what 'ledger show --as-of' reads),
    each with its commit time in ISO-8601 UTC.

    Example: dsv4h ledger history --table cells -w ws
    """
    from harness.store.ledger import delta

    rows = [{"version": h["version"], "time": _utc_ms(h["timestamp"]), "operation": h["operation"]}
            for h in delta.history(_ws(workspace), table)]
    emit(console, rows, [Col("version", "version", "right"), Col("time", "time (UTC)"),
                         Col("operation", "operation")], json_out=json_out, csv_out=csv_out,
         title=f"{esc(table)}: {len(rows)} version(s)")


@app.command("repair")
def repair_cmd(
    workspace: WorkspaceOpt = Path(),
) -> None:
    """Repair a ledger a crash or power cut damaged (a zero-length, truncated or garbled Delta log
    entry, a missing version, a short data file: what every ledger command refuses with exit 6).
    Nothing is deleted: each damaged entry, the entries after it and their data files are moved to
    ledgers/.quarantine/<UTC time>/; the archive tables are rebuilt from the archives under
    archives/ (each verified against its SHA-256 manifest, then ingested with the evidence rules, as
    'ledger ingest'); the governance tables (records, closures, gates, freezes, historical) are kept
    at their last good version, with the rows of intact later entries appended again. Then every
    archive not yet in the ledger is ingested and every resume's supersession made again. Prints
    what was damaged, moved, re-derived (tables, rows, archives), carried and salvaged. Run it while
    no other dsv4h process writes to the workspace. Exit 6 when an archive was refused (its rows of
    the last good version are kept).

    Example: dsv4h ledger repair -w ws
    """
    from harness.run.skeleton import settle
    from harness.store.ledger.repair import repair_ledger

    ws = _ws(workspace)
    res = repair_ledger(ws, lambda path: settle(ws, path).ledger_rows)
    for table, what in res.damaged.items():
        console.print(f"damaged: {esc(table)}: {esc(what)}", soft_wrap=True, highlight=False)
    if res.quarantine is not None:
        console.print(f"moved aside (never deleted): {len(res.moved)} item(s) under {esc(res.quarantine)}",
                      soft_wrap=True)
    else:
        console.print("no damaged Delta log entry found", highlight=False)
    if res.rebuilt:
        rows = ", ".join(f"{k} {v}" for k, v in sorted(res.rebuilt.items()) if v)
        console.print(f"archive tables rebuilt from the verified archives: {esc(rows or 'no rows')}", soft_wrap=True)
    for aid, added in sorted(res.rederived.items()):
        console.print(f"re-derived {esc(aid)}: " + ", ".join(f"{k} +{v}" for k, v in sorted(added.items())),
                      soft_wrap=True, highlight=False)
    console.print(f"{len(res.rederived)} archive(s) re-derived from archives/", highlight=False)
    if res.carried:
        console.print(f"kept from the last good version (no verified archive on disk): {esc(', '.join(res.carried))}",
                      soft_wrap=True, highlight=False)
    for table, n in sorted(res.salvaged.items()):
        console.print(f"{esc(table)}: {n} row(s) of intact later entries appended again", highlight=False)
    for old, new in sorted(res.superseded.items()):
        console.print(f"superseded again: {esc(old)} by {esc(new)}", highlight=False)
    for r in res.refused:
        console.print(f"refused: {esc(r)}", soft_wrap=True, highlight=False)
    if res.refused:
        raise LedgerError(f"{len(res.refused)} archive(s) refused (listed above); everything else was repaired",
                          hint="restore the refused archives from a copy, then run 'dsv4h ledger repair' again")


@app.command("export")
def export_cmd(
    parquet: Annotated[Path, typer.Option("--parquet", help="directory to write <table>.parquet into")],
    workspace: WorkspaceOpt = Path(),
) -> None:
    """Write each ledger table's current rows as one plain Parquet file, DIR/<table>.parquet (every
    table; an empty one has its schema), for tools that do not read Delta Lake. The rows are those
    harness.ledger.read gives (committed archives, each row once); a plain Parquet read of a Delta
    table directory is refused instead (it would count replaced files' rows twice).

    Example: dsv4h ledger export --parquet out/ledger -w ws
    """
    from harness.store.ledger.export import export_parquet

    done = export_parquet(_ws(workspace), parquet)
    for table, n in done.items():
        console.print(f"{esc(parquet / (table + '.parquet'))}: {n} row(s)", soft_wrap=True, highlight=False)
