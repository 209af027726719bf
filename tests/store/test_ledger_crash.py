"""Crash consistency of an ingest (issue 37 item 3): SIGKILL at every step of a resumed archive's
ingest (each table's commit before its fsync, after it, after the table; each supersede update), then
at each step a simulated lost write (the newest log entry zero-length, half-written or gone, or its
data file empty); after ``repair_ledger`` the ledger holds exactly what a clean ingest of the same
archives gives: nothing lost, nothing counted twice, the older archive's rows superseded once."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

import pyarrow as pa
from test_ledger_commit import make

from harness.store.archive import open_archive
from harness.store.ledger import TABLES, durable, ingest_archive, read_table
from harness.store.ledger import delta as dl
from harness.store.ledger.repair import repair_ledger

# A process that never runs a Delta operation itself forks one child per step k; the child counts the
# ledger's fault points and SIGKILLs itself at the k-th (a fork is much cheaper than a new interpreter;
# the parent never started delta-rs's runtime, so the child's is its own)
FORKER = r"""
import os, shutil, signal, sys
from pathlib import Path
from harness import interrupts
from harness.store.archive import open_archive
from harness.store.ledger import ingest_archive
template, root, name = Path(sys.argv[1]), Path(sys.argv[2]), sys.argv[3]
k = 0
while True:
    k += 1
    ws = root / f"k{k:03d}"
    shutil.copytree(template, ws, symlinks=True)
    pid = os.fork()
    if pid == 0:
        seen = [0]
        def hook(point, k=k):
            if point.startswith("ledger:"):
                seen[0] += 1
                if seen[0] == k:
                    os.kill(os.getpid(), signal.SIGKILL)
        interrupts.set_fault_hook(hook)
        ingest_archive(ws, open_archive(ws / "archives" / name))
        os._exit(0)
    _, status = os.waitpid(pid, 0)
    if not (os.WIFSIGNALED(status) and os.WTERMSIG(status) == signal.SIGKILL):
        shutil.rmtree(ws)
        print(k - 1)
        break
"""


def _rows(ws: Path) -> dict[str, list[tuple[str, ...]]]:
    """Every table's committed rows, sorted; ``archive_path`` (the workspace copy's path) left out."""
    out = {}
    for table in TABLES:
        t = read_table(ws, table)
        if t is None:
            continue
        t = t.drop_columns([c for c in ("archive_path",) if c in t.column_names])
        out[table] = sorted(tuple(map(repr, r.values())) for r in t.to_pylist())
    return out


def _newest_entry(ws: Path) -> Path:
    """The log entry written last in the whole ledger (the one a power cut would lose)."""
    entries = []
    for table in TABLES:
        path = dl.table_path(ws, table)
        _, versions = durable.log_versions(path)
        if versions:
            entries.append(durable.entry_path(path, versions[-1]))
    return max(entries, key=lambda p: (p.stat().st_mtime_ns, p.name))


def _lose(ws: Path, how: str) -> None:
    """Simulate a write lost in a power cut on the newest log entry."""
    entry = _newest_entry(ws)
    adds = durable.parse_entry(entry, int(entry.name[:20])).adds
    if how == "zero-length":
        entry.write_bytes(b"")
    elif how == "half-written":
        raw = entry.read_bytes()
        entry.write_bytes(raw[: len(raw) // 2])
    elif how == "removed":
        entry.unlink()
    elif adds:  # its data file empty
        (entry.parent.parent / adds[0][0]).write_bytes(b"")
    else:
        entry.write_bytes(b"")


def _repair(ws: Path) -> None:
    repair_ledger(ws, lambda path: ingest_archive(ws, open_archive(path)))


def test_sigkill_and_a_lost_write_at_every_ingest_step_repair_to_a_clean_ingest(tmp_path: Path) -> None:
    template = tmp_path / "template"
    old = make(template, "m", median=100.0)
    new = make(template, "m", resumed_from=old.name, median=101.0)
    ingest_archive(template, open_archive(old))
    clean = tmp_path / "clean"
    shutil.copytree(template, clean, symlinks=True)
    ingest_archive(clean, open_archive(clean / "archives" / new.name))
    want = _rows(clean)
    cells = read_table(clean, "cells")
    assert cells is not None and sorted(cells.filter(pa.compute.field("valid")).column("archive_id").to_pylist()) \
        == [new.name, new.name]  # the known answer: the newer archive's two cells, once

    root = tmp_path / "killed"
    root.mkdir()
    env = dict(os.environ, PYTHONPATH=os.pathsep.join([str(Path.cwd()), os.environ.get("PYTHONPATH", "")]))
    proc = subprocess.run([sys.executable, "-c", FORKER, str(template), str(root), new.name], env=env,
                          capture_output=True, text=True, timeout=240, check=False)
    assert proc.returncode == 0, proc.stderr[-3000:]
    steps = int(proc.stdout.split()[-1])
    # 5 tables appended (committed, synced, appended each) and 5 tables superseded (committed, synced each)
    assert steps == 25, steps
    ways = ("zero-length", "half-written", "removed", "data-empty")
    for k in range(1, steps + 1):
        killed = root / f"k{k:03d}"
        lost = root / f"k{k:03d}-lost"
        shutil.copytree(killed, lost, symlinks=True)
        _repair(killed)
        assert _rows(killed) == want, f"step {k}: SIGKILL, then repair"
        way = ways[k % len(ways)]
        _lose(lost, way)
        _repair(lost)
        assert _rows(lost) == want, f"step {k}: SIGKILL, a {way} write lost, then repair"
        valid = read_table(lost, "cells")
        assert valid is not None
        assert sorted(r["archive_id"] for r in valid.to_pylist() if r["valid"]) == [new.name, new.name], k
