"""The ledgers are Delta Lake tables (harness.store.ledger, docs/ledger-format.md; issue 29 item 3): a
schema-3 and a schema-4 Parquet ledger move into them with every row kept (counted before and after;
the old files set aside; again adds nothing), by ``dsv4h ledger migrate`` or by the first write; reads
never migrate; a resume supersedes by a Delta UPDATE and ``--as-of`` reads the version before; optimize
compacts without changing rows; governance read-check-writes from two processes at once append once;
another host's Delta tables are read only from a checked copy, never trusted; the documented read path
(pandas, pyarrow, DuckDB, polars through the Arrow dataset) runs verbatim."""

from __future__ import annotations

import json
import re
import shutil
import subprocess
import sys
import time
from collections import Counter
from pathlib import Path

import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq
import pytest
from synthetic_archives import write_formal_archive
from testkit import run_cli

import harness.ledger as hl
from harness.errors import LedgerError
from harness.store.ledger import TABLES, append_rows, ingest_archive, is_current, parquet_layout, read_table
from harness.store.ledger import delta as dl
from harness.store.ledger.layout import PER_ARCHIVE, SCHEMAS, ledger_dir
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


def _schema4(tmp_path: Path) -> Path:
    """The schema-3 fixture as a schema-4 Parquet ledger, as a schema-4 writer left it: one file per
    archive and table, the marker, a governance file, a resume marker."""
    ws = _schema3(tmp_path)
    led = ledger_dir(ws)
    tables = {t: parquet_layout.read_table(led, t) for t in PER_ARCHIVE}
    for t in PER_ARCHIVE:
        if (led / t).is_dir():
            shutil.rmtree(led / t)
    for t, rows in tables.items():
        if rows is None:
            continue
        (led / t).mkdir()
        for aid in set(rows.column("archive_id").to_pylist()):
            pq.write_table(rows.filter(pc.equal(rows.column("archive_id"), aid)), led / t / f"{aid}.parquet")
    (led / "closures").mkdir(exist_ok=True)
    gov = pa.Table.from_pylist([{"direction": "d1", "action": "close", "evidence_archive_id": FORMAL, "reason": "r",
                                 "at": "2026-12-01T00:00:00+00:00"}])
    pq.write_table(gov, led / "closures" / "20261201T000000000000-0000abcd.parquet")
    (led / ".schema").write_text("4\n")
    return ws


def _counts(read: object, ws: Path) -> Counter[tuple[str, str]]:
    out: Counter[tuple[str, str]] = Counter()
    for table in TABLES:
        t = read(ws, table)  # type: ignore[operator]
        if t is not None and table in PER_ARCHIVE:
            out.update((table, str(a)) for a in t.column("archive_id").to_pylist())
        elif t is not None and t.num_rows:
            out[(table, "")] += t.num_rows
    return out


def _rows(t: pa.Table | None) -> list[str]:
    """A table's rows as sorted JSON text (order not compared), wall-clock columns at Delta's
    precision, microseconds (docs/ledger-format.md), ``ledger_schema_version`` left out (a moved row
    is of the current schema)."""
    assert t is not None
    walls = [i for i, f in enumerate(t.schema) if pa.types.is_timestamp(f.type)]
    for i in walls:
        t = t.set_column(i, t.schema.field(i).name, pc.cast(pc.cast(t.column(i), pa.timestamp("us", "UTC"),
                                                                    safe=False), t.schema.field(i).type))
    return sorted(json.dumps({k: v for k, v in r.items() if k != "ledger_schema_version"}, sort_keys=True,
                             default=str) for r in t.to_pylist())


def test_a_schema3_ledger_is_read_in_memory_and_moved_by_migrate_with_every_row_kept(tmp_path: Path) -> None:
    ws = _schema3(tmp_path)
    assert schema_version(ws / "ledgers") == 3 and not is_current(ws)
    before = _counts(read_table, ws)  # read as the current schema in memory: nothing written
    assert dict(before) == ROWS
    old_rows = {t: _rows(read_table(ws, t)) for t in ("cells", "sweep_cells", "requests", "runs")}
    assert not (ws / "ledgers" / "delta").exists()
    code, out, err = run_cli("ledger", "migrate", "-w", str(ws))
    assert code == 0, err
    assert "schema 3 -> schema 6" in out and "requests 60" in out
    assert is_current(ws) and schema_version(ws / "ledgers") == 6
    assert _counts(read_table, ws) == before == _counts(dl.read, ws)
    for table, rows in old_rows.items():
        t = read_table(ws, table)
        assert t is not None and t.schema.equals(SCHEMAS[table]), table
        assert _rows(t) == rows, table  # every value carried (wall times at their microseconds)
    backup = list((ws / "ledgers" / ".parquet-backup").iterdir())
    assert len(backup) == 1 and (backup[0] / "cells" / f"{FORMAL}.parquet").is_file()  # kept, set aside
    assert not (ws / "ledgers" / "cells").exists()
    code, out, _ = run_cli("ledger", "migrate", "-w", str(ws))
    assert code == 0 and "already schema 6" in out
    assert _counts(dl.read, ws) == before


