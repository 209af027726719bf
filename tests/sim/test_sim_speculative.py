"""The simulator as a speculative-decoding server: the profile block, the seeded draws, the SGLang
and vLLM wire formats, and the known answer E[a] = 1 + sum of prefix products.

Sampling error of the tokens-per-step check (p = 0.8, 0.6, 0.4): accepted drafts per step take
0..3 with probabilities 0.2, 0.32, 0.288, 0.192, so E[a] = 2.472 and sd(a) = 1.0165 (0.411 E[a]).
C16 x 2048 tokens gives about 16 x 828 = 13,250 steps (relative standard error 0.36%) and C64 x 1024
about 26,400 (0.25%): the 1% bound is about 2.8 and 4 standard errors (measured 2026-12-02: +0.18%
at C16; C1 x 2048, 831 steps, standard error 1.4%, is checked only for its identities). The draws are seeded, so every
run sees exactly the same steps.
"""

from __future__ import annotations

import asyncio
import json
import math
import re
from pathlib import Path
from typing import Any

import aiohttp
import pytest
from pydantic import ValidationError
from sim_helpers import Stream, parse_sse, prompt, run, serving, stream, unary

from harness.errors import SpecError
from harness.sim import SimProfile, analytic_decode_rate, load_profile_file
from harness.sim.profiles import PROFILES, SPECULATIVE_PROFILE_DIR
from harness.sim.speculation import (
    ForgedReport,
    SpecTally,
    SpeculativeSpec,
    accepted_drafts,
    expected_acceptance_rate,
    expected_tokens_per_step,
    request_key,
    sglang_meta,
    vllm_request_metrics,
)

PROBS = (0.8, 0.6, 0.4)
E_A = 2.472
FAST_EAGLE = load_profile_file(SPECULATIVE_PROFILE_DIR / "fast-eagle.yaml")
TIME_SCALE = 0.2  # model steps of 1-4.5 ms: counts never depend on the clock, only the run time does


def _with(**spec: Any) -> SimProfile:
    base = FAST_EAGLE.speculative
    assert base is not None
    return FAST_EAGLE.model_copy(update={"speculative": base.model_copy(update=spec)})


# ----- pure ----------------------------------------------------------------------------------------


def test_expected_tokens_per_step_literals() -> None:
    assert expected_tokens_per_step(PROBS) == pytest.approx(E_A)
    assert expected_tokens_per_step([1.0, 1.0]) == 3.0
    assert expected_tokens_per_step([0.0, 1.0, 1.0]) == 1.0
    assert expected_tokens_per_step([0.5]) == 1.5
    assert expected_acceptance_rate(PROBS) == pytest.approx(1.472 / 3)
    assert FAST_EAGLE.speculative is not None and FAST_EAGLE.speculative.expected_tokens_per_step == pytest.approx(E_A)


def test_draws_follow_the_conditional_probabilities() -> None:
    key = request_key(0, prompt(64))
    n = 200_000
    draws = [accepted_drafts(PROBS, key, pos) for pos in range(n)]
    assert draws == [accepted_drafts(PROBS, key, pos) for pos in range(n)]  # deterministic
    mean = 1 + sum(draws) / n
    assert abs(mean - E_A) / E_A < 0.003  # standard error 0.09%
    reached = [sum(1 for d in draws if d >= i) for i in range(4)]
    for i, p in enumerate(PROBS):
        assert reached[i + 1] / reached[i] == pytest.approx(p, abs=0.01)
    assert accepted_drafts((1.0, 1.0), key, 5) == 2
    assert accepted_drafts((0.0, 1.0), key, 5) == 0
    assert request_key(1, prompt(64)) != key and request_key(0, prompt(65)) != key


def test_spec_validation() -> None:
    good = {"draft_tokens": 2, "accept_probs": [0.5, 0.5], "verify_cost": 1.2}
    SpeculativeSpec.model_validate(good)
    for bad in ({"accept_probs": [0.5]}, {"accept_probs": [0.5, 1.5]}, {"accept_probs": [-0.1, 0.5]},
                {"verify_cost": 0}, {"sglang_fields": "newest"}, {"vllm_per_request": "full"},
                {"draft_tokens": 0, "accept_probs": []}):
        with pytest.raises(ValidationError):
            SpeculativeSpec.model_validate(good | bad)
    assert all(p.speculative is None for p in PROFILES.values())


def test_profile_file_errors_name_the_speculative_field(tmp_path: Path) -> None:
    text = (SPECULATIVE_PROFILE_DIR / "fast-eagle.yaml").read_text().replace("verify_cost: 1.25", "verify_cost: -1")
    bad = tmp_path / "bad.yaml"
    bad.write_text(text)
    with pytest.raises(SpecError, match="verify_cost"):
        load_profile_file(bad)
    assert load_profile_file(SPECULATIVE_PROFILE_DIR / "paper-tp8-eagle.yaml").speculative is not None


