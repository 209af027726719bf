"""Benchmark: metrics + archive + ledger for a campaign of N requests x E events.

Issue target: 100k requests x 512 events must take seconds, not minutes.

    .venv/bin/python benchmarks/bench_archive.py [--requests 100000] [--events 512]

Prints a table and writes benchmarks/results/archive.json.
"""

from __future__ import annotations

import argparse
import json
import platform
import tempfile
import time
from pathlib import Path

import numpy as np

from harness.measure.results import compute_results, results_json, results_tables
from harness.records import RequestRecord
from harness.store.archive import ArchiveWriter, open_archive
from harness.store.ledger import ingest_archive
from harness.store.runblock import RunBlock


def synth(n_requests: int, n_events: int, wave_size: int) -> list[RequestRecord]:
    """Decode-like records: waves of ``wave_size``, one token per event, 20 ms steps."""
    rng = np.random.default_rng(0)
    tokens = np.arange(1, n_events + 1, dtype=np.int32)
    out = []
    for i in range(n_requests):
        w = i // wave_size
        base = w * 100_000_000_000 + int(rng.integers(0, 5_000_000))
        ev = base + 50_000_000 + np.arange(n_events, dtype=np.int64) * 20_000_000
        cell = f"decode-c64-bench.r{(w // 8) % 3}"
        out.append(RequestRecord(
            rid=f"r{i}", send_ns=base, done_ns=int(ev[-1]) + 1000, event_ns=ev, event_tokens=tokens,
            output_ids=tokens, prompt_tokens=512, cached_tokens=0, completion_tokens=n_events,
            finish_reason="length", http_status=200, cell_id=cell.split(".", maxsplit=1)[0], round_index=(w // 8) % 3,
            wave_id=f"{cell}.w{w:05d}", wave_index=w, workload="decode", concurrency=wave_size,
            case_id=f"c{i % 64:03d}", input_len=512,
        ))
    return out


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--requests", type=int, default=100_000)
    ap.add_argument("--events", type=int, default=512)
    ap.add_argument("--wave-size", type=int, default=64)
    ap.add_argument("--out", type=Path, default=Path(__file__).parent / "results" / "archive.json")
    args = ap.parse_args()
    t0 = time.perf_counter()
    recs = synth(args.requests, args.events, args.wave_size)
    t_synth = time.perf_counter() - t0
    timings: dict[str, float] = {}
    with tempfile.TemporaryDirectory() as tmp:
        ws = Path(tmp)
        t = time.perf_counter()
        status = {f"decode-c64-bench.r{k}": "ok" for k in range(3)}
        res = compute_results(recs, status, [("decode-c64-bench", "decode", args.wave_size, 3)])
        timings["metrics (waves, rounds, cells)"] = time.perf_counter() - t
        t = time.perf_counter()
        w = ArchiveWriter(ws)
        chunk = args.wave_size * 64
        for i in range(0, len(recs), chunk):  # streamed as waves finish, in 64-wave batches here
            w.write_wave(recs[i : i + chunk])
        timings["stream raw records to disk"] = time.perf_counter() - t
        t = time.perf_counter()
        for name, table in results_tables(res, {"campaign": "bench"}).items():
            w.write_table(f"{name}.parquet", table)
        w.write_json("results.json", results_json(res))
        run = RunBlock(campaign="bench", kind="formal-matrix", claim_class="native-ar", protocol_class="formal",
                       backend="sim", service_name="sim", created_wall="", run_token="bench")
        path = w.finalize(status="complete", run=run)
        timings["finalize (hash every file, manifest)"] = time.perf_counter() - t
        t = time.perf_counter()
        ingest_archive(ws, open_archive(path))
        timings["ledger ingest (incl. reading records)"] = time.perf_counter() - t
        size = sum(f.stat().st_size for f in path.rglob("*") if f.is_file())
    total = sum(timings.values())
    print(f"{args.requests:,} requests x {args.events} events ({args.requests * args.events / 1e6:.1f} M events); "
          f"synthesis {t_synth:.1f} s (not counted)")
    print(f"{'step':<42}{'seconds':>10}")
    for k, v in timings.items():
        print(f"{k:<42}{v:>10.2f}")
    print(f"{'total':<42}{total:>10.2f}")
    print(f"archive size {size / 1e6:.1f} MB; cell median {res.cells[0].median_tok_s:.2f} tok/s")
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps({"requests": args.requests, "events": args.events, "timings_s": timings,
                                    "total_s": total, "archive_bytes": size, "machine": platform.platform(),
                                    "cpus": __import__("os").cpu_count()}, indent=1) + "\n")


if __name__ == "__main__":
    main()
