"""Plans: ordered cells, stable ids from canonical JSON, case cycling."""

from __future__ import annotations

from harness.inputs.plan import build_plan, wave_cases
from harness.inputs.spec import CampaignSpec


def spec(**over: object) -> CampaignSpec:
    data: dict[str, object] = {
        "name": "p", "claim_class": "native-ar", "service": {"backend": "sim"},
        "corpora": {"decode": "d", "prefill": "p"},
        "decode": {"tiers": [4, 1], "max_new_tokens": 64},
        "prefill": {"tiers": [2]},
    }
    data.update(over)
    return CampaignSpec.model_validate(data)


def test_order_and_stable_ids() -> None:
    p1 = build_plan(spec(), {"decode": "a" * 64, "prefill": "b" * 64})
    p2 = build_plan(spec(), {"decode": "a" * 64, "prefill": "b" * 64})
    assert [(c.workload, c.concurrency) for c in p1.cells] == [("decode", 1), ("decode", 4), ("prefill", 2)]
    assert [c.cell_id for c in p1.cells] == [c.cell_id for c in p2.cells]
    assert p1.plan_id == p2.plan_id
    assert p1.cells[0].cell_id.startswith("decode-c01-")
    assert p1.cells[0].wave_id(0, 3) == p1.cells[0].cell_id + ".r0.w003"
    assert p1.cells[0].wave_id(1, 0, attempt=2) == p1.cells[0].cell_id + ".r1.a2.w000"
    assert p1.cells[0].wave_id(-1, 0) == p1.cells[0].cell_id + ".warmup.w000"


def test_changed_definition_changes_ids() -> None:
    base = build_plan(spec(), {"decode": "a" * 64})
    other_corpus = build_plan(spec(), {"decode": "c" * 64})
    other_tokens = build_plan(spec(decode={"tiers": [4, 1], "max_new_tokens": 65}), {"decode": "a" * 64})
    assert base.cells[0].cell_id != other_corpus.cells[0].cell_id
    assert base.cells[0].cell_id != other_tokens.cells[0].cell_id
    assert base.plan_id != other_tokens.plan_id


def test_order_prefill_first_and_estimate() -> None:
    p = build_plan(spec(order=["prefill", "decode"]), {}, estimator=lambda c: 10.0, estimate_basis="x")
    assert p.cells[0].workload == "prefill"
    assert p.estimate_s == 30.0
    assert build_plan(spec(), {}, estimator=lambda c: None).estimate_s is None


def test_wave_cases_cycle() -> None:
    assert wave_cases(64, 4, 0) == [0, 1, 2, 3]
    assert wave_cases(64, 4, 1) == [4, 5, 6, 7]
    assert wave_cases(64, 32, 2) == list(range(0, 32))
    assert wave_cases(10, 4, 2) == [8, 9, 0, 1]
    assert wave_cases(3, 5, 0) == [0, 1, 2, 0, 1]
