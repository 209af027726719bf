"""Benchmark: ledgers at scale (issue 15.5) - per-archive ingest and a cross-archive query vs ledger size.

Real, finalized formal-matrix archives (tests/synthetic_archives.py, 8 cells and 24 rounds each) are
ingested with ``harness.store.ledger.ingest_archive`` (verification included). Distinct archives are made
cheaply by cloning a few built ones: same files (hard links), a new run token in the run block, so a new
manifest and archive id - exactly what ``verify_archive`` checks. At each size N the next ``--probe``
archives are ingested one by one and timed (median and p90 ms per archive), then the query "median of
``median_tok_s`` per cell (workload, concurrency) over all valid rows" runs through
``harness.ledger.open_dataset`` + pandas and through a DuckDB view.

Between sizes the ledger is grown by real ingests up to ``--real-up-to`` archives; above that it is
filled by writing each further archive's ledger files directly (the same canonical files with the clone's
id; ingest reads no other archive's files, so what it meets at size N is the same directory of N files).
The fill is labelled as such in the output.

    .venv/bin/python benchmarks/bench_ledger.py [--sizes 100 1000 10000] [--probe 100] [--real-up-to 1000]

Prints a table and writes benchmarks/results/ledger_bench.json.
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

import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq

import harness.ledger as hl
from harness.formats import dump_json
from harness.store.archive import MANIFEST, Archive, manifest_id, open_archive
from harness.store.ledger import ingest_archive
from harness.store.ledger.layout import archive_file, file_metadata

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "tests"))

from synthetic_archives import write_formal_archive

TABLES = ("runs", "cells", "rounds")


def clone(template: Archive, workspace: Path, k: int) -> Archive:
    """A distinct finalized archive with ``template``'s files (hard links) and run token ``k``."""
    manifest = json.loads((template.path / MANIFEST).read_text())
    manifest["run"]["run_token"] = f"bench-{k:08d}"
    manifest.pop("archive_id", None)
    manifest["archive_id"] = manifest_id(manifest)
    target = workspace / "archives" / manifest["archive_id"]
    target.mkdir()
    for rel in manifest["files"]:
        (target / rel).parent.mkdir(parents=True, exist_ok=True)
        os.link(template.path / rel, target / rel)
    (target / MANIFEST).write_bytes(dump_json(manifest))
    return open_archive(target)


def fill(workspace: Path, source_id: str, new_id: str) -> None:
    """The ledger files an ingest of a clone would write, copied from an ingested one (bench fill)."""
    for table in TABLES:
        t = pq.read_table(archive_file(workspace, table, source_id))
        col = t.column_names.index("archive_id")
        t = t.set_column(col, "archive_id", pa.array([new_id] * t.num_rows, pa.string()))
        pq.write_table(t.replace_schema_metadata(file_metadata(table)), archive_file(workspace, table, new_id),
                       compression="zstd")


def query_dataset(workspace: Path) -> tuple[float, int]:
    t0 = time.perf_counter()
    t = hl.open_dataset(workspace, "cells").to_table(columns=["workload", "concurrency", "median_tok_s", "valid"],
                                                     filter=pc.field("valid"))
    med = t.to_pandas().groupby(["workload", "concurrency"]).median_tok_s.median()
    return time.perf_counter() - t0, len(med)