def test_a_schema4_ledger_moves_on_the_first_write_with_every_row_kept(tmp_path: Path) -> None:
    ws = _schema4(tmp_path)
    assert schema_version(ws / "ledgers") == 4
    before = _counts(read_table, ws)
    assert before == Counter(ROWS) + Counter({("closures", ""): 1})
    new = write_formal_archive(ws, tiers=(1,), seed=3)
    assert ingest_archive(ws, new)["cells"] == 2  # the first write moves the old rows, then appends
    after = _counts(read_table, ws)
    assert after - Counter({(t, a): n for (t, a), n in after.items() if a == new.archive_id}) == before
    closures = read_table(ws, "closures")
    assert closures is not None and closures.column("append_key").to_pylist() == ["20261201T000000000000-0000abcd"]


def test_a_pending_schema4_commit_is_kept_by_the_move(tmp_path: Path) -> None:
    ws = _schema4(tmp_path)
    led = ledger_dir(ws)
    (led / ".staging").mkdir()
    staged = led / ".staging" / "0000beef-0.parquet"
    pq.write_table(pa.Table.from_pylist([{"entry_id": "pending"}]), staged)
    (led / ".commit.json").write_text(json.dumps({"renames": [[".staging/0000beef-0.parquet",
                                                              "historical/20261201T000000000001-0000beef.parquet"]]}))
    append_rows(ws, "historical", [{"entry_id": "later"}])
    hist = read_table(ws, "historical")
    assert hist is not None and hist.column("entry_id").to_pylist() == ["pending", "later"]


def test_resume_supersedes_by_update_and_as_of_shows_the_rows_before(tmp_path: Path) -> None:
    ws = tmp_path / "ws"
    first = write_formal_archive(ws, tiers=(1, 2))
    ingest_archive(ws, first)
    before = read_table(ws, "cells")
    version = dl.history(ws, "cells")[0]["version"]
    second = write_formal_archive(ws, tiers=(1, 2), seed=1, resumed_from=first.archive_id)
    assert ingest_archive(ws, second)["cells"] == 4
    assert ingest_archive(ws, second) == {}  # idempotent
    cells = read_table(ws, "cells")
    assert cells is not None and cells.num_rows == 8
    by = {(r["archive_id"], r["valid"], r["superseded_by"]) for r in cells.to_pylist()}
    assert by == {(first.archive_id, False, second.archive_id), (second.archive_id, True, None)}
    assert dl.history(ws, "cells")[0]["operation"] == "UPDATE"
    assert _rows(dl.read(ws, "cells", as_of=version)) == _rows(before)  # the version before the resume
    with pytest.raises(LedgerError, match="16 hex"):
        dl.supersede(ws, "x' OR true --", second.archive_id)
    with pytest.raises(LedgerError, match="version 99"):
        dl.read(ws, "cells", as_of=99)


def test_show_as_of_and_history_through_the_cli(tmp_path: Path) -> None:
    ws = _schema3(tmp_path)
    run_cli("ledger", "migrate", "-w", str(ws))
    dl.supersede(ws, FORMAL, SWEEP)
    code, out, err = run_cli("ledger", "history", "--table", "cells", "-w", str(ws), "--json")
    assert code == 0, err
    assert [h["operation"] for h in json.loads(out)] == ["UPDATE", "WRITE", "CREATE TABLE"]
    # commit times in ISO-8601 UTC, never epoch milliseconds
    assert all(re.fullmatch(r"20\d\d-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{3}Z", h["time"]) for h in json.loads(out))
    code, out, _ = run_cli("ledger", "history", "--table", "cells", "-w", str(ws))
    assert code == 0 and "time (UTC)" in out and re.search(r"T\d\d:\d\d:\d\d\.\d{3}Z", out), out
    assert not re.search(r"\b1[6-9]\d{11}\b", out), out  # no 13-digit epoch milliseconds
    code, out, _ = run_cli("ledger", "show", "--table", "cells", "-w", str(ws), "--json", "--as-of", "1")
    assert code == 0 and [r["valid"] for r in json.loads(out)] == [True]
    code, out, _ = run_cli("ledger", "show", "--table", "cells", "-w", str(ws), "--json", "--as-of", "2")
    assert code == 0 and [r["valid"] for r in json.loads(out)] == [False]


