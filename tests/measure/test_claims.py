"""Known answers for harness.measure.claims (issue 37): every count a server reports is checked against
its other counts and the stream before use; the lies of the issue with literal numbers."""

from __future__ import annotations

import math

import numpy as np

from harness.measure import claims as cl
from harness.measure.acceptance import acceptance_rows, cell_acceptance, counts_of
from harness.measure.speculative import VLLM_ACCEPTED, VLLM_DRAFT_TOKENS, VLLM_DRAFTS, VLLM_PER_POS
from harness.records import RequestRecord


def fields(found: list[cl.Contradiction]) -> list[tuple[str, str]]:
    return [(c.field, c.relation) for c in found]


def test_true_counts_raise_nothing() -> None:
    # 40 steps, 60 of 120 drafts accepted, 101 tokens = 1 (prefill) + 40 + 60: exactly what the steps emit
    assert cl.spec_contradictions("r0", "w", steps=40, proposed=120, accepted=60, histogram=(10, 10, 10, 10),
                                  completion_tokens=101, draft_tokens=3) == []
    assert cl.spec_contradictions("r0", "w", steps=None, proposed=None, accepted=None) == []  # nothing claimed


def test_the_huge_sglang_lie_is_refused() -> None:
    # the final meta_info: spec_verify_ct 1, spec_num_correct_drafts 2147483647 (a = 2.1e9)
    (c,) = cl.spec_contradictions("r7", "SD1.r0.w000", steps=1, proposed=3, accepted=2147483647,
                                  completion_tokens=97, draft_tokens=None)[:1]
    assert (c.field, c.relation) == ("spec_accepted", "accepted <= proposed")
    assert c.describe() == "r7: spec_accepted (spec_accepted 2147483647, spec_proposed 3) breaks accepted <= proposed"
    found = cl.spec_contradictions("r7", "SD1.r0.w000", steps=1, proposed=3, accepted=2147483647,
                                   completion_tokens=97)
    assert fields(found) == [("spec_accepted", "accepted <= proposed"),
                             ("spec_accepted", "accepted + steps <= completion tokens")]
    assert found[1].to_json() == {"subject": "r7", "wave_id": "SD1.r0.w000", "field": "spec_accepted",
                                  "relation": "accepted + steps <= completion tokens",
                                  "values": {"spec_accepted": 2147483647, "spec_steps": 1, "completion_tokens": 97}}


def test_the_vllm_zero_proposed_lie_is_refused() -> None:
    found = cl.spec_contradictions("r1", "w", steps=30, proposed=0, accepted=1000000, completion_tokens=97)
    assert fields(found)[0] == ("spec_accepted", "accepted <= proposed")
    assert found[0].values == (("spec_accepted", 1000000), ("spec_proposed", 0))


def test_the_believable_lie_is_refused_by_the_stream() -> None:
    # every draft accepted: proposed = accepted = 3 x 96 steps, histogram to match, but the stream shows one
    # token per step: 97 tokens = 1 + 96 steps; the steps would have emitted 96 + 288 = 384
    found = cl.spec_contradictions("r2", "w", steps=96, proposed=288, accepted=288, histogram=(0, 0, 0, 96),
                                   completion_tokens=97, draft_tokens=3)
    assert fields(found) == [("spec_accepted", "accepted + steps <= completion tokens + draft tokens 3")]
    assert found[0].values == (("spec_accepted", 288), ("spec_steps", 96), ("completion_tokens", 97))


def test_a_last_step_cut_short_is_allowed_k_more_tokens() -> None:
    # 10 steps, 20 accepted = 30 tokens claimed, 28 streamed: within k = 3 (the last step's drafts cut)
    assert cl.spec_contradictions("r", "w", steps=10, proposed=30, accepted=20, completion_tokens=28,
                                  draft_tokens=3) == []
    assert fields(cl.spec_contradictions("r", "w", steps=10, proposed=30, accepted=20, completion_tokens=26,
                                         draft_tokens=3))[0][0] == "spec_accepted"
    # k unknown: no allowance
    assert cl.spec_contradictions("r", "w", steps=10, proposed=30, accepted=20, completion_tokens=29) != []


