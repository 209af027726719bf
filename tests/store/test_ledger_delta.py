"""Delta Lake ledger tables (harness.store.ledger.delta, docs/ledger-format.md): a schema-3 and a
schema-4 Parquet ledger migrate with every row kept (counted before and after), again adds nothing;
every later commit (ingest, supersession, governance appends) reaches the Delta tables; --as-of reads
an earlier version; optimize compacts without changing rows; the documented read path (pandas,
pyarrow, DuckDB, polars through the Arrow dataset) runs verbatim."""

from __future__ import annotations

import json
import re
import shutil
from collections import Counter
from pathlib import Path

import pyarrow as pa
import pyarrow.compute as pc
import pytest
from synthetic_archives import write_formal_archive
from testkit import run_cli

import harness.ledger as hl
from harness.errors import LedgerError
from harness.store.ledger import TABLES, append_rows, ingest_archive, locked, read_table
from harness.store.ledger import delta as dl
from harness.store.ledger.layout import SCHEMAS, ledger_dir
from harness.store.ledger.migrate import schema_version

REPO = Path(__file__).resolve().parents[2]
FIXTURE = REPO / "tests" / "fixtures" / "ledger-schema-3"
FORMAL, SWEEP = "1eea09325535a6ab", "898e6745fe5ce2b3"
# the schema-3 fixture's rows per (schema-4 table, archive) (tests/store/test_ledger_schema3.py)
ROWS = {("cells", FORMAL): 1, ("sweep_cells", SWEEP): 2, ("rounds", FORMAL): 3, ("sweep_rounds", SWEEP): 6,
        ("waves", FORMAL): 4, ("requests", FORMAL): 8, ("requests", SWEEP): 52, ("runs", FORMAL): 1,
        ("runs", SWEEP): 1, ("findings", FORMAL): 1, ("findings", SWEEP): 1}


def _schema3(tmp_path: Path) -> Path:
    ws = tmp_path / "ws"
    shutil.copytree(FIXTURE, ws / "ledgers")
    (ws / "archives").mkdir()
    return ws


def _counts(read: object, ws: Path) -> Counter[tuple[str, str]]:
    out: Counter[tuple[str, str]] = Counter()
    for table in TABLES:
        t = read(ws, table)  # type: ignore[operator]
        if t is not None and "archive_id" in t.column_names:
            out.update((table, str(a)) for a in t.column("archive_id").to_pylist())
        elif t is not None:
            out[(table, "")] += t.num_rows
    return out


def _rows(t: pa.Table | None) -> list[str]:
    """A table's rows as sorted JSON text (NaN equal to NaN; order not compared), wall-clock columns at
    Delta's precision, microseconds (the one thing Delta does not keep: docs/ledger-format.md)."""
    assert t is not None
    walls = [i for i, f in enumerate(t.schema) if pa.types.is_timestamp(f.type)]
    for i in walls:
        t = t.set_column(i, t.schema.field(i).name, pc.cast(pc.cast(t.column(i), pa.timestamp("us", "UTC"),
                                                                    safe=False), t.schema.field(i).type))
    return sorted(json.dumps(r, sort_keys=True, default=str) for r in t.to_pylist())


def test_a_schema3_ledger_migrates_to_delta_with_every_row_kept(tmp_path: Path) -> None:
    ws = _schema3(tmp_path)
    assert schema_version(ws / "ledgers") == 3
    before = _counts(read_table, ws)  # read as schema 4 in memory
    assert dict(before) == ROWS
    written = dl.migrate_to_delta(ws, read_table)
    assert sum(written.values()) == sum(ROWS.values()) == 80
    assert _counts(dl.read, ws) == before
    for table in ("cells", "sweep_cells", "requests", "runs"):
        a, b = read_table(ws, table), dl.read(ws, table)
        assert a is not None and b is not None and b.schema.equals(SCHEMAS[table]), table
        assert _rows(a) == _rows(b), table  # every value carried (wall times at their microseconds)
    assert dl.migrate_to_delta(ws, read_table) == {}  # again: nothing added
    assert _counts(dl.read, ws) == before