def test_optimize_compacts_and_keeps_every_row(tmp_path: Path) -> None:
    ws = tmp_path / "ws"
    for seed in range(3):
        ingest_archive(ws, write_formal_archive(ws, tiers=(1, 2), seed=seed))
    counts = _counts(read_table, ws)
    assert sum(v for (t, _), v in counts.items() if t == "runs") == 3
    code, out, err = run_cli("ledger", "optimize", "-w", str(ws), "--retention-hours", "0")
    assert code == 0, err
    assert re.search(r"cells: 3 -> 1 file\(s\), [1-9][0-9]* vacuumed, 12 rows", out), out
    assert _counts(read_table, ws) == counts
    done = dl.optimize(ws)  # the default retention keeps what an as-of read may need
    assert done["cells"]["files_after"] == 1 and done["cells"]["vacuumed"] == 0
    ingest_archive(ws, write_formal_archive(ws, tiers=(1, 2), seed=9))  # appends go on after a compaction
    assert sum(v for (t, _), v in _counts(read_table, ws).items() if t == "runs") == 4
    with pytest.raises(LedgerError, match="negative"):
        dl.optimize(ws, -1)


CLOSE = ("import sys, time; from pathlib import Path; from harness.errors import EvidenceError; "
         "from harness.governance.io import add_closure\n"
         "while time.time() < float(sys.argv[1]): time.sleep(0.001)\n"
         "try:\n    add_closure(Path(sys.argv[2]), 'spec-off', sys.argv[3], 'no gain')\n    print('closed')\n"
         "except EvidenceError as e:\n    print('refused', e.message)\n"
         # as harness.cli.main ends: no native teardown (Arrow's thread pool can abort the exit, apache/arrow#34314)
         "import os; sys.stdout.flush(); os._exit(0)")


def test_two_processes_closing_one_direction_at_once_close_it_once(tmp_path: Path) -> None:
    ws = tmp_path / "ws"
    a = write_formal_archive(ws, tiers=(1,))
    ingest_archive(ws, a)
    start = str(time.time() + 3.0)
    procs = [subprocess.Popen([sys.executable, "-c", CLOSE, start, str(ws), a.archive_id], stdout=subprocess.PIPE,
                              stderr=subprocess.PIPE, text=True) for _ in range(2)]
    outs = []
    for p in procs:
        out, err = p.communicate(timeout=300)
        assert p.returncode == 0, err[-2000:]
        outs.append(out.strip())
    assert sorted(o.split()[0] for o in outs) == ["closed", "refused"], outs  # the read-check-write held
    closures = read_table(ws, "closures")
    assert closures is not None and closures.column("action").to_pylist() == ["close"]


def _doc_examples() -> list[str]:
    text = (REPO / "docs" / "ledger-format.md").read_text(encoding="utf-8")
    return [b for b in re.findall(r"```python\n(.*?)```", text, flags=re.DOTALL) if b.startswith("# Delta example")]