def test_meta_and_vllm_payloads() -> None:
    t = SpecTally(3)
    for a in (3, 0, 2, 1):
        t.observe(a)
    assert t.histogram == [1, 1, 1, 1] and (t.steps, t.proposed, t.accepted) == (4, 12, 6)
    new = sglang_meta(t, 11, "new")
    assert new == {"spec_accept_rate": 0.5, "spec_accept_length": 11 / 4, "spec_num_correct_drafts": 6,
                   "spec_num_proposed_drafts": 12, "spec_verify_ct": 4, "spec_correct_drafts_histogram": [1, 1, 1, 1]}
    old = sglang_meta(t, 11, "old")
    assert old == {"spec_verify_ct": 4, "spec_accept_token_num": 6, "spec_draft_token_num": 12,
                   "spec_accept_length": 0, "spec_accept_rate": 0, "spec_accept_histogram": [1, 1, 1, 1]}
    assert sglang_meta(SpecTally(3), 1, "new") == {}
    v = vllm_request_metrics(t, detailed=True)
    assert v["mean_acceptance_length"] == 2.5 and v["draft_acceptance_rate"] == 0.5
    assert v["per_step_accepted"] == [3, 0, 2, 1] and v["per_step_drafted"] == [3, 3, 3, 3]
    assert "per_step_accepted" not in vllm_request_metrics(t, detailed=False)


def test_forged_reports_lie_while_the_tallies_stay_true() -> None:
    # test-only fault (issue 37): the reports lie, the true counts (and so the stream) do not change
    huge = SpecTally(3, forge=ForgedReport(steps=1, accepted=2147483647))
    zero = SpecTally(3, forge=ForgedReport(proposed=0, accepted=1000000))
    every = SpecTally(3, forge=ForgedReport(all_accepted=True))
    for t in (huge, zero, every):
        for a in (0, 0, 0, 0):
            t.observe(a)
        assert (t.steps, t.proposed, t.accepted) == (4, 12, 0)
    h = sglang_meta(huge, 5, "new")
    assert (h["spec_verify_ct"], h["spec_num_correct_drafts"], h["spec_num_proposed_drafts"]) == (1, 2147483647, 12)
    z = vllm_request_metrics(zero, detailed=False)
    assert (z["num_spec_steps"], z["num_draft_tokens"], z["num_accepted_draft_tokens"]) == (4, 0, 1000000)
    e = sglang_meta(every, 5, "old")
    assert (e["spec_verify_ct"], e["spec_accept_token_num"], e["spec_draft_token_num"]) == (4, 12, 12)
    assert e["spec_accept_histogram"] == [0, 0, 0, 4]  # consistent in itself: only the stream contradicts it
    with pytest.raises(ValidationError):
        SpeculativeSpec(draft_tokens=1, accept_probs=(0.5,), verify_cost=1.0, forge_report={"steps": -1})


def test_analytic_rate_of_a_speculative_profile() -> None:
    native = analytic_decode_rate(PROFILES["fast"], 16)
    assert analytic_decode_rate(FAST_EAGLE, 16) == pytest.approx(native * E_A / 1.25)


# ----- over HTTP -----------------------------------------------------------------------------------


def _payload(i: int, max_new: int) -> dict[str, Any]:
    return {"input_ids": prompt(24, seed=100 + i), "sampling_params": {"max_new_tokens": max_new, "ignore_eos": True}}


async def _wave(session: aiohttp.ClientSession, c: int, max_new: int) -> list[Stream]:
    return list(await asyncio.gather(*(stream(session, _payload(i, max_new)) for i in range(c))))


async def _get(session: aiohttp.ClientSession, path: str) -> Any:
    async with session.get(path) as r:
        assert r.status == 200
        return await r.json() if path.endswith("info") else await r.text()


def _metrics(text: str) -> dict[str, float]:
    out: dict[str, float] = {}
    for line in text.splitlines():
        m = re.match(r'^(vllm:spec_decode_\w+)\{[^}]*?(?:position="(\d+)")?\} (\S+)$', line)
        if m:
            key = m.group(1) + (f"[{m.group(2)}]" if m.group(2) else "")
            out[key] = out.get(key, 0.0) + float(m.group(3))
    return out


