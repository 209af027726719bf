"""Closures: close, refuse a run of a closed direction, reopen only with new evidence."""

from __future__ import annotations

from pathlib import Path

import pytest
from hypothesis import given
from hypothesis import strategies as st
from test_governance_support import make_abba

from harness.errors import ArchiveError, EvidenceError, SpecError
from harness.governance import record_claims as gv
from harness.governance.io import add_closure, check_direction, closure_states, reopen_direction, table_rows

OLD, NEW = "2026-07-15T22:20:00+0000", "2026-07-16T09:00:00+0000"


def test_close_then_refuse_then_reopen(tmp_path: Path) -> None:
    ws = tmp_path
    closing = make_abba(ws, created_wall=OLD).archive_id
    newer = make_abba(ws, change_pct=4.0, created_wall=NEW).archive_id
    assert check_direction(ws, "mtp2-reuse", None)["state"] == "open"  # never closed
    row = add_closure(ws, "mtp2-reuse", closing[:8], "second position accepts only 0.5-2.2%")
    assert row["evidence_archive_id"] == closing and row["action"] == "close"
    with pytest.raises(EvidenceError) as exc:
        check_direction(ws, "mtp2-reuse", None)
    msg = exc.value.message
    assert msg.startswith(f"direction mtp2-reuse was closed on {row['at'][:10]} by archive {closing}: second position")
    assert msg.endswith("reopen it only with new evidence")
    # the closing archive itself is not new evidence
    with pytest.raises(EvidenceError, match="is the evidence that closed"):
        check_direction(ws, "mtp2-reuse", closing)
    out = check_direction(ws, "mtp2-reuse", newer, "new predictor design")
    assert out["state"] == "reopened" and out["reopen"]["evidence_archive_id"] == newer
    assert out["closed_by"] == closing
    assert check_direction(ws, "mtp2-reuse", None)["state"] == "open"
    log = table_rows(ws, "closures")
    assert [r["action"] for r in log] == ["close", "reopen"]  # append-only
    assert log[1]["closing_archive_id"] == closing and log[1]["reason"] == "new predictor design"


def test_reopen_refusals(tmp_path: Path) -> None:
    ws = tmp_path
    older = make_abba(ws, created_wall="2026-07-01T00:00:00+0000").archive_id
    closing = make_abba(ws, created_wall=NEW).archive_id
    with pytest.raises(EvidenceError, match="not closed"):
        reopen_direction(ws, "n32-mxfp4", closing, "x")
    add_closure(ws, "n32-mxfp4", closing, "slower than N64")
    with pytest.raises(EvidenceError, match="already closed"):
        add_closure(ws, "n32-mxfp4", closing, "again")
    with pytest.raises(EvidenceError, match="older than the archive that closed"):
        reopen_direction(ws, "n32-mxfp4", older, "old data")
    with pytest.raises(ArchiveError):
        reopen_direction(ws, "n32-mxfp4", "0123456789abcdef", "missing archive")
    with pytest.raises(SpecError):
        add_closure(ws, "Not A Slug", closing, "x")
    assert [r["action"] for r in table_rows(ws, "closures")] == ["close"]


def test_close_again_after_reopen_and_states(tmp_path: Path) -> None:
    ws = tmp_path
    a, b, c = (make_abba(ws, created_wall=f"2026-07-1{i}T00:00:00+0000").archive_id for i in range(3))
    add_closure(ws, "ll-geometry", a, "no gain")
    reopen_direction(ws, "ll-geometry", b, "new algebra")
    add_closure(ws, "ll-geometry", c, "still no gain")
    add_closure(ws, "polling-consumer", a, "deadlocks")
    states = {r["direction"]: r["action"] for r in closure_states(ws)}
    assert states == {"ll-geometry": "close", "polling-consumer": "close"}
    # b closed nothing, but a and c did: neither may reopen it
    for used in (a, c):
        with pytest.raises(EvidenceError):
            reopen_direction(ws, "ll-geometry", used, "reuse")


@given(st.lists(st.sampled_from(["close", "reopen"]), max_size=8))
def test_state_is_last_row(actions: list[str]) -> None:
    rows = [{"direction": "d", "action": a} for a in actions] + [{"direction": "other", "action": "close"}]
    assert gv.is_closed(rows, "d") is (bool(actions) and actions[-1] == "close")