def test_a_schema4_ledger_migrates_through_the_cli_and_rows_are_counted(tmp_path: Path) -> None:
    ws = _schema3(tmp_path)
    with locked(ledger_dir(ws)):  # the first write migrates schema 3 to 4 (Parquet)
        pass
    assert schema_version(ws / "ledgers") == 4
    before = _counts(read_table, ws)
    code, out, err = run_cli("ledger", "migrate", "--delta", "-w", str(ws))
    assert code == 0, err
    assert "Delta tables written" in out and "requests +60" in out
    assert _counts(dl.read, ws) == before == Counter(ROWS)
    code, out, _ = run_cli("ledger", "migrate", "--delta", "-w", str(ws))
    assert code == 0 and "nothing (already in step)" in out


def test_every_later_commit_reaches_the_delta_tables(tmp_path: Path) -> None:
    ws = tmp_path / "ws"
    first = write_formal_archive(ws, tiers=(1, 2))
    ingest_archive(ws, first)
    dl.migrate_to_delta(ws, read_table)
    cells_v0 = dl.read(ws, "cells")
    assert cells_v0 is not None and cells_v0.num_rows == 4
    version = max(h["version"] for h in dl.history(ws, "cells"))
    # a resumed run: its archive supersedes the first; both commits reach Delta
    second = write_formal_archive(ws, tiers=(1, 2), seed=1, resumed_from=first.archive_id)
    assert ingest_archive(ws, second)["cells"] == 4
    assert ingest_archive(ws, second) == {}  # idempotent
    cells = dl.read(ws, "cells")
    assert cells is not None and cells.num_rows == 8
    by = {(r["archive_id"], r["valid"], r["superseded_by"]) for r in cells.to_pylist()}
    assert by == {(first.archive_id, False, second.archive_id), (second.archive_id, True, None)}
    parquet = read_table(ws, "cells")
    assert _rows(parquet) == _rows(cells)
    # the version before the resume still reads as it was
    old = dl.read(ws, "cells", as_of=version)
    assert _rows(old) == _rows(cells_v0)
    with locked(ledger_dir(ws)):
        append_rows(ws, "historical", [{"entry_id": "h1"}])
    hist = dl.read(ws, "historical")
    assert hist is not None and hist.column("entry_id").to_pylist() == ["h1"]
    assert _counts(dl.read, ws) == _counts(read_table, ws)


def test_supersede_is_an_update_and_as_of_shows_the_rows_before(tmp_path: Path) -> None:
    ws = _schema3(tmp_path)
    dl.migrate_to_delta(ws, read_table)
    v = dl.history(ws, "requests")[0]["version"]
    assert dl.supersede(ws, FORMAL, SWEEP) == {"runs": 1, "cells": 1, "rounds": 3, "waves": 4, "requests": 8}
    assert dl.supersede(ws, FORMAL, SWEEP) == {}  # already superseded: no new version
    req = dl.read(ws, "requests")
    assert req is not None
    assert {(r["archive_id"], r["valid"], r["superseded_by"]) for r in req.to_pylist()} >= {(FORMAL, False, SWEEP)}
    old = dl.read(ws, "requests", as_of=v)
    assert old is not None and {r["superseded_by"] for r in old.to_pylist()} == {None}
    assert dl.history(ws, "requests")[0]["operation"] == "UPDATE"
    with pytest.raises(LedgerError, match="16 hex"):
        dl.supersede(ws, "x' OR true --", SWEEP)
    with pytest.raises(LedgerError, match="version 99"):
        dl.read(ws, "requests", as_of=99)


def test_show_as_of_and_history_through_the_cli(tmp_path: Path) -> None:
    ws = _schema3(tmp_path)
    dl.migrate_to_delta(ws, read_table)
    dl.supersede(ws, FORMAL, SWEEP)
    code, out, err = run_cli("ledger", "history", "--table", "cells", "-w", str(ws), "--json")
    assert code == 0, err
    assert [h["operation"] for h in json.loads(out)] == ["UPDATE", "WRITE"]
    code, out, _ = run_cli("ledger", "show", "--table", "cells", "-w", str(ws), "--json", "--as-of", "0")
    assert code == 0 and [r["valid"] for r in json.loads(out)] == [True]
    code, out, _ = run_cli("ledger", "show", "--table", "cells", "-w", str(ws), "--json", "--as-of", "1")
    assert code == 0 and [r["valid"] for r in json.loads(out)] == [False]