def _check_stream(s: Stream, max_new: int) -> tuple[int, int]:
    """Per-request identities of one speculative stream; returns (verify steps, accepted drafts)."""
    assert s.status == 200 and s.done
    meta = s.meta
    steps, accepted = meta["spec_verify_ct"], meta["spec_num_correct_drafts"]
    assert meta["completion_tokens"] == max_new == 1 + steps + accepted  # first token from prefill
    assert meta["spec_num_proposed_drafts"] == 3 * steps
    assert sum(meta["spec_correct_drafts_histogram"]) == steps
    assert sum(i * n for i, n in enumerate(meta["spec_correct_drafts_histogram"])) == accepted
    assert meta["spec_accept_length"] == pytest.approx(max_new / steps)
    assert meta["spec_accept_rate"] == pytest.approx(accepted / (3 * steps))
    counts = [ev["meta_info"]["completion_tokens"] for ev in s.events]
    jumps = [b - a for a, b in zip([0, *counts], counts, strict=False)]
    assert jumps[0] == 1 and len(jumps) == 1 + steps  # one event per verify step
    assert all(1 <= j <= 4 for j in jumps)
    for ev in s.events[:-1]:
        assert not any(k.startswith("spec_") for k in ev["meta_info"])
    return steps, accepted


def test_tokens_per_event_match_the_known_answer() -> None:
    async def body() -> None:
        async with serving(profile=FAST_EAGLE, time_scale=TIME_SCALE) as (_, s):
            for c, max_new in ((16, 2048), (64, 1024)):
                before = _metrics(await _get(s, "/metrics"))
                streams = await _wave(s, c, max_new)
                totals = [_check_stream(x, max_new) for x in streams]
                steps, accepted = sum(t[0] for t in totals), sum(t[1] for t in totals)
                a = 1 + accepted / steps
                assert abs(a - E_A) / E_A < 0.01, (c, a, steps)
                event_tokens = [b - a for x in streams
                                for a, b in zip([ev["meta_info"]["completion_tokens"] for ev in x.events],
                                                [ev["meta_info"]["completion_tokens"] for ev in x.events[1:]],
                                                strict=False)]
                assert len(event_tokens) == steps and sum(event_tokens) / steps == pytest.approx(a)
                after = _metrics(await _get(s, "/metrics"))
                delta = {k: after[k] - before.get(k, 0.0) for k in after}
                assert delta["vllm:spec_decode_num_drafts_total"] == steps
                assert delta["vllm:spec_decode_num_draft_tokens_total"] == 3 * steps
                assert delta["vllm:spec_decode_num_accepted_tokens_total"] == accepted
                per_pos = [delta[f"vllm:spec_decode_num_accepted_tokens_per_pos_total[{i}]"] for i in range(3)]
                assert sum(per_pos) == accepted and per_pos[0] >= per_pos[1] >= per_pos[2] > 0
                assert per_pos[0] / steps == pytest.approx(0.8, abs=0.02)
            info = await _get(s, "/server_info")
            assert info["speculative_algorithm"] == "EAGLE"
            assert info["speculative_draft_model_path"] == "sim-draft"
            assert (info["speculative_num_steps"], info["speculative_eagle_topk"],
                    info["speculative_num_draft_tokens"]) == (3, 1, 4)
            st = info["internal_states"][0]
            total = _metrics(await _get(s, "/metrics"))
            assert st["avg_spec_accept_length"] == pytest.approx(
                1 + total["vllm:spec_decode_num_accepted_tokens_total"] / total["vllm:spec_decode_num_drafts_total"])
            assert info["dsv4h_simulator"]["parameters"]["speculative"]["accept_probs"] == list(PROBS)

    run(body())


def test_outputs_equal_native_and_reruns_reproduce() -> None:
    async def wave(profile: SimProfile | str) -> list[Stream]:
        async with serving(profile=profile, time_scale=TIME_SCALE) as (_, s):
            return await _wave(s, 4, 300)

    async def body() -> None:
        native, spec, again = await wave("fast"), await wave(FAST_EAGLE), await wave(FAST_EAGLE)
        for n, x, y in zip(native, spec, again, strict=True):
            assert x.last["output_ids"] == n.last["output_ids"] == y.last["output_ids"]
            assert x.last["text"] == n.last["text"]
            assert len(x.events) < len(n.events)  # grouped: fewer, larger events
            assert [ev["meta_info"]["completion_tokens"] for ev in x.events] == \
                [ev["meta_info"]["completion_tokens"] for ev in y.events]
            assert not any(k.startswith("spec_") for k in n.meta)

    run(body())


