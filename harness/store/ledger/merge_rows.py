"""Validating another host's governance rows column by column (pure; ``harness.store.ledger.merge``).

:func:`check_rows` refuses a row, exactly as validating it on its own would, for: a value its column
cannot be cast to (it would be lost), a required column (:data:`REQUIRED`) missing or null, an action
outside :data:`ACTIONS`, or a reference (:data:`REFERENCES`) to an archive not of this workspace; and
every row for a column outside the table's schema. It works on whole columns with pyarrow compute:
a row costs no Python object of its own, only a refused row's reason is built in Python (a table of
100,000 rows is checked in well under a second; one model per row took 60 s and 3 GB).
A column whose cast fails as a whole is bisected to the values that fail (a cast is element-wise).
:func:`governance_problems` makes the same checks of a whole Parquet file of the older layout, which is
merged or refused whole.
"""

from __future__ import annotations

from collections.abc import Iterator

import numpy as np
import numpy.typing as npt
import pyarrow as pa
import pyarrow.compute as pc

from harness.store.ledger.layout import SCHEMAS, _cast, canonical

# columns a governance row cannot lack (what its writer in harness.governance.io always fills)
REQUIRED: dict[str, tuple[str, ...]] = {
    "records": ("record_id", "name", "metric", "recorded_at", "content"),
    "closures": ("direction", "action", "evidence_archive_id", "reason", "at"),
    "gates": ("gate", "quantity", "op", "archive_id", "passed", "checked_at"),
    "freezes": ("action", "path", "sha256", "at", "outcome", "passed"),
    "historical": ("entry_id",),
}
# columns naming archives (a string, or a list of strings): each must be an archive of this workspace
REFERENCES: dict[str, tuple[str, ...]] = {
    "records": ("suite_ids", "control_ids"),
    "closures": ("evidence_archive_id", "closing_archive_id"),
    "gates": ("archive_id",),
    "freezes": ("results_archive_id",),
    "historical": (),
}
ACTIONS: dict[str, tuple[str, ...]] = {"closures": ("close", "reopen"), "freezes": ("freeze", "reveal")}
SHOWN_ROWS = 5  # row numbers named in one refusal

Mask = npt.NDArray[np.bool_]


def _mask(values: pa.Array | pa.ChunkedArray) -> Mask:
    return np.asarray(pc.fill_null(values, False).to_numpy(zero_copy_only=False), dtype=bool)


def _cast_ok(col: pa.ChunkedArray, to: pa.DataType) -> bool:
    try:
        _cast(col, to)
    except (pa.ArrowException, TypeError, ValueError):
        return False
    return True


def uncastable(col: pa.ChunkedArray, to: pa.DataType) -> Mask:
    """Rows of ``col`` whose value cannot be cast to ``to``: a cast that fails, bisected to the values
    that fail (log n casts per such value), or one that yields null for a value."""
    n = len(col)
    bad = np.zeros(n, dtype=bool)
    spans = [(0, n)]
    while spans:
        lo, hi = spans.pop()
        part = col.slice(lo, hi - lo)
        if hi <= lo or _cast_ok(part, to):
            continue
        if hi - lo == 1:
            bad[lo] = True
            continue
        mid = (lo + hi) // 2
        spans += [(lo, mid), (mid, hi)]
    ok = ~bad
    if ok.any():
        good = col.filter(pa.array(ok))
        lost = _mask(pc.and_(pc.is_valid(good), pc.is_null(_cast(good, to))))
        bad[np.flatnonzero(ok)[lost]] = True
    return bad


def _references(col: pa.ChunkedArray, archives: pa.Array) -> Mask:
    """Rows naming (in a string column, or any item of a list column) an id not in ``archives``."""
    flat = col.combine_chunks()
    if pa.types.is_list(flat.type):
        items = pc.list_flatten(flat)
        parents = np.asarray(pc.list_parent_indices(flat).to_numpy(zero_copy_only=False))
        stray = _mask(pc.and_(pc.is_valid(items), pc.invert(pc.is_in(items, value_set=archives))))
        out = np.zeros(len(flat), dtype=bool)
        out[parents[stray]] = True
        return out
    return _mask(pc.and_(pc.is_valid(flat), pc.invert(pc.is_in(flat, value_set=archives))))


def _row_problems(table: str, t: pa.Table, archives: pa.Array) -> Iterator[tuple[Mask, str | None, str]]:
    """(rows, column, what) of each check on the canonical rows ``t``; with a column, the row's value is
    named in the reason."""
    for c in REQUIRED[table]:
        yield _mask(pc.is_null(t.column(c))), None, f"required column {c!r} is missing or null"
    allowed = ACTIONS.get(table)
    if allowed:
        wrong = pc.invert(pc.is_in(t.column("action"), value_set=pa.array(allowed, pa.string())))
        yield _mask(pc.or_kleene(pc.is_null(t.column("action")), wrong)), "action", f"not one of {', '.join(allowed)}"
    for c in REFERENCES[table]:
        yield _references(t.column(c), archives), c, "not an archive of this workspace (merge its archive first)"