def test_optimize_compacts_and_keeps_every_row(tmp_path: Path) -> None:
    ws = tmp_path / "ws"
    (ledger_dir(ws) / dl.DELTA_DIR).mkdir(parents=True)  # Delta tables from the first commit on
    for seed in range(3):
        ingest_archive(ws, write_formal_archive(ws, tiers=(1, 2), seed=seed))
    counts = _counts(dl.read, ws)
    assert counts == _counts(read_table, ws) and sum(v for (t, _), v in counts.items() if t == "runs") == 3
    code, out, err = run_cli("ledger", "optimize", "-w", str(ws), "--retention-hours", "0")
    assert code == 0, err
    assert re.search(r"cells: 3 -> 1 file\(s\), [1-9][0-9]* vacuumed, 12 rows", out), out
    assert _counts(dl.read, ws) == counts
    done = dl.optimize(ws)  # the default retention keeps what an as-of read may need
    assert done["cells"]["files_after"] == 1 and done["cells"]["vacuumed"] == 0
    with pytest.raises(LedgerError, match="negative"):
        dl.optimize(ws, -1)


def test_optimize_without_delta_tables_says_how_to_make_them(tmp_path: Path) -> None:
    ws = _schema3(tmp_path)
    code, _, err = run_cli("ledger", "optimize", "-w", str(ws))
    assert code != 0 and "migrate --delta" in err


def _doc_examples() -> list[str]:
    text = (REPO / "docs" / "ledger-format.md").read_text(encoding="utf-8")
    return [b for b in re.findall(r"```python\n(.*?)```", text, flags=re.DOTALL) if b.startswith("# Delta example")]


def test_the_documented_read_path_runs_verbatim(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    pytest.importorskip("duckdb")
    pytest.importorskip("polars")
    ws = _schema3(tmp_path)
    dl.migrate_to_delta(ws, read_table)
    blocks = _doc_examples()
    assert len(blocks) == 1
    for needle in ("DeltaTable", "to_pyarrow_dataset", "duckdb", "polars", "pandas", "hl.open_delta"):
        assert needle in blocks[0], needle
    monkeypatch.chdir(ws)
    namespace: dict[str, object] = {"__name__": "doc"}
    exec(compile(blocks[0], "docs/ledger-format.md", "exec"), namespace)  # the doc's own code
    assert namespace["n_pandas"] == namespace["n_polars"] == namespace["n_duckdb"] == 1
    assert namespace["n_as_of"] == 1
    assert hl.open_delta(ws, "requests").count_rows() == 60


def test_merge_ingests_the_other_hosts_archives_into_the_delta_tables_never_its_rows(tmp_path: Path) -> None:
    from harness.run.merge import merge_workspace

    here, other = tmp_path / "here", tmp_path / "other"
    mine = write_formal_archive(here, tiers=(1,))
    ingest_archive(here, mine)
    dl.migrate_to_delta(here, read_table)
    theirs = write_formal_archive(other, tiers=(1, 2), seed=5, campaign="other-host")
    ingest_archive(other, theirs)
    dl.migrate_to_delta(other, read_table)
    forged = dl.read(other, "cells")
    assert forged is not None
    # the other host's Delta table claims rows no verified archive gives: never read by a merge
    dl.write_archive(other, "cells", "00000000000000ff", forged.set_column(
        forged.schema.get_field_index("archive_id"), "archive_id", pa.array(["00000000000000ff"] * forged.num_rows)))
    res = merge_workspace(here, other)
    assert res.archives == [theirs.archive_id]
    cells = dl.read(here, "cells")
    assert cells is not None
    assert Counter(cells.column("archive_id").to_pylist()) == {mine.archive_id: 2, theirs.archive_id: 4}
    assert _counts(dl.read, here) == _counts(read_table, here)
    versions = {t: dl.history(here, t)[0]["version"] for t in ("cells", "runs")}
    again = merge_workspace(here, other)
    assert again.archives == [] and again.present == 1
    assert {t: dl.history(here, t)[0]["version"] for t in ("cells", "runs")} == versions  # nothing written
