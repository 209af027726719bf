"""Benchmark: every bounded reader of issue 37 at its cap (each must stay under 1 GB and 20 s), and the
measured hostile inputs, now refused.

Each case's hostile input is built first, then read by a fresh child process
(``bounded_readers.py --child CASE DIR``), which reports its wall and CPU seconds, its peak RSS
(``VmHWM``, the interpreter and pyarrow included) and what happened (merged/imported counts, or the refusal):

- ``ledger merge``: another host's governance Delta table of 100,000 rows (``--max-rows``) in one
  commit; one of 2,000 log entries and 2,000 data files (``--max-commits``); one over each, and the
  issue's 100,000 commits;
- ``corpus import-trace``: 2^24 prompt tokens in 16 lines (``--max-total-tokens``); 2^18 named blocks
  of block size 1 (``--max-blocks``); 100,000 requests padded to 64 MiB (``--max-lines``,
  ``--max-bytes``); the issue's 40 lines of 2^20 tokens and a 401-digit timestamp (refused);
- the simulator: a body of exactly its limit (9,437,176 bytes for the default context, parsed and
  answered) and the issue's 189 MB body (413 unread).

Writes ``benchmarks/results/bounded_readers.json`` and prints a table. Usage::

    .venv/bin/python benchmarks/bounded_readers.py [--only NAME,...]
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import platform
import shutil
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
LIMIT_S, LIMIT_BYTES = 20.0, 2**30


# --- inputs ----------------------------------------------------------------------------------------


def _historical(n: int, start: int = 0) -> list[dict[str, Any]]:
    return [{"entry_id": f"syn-{k:07d}", "source": "synthetic", "published_date": "2026-09-18",
             "protocol_label": "synthetic TP4 short probe", "claim_class": "native-ar",
             "protocol_class": "historical-other", "metric": "single_request_output", "concurrency": 1,
             "value": 15.0 + k, "unit": "output tok/s", "tp": 4, "label": f"synthetic milestone {k}",
             "not_claims": ["not current"]} for k in range(start, start + n)]


def build_rows(d: Path, n: int) -> None:
    """Another host whose historical Delta table holds ``n`` rows in one commit."""
    from harness.store.ledger import append_rows

    (d / "here").mkdir()
    append_rows(d / "other", "historical", _historical(n))


def build_commits(d: Path, entries: int) -> None:
    """Another host whose historical Delta table has ``entries`` log entries and as many data files:
    dsv4h's first commit, then copies of its data file added one commit each (written directly)."""
    from harness.store.ledger import append_rows

    (d / "here").mkdir()
    append_rows(d / "other", "historical", _historical(1))
    table = d / "other" / "ledgers" / "delta" / "historical"
    log = table / "_delta_log"
    first = sorted(log.glob("*.json"))
    adds = [json.loads(ln)["add"] for ln in first[-1].read_text().splitlines() if '"add"' in ln]
    data = (table / adds[0]["path"]).read_bytes()
    for v in range(len(list(log.iterdir())), entries):
        name = f"bench-{v:06d}.parquet"
        (table / name).write_bytes(data)
        add = {"path": name, "size": len(data), "partitionValues": {}, "modificationTime": 1_764_806_400_000 + v,
               "dataChange": True}
        (log / f"{v:020d}.json").write_text(json.dumps({"add": add}) + "\n")


def _trace_line(ts: int, n_in: int, ids: list[int], pad: int = 0) -> str:
    return json.dumps({"timestamp": ts, "input_length": n_in, "output_length": 1, "hash_ids": ids}) + " " * pad + "\n"


def build_trace(d: Path, lines: list[str], block: int = 512) -> None:
    (d / "trace.jsonl").write_text("".join(lines))
    (d / "block").write_text(str(block))


def build_trace_bytes(d: Path, n: int, size: int) -> None:
    """``n`` one-token requests padded with blanks to ``size`` bytes in all."""
    line = _trace_line(0, 1, [])
    pad = size // n - len(line)
    (d / "trace.jsonl").write_text("".join(_trace_line(0, 1, [], pad) for _ in range(n)))


# --- what the child runs ---------------------------------------------------------------------------


def run_merge(d: Path) -> str:
    from harness.errors import DsvError
    from harness.run.merge import merge_workspace

    try:
        res = merge_workspace(d / "here", d / "other")
    except DsvError as exc:
        return f"refused: {exc}"
    return f"merged: {res.governance}, {len(res.refusals)} refused"


def run_import(d: Path) -> str:
    from harness.errors import DsvError
    from harness.inputs.corpus.trace_import import import_trace

    block = int((d / "block").read_text()) if (d / "block").exists() else 512  # written by build_trace
    try:
        c = import_trace(d / "trace.jsonl", d / "corpus", block_size=block)
    except DsvError as exc:
        return f"refused: {exc}"
    size = (c.path / "cases.jsonl").stat().st_size
    return f"imported: {len(c)} cases, {sum(x.n_tokens for x in c.cases)} tokens, cases.jsonl {size / 1e6:.0f} MB"


async def _post(url: str, body: bytes, declared: int) -> str:
    host, port = url.split("//", 1)[1].rsplit(":", 1)
    reader, writer = await asyncio.open_connection(host, int(port))
    writer.write(f"POST /generate HTTP/1.1\r\nHost: sim\r\nContent-Type: application/json\r\n"
                 f"Content-Length: {declared}\r\nConnection: close\r\n\r\n".encode())
    writer.write(body)
    await writer.drain()
    head = (await asyncio.wait_for(reader.read(300), 60)).split(b"\r\n", 1)[0].decode()
    writer.close()
    return head


