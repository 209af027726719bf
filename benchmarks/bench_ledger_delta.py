"""Benchmark: ingest and query of the Delta Lake ledgers (schema 5) at 1,000 to 100,000 archives (issue 29.3).

Synthetic archives with realistic columns: each archive is 8 ``cells`` rows (the canonical schema of
``harness.store.ledger.layout.SCHEMAS['cells']``, the measured columns filled) and one ``runs`` row.
At each size N (ascending, given as arguments) the ledger is grown to N archives, the last ``--probe``
of them by timed single-archive ingests, then the query "median of ``median_tok_s`` per cell
(workload, concurrency) over valid rows" is timed through DuckDB over the Arrow dataset
(``DeltaTable.to_pyarrow_dataset()``); then ``optimize`` (harness.store.ledger.delta.optimize:
compaction, checkpoint, vacuum) runs, the query is timed again, and ``--probe`` more single-archive
ingests are timed on the compacted tables (they count towards the next size).

Ingest per archive is the ledger half of a real ingest, ``harness.store.ledger.core.append_tables``
(what ``ingest_view`` does once the archive is verified and its rows built): the runs table opened
once for the ``ingested`` check (its application transaction) and the successor lookup (its resume
transaction), one transaction per table with the archive's application transaction, ``runs`` last,
and the successor check after; tables freshly opened, as a new process does. Reading and hashing the archive is left out
(it depends on the archive, not on the ledger).

Growing between probes: with ``--fill bulk`` (default) archives before the probe window are added
``--fill-batch`` per transaction, one data file and one application transaction per archive, then
the table is compacted as the ingests' own auto-compaction would have done
(``harness.store.ledger.delta.AUTO_COMPACT_FILES``; ``--no-auto-compact``: not, leaving one file per
archive, what ingests without it left), with a shorter log than N ingests (fewer JSON commits).
``--fill real`` grows by single ingests only (slow). The JSON records which fill was used.

The figures of the older Parquet layout (schema 4: one file per archive, journal and lock) were
measured by this script's previous version at commit d916eb0 and are kept in
``benchmarks/results/ledger_parquet_layout_d916eb0.json``; this run prints them beside its own.

    .venv/bin/python benchmarks/bench_ledger_delta.py 1000 10000 [100000] [--probe 50] [--fill bulk|real]

Prints a table and writes benchmarks/results/ledger_delta_bench.json (``--out`` to change).
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import statistics
import sys
import tempfile
import time
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import duckdb
import pyarrow as pa
import pyarrow.parquet as pq
from deltalake import CommitProperties, DeltaTable, Transaction
from deltalake.transaction import AddAction, RemoveAction

from harness.formats import dump_json
from harness.store.ledger import delta, ensure_current
from harness.store.ledger.core import append_tables
from harness.store.ledger.layout import canonical

QUERY = ("SELECT workload, concurrency, median(median_tok_s) AS m, count(*) AS n FROM cells "
         "WHERE valid GROUP BY workload, concurrency ORDER BY workload, concurrency")
CONC = (1, 2, 4, 8)
# the synthetic runs start now: an ingest of a new archive trusts its missing transaction
NOW_WALL = datetime.now(UTC).strftime("%Y-%m-%dT%H:%M:%S+00:00")
# --aged: what the fill stands for was ingested this long ago (past both retentions)
AGED_DAYS = delta.TXN_RETENTION_DAYS + 10


def archive_tables(k: int) -> tuple[str, pa.Table, pa.Table]:
    """(archive id, its 8 cells rows, its runs row) in the canonical schemas (no metadata)."""
    aid = f"{k:016x}"
    rows = [{"archive_id": aid, "cell_id": f"{w}-c{c}", "workload": w, "concurrency": c, "status": "ok",
             "median_tok_s": 1000.0 + (k % 97) + c, "http_output_tok_s": 990.0 + c, "rounds_ok": 3,
             "campaign": "bench", "claim_class": "formal", "protocol_class": "formal-matrix",
             "backend": "sglang", "data_origin": "simulated", "archive_status": "complete",
             "created_wall": NOW_WALL, "identity_hash": "ab" * 32, "valid": True,
             "superseded_by": None} for w in ("decode", "prefill") for c in CONC]
    cells = canonical("cells", pa.Table.from_pylist(rows)).replace_schema_metadata(None)
    run = canonical("runs", pa.Table.from_pylist([{k2: rows[0][k2] for k2 in (
        "archive_id", "campaign", "claim_class", "protocol_class", "backend", "data_origin", "archive_status",
        "created_wall", "identity_hash", "valid")} | {"kind": "formal-matrix", "plan_id": "p",
                                                       "n_cells": 8}])).replace_schema_metadata(None)
    return aid, cells, run


class DeltaLedger:
    name = "delta"

    def __init__(self, root: Path, auto: bool = True, aged: bool = False) -> None:
        self.ws = root
        self.auto = auto
        self.aged = aged

    def ingest(self, k: int) -> None:
        aid, cells, run = archive_tables(k)
        runs = delta.open_table(self.ws, "runs")  # as ingest_view: one snapshot for both lookups
        if runs is not None and delta.has_archive(runs, aid, datetime.fromisoformat(NOW_WALL)):
            return
        append_tables(self.ws, aid, {"cells": cells, "runs": run}, None,
                      None if runs is None else delta.successor(runs, aid), runs)

    def fill(self, start: int, stop: int, batch: int) -> None:
        """Add archives ``start..stop`` as one Parquet file each, with their application transactions,
        ``batch`` archives per transaction; ``aged``: as if ingested :data:`AGED_DAYS` ago
        (:meth:`age`)."""
        ensure_current(self.ws)
        stamp = datetime.now(UTC) - (timedelta(days=AGED_DAYS) if self.aged else timedelta(0))
        for lo in range(start, stop, batch):
            ks = range(lo, min(stop, lo + batch))
            for table, idx in (("cells", 1), ("runs", 2)):
                path = delta.table_path(self.ws, table)
                dt = DeltaTable(str(path))
                actions: list[AddAction | RemoveAction] = []
                for k in ks:
                    t = archive_tables(k)[idx]
                    assert isinstance(t, pa.Table)
                    name = f"fill-{k:08d}.parquet"
                    pq.write_table(delta._stored(t), path / name)
                    st = (path / name).stat()
                    actions.append(AddAction(name, st.st_size, {}, int(st.st_mtime * 1000), True,
                                             json.dumps({"numRecords": t.num_rows})))
                props = CommitProperties(app_transactions=[
                    Transaction(f"{k:016x}", 1, last_updated=int(stamp.timestamp() * 1000)) for k in ks])
                dt.create_write_transaction(actions, mode="append", schema=dt.schema(), commit_properties=props)
                if self.auto and len(DeltaTable(str(path)).file_uris()) >= delta.AUTO_COMPACT_FILES:
                    delta.compact(self.ws, table)  # what the ingests' own auto-compaction would have done
        if self.aged:
            self.age()

    def age(self) -> None:
        """Checkpoint each table as it would be checkpointed once the fill is past Delta's retentions:
        the fill's transactions are stamped :data:`AGED_DAYS` back (delta-rs leaves them out), and
        the tombstones its compactions left (stamped now by delta-rs) are dropped by a checkpoint
        taken under a one-second ``delta.deletedFileRetentionDuration``, which is then set back."""
        for table in ("cells", "runs"):
            path = str(delta.table_path(self.ws, table))
            DeltaTable(path).alter.set_table_properties({"delta.deletedFileRetentionDuration": "interval 1 seconds"})
            time.sleep(1.1)
            DeltaTable(path).create_checkpoint()
            DeltaTable(path).alter.set_table_properties({"delta.deletedFileRetentionDuration": "interval 7 days"})

    def query(self) -> list[tuple[Any, ...]]:
        cells = delta.dataset(self.ws, "cells")  # noqa: F841 - DuckDB reads it by name
        return duckdb.execute(QUERY).fetchall()

    def files(self) -> int:
        return len(DeltaTable(str(delta.table_path(self.ws, "cells"))).file_uris())

    def optimize(self) -> None:
        delta.optimize(self.ws, retention_hours=0)


def timed(fn: Any, repeat: int) -> float:
    """Median seconds of ``repeat`` calls."""
    out = []
    for _ in range(repeat):
        t0 = time.perf_counter()
        fn()
        out.append(time.perf_counter() - t0)
    return statistics.median(out)


def run(store: Any, sizes: list[int], probe: int, fill: str, batch: int, repeat: int) -> list[dict[str, Any]]:
    results = []
    have = 0
    for n in sizes:
        t_fill = time.perf_counter()
        window = max(0, min(probe, n - have))
        if fill == "bulk":
            store.fill(have, n - window, batch)
        else:
            for k in range(have, n - window):
                store.ingest(k)
        t_fill = time.perf_counter() - t_fill
        ingest = []
        for k in range(n - window, n):
            t0 = time.perf_counter()
            store.ingest(k)
            ingest.append(time.perf_counter() - t0)
        have = n
        answer = store.query()
        assert sum(r[3] for r in answer) == 8 * have, answer
        row = {"store": store.name, "archives": n, "fill": fill, "fill_s": round(t_fill, 2),
               "ingest_median_ms": round(1000 * statistics.median(ingest), 2),
               "ingest_p90_ms": round(1000 * sorted(ingest)[int(0.9 * (len(ingest) - 1))], 2),
               "files_before": store.files(), "query_s": round(timed(store.query, repeat), 4)}
        if store.name == "delta":
            t0 = time.perf_counter()
            store.optimize()
            row["optimize_s"] = round(time.perf_counter() - t0, 2)
            row["files_after"] = store.files()
            row["query_after_optimize_s"] = round(timed(store.query, repeat), 4)
            assert sum(r[3] for r in store.query()) == 8 * have
            after = []
            for k in range(have, have + probe):  # the next appends, on the compacted table
                t0 = time.perf_counter()
                store.ingest(k)
                after.append(time.perf_counter() - t0)
            have += probe
            row["ingest_after_optimize_median_ms"] = round(1000 * statistics.median(after), 2)
        results.append(row)
        print(json.dumps(row), flush=True)
    return results


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("sizes", nargs="+", type=int, help="ledger sizes in archives, ascending")
    p.add_argument("--probe", type=int, default=50, help="timed single-archive ingests per size")
    p.add_argument("--fill", choices=("bulk", "real"), default="bulk")
    p.add_argument("--fill-batch", type=int, default=1000, help="archives per fill transaction (Delta)")
    p.add_argument("--repeat", type=int, default=3, help="query repetitions (median)")
    p.add_argument("--no-auto-compact", action="store_true", help="bulk fill leaves one file per archive")
    p.add_argument("--aged", action="store_true",
                   help=f"bulk fill as if ingested {AGED_DAYS} days ago (past the transaction, tombstone retentions)")
    p.add_argument("--out", type=Path, default=Path(__file__).parent / "results" / "ledger_delta_bench.json")
    a = p.parse_args()
    sizes = sorted(a.sizes)
    results: list[dict[str, Any]] = []
    with tempfile.TemporaryDirectory(prefix="bench-delta-") as tmp:
        store = DeltaLedger(Path(tmp), auto=not a.no_auto_compact, aged=a.aged)
        results += run(store, sizes, a.probe, a.fill, a.fill_batch, a.repeat)
    old = Path(__file__).parent / "results" / "ledger_parquet_layout_d916eb0.json"
    earlier = [r | {"store": "parquet (d916eb0)"} for r in json.loads(old.read_text())["results"]
               if r["store"] == "parquet"] if old.is_file() else []
    import deltalake

    doc = {"command": " ".join(["benchmarks/bench_ledger_delta.py", *sys.argv[1:]]), "sizes": sizes,
           "probe": a.probe, "fill": a.fill, "auto_compact": not a.no_auto_compact, "aged": a.aged,
           "deltalake": deltalake.__version__, "duckdb": duckdb.__version__,
           "cpus": os.cpu_count(), "python": platform.python_version(), "results": results}
    a.out.parent.mkdir(parents=True, exist_ok=True)
    a.out.write_bytes(dump_json(doc))
    cols = ["store", "archives", "fill", "ingest_median_ms", "ingest_p90_ms", "files_before", "query_s",
            "optimize_s", "files_after", "query_after_optimize_s", "ingest_after_optimize_median_ms"]
    print(" | ".join(cols))
    for r in results + earlier:
        print(" | ".join(str(r.get(c, "-")) for c in cols))
    print(f"wrote {a.out}")


if __name__ == "__main__":
    main()