def test_the_documented_read_path_runs_verbatim(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    pytest.importorskip("duckdb")
    pytest.importorskip("polars")
    ws = _schema3(tmp_path)
    run_cli("ledger", "migrate", "-w", str(ws))
    blocks = _doc_examples()
    assert len(blocks) == 1
    for needle in ("DeltaTable", "to_pyarrow_dataset", "duckdb", "polars", "pandas", "hl.open_delta"):
        assert needle in blocks[0], needle
    monkeypatch.chdir(ws)
    namespace: dict[str, object] = {"__name__": "doc"}
    exec(compile(blocks[0], "docs/ledger-format.md", "exec"), namespace)  # the doc's own code
    assert namespace["n_pandas"] == namespace["n_polars"] == namespace["n_duckdb"] == 1
    assert namespace["n_as_of"] == 0  # version 0: the table as created, before any row
    assert hl.open_delta(ws, "requests").count_rows() == 60


def test_merge_reads_the_other_hosts_delta_tables_only_to_refuse_their_rows(tmp_path: Path) -> None:
    from harness.run.merge import merge_workspace

    here, other = tmp_path / "here", tmp_path / "other"
    mine = write_formal_archive(here, tiers=(1,))
    ingest_archive(here, mine)
    theirs = write_formal_archive(other, tiers=(1, 2), seed=5, campaign="other-host")
    ingest_archive(other, theirs)
    forged = dl.read(other, "cells")
    assert forged is not None
    fake = "00000000000000ff"  # the other host's Delta table claims rows no verified archive gives
    dl.append_archive(other, "cells", fake, forged.set_column(
        forged.schema.get_field_index("archive_id"), "archive_id", pa.array([fake] * forged.num_rows)))
    res = merge_workspace(here, other)
    assert res.archives == [theirs.archive_id]
    assert any(r.file.endswith(f"cells#{fake}") and f"no verified archive {fake}" in r.reason for r in res.refusals)
    cells = read_table(here, "cells")
    assert cells is not None
    assert Counter(cells.column("archive_id").to_pylist()) == {mine.archive_id: 2, theirs.archive_id: 4}
    versions = {t: dl.history(here, t)[0]["version"] for t in ("cells", "runs")}
    again = merge_workspace(here, other)
    assert again.archives == [] and again.present == 1
    assert {t: dl.history(here, t)[0]["version"] for t in ("cells", "runs")} == versions  # nothing written
    assert not list(ledger_dir(here).glob(".foreign-*"))  # the checked copies are gone


def test_a_hostile_delta_log_naming_a_file_outside_is_refused_unread(tmp_path: Path) -> None:
    from harness.run.merge import merge_workspace

    here, other = tmp_path / "here", tmp_path / "other"
    ingest_archive(here, write_formal_archive(here, tiers=(1,)))
    ingest_archive(other, write_formal_archive(other, tiers=(1,), seed=2))
    secret = tmp_path / "secret.parquet"
    pq.write_table(pa.table({"archive_id": ["a" * 16]}), secret)
    log = dl.table_path(other, "cells") / "_delta_log"
    last = sorted(log.glob("*.json"))[-1]
    n = int(last.stem) + 1
    add = {"add": {"path": str(secret), "size": secret.stat().st_size, "partitionValues": {},
                   "modificationTime": 0, "dataChange": True}}
    (log / f"{n:020d}.json").write_text(json.dumps(add) + "\n")
    res = merge_workspace(here, other)
    assert any(r.file == str(dl.table_path(other, "cells")) and "never opened" in r.reason for r in res.refusals)
    cells = read_table(here, "cells")
    assert cells is not None and "a" * 16 not in cells.column("archive_id").to_pylist()


def test_appends_compact_a_table_once_it_has_many_files(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(dl, "AUTO_COMPACT_FILES", 3)
    ws = tmp_path / "ws"
    archives = [write_formal_archive(ws, tiers=(1,), seed=s) for s in range(5)]
    for a in archives:
        ingest_archive(ws, a)
    dt = dl.open_table(ws, "cells")
    assert dt is not None and len(dt.file_uris()) < 3  # compacted on the way, by the ingests themselves
    assert "OPTIMIZE" in [h["operation"] for h in dl.history(ws, "cells")]
    cells = read_table(ws, "cells")
    assert cells is not None and Counter(cells.column("archive_id").to_pylist()) == {a.archive_id: 2 for a in archives}
    assert ingest_archive(ws, archives[0]) == {}  # the archives' transactions survive the compaction


def test_delta_tables_an_earlier_mirror_left_are_set_aside_not_doubled(tmp_path: Path) -> None:
    ws = _schema4(tmp_path)
    cells = read_table(ws, "cells")
    assert cells is not None
    from deltalake import write_deltalake

    write_deltalake(str(dl.table_path(ws, "cells")), dl._stored(cells), mode="append")  # the old mirror's copy
    code, _, err = run_cli("ledger", "migrate", "-w", str(ws))
    assert code == 0, err
    assert _counts(read_table, ws) == Counter(ROWS) + Counter({("closures", ""): 1})  # each row once
    (backup,) = (ws / "ledgers" / ".parquet-backup").iterdir()
    assert (backup / "delta" / "cells" / "_delta_log").is_dir() and (backup / "cells").is_dir()


def _tree(root: Path) -> dict[str, str]:
    """Every entry under ``root`` (links not followed): a link's target or a file's bytes, hashed."""
    import hashlib

    out = {}
    for p in sorted(root.rglob("*")):
        rel = str(p.relative_to(root))
        out[rel] = f"link:{p.readlink()}" if p.is_symlink() else (
            "dir" if p.is_dir() else hashlib.sha256(p.read_bytes()).hexdigest())
    return out


def _add(log: Path, action: object) -> None:
    n = int(sorted(log.glob("*.json"))[-1].stem) + 1
    (log / f"{n:020d}.json").write_text(action if isinstance(action, str) else json.dumps(action) + "\n")


def _hostile_data_link(table: Path, outside: Path) -> str:
    data = next(p for p in sorted(table.glob("*.parquet")))
    data.unlink()
    data.symlink_to(outside / "secret.parquet")
    return "not a regular file"


def _hostile_log_link(table: Path, outside: Path) -> str:
    shutil.copytree(table / "_delta_log", outside / "log")
    shutil.rmtree(table / "_delta_log")
    (table / "_delta_log").symlink_to(outside / "log", target_is_directory=True)
    return "not a directory"


def _hostile_path(path: str) -> object:
    def build(table: Path, outside: Path) -> str:
        _add(table / "_delta_log", {"add": {"path": path.format(outside=outside), "size": 1, "partitionValues": {},
                                            "modificationTime": 0, "dataChange": True}})
        return "never opened"
    return build


def _hostile_dv(table: Path, outside: Path) -> str:
    _add(table / "_delta_log", {"add": {"path": "part-x.parquet", "size": 1, "partitionValues": {},
                                        "modificationTime": 0, "dataChange": True,
                                        "deletionVector": {"storageType": "p", "pathOrInlineDv": str(outside),
                                                           "sizeInBytes": 1, "cardinality": 1}}})
    return "deletion vector"


def _hostile_json(table: Path, outside: Path) -> str:
    _add(table / "_delta_log", '{"add": {"path": "part-x.parquet", \n')
    return "cannot be read"


@pytest.mark.parametrize("hostile", [
    _hostile_data_link, _hostile_log_link, _hostile_path("{outside}/secret.parquet"),
    _hostile_path("../../../../outside/secret.parquet"), _hostile_path("file://{outside}/secret.parquet"),
    _hostile_dv, _hostile_json,
], ids=["data-file-link", "log-dir-link", "absolute-path", "dotdot-path", "url-path", "deletion-vector", "bad-json"])
def test_a_hostile_delta_table_of_the_other_host_is_one_refusal_and_reads_nothing_outside(
        tmp_path: Path, hostile: object) -> None:
    """Whatever the other host's Delta table holds (links, paths leaving the table, deletion
    vectors, a broken log): merge ends (no hang) with one refusal naming the table, writes nothing
    outside this workspace, changes nothing there, and no value of the file outside lands here."""
    from harness.run.merge import merge_workspace

    here, other, outside = tmp_path / "here", tmp_path / "other", tmp_path / "outside"
    outside.mkdir()
    pq.write_table(pa.table({"archive_id": ["a" * 16], "median_tok_s": [12345.0]}), outside / "secret.parquet")
    ingest_archive(here, write_formal_archive(here, tiers=(1,)))
    theirs = write_formal_archive(other, tiers=(1,), seed=2)
    ingest_archive(other, theirs)
    table = dl.table_path(other, "cells")
    reason = hostile(table, outside)  # type: ignore[operator]
    before = {"outside": _tree(outside), "other": _tree(other), "top": sorted(p.name for p in tmp_path.iterdir())}
    res = merge_workspace(here, other)
    assert res.archives == [theirs.archive_id]  # its verified archive still merges
    mine = [r for r in res.refusals if r.file == str(table)]
    assert len(mine) == 1 and reason in mine[0].reason, [str(r) for r in res.refusals]
    assert {"outside": _tree(outside), "other": _tree(other), "top": sorted(p.name for p in tmp_path.iterdir())} \
        == before
    cells = read_table(here, "cells")
    assert cells is not None and 12345.0 not in cells.column("median_tok_s").to_pylist()
    assert "a" * 16 not in cells.column("archive_id").to_pylist()
    assert not list(ledger_dir(here).glob(".foreign-*"))
