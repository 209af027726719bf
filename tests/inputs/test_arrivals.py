"""Arrival planning (harness.inputs.arrivals) and rate-sweep specs: known answers, determinism."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from harness.inputs.arrivals import geometric_rates, offsets, plan_hash, plan_round
from harness.inputs.corpus import load_corpus
from harness.inputs.spec import SweepSpec, load_spec
from harness.inputs.sweep_plan import make_sweep_plan

ROOT = Path(__file__).resolve().parents[2]


def test_constant_offsets_are_exact() -> None:
    assert offsets("constant", 4.0, count=4).tolist() == [0.0, 0.25, 0.5, 0.75]
    assert offsets("constant", 2.0, duration_s=2.0).tolist() == [0.0, 0.5, 1.0, 1.5]


def test_poisson_is_seeded_and_has_the_mean_gap() -> None:
    a = offsets("poisson", 10.0, count=20_001, seed=7)
    b = offsets("poisson", 10.0, count=20_001, seed=7)
    assert np.array_equal(a, b)
    assert not np.array_equal(a, offsets("poisson", 10.0, count=20_001, seed=8))
    assert a[0] == 0.0 and np.all(np.diff(a) >= 0)
    assert abs(float(np.diff(a).mean()) - 0.1) < 0.003


def test_gamma_burstiness_changes_spread_not_mean() -> None:
    bursty = np.diff(offsets("gamma", 10.0, count=20_001, burstiness=0.25, seed=1))
    regular = np.diff(offsets("gamma", 10.0, count=20_001, burstiness=4.0, seed=1))
    assert abs(float(bursty.mean()) - 0.1) < 0.006 and abs(float(regular.mean()) - 0.1) < 0.003
    # coefficient of variation of gamma gaps is 1/sqrt(shape): 2.0 and 0.5
    assert abs(float(bursty.std() / bursty.mean()) - 2.0) < 0.1
    assert abs(float(regular.std() / regular.mean()) - 0.5) < 0.03


def test_duration_bound_and_errors() -> None:
    t = offsets("poisson", 50.0, duration_s=3.0, seed=3)
    assert t.size > 100 and float(t.max()) < 3.0
    with pytest.raises(ValueError, match="exactly one"):
        offsets("poisson", 1.0)
    with pytest.raises(ValueError, match="positive"):
        offsets("poisson", 0.0, count=3)


def test_geometric_rates() -> None:
    assert geometric_rates(1, 16, 5) == [1.0, 2.0, 4.0, 8.0, 16.0]
    assert geometric_rates(3, 3, 1) == [3.0]


def test_round_plan_cycles_cases_and_hash_is_stable() -> None:
    p = plan_round("constant", 2.0, 0, ["c000", "c001"], seed=1, count=5)
    assert p.case_ids == ("c000", "c001", "c000", "c001", "c000")
    assert p.to_json()["offsets_ns"] == [0, 500_000_000, 1_000_000_000, 1_500_000_000, 2_000_000_000]
    assert plan_hash([p]) == plan_hash([plan_round("constant", 2.0, 0, ["c000", "c001"], seed=1, count=5)])


def test_demo_sweep_spec_plans_warmups_and_three_rounds() -> None:
    loaded = load_spec(ROOT / "campaigns" / "sweep-demo.yaml")
    spec, corpus_path = loaded.spec, loaded.paths.corpora["sweep"]
    assert isinstance(spec, SweepSpec)
    assert spec.protocol_class == "rate-sweep" and spec.rate_list == [4.0, 8.0, 16.0]
    plan = make_sweep_plan(spec, load_corpus(corpus_path))
    assert [(r.rate, r.round_index) for r in plan.rounds][:4] == [(4.0, -1), (4.0, 0), (4.0, 1), (4.0, 2)]
    assert len(plan.rounds) == 12 and all(len(r.offsets_s) == 24 for r in plan.rounds if r.round_index >= 0)
    assert plan.plan_id == make_sweep_plan(spec, load_corpus(corpus_path)).plan_id