def test_c1_step_time_and_natural_end() -> None:
    async def body() -> None:
        ratios = []
        for profile in ("fast", FAST_EAGLE):
            async with serving(profile=profile, time_scale=TIME_SCALE) as (_, s):
                x = await stream(s, _payload(0, 400))
                info = await _get(s, "/server_info")
                st = info["internal_states"][0]
                ratios.append(st["sim_decode_model_s_total"] / st["sim_decode_steps"])
                if profile != "fast":
                    steps, accepted = _check_stream(x, 400)
                    assert st["sim_decode_steps"] == steps
                    assert st["avg_spec_accept_length"] == pytest.approx(1 + accepted / steps)
                    # a natural EOS ends a request mid-step: the identity still holds
                    y = await stream(s, {"input_ids": prompt(24, seed=3), "sampling_params": {"max_new_tokens": 500}})
                    m = y.meta
                    assert m["finish_reason"]["type"] == "stop"
                    assert m["completion_tokens"] == 1 + m["spec_verify_ct"] + m["spec_num_correct_drafts"]
                    # max_new_tokens 1: no verify step, no speculative fields
                    z = await stream(s, _payload(1, 1))
                    assert not any(k.startswith("spec_") for k in z.meta)
                else:
                    assert info["speculative_algorithm"] is None and "speculative_num_steps" not in info
                    assert "avg_spec_accept_length" not in st
                    assert "speculative" not in info["dsv4h_simulator"]["parameters"]
                    assert "vllm:spec_decode" not in await _get(s, "/metrics")
        assert ratios[1] / ratios[0] == pytest.approx(1.25)  # the sim's own model step times, C1

    run(body())


def test_old_field_names() -> None:
    async def body() -> None:
        async with serving(profile=_with(sglang_fields="old"), time_scale=TIME_SCALE) as (_, s):
            x = await stream(s, _payload(0, 200))
            m = x.meta
            assert m["spec_accept_length"] == 0 and m["spec_accept_rate"] == 0
            assert m["completion_tokens"] == 1 + m["spec_verify_ct"] + m["spec_accept_token_num"]
            assert m["spec_draft_token_num"] == 3 * m["spec_verify_ct"]
            assert sum(m["spec_accept_histogram"]) == m["spec_verify_ct"]
            for name in ("spec_num_correct_drafts", "spec_num_proposed_drafts", "spec_correct_drafts_histogram"):
                assert name not in m
            status, body_ = await unary(s, _payload(0, 200))
            assert status == 200 and body_["meta_info"]["spec_verify_ct"] == m["spec_verify_ct"]

    run(body())


async def _openai(session: aiohttp.ClientSession, path: str, body: dict[str, Any]) -> list[dict[str, Any]]:
    async with session.post(path, data=json.dumps(body).encode(), headers={"Content-Type": "application/json"}) as r:
        assert r.status == 200
        events, done = parse_sse(await r.read())
    assert done
    return events


@pytest.mark.parametrize("mode", ["detailed", "summary", "none"])
def test_vllm_per_request_metrics(mode: str) -> None:
    async def body() -> None:
        async with serving(profile=_with(vllm_per_request=mode), time_scale=TIME_SCALE) as (_, s):
            req = {"prompt": prompt(24, seed=5), "max_tokens": 300, "ignore_eos": True, "stream": True,
                   "stream_options": {"include_usage": True}}
            events = await _openai(s, "/v1/completions", req)
            tail = events[-1]
            assert tail["choices"] == [] and tail["usage"]["completion_tokens"] == 300
            content = [ev for ev in events if ev["choices"]]
            assert all("metrics" not in ev for ev in events[:-1])
            if mode == "none":
                assert "metrics" not in tail
                return
            sd = tail["metrics"]["speculative_decoding"]
            assert set(tail["metrics"]) == {"speculative_decoding"}
            keys = {"mean_acceptance_length", "draft_acceptance_rate", "acceptance_histogram", "num_spec_steps",
                    "num_accepted_draft_tokens", "num_draft_tokens", "num_spec_tokens"}
            assert set(sd) == keys | ({"per_step_accepted", "per_step_drafted"} if mode == "detailed" else set())
            steps, accepted = sd["num_spec_steps"], sd["num_accepted_draft_tokens"]
            assert 1 + steps + accepted == 300 and len(content) == 1 + steps  # one chunk per verify step
            assert sd["num_draft_tokens"] == 3 * steps and sd["num_spec_tokens"] == 3
            assert sd["mean_acceptance_length"] == pytest.approx(1 + accepted / steps)
            assert len(sd["acceptance_histogram"]) == 4 and sum(sd["acceptance_histogram"]) == steps
            if mode == "detailed":
                assert sum(sd["per_step_accepted"]) == accepted and sd["per_step_drafted"] == [3] * steps
            # the same prompt on /generate: the same draws
            x = await stream(s, {"input_ids": prompt(24, seed=5),
                                 "sampling_params": {"max_new_tokens": 300, "ignore_eos": True}})
            assert x.meta["spec_verify_ct"] == steps
            chat = await _openai(s, "/v1/chat/completions", {"messages": [{"role": "user", "content": "hi"}],
                                                               "max_tokens": 50, "stream": True,
                                                               "stream_options": {"include_usage": True}})
            assert chat[-1]["metrics"]["speculative_decoding"]["num_spec_tokens"] == 3
            no_usage = await _openai(s, "/v1/completions", req | {"stream_options": {}})
            assert all("metrics" not in ev for ev in no_usage)
            assert not math.isnan(sd["draft_acceptance_rate"])

    run(body())
