"""A trace replay's plan and schedule rows (harness.run.replay) without a server: offsets from the trace,
answer lengths, implied cached tokens, the plan id, the requests' shared salt and answer lengths."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from harness.inputs.corpus.trace_import import import_trace
from harness.inputs.spec import ReplaySpec
from harness.records import RequestRecord
from harness.run.replay import ReplayPlan, make_replay_plan, schedule_rows

ROOT = Path(__file__).resolve().parents[2]
SMALL = ROOT / "tests" / "fixtures" / "traces" / "mooncake-small.jsonl"


def spec(**kw: object) -> ReplaySpec:
    return ReplaySpec.model_validate({"name": "r", "claim_class": "native-ar", "service": {"backend": "sim"},
                                      "corpus": "mc", "trace": str(SMALL)} | kw)


def test_plan_from_the_trace(tmp_path: Path) -> None:
    corpus = import_trace(SMALL, tmp_path / "mc")
    plan = make_replay_plan(spec(speed=3, max_concurrency=4), corpus, SMALL)
    assert plan.offsets_s[:3] == pytest.approx((0.0, 0.05, 0.1)) and len(plan.case_ids) == 20
    assert plan.output_tokens[:5] == (8, 12, 16, 20, 24) and sum(plan.expected_cached) == 12537
    assert plan.block_size == 512 and plan.definition["speed"] == 3 and plan.definition["max_concurrency"] == 4
    again = ReplayPlan.from_json(plan.to_json())
    assert again.plan_id == plan.plan_id and again.expected_cached == plan.expected_cached
    assert make_replay_plan(spec(speed=1), corpus, SMALL).plan_id != plan.plan_id


def test_schedule_rows_split_the_cap_wait_from_the_lateness() -> None:
    recs = [RequestRecord(rid=f"r{i}", send_ns=s, done_ns=s + 10, event_ns=np.zeros(0, dtype=np.int64))
            for i, s in enumerate((1_000, 2_000_000_000))]
    rows = schedule_rows([1_000, 1_000_000_000], recs, [0, 900_000_000])
    assert [(r["index"], r["lag_s"], r["cap_wait_s"]) for r in rows] == [(0, 0.0, 0.0), (1, 1.0, 0.9)]
    assert abs(rows[1]["client_lag_s"] - 0.1) < 1e-12
