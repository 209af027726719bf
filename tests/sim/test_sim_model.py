"""The simulator's model: profiles and known answers, token model, radix cache, determinism, oracle."""

from __future__ import annotations

import asyncio
import hashlib
import struct

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from sim_helpers import prompt, run, serving, stream, unary

from harness.errors import SpecError
from harness.sim import PROFILES, SimOptions, analytic_decode_rate, analytic_prefill_rate, get_profile
from harness.sim.batching import plan_prefill_forward
from harness.sim.profiles import PAPER_DECODE, PAPER_PREFILL
from harness.sim.radix import RadixCache
from harness.sim.tokens import (
    EOS_ID,
    FRANCE_INPUT_IDS,
    FRANCE_OUTPUT_IDS,
    FRANCE_TEXT,
    decode_tokens,
    plan_output,
    token_text,
)

# ----- profiles and analytic answers -------------------------------------------------------------


def test_paper_profile_reproduces_table2_decode_exactly() -> None:
    prof = get_profile("paper-tp8")
    for batch, rate in PAPER_DECODE:
        assert analytic_decode_rate(prof, batch) == pytest.approx(rate, rel=1e-12)
    assert analytic_decode_rate(prof, 32, 1 / 1.1) == pytest.approx(1041.78 * 1.1)
    assert analytic_decode_rate(prof, 8, time_scale=2.0) == pytest.approx(333.38 / 2)
    rates = [analytic_decode_rate(prof, b) for b in range(1, 65)]
    assert rates == sorted(rates)
    assert analytic_decode_rate(prof, 128) == pytest.approx(1327.10)


def test_paper_profile_reproduces_report_prefill_within_1_5_percent() -> None:
    prof = get_profile("paper-tp8")
    for n, want in PAPER_PREFILL.items():
        got = analytic_prefill_rate(prof, n, 8192)
        assert abs(got / want - 1) < 0.015, (n, got, want)
    # time_scale scales the forwards, not the (wall-clock) gather window.
    full = 4 * 8192 / analytic_prefill_rate(prof, 4, 8192)
    half = 4 * 8192 / analytic_prefill_rate(prof, 4, 8192, time_scale=0.5)
    assert half - prof.gather_s == pytest.approx(0.5 * (full - prof.gather_s))
    assert full == pytest.approx(prof.gather_s + prof.prefill_a_s + 32768 / prof.prefill_rate_tps)


def test_prefill_batching_rules() -> None:
    prof = get_profile("paper-tp8")
    # 8K prompts: the chunk budget (32768) binds before the admission limit (16).
    take, grants = plan_prefill_forward(prof, chunked_remaining=0, resident=0, kv_free=10**9,
                                        waiting=[(8192, 9000)] * 10)
    assert (take, grants) == (0, [8192] * 4)
    # 512-token prompts: the admission limit binds.
    _, grants = plan_prefill_forward(prof, chunked_remaining=0, resident=0, kv_free=10**9,
                                     waiting=[(512, 600)] * 64)
    assert grants == [512] * 16
    # A long prompt is chunked; its remainder goes first in the next forward.
    _, grants = plan_prefill_forward(prof, chunked_remaining=0, resident=0, kv_free=10**9,
                                     waiting=[(50_000, 50_001), (10, 11)])
    assert grants == [32768]
    take, grants = plan_prefill_forward(prof, chunked_remaining=50_000 - 32768, resident=1, kv_free=10**9,
                                        waiting=[(10, 11)])
    assert (take, grants) == (50_000 - 32768, [10])
    # Resident and capacity limits.
    assert plan_prefill_forward(prof, chunked_remaining=0, resident=64, kv_free=10**9, waiting=[(5, 6)]) == (0, [])
    assert plan_prefill_forward(prof, chunked_remaining=0, resident=0, kv_free=5, waiting=[(5, 6)]) == (0, [])


def test_unknown_profile_lists_valid_names() -> None:
    with pytest.raises(SpecError) as info:
        get_profile("nope")
    for name in PROFILES:
        assert name in info.value.message
    with pytest.raises(SpecError):
        SimOptions.build(profile="nope")
    with pytest.raises(SpecError, match="stream_interval"):
        SimOptions.build(stream_interval=0)
    with pytest.raises(SpecError, match="fault"):
        SimOptions.build(fault="explode")


# ----- token model -------------------------------------------------------------------------------


def test_token_text_nonempty_except_special() -> None:
    assert token_text(EOS_ID) == ""
    assert all(token_text(t) for t in range(2, 5000))
    assert decode_tokens(FRANCE_OUTPUT_IDS) == FRANCE_TEXT


@settings(max_examples=50, deadline=None)
@given(st.lists(st.integers(0, 129_279), min_size=1, max_size=40), st.integers(0, 300), st.integers(1, 200))
def test_output_plan_is_position_addressable(ids: list[int], start: int, count: int) -> None:
    plan = plan_output(ids, 16, 64)
    assert 16 <= plan.natural_len <= 64
    whole = plan.tokens(0, start + count)
    assert plan.tokens(start, count) == whole[start:]
    assert plan_output(list(ids), 16, 64) == plan
    assert all(t >= 2 for i, t in enumerate(whole) if i != plan.natural_len - 1)