def test_proposed_steps_and_histogram_checks() -> None:
    assert fields(cl.spec_contradictions("r", "w", steps=10, proposed=31, accepted=5, draft_tokens=3)) == [
        ("spec_proposed", "proposed <= steps x draft tokens")]
    assert fields(cl.spec_contradictions("r", "w", steps=0, proposed=6, accepted=2)) == [
        ("spec_steps", "no drafts without a verify step")]
    found = cl.spec_contradictions("r", "w", steps=6, proposed=18, accepted=11, histogram=(1, 2, 0, 2, 1),
                                   draft_tokens=3)
    assert fields(found) == [("spec_histogram", "sum(i x histogram[i]) = accepted"),
                             ("spec_histogram", "len(histogram) <= draft tokens + 1")]
    assert found[0].values == (("histogram_weighted", 12), ("spec_accepted", 11))
    assert fields(cl.spec_contradictions("r", "w", steps=7, proposed=21, accepted=11, histogram=(1, 2, 0, 3))) == [
        ("spec_histogram", "sum(histogram) = steps")]


def test_usage_against_itself_and_the_stream() -> None:
    assert fields(cl.usage_contradictions("r", "w", prompt_tokens=512, cached_tokens=513, completion_tokens=96,
                                          streamed_tokens=96, count_method="server-cumulative", ok=True)) == [
        ("cached_tokens", "cached_tokens <= prompt_tokens")]
    found = cl.usage_contradictions("r", "w", prompt_tokens=512, cached_tokens=0, completion_tokens=120,
                                    streamed_tokens=96, count_method="token-ids", ok=True)
    assert fields(found) == [("completion_tokens", "completion_tokens = streamed tokens")]
    # approximate counting, or a failed request: the stream is not the bound
    assert cl.usage_contradictions("r", "w", prompt_tokens=512, cached_tokens=0, completion_tokens=120,
                                   streamed_tokens=96, count_method="chunks", ok=True) == []
    assert cl.usage_contradictions("r", "w", prompt_tokens=512, cached_tokens=0, completion_tokens=120,
                                   streamed_tokens=96, count_method="token-ids", ok=False) == []


def test_token_bound_prefers_the_exact_stream() -> None:
    assert cl.token_bound(96, 120, "usage-per-chunk", True) == 96
    assert cl.token_bound(40, 96, "chunks", True) == 96  # chunks under SD undercount: the server's total
    assert cl.token_bound(40, 96, "server-cumulative", False) is None


def readings(drafts: float, tokens: float, accepted: float, per_pos: list[float] | None = None
             ) -> dict[str, dict[str, float]]:
    after = {VLLM_DRAFTS: 100 + drafts, VLLM_DRAFT_TOKENS: 300 + tokens, VLLM_ACCEPTED: 150 + accepted}
    before = {VLLM_DRAFTS: 100.0, VLLM_DRAFT_TOKENS: 300.0, VLLM_ACCEPTED: 150.0}
    for i, n in enumerate(per_pos or []):
        key = f'{VLLM_PER_POS}{{position="{i}"}}'
        before[key], after[key] = 10.0, 10.0 + n
    return {"before": before, "after": after}


def test_counter_deltas_true_and_forged() -> None:
    ok = readings(40, 120, 60, [30, 20, 10])
    assert cl.counter_contradictions("w0", ok["before"], ok["after"], streamed_tokens=101, requests=1,
                                     draft_tokens=3) == []
    # the vLLM lie: proposed 0, accepted 1000000
    lie = readings(40, 0, 1000000)
    found = cl.counter_contradictions("w0", lie["before"], lie["after"], streamed_tokens=101, requests=1)
    assert fields(found) == [(VLLM_ACCEPTED, "accepted <= draft tokens"),
                             (VLLM_ACCEPTED, "accepted + drafts <= the wave's streamed tokens")]
    assert found[0].subject == "wave w0" and found[0].values == (("accepted", 1000000.0), ("draft_tokens", 0.0))
    down = readings(-5, 120, 60)
    assert fields(cl.counter_contradictions("w0", down["before"], down["after"], streamed_tokens=None,
                                            requests=1)) == [(VLLM_DRAFTS, "a counter delta is a whole count >= 0")]
    half = readings(40, 120.5, 60)
    assert fields(cl.counter_contradictions("w0", half["before"], half["after"], streamed_tokens=None,
                                            requests=1))[0][0] == VLLM_DRAFT_TOKENS
    over = readings(40, 121, 60)
    assert fields(cl.counter_contradictions("w0", over["before"], over["after"], streamed_tokens=None,
                                            requests=1, draft_tokens=3)) == [
        (VLLM_DRAFT_TOKENS, "draft tokens <= drafts x k")]
    rising = readings(40, 120, 60, [30, 31, 0])
    assert fields(cl.counter_contradictions("w0", rising["before"], rising["after"], streamed_tokens=None,
                                            requests=1)) == [
        (f'{VLLM_PER_POS}{{position="1"}}', "per-position accepted <= the position before"),
        (VLLM_PER_POS, "per-position accepted sum = accepted")]


