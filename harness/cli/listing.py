"""Listings: one renderer for every command that prints rows (a table whose id columns are never
cut, or the same rows as JSON or CSV for scripts)."""

from __future__ import annotations

import csv
import io
import json
import math
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Annotated, Any, Literal

import typer
from rich import box
from rich.console import Console
from rich.table import Table

from harness.cli.common import esc
from harness.formats import finite_float, fixed_point, json_default, json_safe

JsonOpt = Annotated[bool, typer.Option("--json", help="print the rows as a JSON array (every field)")]
CsvOpt = Annotated[bool, typer.Option("--csv", help="print the rows as CSV, header first (every field)")]


@dataclass(frozen=True)
class Col:
    """One table column: the row key it shows, its header, and how. ``ident`` columns (archive,
    cell and plan ids, paths users copy) are never cut or wrapped: other columns fold instead."""

    key: str
    header: str
    justify: Literal["left", "right"] = "left"
    ident: bool = False
    fmt: Callable[[Any], str] | None = None
    style: str | None = None


MISSING = "—"


def num(value: Any, decimals: int | None = None, *, scale: float = 1.0) -> str:
    """The one number format of every listing: ``value * scale`` in fixed point, thousands separated,
    never an exponent (``1,280``, ``375.3``, ``4.18``, ``0.0237``; ``decimals`` forces the places);
    :data:`MISSING` for None, NaN, infinities and non-numbers."""
    return fixed_point(value, decimals, scale=scale, missing=MISSING)


def ms(value: Any) -> str:
    """Seconds shown as milliseconds (:func:`num`), one place from 1 ms, none from 100 ms (``1,280``,
    ``23.7``, ``0.512``)."""
    a = abs(finite_float(value, 1e3))
    return num(value, 0 if a >= 100 else 1 if a >= 1 else None, scale=1e3)


def _cell(col: Col, value: Any) -> str:
    if col.fmt is not None:
        return col.fmt(value)
    if value is None or (isinstance(value, float) and math.isnan(value)):
        return MISSING
    if isinstance(value, float):
        return num(value)
    return esc(value)


def table(rows: Sequence[Mapping[str, Any]], cols: Sequence[Col], *, title: str | None = None,
          caption: str | None = None, lines: bool = False) -> Table:
    """A rich table of ``rows``; id columns keep their full width, the others fold to fit; ``lines``
    rules between rows (for rows of two lines)."""
    # light borders: listings must fit 80 columns with their ids whole
    t = Table(title=title, caption=caption, title_justify="left", caption_justify="left", box=box.SIMPLE_HEAD,
              show_edge=False, collapse_padding=True, pad_edge=False, show_lines=lines)
    for col in cols:
        if col.ident:
            widest = max([len(str(r.get(col.key) or "")) for r in rows] + [len(col.header)])
            t.add_column(esc(col.header), no_wrap=True, min_width=widest, justify=col.justify, style=col.style)
        else:
            t.add_column(esc(col.header), overflow="fold", justify=col.justify, style=col.style)
    for r in rows:
        t.add_row(*[_cell(c, r.get(c.key)) for c in cols])
    return t


def wall_second(value: Any) -> str:
    """A wall time (ISO text or datetime) to the second, ``YYYY-MM-DD HH:MM:SS``; '' when absent."""
    if value is None:
        return ""
    text = value.isoformat() if hasattr(value, "isoformat") else str(value)
    return text[:19].replace("T", " ")


def _flat(value: Any) -> Any:
    if isinstance(value, dict | list | tuple):
        return json.dumps(value, default=json_default, sort_keys=True)
    return "" if value is None else value


def as_csv(rows: Sequence[Mapping[str, Any]]) -> str:
    """Every key of every row (first-seen order) as CSV; nested values as JSON text."""
    keys: dict[str, None] = {}
    for r in rows:
        keys.update(dict.fromkeys(r))
    buf = io.StringIO()
    w = csv.DictWriter(buf, fieldnames=list(keys), lineterminator="\n")
    w.writeheader()
    for r in rows:
        w.writerow({k: _flat(r.get(k)) for k in keys})
    return buf.getvalue()


def as_json(rows: Sequence[Mapping[str, Any]]) -> str:
    """The rows as an indented JSON array (NaN written as null: JSON has no NaN)."""
    return json.dumps(json_safe([dict(r) for r in rows]), default=json_default, indent=2)


def emit(console: Console, rows: Sequence[Mapping[str, Any]], cols: Sequence[Col], *, json_out: bool = False,
         csv_out: bool = False, title: str | None = None, caption: str | None = None, lines: bool = False) -> None:
    """Print ``rows``: JSON or CSV (plain stdout, nothing else printed) or a table."""
    if json_out and csv_out:
        raise typer.BadParameter("choose one of --json and --csv")
    if json_out:
        typer.echo(as_json(rows))
    elif csv_out:
        typer.echo(as_csv(rows), nl=False)
    else:
        console.print(table(rows, cols, title=title, caption=caption, lines=lines))