def _lcp(a: list[int], b: list[int]) -> int:
    n = 0
    while n < min(len(a), len(b)) and a[n] == b[n]:
        n += 1
    return n


@settings(max_examples=60, deadline=None)
@given(st.lists(st.lists(st.integers(0, 3), max_size=12), max_size=8), st.lists(st.integers(0, 3), max_size=12))
def test_radix_cache_matches_longest_common_prefix(stored: list[list[int]], query: list[int]) -> None:
    cache = RadixCache(max_tokens=10**6)
    for seq in stored:
        cache.insert(("s", None), seq)
    want = max((_lcp(seq, query) for seq in stored), default=0)
    assert cache.match(("s", None), query) == want
    assert cache.match(("t", None), query) == 0


def test_radix_cache_evicts_least_recent_keys() -> None:
    cache = RadixCache(max_tokens=10)
    cache.insert(("a", None), [1, 2, 3, 4, 5, 6])
    cache.insert(("b", None), [1, 2, 3])
    assert cache.match(("a", None), [1, 2, 3]) == 3  # touch "a": "b" is now least recent
    cache.insert(("c", None), [7, 8, 9])
    assert cache.match(("b", None), [1, 2, 3]) == 0
    assert cache.match(("a", None), [1, 2]) == 2
    assert cache.total_tokens <= 10


# ----- over HTTP ---------------------------------------------------------------------------------


def test_france_oracle() -> None:
    async def body() -> None:
        async with serving(profile="paper-tp8", time_scale=0.01) as (_, s):
            st = await stream(s, {"input_ids": list(FRANCE_INPUT_IDS), "sampling_params": {"max_new_tokens": 64}})
            status, out = await unary(s, {"input_ids": list(FRANCE_INPUT_IDS)})
        for ev in (st.last, out):
            assert ev["output_ids"] == list(FRANCE_OUTPUT_IDS)
            assert ev["text"] == "The capital of France is **Paris**."
            assert ev["meta_info"]["finish_reason"] == {"type": "stop", "matched": 1}
        packed = struct.pack(f"<{len(FRANCE_OUTPUT_IDS)}i", *FRANCE_OUTPUT_IDS)
        assert hashlib.sha256(packed).hexdigest()[:16] == "6f41fe2f01d52507"
        assert status == 200

    run(body())


def test_natural_eos_length_and_ignore_eos() -> None:
    async def body() -> None:
        ids = prompt(40, seed=3)
        async with serving() as (_, s):
            natural = await stream(s, {"input_ids": ids, "sampling_params": {"max_new_tokens": 1000}})
            n = natural.meta["completion_tokens"]
            short = await stream(s, {"input_ids": ids, "sampling_params": {"max_new_tokens": n - 1}})
            ignored = await stream(s, {"input_ids": ids, "sampling_params": {"max_new_tokens": n + 20,
                                                                            "ignore_eos": True}})
            stop = await stream(s, {"input_ids": ids, "sampling_params": {
                "max_new_tokens": 1000, "stop_token_ids": [natural.last["output_ids"][4]]}})
        prof = get_profile("fast")
        assert prof.eos_min <= n <= prof.eos_max
        assert natural.last["output_ids"][-1] == EOS_ID
        assert natural.meta["finish_reason"] == {"type": "stop", "matched": EOS_ID}
        assert short.meta["finish_reason"] == {"type": "length", "length": n - 1}
        assert short.last["output_ids"] == natural.last["output_ids"][:-1]
        assert ignored.meta["finish_reason"] == {"type": "length", "length": n + 20}
        assert ignored.last["output_ids"][:n] == natural.last["output_ids"]
        assert stop.meta["completion_tokens"] == 5
        assert stop.meta["finish_reason"] == {"type": "stop", "matched": natural.last["output_ids"][4]}

    run(body())


def test_outputs_independent_of_server_batch_and_timing() -> None:
    prompts = [prompt(30 + i, seed=i) for i in range(8)]

    async def alone() -> list[list[int]]:
        outs = []
        async with serving() as (_, s):
            for ids in prompts:
                outs.append((await stream(s, {"input_ids": ids, "sampling_params": {"max_new_tokens": 80}}))
                            .last["output_ids"])
        return outs

    async def together() -> list[list[int]]:
        async with serving(profile="paper-tp8", time_scale=0.02, stream_interval=3, step_factor=0.5) as (_, s):
            results = await asyncio.gather(*(
                unary(s, {"input_ids": ids, "sampling_params": {"max_new_tokens": 80}}) for ids in prompts))
        return [body["output_ids"] for _, body in results]

    first = run(alone())
    assert first == run(alone())
    fast_eos = [np.count_nonzero(np.array(o) == EOS_ID) for o in first]
    assert all(c <= 1 for c in fast_eos)
    # The paper profile draws a different natural length, so compare common prefixes.
    for a, b in zip(first, run(together()), strict=True):
        k = min(len(a), len(b)) - 1
        assert a[:k] == b[:k]
