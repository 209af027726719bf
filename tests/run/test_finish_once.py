"""Finishing a run is one pass (harness.run.skeleton.finish / settle, harness.store.finished): the records
are read once, the request rows computed once, the archive verified at most once, inside one critical
section (no nested one below it)."""

from __future__ import annotations

import shutil
from collections import Counter
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from testkit import quick_decode_run

import harness.store.archive as archive_mod
import harness.store.finished as finished_mod
from harness import interrupts
from harness.run.skeleton import settle
from harness.store.ledger import read_table


@pytest.fixture
def counts(monkeypatch: pytest.MonkeyPatch) -> Iterator[Counter[str]]:
    """Calls of the one records reader, the request-row builder and the verifier, and the critical
    section depth at the ``finish:ingested`` fault point (reads of the run's own records only)."""
    seen: Counter[str] = Counter()

    def counted(name: str, fn: Any) -> Any:
        def wrapper(*args: Any, **kwargs: Any) -> Any:
            seen[name] += 1
            return fn(*args, **kwargs)
        return wrapper

    monkeypatch.setattr(archive_mod, "read_records_table", counted("records", archive_mod.read_records_table))
    monkeypatch.setattr(archive_mod, "verify_archive", counted("verify", archive_mod.verify_archive))
    monkeypatch.setattr(finished_mod, "request_rows", counted("request_rows", finished_mod.request_rows))

    def hook(name: str) -> None:
        if name == "finish:ingested":
            seen[f"depth={interrupts.depth()}"] += 1

    interrupts.set_fault_hook(hook)
    try:
        yield seen
    finally:
        interrupts.set_fault_hook(None)


def test_a_campaign_reads_its_records_once_and_settle_too(tmp_path: Path, counts: Counter[str]) -> None:
    out, ws = quick_decode_run(tmp_path, "once", 2)
    # one read back of the streamed records (the results, ingest and evidence share it), one set of
    # request rows, no re-hash after finalize; the skeleton (drive) holds the one critical section
    # and nothing below it opens another
    assert counts == Counter({"records": 1, "request_rows": 1, "depth=1": 1}), counts
    n_records = len(out.archive.records())
    assert n_records > 0 and out.ledger_rows["requests"] == n_records
    requests = read_table(ws, "requests")
    assert requests is not None and requests.num_rows == n_records

    counts.clear()
    other = tmp_path / "other"
    (other / "archives").mkdir(parents=True)
    copy = other / "archives" / out.archive.archive_id
    shutil.copytree(out.archive.path, copy)
    done = settle(other, copy)  # an archive already on disk (what recovery does)
    assert counts == Counter({"verify": 1, "records": 1, "request_rows": 1, "depth=1": 1}), counts
    assert done.ledger_rows["requests"] == n_records and done.archive.archive_id == out.archive.archive_id
    assert [f.rule for f in done.findings] == [f.rule for f in out.findings]
