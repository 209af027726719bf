"""Benchmark: a ledger table as Delta Lake (delta-rs) vs the Parquet-per-archive layout (issue 29.3).

Synthetic archives with realistic columns: each archive is 8 ``cells`` rows (the canonical schema of
``harness.store.ledger.layout.SCHEMAS['cells']``, 73 columns, the measured ones filled) and one
``runs`` row. At each size N (ascending, given as arguments) the ledger is grown to N archives, the
last ``--probe`` of them by timed single-archive ingests, then the query "median of ``median_tok_s``
per cell (workload, concurrency) over valid rows" is timed through DuckDB over the Arrow dataset
(``DeltaTable.to_pyarrow_dataset()`` for Delta, ``pyarrow.dataset`` over the directory for the old
layout), for Delta before and after ``optimize.compact()`` + ``vacuum(retention_hours=0)``; then
(Delta) ``--probe`` more single-archive ingests are timed on the compacted table (they count towards
the next size).

Ingest per archive, Delta: two transactions (``cells`` then ``runs``, each ``write_deltalake(...,
mode="append")`` on a freshly opened table, as a new process would). Old layout: one commit of the two
files through ``harness.store.ledger.commit_files`` under the ledger lock (journal and renames included).

Growing between probes: with ``--fill bulk`` (default) archives before the probe window are added
many per transaction (Delta: ``--fill-batch`` archives' files, one file per archive, one commit;
the old layout: one file per archive written directly), so the table has one data file per archive as
after N separate appends, but a shorter log (fewer JSON commits; checkpoints every 100 commits keep
the log replay short either way). ``--fill real`` grows by single appends only (slow: what 100,000
separate appends cost is measured only when run so). The JSON records which fill was used.

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
from pathlib import Path
from typing import Any

import duckdb
import pyarrow as pa
import pyarrow.dataset as ds
import pyarrow.parquet as pq
from deltalake import DeltaTable, write_deltalake
from deltalake.transaction import AddAction, RemoveAction

from harness.formats import dump_json
from harness.store.ledger import commit_files, locked
from harness.store.ledger.layout import SCHEMAS, canonical, ledger_dir

QUERY = ("SELECT workload, concurrency, median(median_tok_s) AS m, count(*) AS n FROM cells "
         "WHERE valid GROUP BY workload, concurrency ORDER BY workload, concurrency")
CONC = (1, 2, 4, 8)


def archive_tables(k: int) -> tuple[str, pa.Table, pa.Table]:
    """(archive id, its 8 cells rows, its runs row) in the canonical schemas (no metadata)."""
    aid = f"{k:016x}"
    rows = [{"archive_id": aid, "cell_id": f"{w}-c{c}", "workload": w, "concurrency": c, "status": "ok",
             "median_tok_s": 1000.0 + (k % 97) + c, "http_output_tok_s": 990.0 + c, "rounds_ok": 3,
             "campaign": "bench", "claim_class": "formal", "protocol_class": "formal-matrix",
             "backend": "sglang", "data_origin": "simulated", "archive_status": "complete",
             "created_wall": "2026-12-02T10:00:00+00:00", "identity_hash": "ab" * 32, "valid": True,
             "superseded_by": None} for w in ("decode", "prefill") for c in CONC]
    cells = canonical("cells", pa.Table.from_pylist(rows)).replace_schema_metadata(None)
    run = canonical("runs", pa.Table.from_pylist([{k2: rows[0][k2] for k2 in (
        "archive_id", "campaign", "claim_class", "protocol_class", "backend", "data_origin", "archive_status",
        "created_wall", "identity_hash", "valid")} | {"kind": "formal-matrix", "plan_id": "p",
                                                       "n_cells": 8}])).replace_schema_metadata(None)
    return aid, cells, run


class DeltaLedger:
    name = "delta"

    def __init__(self, root: Path) -> None:
        self.root = root

    def ingest(self, k: int) -> None:
        _, cells, run = archive_tables(k)
        for table, t in (("cells", cells), ("runs", run)):
            path = self.root / table
            target: Any = DeltaTable(str(path)) if (path / "_delta_log").is_dir() else str(path)
            write_deltalake(target, t, mode="append")

    def fill(self, start: int, stop: int, batch: int) -> None:
        """Add archives ``start..stop`` as one Parquet file each, ``batch`` files per transaction."""
        for table in ("cells", "runs"):  # the table exists (first commit) before files are added
            if not (self.root / table / "_delta_log").is_dir():
                first = archive_tables(start)[1 if table == "cells" else 2]
                assert isinstance(first, pa.Table)
                write_deltalake(str(self.root / table), first.slice(0, 0), mode="append")
        for lo in range(start, stop, batch):
            for table, idx in (("cells", 1), ("runs", 2)):
                dt = DeltaTable(str(self.root / table))
                actions: list[AddAction | RemoveAction] = []
                for k in range(lo, min(stop, lo + batch)):
                    t = archive_tables(k)[idx]
                    assert isinstance(t, pa.Table)
                    name = f"fill-{k:08d}.parquet"
                    pq.write_table(t, self.root / table / name)
                    st = (self.root / table / name).stat()
                    actions.append(AddAction(name, st.st_size, {}, int(st.st_mtime * 1000), True,
                                             json.dumps({"numRecords": t.num_rows})))
                dt.create_write_transaction(actions, mode="append", schema=dt.schema())

    def query(self) -> list[tuple[Any, ...]]:
        cells = DeltaTable(str(self.root / "cells")).to_pyarrow_dataset()  # noqa: F841 - DuckDB reads it
        return duckdb.execute(QUERY).fetchall()

    def files(self) -> int:
        return len(DeltaTable(str(self.root / "cells")).file_uris())

    def optimize(self) -> None:
        for table in ("cells", "runs"):
            dt = DeltaTable(str(self.root / table))
            dt.optimize.compact()
            dt.vacuum(retention_hours=0, dry_run=False, enforce_retention_duration=False)
            dt.create_checkpoint()


class ParquetLedger:
    name = "parquet"

    def __init__(self, root: Path) -> None:
        self.ws = root

    def ingest(self, k: int) -> None:
        aid, cells, run = archive_tables(k)
        with locked(ledger_dir(self.ws)):
            commit_files(self.ws, {f"cells/{aid}.parquet": cells, f"runs/{aid}.parquet": run})

    def fill(self, start: int, stop: int, batch: int) -> None:
        for k in range(start, stop):
            aid, cells, run = archive_tables(k)
            for table, t in (("cells", cells), ("runs", run)):
                d = ledger_dir(self.ws) / table
                d.mkdir(parents=True, exist_ok=True)
                pq.write_table(t, d / f"{aid}.parquet")

    def query(self) -> list[tuple[Any, ...]]:
        cells = ds.dataset(str(ledger_dir(self.ws) / "cells"), format="parquet",  # noqa: F841
                           schema=SCHEMAS["cells"].remove_metadata())
        return duckdb.execute(QUERY).fetchall()

    def files(self) -> int:
        return len(list((ledger_dir(self.ws) / "cells").glob("*.parquet")))

    def optimize(self) -> None:  # the old layout has no compaction
        return None


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
    p.add_argument("--stores", default="delta,parquet")
    p.add_argument("--out", type=Path, default=Path(__file__).parent / "results" / "ledger_delta_bench.json")
    a = p.parse_args()
    sizes = sorted(a.sizes)
    results: list[dict[str, Any]] = []
    with tempfile.TemporaryDirectory(prefix="bench-delta-") as tmp:
        for name in a.stores.split(","):
            root = Path(tmp) / name
            root.mkdir()
            store = DeltaLedger(root) if name == "delta" else ParquetLedger(root)
            results += run(store, sizes, a.probe, a.fill, a.fill_batch, a.repeat)
    import deltalake

    doc = {"command": " ".join(["benchmarks/bench_ledger_delta.py", *sys.argv[1:]]), "sizes": sizes,
           "probe": a.probe, "fill": a.fill, "deltalake": deltalake.__version__, "duckdb": duckdb.__version__,
           "cpus": os.cpu_count(), "python": platform.python_version(), "results": results}
    a.out.parent.mkdir(parents=True, exist_ok=True)
    a.out.write_bytes(dump_json(doc))
    cols = ["store", "archives", "fill", "ingest_median_ms", "ingest_p90_ms", "files_before", "query_s",
            "optimize_s", "files_after", "query_after_optimize_s", "ingest_after_optimize_median_ms"]
    print(" | ".join(cols))
    for r in results:
        print(" | ".join(str(r.get(c, "-")) for c in cols))
    print(f"wrote {a.out}")


if __name__ == "__main__":
    main()