def _named(value: object) -> str:
    if isinstance(value, list):
        return ", ".join(str(v)[:40] for v in value[:4])
    return repr(value)[:42]


def _groups(reasons: dict[int, list[str]]) -> list[tuple[list[int], str]]:
    by_reason: dict[str, list[int]] = {}
    for i, parts in sorted(reasons.items()):
        by_reason.setdefault(f"refused ({len(parts)} problem(s)): " + "; ".join(parts[:6]), []).append(i)
    return [(rows, why) for why, rows in by_reason.items()]


def check_rows(table: str, raw: pa.Table, archives: set[str]) -> tuple[pa.Table | None, list[tuple[list[int], str]]]:
    """The valid rows of ``raw`` (another host's ``table`` rows, as read) in canonical form, or None
    when none is, and the refused ones: (row numbers of ``raw``, the reason they share), one entry per
    distinct reason (module docstring)."""
    schema = SCHEMAS[table]
    n = raw.num_rows
    unknown = [c for c in raw.column_names if c not in schema.names]
    if unknown:
        return None, [(list(range(n)), "; ".join(f"column {c[:60]!r} is not in the {table} schema"
                                                   for c in unknown[:6]))] if n else []
    reasons: dict[int, list[str]] = {}
    for c in raw.column_names:
        if c == "ledger_schema_version":
            continue
        to = schema.field(c).type
        for i in np.flatnonzero(uncastable(raw.column(c), to)).tolist():
            reasons.setdefault(i, []).append(f"column {c!r} cannot be read as {to}")
    keep = np.ones(n, dtype=bool)
    keep[list(reasons)] = False
    rows = np.flatnonzero(keep)  # raw row number of each row of t
    t = canonical(table, raw.filter(pa.array(keep)) if reasons else raw)
    ids = pa.array(sorted(archives), pa.string())
    for bad, column, what in _row_problems(table, t, ids):
        for j in np.flatnonzero(bad).tolist():
            if column is None:
                reasons.setdefault(int(rows[j]), []).append(what)
            else:
                value = t.column(column)[j].as_py()
                reasons.setdefault(int(rows[j]), []).append(f"{column} {_named(value)}: {what}")
    keep[list(reasons)] = False
    good = t.filter(pa.array(keep[rows])) if len(rows) else t
    return (good if good.num_rows else None), _groups(reasons)


def rows_label(rows: list[int]) -> str:
    """How a refusal names rows of a Delta table: ``#row3``, or ``#row3,7,9 (3 rows)`` (the first
    :data:`SHOWN_ROWS` numbers, then ``…``)."""
    shown = ",".join(str(i) for i in rows[:SHOWN_ROWS]) + ("…" if len(rows) > SHOWN_ROWS else "")
    return f"#row{shown}" if len(rows) == 1 else f"#row{shown} ({len(rows)} rows)"


def _non_null(col: pa.ChunkedArray | pa.Array) -> int:
    return int(len(col) - col.null_count)


def governance_problems(table: str, raw: pa.Table, t: pa.Table, archives: set[str]) -> list[str]:
    """Why a governance file (``raw`` as read, ``t`` its canonical form) may not land here (pure):
    a column outside the schema or one whose values cannot be cast (they would be lost), a required
    column missing or null, an unknown action, a reference to an archive not in ``archives``."""
    schema = SCHEMAS[table]
    problems = [f"column {c[:60]!r} is not in the {table} schema" for c in raw.column_names if c not in schema.names]
    problems += [f"column {c!r} cannot be read as {schema.field(c).type}" for c in raw.column_names
                 if c in schema.names and c != "ledger_schema_version" and _non_null(raw.column(c)) !=
                 _non_null(t.column(c))]
    problems += [f"required column {c!r} is missing or null" for c in REQUIRED[table] if t.column(c).null_count]
    allowed = ACTIONS.get(table)
    if allowed:
        bad = sorted({str(a) for a in t.column("action").to_pylist() if a not in allowed})
        problems += [f"action {a[:40]!r} is not one of {', '.join(allowed)}" for a in bad]
    for c in REFERENCES[table]:
        col = t.column(c)
        values = pc.list_flatten(col).to_pylist() if pa.types.is_list(col.type) else col.to_pylist()
        missing = sorted({str(v) for v in values if v is not None and v not in archives})
        if missing:
            problems.append(f"{c} names {', '.join(m[:40] for m in missing[:4])}, not an archive of this "
                            "workspace (merge its archive first)")
    return problems