def test_wave_counters_are_bounded_by_the_wave_s_stream() -> None:
    rows = [{"rid": "a", "wave_id": "w0", "n_tokens": 50, "count_method": "server-cumulative", "ok": True},
            {"rid": "b", "wave_id": "w0", "n_tokens": 51, "count_method": "server-cumulative", "ok": True}]
    # 40 drafts + 70 accepted = 110 > 101 streamed + k 3 x 2 requests
    found = cl.wave_counter_contradictions({"w0": readings(40, 120, 70)}, rows, draft_tokens=3)
    assert fields(found) == [(VLLM_ACCEPTED, "accepted + drafts <= the wave's streamed tokens")]
    assert found[0].values[-1] == ("streamed_tokens", 101)
    assert cl.wave_counter_contradictions({"w0": readings(40, 120, 60)}, rows, draft_tokens=3) == []
    failed = [rows[0], rows[1] | {"ok": False}]  # a cut stream bounds nothing
    assert cl.wave_counter_contradictions({"w0": readings(40, 120, 70)}, failed, draft_tokens=3) == []


def test_draft_length_only_when_the_services_agree() -> None:
    assert cl.draft_length([{"speculation": {"draft_tokens": 3}}, {"speculation": None}, {}]) == 3
    assert cl.draft_length([{"speculation": {"draft_tokens": 3}}, {"speculation": {"draft_tokens": 4}}]) is None
    assert cl.draft_length([{"speculation": {"draft_tokens": True}}]) is None


def rec(i: int, wave: str, steps: int, proposed: int, accepted: int, tokens: int) -> RequestRecord:
    """A measured request that streamed ``tokens`` one per event (exact cumulative counts)."""
    return RequestRecord(rid=f"r{i}", send_ns=0, done_ns=tokens + 1, event_ns=np.arange(tokens, dtype=np.int64),
                         event_tokens=np.arange(1, tokens + 1, dtype=np.int32), completion_tokens=tokens,
                         count_method="server-cumulative", wave_id=wave, cell_id="SD1", concurrency=2,
                         spec_steps=steps, spec_proposed=proposed, spec_accepted=accepted,
                         spec_source="sglang-meta-info")


def test_one_lying_request_withholds_its_wave_and_cell() -> None:
    honest = [rec(0, "SD1.r0.w000", 96, 288, 0, 97), rec(1, "SD1.r0.w000", 96, 288, 0, 97)]
    c = counts_of(honest, 3)
    assert c is not None and c.tokens_per_step == 1.0
    lying = [honest[0], rec(2, "SD1.r0.w000", 1, 3, 2147483647, 97)]
    assert counts_of(lying, 3) is None  # withheld, never the honest request's counts alone
    assert cell_acceptance(lying, 3) == {}
    assert [r["source"] for r in acceptance_rows(lying, draft_tokens=3)] == []  # one token per event: no stream row
    assert [r["source"] for r in acceptance_rows(honest, draft_tokens=3)] == ["sglang-meta-info"]
    assert math.isclose(acceptance_rows(honest)[0]["tokens_per_step"], 1.0)


def test_forged_counters_give_no_counter_row() -> None:
    honest = [rec(0, "w.r0.w000", 96, 288, 0, 97)]
    rows = acceptance_rows(honest, counters={"w.r0.w000": readings(96, 288, 0)})
    assert [r["source"] for r in rows] == ["sglang-meta-info", "vllm-metrics-delta"]
    # proposed 0, accepted 1000000: withheld (before issue 37 a MeasurementError ended the run's finish)
    rows = acceptance_rows(honest, counters={"w.r0.w000": readings(96, 0, 1000000)})
    assert [r["source"] for r in rows] == ["sglang-meta-info"]
