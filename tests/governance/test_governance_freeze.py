"""Freeze-before-reveal and analysis-plan status."""

from __future__ import annotations

from datetime import UTC, datetime
from pathlib import Path

import pytest
from hypothesis import given
from hypothesis import strategies as st
from test_governance_support import make_abba

from harness.governance import record_claims as gv
from harness.governance.io import analysis_plan_status, freeze_file, reveal_file, table_rows

BEFORE = datetime(2026, 7, 16, 8, 0, tzinfo=UTC)
RESULTS = "2026-07-16T10:00:00+0200"  # = 08:00:00 UTC + 0 s: the archive's created_wall (local offset)
AFTER = datetime(2026, 7, 16, 9, 0, tzinfo=UTC)


def plan(tmp: Path, text: str = "predict: candidate >= +1.0% at C32\n") -> Path:
    p = tmp / "prediction.yaml"
    p.write_text(text, encoding="utf-8")
    return p


def test_freeze_then_reveal_passes(tmp_path: Path) -> None:
    p = plan(tmp_path)
    row, created = freeze_file(p, tmp_path, now=datetime(2026, 7, 16, 7, 59, 59, tzinfo=UTC))
    assert created and row["bytes"] == p.stat().st_size and len(row["sha256"]) == 64
    again, created2 = freeze_file(p, tmp_path)
    assert not created2 and again["at"] == row["at"]  # the existing freeze is reported, nothing appended
    results = make_abba(tmp_path, created_wall=RESULTS).archive_id
    out = reveal_file(p, results, tmp_path)
    assert out["passed"] and out["outcome"] == "passed" and out["freeze_at"] == row["at"]
    assert [r["action"] for r in table_rows(tmp_path, "freezes")] == ["freeze", "reveal"]


def test_reveal_after_modification_fails(tmp_path: Path) -> None:
    p = plan(tmp_path)
    freeze_file(p, tmp_path, now=datetime(2026, 7, 1, tzinfo=UTC))
    p.write_text("predict: candidate >= +5.0% at C32\n", encoding="utf-8")
    out = reveal_file(p, make_abba(tmp_path, created_wall=RESULTS).archive_id, tmp_path)
    assert not out["passed"] and out["outcome"] == "changed since freeze"
    assert table_rows(tmp_path, "freezes")[-1]["outcome"] == "changed since freeze"


def test_freeze_after_the_results_fails(tmp_path: Path) -> None:
    p = plan(tmp_path)
    results = make_abba(tmp_path, created_wall=RESULTS).archive_id
    freeze_file(p, tmp_path, now=AFTER)
    out = reveal_file(p, results, tmp_path)
    assert not out["passed"] and out["outcome"] == "frozen after the results"
    # a freeze in the very second the results were created is not "before" them
    q = tmp_path / "q.yaml"
    q.write_text("same second\n", encoding="utf-8")
    freeze_file(q, tmp_path, now=BEFORE)
    assert reveal_file(q, results, tmp_path)["outcome"] == "frozen after the results"


def test_never_frozen_fails(tmp_path: Path) -> None:
    out = reveal_file(plan(tmp_path), make_abba(tmp_path).archive_id, tmp_path)
    assert not out["passed"] and out["outcome"] == "never frozen"


def test_analysis_plan_status(tmp_path: Path) -> None:
    p = plan(tmp_path)
    st0 = analysis_plan_status(tmp_path, p)
    assert st0["label"] == "exploratory" and not st0["frozen"] and "never frozen" in st0["reason"]
    row, _ = freeze_file(p, tmp_path)
    st1 = analysis_plan_status(tmp_path, p)
    assert st1 == {"frozen": True, "sha256": row["sha256"], "frozen_at": row["at"], "label": "preregistered",
                   "reason": f"content frozen at {row['at']}", "path": str(p.resolve())}
    p.write_text("changed\n", encoding="utf-8")
    st2 = analysis_plan_status(tmp_path, p)
    assert st2["label"] == "exploratory" and "changed since its freeze" in st2["reason"]
    assert analysis_plan_status(tmp_path, tmp_path / "missing.yaml")["label"] == "exploratory"
    p.write_text("predict: candidate >= +1.0% at C32\n", encoding="utf-8")  # the frozen content again
    assert analysis_plan_status(tmp_path, p, "2099-01-01T00:00:00+0000")["label"] == "preregistered"
    late = analysis_plan_status(tmp_path, p, "2020-01-01T00:00:00+0000")
    assert late["label"] == "exploratory" and "not before the run started" in late["reason"]
    assert len(table_rows(tmp_path, "freezes")) == 1  # status never writes


@given(st.integers(-10_000, 10_000))
def test_reveal_decision_orders_by_time(offset_s: int) -> None:
    created = "2026-07-16T10:00:00+0000"
    frozen = datetime.fromtimestamp(gv.parse_wall(created).timestamp() + offset_s, tz=UTC)
    rows = [{"action": "freeze", "path": "/p", "sha256": "s", "at": frozen.isoformat()}]
    d = gv.reveal_decision(rows, "/p", "s", created)
    assert d.passed is (offset_s < 0)
    assert d.outcome == ("passed" if offset_s < 0 else "frozen after the results")


def test_parse_wall_refuses_naive_times() -> None:
    with pytest.raises(ValueError, match="offset"):
        gv.parse_wall("2026-07-16T10:00:00")