def query_duckdb(workspace: Path) -> tuple[float, int]:
    import duckdb

    t0 = time.perf_counter()
    con = duckdb.connect()
    glob = (workspace / "ledgers" / "cells" / "*.parquet").as_posix()
    con.execute(f"CREATE VIEW cells AS SELECT * FROM read_parquet('{glob}')")
    rows = con.sql("SELECT workload, concurrency, median(median_tok_s) FROM cells WHERE valid GROUP BY ALL").fetchall()
    con.close()
    return time.perf_counter() - t0, len(rows)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--sizes", type=int, nargs="+", default=[100, 1000, 10000])
    ap.add_argument("--probe", type=int, default=100, help="archives ingested and timed at each size")
    ap.add_argument("--real-up-to", type=int, default=1000, help="grow by real ingests up to this size")
    ap.add_argument("--templates", type=int, default=8)
    ap.add_argument("--out", type=Path, default=Path(__file__).parent / "results" / "ledger_bench.json")
    args = ap.parse_args()
    t_start = time.perf_counter()
    rows: list[dict[str, Any]] = []
    with tempfile.TemporaryDirectory() as tmp:
        ws = Path(tmp)
        t0 = time.perf_counter()
        templates = [write_formal_archive(ws / "templates", seed=s, tiers=(1, 2, 4, 8)) for s in range(args.templates)]
        build_s = time.perf_counter() - t0
        (ws / "archives").mkdir()
        k = size = real = filled = 0
        sources: list[str] = []  # ledger files of the first real ingests, one per template, for the fill

        def ingest_next() -> float:
            nonlocal k, size, real
            a = clone(templates[k % len(templates)], ws, k)
            k += 1
            t1 = time.perf_counter()
            ingest_archive(ws, a)
            dt = time.perf_counter() - t1
            if len(sources) < len(templates):
                sources.append(a.archive_id)
            size += 1
            real += 1
            return dt

        for target in sorted(args.sizes):
            grow_t0 = time.perf_counter()
            while size < target - args.probe:
                if size < max(args.real_up_to, len(templates)):
                    ingest_next()
                else:
                    a = clone(templates[k % len(templates)], ws, k)
                    fill(ws, sources[k % len(templates)], a.archive_id)
                    k += 1
                    size += 1
                    filled += 1
            grow_s = time.perf_counter() - grow_t0
            times = sorted(ingest_next() for _ in range(args.probe))
            q_ds, n_ds = query_dataset(ws)
            q_db, n_db = query_duckdb(ws)
            row = {"archives": size, "real_ingests_so_far": real, "filled_so_far": filled,
                   "ingest_ms_median": 1e3 * statistics.median(times),
                   "ingest_ms_p90": 1e3 * times[int(0.9 * (len(times) - 1))],
                   "ingest_ms_mean": 1e3 * statistics.fmean(times),
                   "query_dataset_s": q_ds, "query_duckdb_s": q_db, "cells_groups": n_ds,
                   "duckdb_groups": n_db, "grow_s": grow_s}
            rows.append(row)
            print(f"N={size:>6}  ingest/archive median {row['ingest_ms_median']:6.1f} ms  "
                  f"p90 {row['ingest_ms_p90']:6.1f} ms  | median per cell: dataset {q_ds:6.2f} s, "
                  f"duckdb {q_db:6.2f} s  ({n_ds} groups; {filled} archives filled so far)", flush=True)
    total = time.perf_counter() - t_start
    print(f"\n{'archives':>9} {'ingest ms/archive (median, p90)':>32} {'query: open_dataset':>20} "
          f"{'query: DuckDB':>14}")
    for r in rows:
        print(f"{r['archives']:>9} {r['ingest_ms_median']:>21.1f}, {r['ingest_ms_p90']:>8.1f} "
              f"{r['query_dataset_s']:>19.2f}s {r['query_duckdb_s']:>13.2f}s")
    print(f"templates built in {build_s:.1f} s; total {total:.0f} s")
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps({
        "benchmark": "ledger", "command": "benchmarks/bench_ledger.py " + " ".join(
            f"--{k.replace('_', '-')} {' '.join(map(str, v)) if isinstance(v, list) else v}"
            for k, v in vars(args).items() if k != "out"),
        "machine": {"cpus": os.cpu_count(), "python": platform.python_version(), "platform": platform.platform()},
        "archive": "formal-matrix, 8 cells, 24 rounds, no records (tests/synthetic_archives.py)",
        "probe": args.probe, "real_up_to": args.real_up_to, "rows": rows, "total_s": total,
    }, indent=2) + "\n")


if __name__ == "__main__":
    main()