def run_sim(d: Path) -> str:
    from harness.aio import new_event_loop
    from harness.sim import SimOptions, SimServer
    from harness.sim.protocol import body_limit

    mode = (d / "mode").read_text()

    async def go() -> str:
        server = SimServer(SimOptions.build(profile="fast"))
        url = await server.start()
        try:
            limit = body_limit(server.profile)
            if mode == "at-cap":
                ids = b",".join(b"129279" for _ in range(1_048_575))
                body = b'{"input_ids":[' + ids + b'],"sampling_params":{"max_new_tokens":2}}'
                body += b" " * (limit - len(body))
                return f"{len(body)} bytes: {await _post(url, body, len(body))}"
            return f"189000000 bytes declared: {await _post(url, b'{', 189_000_000)}"
        finally:
            await server.stop()

    with asyncio.Runner(loop_factory=new_event_loop) as runner:
        return runner.run(go())


RUNNERS: dict[str, Callable[[Path], str]] = {"merge": run_merge, "import": run_import, "sim": run_sim}


def child(kind: str, d: Path) -> None:
    t0, c0 = time.perf_counter(), time.process_time()
    outcome = RUNNERS[kind](d)
    seconds, cpu = time.perf_counter() - t0, time.process_time() - c0
    hwm = [ln for ln in Path("/proc/self/status").read_text().splitlines() if ln.startswith("VmHWM:")]
    print(json.dumps({"seconds": seconds, "cpu_seconds": cpu, "peak_rss_bytes": int(hwm[0].split()[1]) * 1024,
                      "outcome": outcome}))


# --- the cases -------------------------------------------------------------------------------------

CASES: list[tuple[str, str, Callable[[Path], object]]] = [
    ("merge: 100,000 governance rows (--max-rows cap)", "merge", lambda d: build_rows(d, 100_000)),
    ("merge: 100,001 governance rows (over)", "merge", lambda d: build_rows(d, 100_001)),
    ("merge: 2,000 log entries, 2,000 data files (--max-commits cap)", "merge", lambda d: build_commits(d, 2_000)),
    ("merge: 2,001 log entries (over)", "merge", lambda d: build_commits(d, 2_001)),
    ("merge: 100,000 log entries (issue 37; over)", "merge", lambda d: build_commits(d, 100_000)),
    ("import-trace: 2^24 tokens, 16 lines (--max-total-tokens cap)", "import",
     lambda d: build_trace(d, [_trace_line(i, 1 << 20, list(range(i * 64, i * 64 + 64))) for i in range(16)])),
    ("import-trace: 40 x 2^20 tokens (issue 37; over)", "import",
     lambda d: build_trace(d, [_trace_line(i, 1 << 20, []) for i in range(40)])),
    ("import-trace: 2^18 blocks of size 1 (--max-blocks cap)", "import",
     lambda d: build_trace(d, [_trace_line(i, 1 << 16, list(range(i << 16, (i + 1) << 16))) for i in range(4)],
                           block=1)),
    ("import-trace: 100,000 requests in 64 MiB (--max-lines, --max-bytes caps)", "import",
     lambda d: build_trace_bytes(d, 100_000, 64 << 20)),
    ("import-trace: 401-digit timestamp (refused)", "import",
     lambda d: (d / "trace.jsonl").write_text('{"timestamp": 1' + "0" * 400 + ', "input_length": 1, '
                                              '"output_length": 1, "hash_ids": []}\n')),
    ("sim: body of exactly its limit (parsed)", "sim", lambda d: (d / "mode").write_text("at-cap")),
    ("sim: 189 MB body declared (issue 37; 413)", "sim", lambda d: (d / "mode").write_text("over")),
]


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--child", nargs=2, metavar=("KIND", "DIR"), help=argparse.SUPPRESS)
    ap.add_argument("--only", default="", help="comma-separated words: run the cases whose label has one")
    args = ap.parse_args()
    if args.child:
        child(args.child[0], Path(args.child[1]))
        return
    words = [w for w in args.only.split(",") if w]
    rows = []
    for label, kind, build in CASES:
        if words and not any(w in label for w in words):
            continue
        d = Path(tempfile.mkdtemp(prefix="dsv4h-bounded-"))
        try:
            build(d)
            proc = subprocess.run([sys.executable, __file__, "--child", kind, str(d)], capture_output=True, text=True,
                                  cwd=ROOT, check=True, env=os.environ | {"PYTHONPATH": str(ROOT)})
            r = json.loads(proc.stdout.splitlines()[-1])
        finally:
            shutil.rmtree(d, ignore_errors=True)
        r["within"] = r["seconds"] < LIMIT_S and r["peak_rss_bytes"] < LIMIT_BYTES
        rows.append({"case": label, **r})
        print(f"{label:<72}{r['seconds']:>7.2f} s{r['cpu_seconds']:>7.2f} cpu{r['peak_rss_bytes'] / 2**20:>6.0f} MiB  "
              f"{'ok' if r['within'] else 'OVER'}  {r['outcome'][:110]}", flush=True)
    out = ROOT / "benchmarks" / "results" / "bounded_readers.json"
    out.write_text(json.dumps({"benchmark": "bounded_readers", "limit_s": LIMIT_S, "limit_bytes": LIMIT_BYTES,
                               "python": sys.version.split()[0], "machine": platform.machine(),
                               "cpus": os.cpu_count(), "load_avg": os.getloadavg(), "rows": rows}, indent=1) + "\n")
    print(f"wrote {out.relative_to(ROOT)}")


if __name__ == "__main__":
    main()
