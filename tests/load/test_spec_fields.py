"""Speculative-decoding counts the server reports per request, and vLLM's /metrics counter deltas
(issue 26): literal bytes shaped as SGLang 0.5.23 and vLLM 0.32.0 send them (not the simulator)."""

from __future__ import annotations

import asyncio
import json
import pickle
from typing import Any

import numpy as np
import pytest
from aiohttp import web
from hypothesis import given, settings
from hypothesis import strategies as st
from load_helpers import each_transport, serve, sse, stream_events  # noqa: F401 - each_transport: the fixture

from harness.inputs.corpus import Case
from harness.load import LoadClient, WaveRequest, run_wave, run_wave_sync
from harness.load.openai import OpenAIDecoder
from harness.load.prom import counter_delta, parse_spec_counters, per_pos_key
from harness.load.sglang import SGLangDecoder
from harness.load.spec import MAX_COUNT, SpecReport, count, histogram, sglang_spec, spec_fields, vllm_spec
from harness.load.vllm import VLLMDecoder
from harness.load.workers import WorkerLoadClient
from harness.records import RequestRecord
from harness.run.wave import MetricsWitness, WaveSpec, counters_summary, execute_wave, witness_summary
from harness.service.launch.manager import RunningService

# ---------------------------------------------------------------- SGLang meta_info

# the final event of an EAGLE (k=3, topk 1) stream as SGLang 0.5.23 writes it: 4 verify steps that
# accepted 0, 1, 2 and 3 drafts (histogram [1, 1, 1, 1]): 6 accepted of 12 proposed, 4 + 6 = 10 tokens
NEW_META: dict[str, Any] = {
    "id": "r0", "finish_reason": {"type": "length", "length": 10}, "prompt_tokens": 4,
    "weight_version": "default", "completion_tokens": 10, "cached_tokens": 0, "e2e_latency": 0.12,
    "spec_accept_rate": 0.5, "spec_accept_length": 2.5, "spec_num_correct_drafts": 6,
    "spec_num_proposed_drafts": 12, "spec_verify_ct": 4, "spec_correct_drafts_histogram": [1, 1, 1, 1],
}
OLD_META: dict[str, Any] = {
    "id": "r0", "finish_reason": {"type": "length", "length": 10}, "prompt_tokens": 4,
    "completion_tokens": 10, "cached_tokens": 0, "spec_verify_ct": 4, "spec_accept_token_num": 6,
    "spec_draft_token_num": 12, "spec_accept_length": 0, "spec_accept_rate": 0,
    "spec_accept_histogram": [1, 1, 1, 1],
}
ALIAS_META: dict[str, Any] = {"completion_tokens": 10, "spec_verify_ct": 4, "spec_accepted_drafts": 6,
                              "spec_proposed_drafts": 12}


def test_sglang_every_alias_known_answer() -> None:
    want = SpecReport("sglang-meta-info", steps=4, proposed=12, accepted=6, histogram=(1, 1, 1, 1))
    assert sglang_spec(NEW_META) == want
    assert sglang_spec(OLD_META) == want  # the derived fields, 0 in old builds, are not read
    assert sglang_spec(ALIAS_META) == SpecReport("sglang-meta-info", 4, 12, 6, ())


@pytest.mark.parametrize("ct", [0, None, -1, True, 4.0, "4", 2**31, [4]])
def test_sglang_no_valid_verify_count_is_no_report(ct: Any) -> None:
    meta = {**NEW_META, "spec_verify_ct": ct}
    if ct is None:
        del meta["spec_verify_ct"]
    assert sglang_spec(meta) is None


@pytest.mark.parametrize("bad", [True, False, 6.0, 6.5, "6", -6, 2**31, 10**30, None, [6], {"n": 6}])
def test_hostile_counts_read_as_absent(bad: Any) -> None:
    r = sglang_spec({**NEW_META, "spec_num_correct_drafts": bad, "spec_num_proposed_drafts": bad})
    assert r is not None and r.steps == 4
    assert (r.accepted, r.proposed) == (None, None)
    # a bad new-name value does not hide a good old-name one (every alias is read)
    r2 = sglang_spec({**NEW_META, "spec_num_correct_drafts": bad, "spec_accept_token_num": 5})
    assert r2 is not None and r2.accepted == 5


@pytest.mark.parametrize("bad", [[1, True, 1], [1, -1], [1.0, 2], ["1"], [2**31], "1,1", 3, {"0": 1}])
def test_hostile_histogram_reads_as_empty(bad: Any) -> None:
    assert histogram(bad) == ()
    r = sglang_spec({**NEW_META, "spec_correct_drafts_histogram": bad})
    assert r is not None and r.histogram == () and r.accepted == 6


def test_count_bounds() -> None:
    assert [count(v) for v in (0, 1, MAX_COUNT, MAX_COUNT + 1, -1, True, 1.0)] == [0, 1, MAX_COUNT] + [None] * 4


def _sg_final(meta: dict[str, Any], ids: list[int]) -> bytes:
    return json.dumps({"text": "x" * len(ids), "output_ids": ids, "meta_info": meta},
                      separators=(",", ":")).encode()


def _sg_events(final_meta: dict[str, Any], rid: str = "r0") -> list[bytes]:
    """A cumulative 10-token stream in events of 1, 3, 2, 4 tokens; only the last carries spec fields."""
    toks = list(range(100, 110))
    out = []
    for n in (1, 4, 6):
        out.append(_sg_final({"id": rid, "finish_reason": None, "prompt_tokens": 4, "completion_tokens": n,
                              "cached_tokens": 0}, toks[:n]))
    out.append(_sg_final({**final_meta, "id": rid} if "id" in final_meta else final_meta, toks))
    return out


@pytest.mark.parametrize("fast", [True, False])
@pytest.mark.parametrize("meta", [NEW_META, OLD_META])
def test_sglang_decoder_reads_the_final_event(fast: bool, meta: dict[str, Any]) -> None:
    d = SGLangDecoder(fast=fast)
    for k, p in enumerate(_sg_events(meta)):
        d.on_event(p, 10 * (k + 1))
    d.on_event(b"[DONE]", 99)
    out = d.finish()
    assert out.error is None and out.event_tokens == [1, 4, 6, 10]
    assert out.spec == SpecReport("sglang-meta-info", 4, 12, 6, (1, 1, 1, 1))


def test_sglang_spec_fields_before_the_last_event_are_not_read() -> None:
    events = _sg_events({k: v for k, v in NEW_META.items() if not k.startswith("spec_")})
    early = json.loads(events[0])
    early["meta_info"].update(spec_verify_ct=1, spec_num_correct_drafts=0, spec_num_proposed_drafts=3)
    d = SGLangDecoder()
    for k, p in enumerate([json.dumps(early).encode(), *events[1:]]):
        d.on_event(p, k)
    out = d.finish()
    assert out.error is None and out.spec is None


# ---------------------------------------------------------------- vLLM per-request metrics

SPEC_METRICS = {"mean_acceptance_length": 2.5, "draft_acceptance_rate": 0.5, "acceptance_histogram": [1, 1, 1, 1],
                "num_spec_steps": 4, "num_accepted_draft_tokens": 6, "num_draft_tokens": 12, "num_spec_tokens": 3}


def _v_chunk(ids: list[int] | None, text: str, finish: str | None = None) -> bytes:
    c: dict[str, Any] = {"index": 0, "text": text, "logprobs": None, "finish_reason": finish}
    if ids is not None:
        c["token_ids"] = ids
    return json.dumps({"id": "cmpl-1", "object": "text_completion", "created": 1, "model": "m",
                       "choices": [c]}, separators=(",", ":")).encode()


def _v_final(metrics: Any = None) -> bytes:
    # vLLM 0.32: CompletionStreamResponse(choices=[], usage=..., metrics=PerRequestMetrics(...)),
    # model_dump_json(exclude_unset=False, exclude_none=True)
    obj: dict[str, Any] = {"id": "cmpl-1", "object": "text_completion", "created": 1, "model": "m", "choices": [],
                           "usage": {"prompt_tokens": 4, "total_tokens": 14, "completion_tokens": 10}}
    if metrics is not None:
        obj["metrics"] = metrics
    return json.dumps(obj, separators=(",", ":")).encode()


def _v_stream(metrics: Any, ids: bool) -> list[bytes]:
    groups = [[1], [2, 3, 4], [5, 6], [7, 8, 9, 10]]
    chunks = [_v_chunk(g if ids else None, "".join(f"t{i}" for i in g)) for g in groups]
    return [*chunks, _v_final(metrics), b"[DONE]"]


def test_vllm_metrics_known_answer() -> None:
    assert vllm_spec({"speculative_decoding": SPEC_METRICS}) == SpecReport("vllm-request-metrics", 4, 12, 6,
                                                                            (1, 1, 1, 1))
    zero = {**SPEC_METRICS, "num_spec_steps": 0, "num_accepted_draft_tokens": 0, "num_draft_tokens": 0,
            "acceptance_histogram": [0, 0, 0, 0]}
    assert vllm_spec({"speculative_decoding": zero}) == SpecReport("vllm-request-metrics", 0, 0, 0, (0, 0, 0, 0))
    assert vllm_spec(None) is None and vllm_spec({"time_to_first_token_ms": 3.0}) is None
    assert vllm_spec({"speculative_decoding": None}) is None and vllm_spec([SPEC_METRICS]) is None


@pytest.mark.parametrize("bad", [True, 4.0, "4", -4, 2**40, None])
def test_vllm_hostile_values(bad: Any) -> None:
    assert vllm_spec({"speculative_decoding": {**SPEC_METRICS, "num_spec_steps": bad}}) is None
    r = vllm_spec({"speculative_decoding": {**SPEC_METRICS, "num_accepted_draft_tokens": bad,
                                            "acceptance_histogram": [bad, 1]}})
    assert r is not None and (r.steps, r.accepted, r.proposed, r.histogram) == (4, None, 12, ())


@pytest.mark.parametrize("chat", [False, True])
def test_openai_decoder_reads_the_final_usage_chunk(chat: bool) -> None:
    payloads = _v_stream({"speculative_decoding": SPEC_METRICS}, ids=False)
    if chat:
        payloads = [p.replace(b'"text":', b'"delta":{"content":').replace(b',"logprobs"', b'},"logprobs"')
                    if b'"text":' in p else p for p in payloads]
    d = OpenAIDecoder("openai-chat" if chat else "openai-completions")
    for k, p in enumerate(payloads):
        d.on_event(p, k)
    out = d.finish()
    assert out.error is None and out.completion_tokens == 10
    assert out.spec == SpecReport("vllm-request-metrics", 4, 12, 6, (1, 1, 1, 1))


def test_vllm_decoder_reads_the_final_usage_chunk_and_none_without_it() -> None:
    for metrics, want in [({"speculative_decoding": SPEC_METRICS}, SpecReport("vllm-request-metrics", 4, 12, 6,
                                                                               (1, 1, 1, 1))),
                          (None, None), ({"mean_itl_ms": 2.0}, None)]:
        d = VLLMDecoder()
        for k, p in enumerate(_v_stream(metrics, ids=True)):
            d.on_event(p, k)
        out = d.finish()
        assert out.error is None and out.event_tokens == [1, 4, 6, 10]
        assert out.spec == want


# ---------------------------------------------------------------- over HTTP, both transports

def _chunks_handler(chunks: list[bytes]) -> Any:
    async def handler(request: web.Request) -> web.StreamResponse:
        return await stream_events(request, chunks)

    return handler


def _one(url: str, protocol: str) -> RequestRecord:
    req = WaveRequest(input_ids=[1, 2, 3, 4], max_new_tokens=10, rid="r0")
    [rec] = run_wave_sync(url, [req], protocol=protocol, model="m", timeout_s=10)  # type: ignore[arg-type]
    return rec


@pytest.mark.usefixtures("each_transport")
def test_sglang_record_carries_the_counts() -> None:
    with serve(_chunks_handler([sse([p]) for p in [*_sg_events(NEW_META), b"[DONE]"]])) as srv:
        rec = _one(srv.url, "sglang")
    assert rec.error is None, rec.error
    assert (rec.spec_steps, rec.spec_proposed, rec.spec_accepted, rec.spec_source) == (4, 12, 6, "sglang-meta-info")
    assert rec.spec_histogram.tolist() == [1, 1, 1, 1] and rec.event_tokens.tolist() == [1, 4, 6, 10]


@pytest.mark.usefixtures("each_transport")
@pytest.mark.parametrize("protocol", ["vllm", "openai-completions"])
def test_vllm_record_carries_the_counts(protocol: str) -> None:
    chunks = [sse([p]) for p in _v_stream({"speculative_decoding": SPEC_METRICS}, ids=True)]
    with serve(_chunks_handler(chunks), "/v1/completions") as srv:
        rec = _one(srv.url, protocol)
    assert rec.error is None, rec.error
    assert (rec.spec_steps, rec.spec_proposed, rec.spec_accepted) == (4, 12, 6)
    assert rec.spec_source == "vllm-request-metrics" and rec.spec_histogram.tolist() == [1, 1, 1, 1]


@pytest.mark.usefixtures("each_transport")
def test_native_server_leaves_the_fields_empty() -> None:
    plain = {k: v for k, v in NEW_META.items() if not k.startswith("spec_")}
    with serve(_chunks_handler([sse([p]) for p in [*_sg_events(plain), b"[DONE]"]])) as srv:
        rec = _one(srv.url, "sglang")
    assert rec.error is None
    assert (rec.spec_steps, rec.spec_proposed, rec.spec_accepted, rec.spec_source) == (None,) * 4
    assert rec.spec_histogram.size == 0


# ---------------------------------------------------------------- worker processes (pickled records)

spec_reports = st.none() | st.builds(
    SpecReport, st.sampled_from(["sglang-meta-info", "vllm-request-metrics"]),
    st.none() | st.integers(0, MAX_COUNT), st.none() | st.integers(0, MAX_COUNT), st.none() | st.integers(0, MAX_COUNT),
    st.lists(st.integers(0, MAX_COUNT), max_size=9).map(tuple))


@settings(max_examples=60, deadline=None)
@given(spec_reports)
def test_records_cross_worker_processes_with_the_counts(spec: SpecReport | None) -> None:
    # worker processes send their records through a multiprocessing pipe, which pickles them
    rec = RequestRecord(rid="r", send_ns=1, done_ns=2, **spec_fields(spec))
    back = pickle.loads(pickle.dumps(rec))
    assert back.same_as(rec)
    assert back.spec_steps == (spec.steps if spec else None)
    assert back.spec_histogram.tolist() == (list(spec.histogram) if spec else [])


def test_worker_pool_records_carry_the_counts() -> None:
    async def main(url: str) -> list[RequestRecord]:
        async with WorkerLoadClient(url, workers=1, concurrency=2, timeout_s=30) as client:
            return await run_wave(client, [WaveRequest([1, 2, 3, 4], 10, rid=f"r{i}") for i in range(2)])

    async def echo_rid(request: web.Request) -> web.StreamResponse:
        rid = json.loads(await request.read())["rid"]
        return await stream_events(request, [sse([p]) for p in [*_sg_events(NEW_META, rid), b"[DONE]"]])

    with serve(echo_rid) as srv:
        recs = asyncio.run(main(srv.url))
    assert [r.error for r in recs] == [None, None]
    assert [(r.spec_steps, r.spec_proposed, r.spec_accepted, r.spec_histogram.tolist()) for r in recs] \
        == [(4, 12, 6, [1, 1, 1, 1])] * 2


# ---------------------------------------------------------------- /metrics counters

METRICS_BEFORE = """\
# HELP vllm:spec_decode_num_drafts_total Number of spec decoding drafts.
# TYPE vllm:spec_decode_num_drafts_total counter
vllm:spec_decode_num_drafts_total{engine="0",model_name="m"} 100.0
vllm:spec_decode_num_drafts_total{engine="1",model_name="m"} 20.0
# HELP vllm:spec_decode_num_drafts_created Number of spec decoding drafts.
# TYPE vllm:spec_decode_num_drafts_created gauge
vllm:spec_decode_num_drafts_created{engine="0",model_name="m"} 1.7e9
# HELP vllm:spec_decode_num_draft_tokens_total Number of draft tokens.
# TYPE vllm:spec_decode_num_draft_tokens_total counter
vllm:spec_decode_num_draft_tokens_total{engine="0",model_name="m"} 360.0
# HELP vllm:spec_decode_num_accepted_tokens_total Number of accepted tokens.
# TYPE vllm:spec_decode_num_accepted_tokens_total counter
vllm:spec_decode_num_accepted_tokens_total{engine="0",model_name="m"} 200.0
# HELP vllm:spec_decode_num_accepted_tokens_per_pos_total Accepted tokens per draft position.
# TYPE vllm:spec_decode_num_accepted_tokens_per_pos_total counter
vllm:spec_decode_num_accepted_tokens_per_pos_total{engine="0",model_name="m",position="0"} 90.0
vllm:spec_decode_num_accepted_tokens_per_pos_total{engine="1",model_name="m",position="0"} 5.0
vllm:spec_decode_num_accepted_tokens_per_pos_total{engine="0",model_name="m",position="1"} 70.0
vllm:spec_decode_num_accepted_tokens_per_pos_total{engine="0",model_name="m",position="2"} 40.0
# HELP vllm:num_requests_running Number of requests in model execution batches.
# TYPE vllm:num_requests_running gauge
vllm:num_requests_running{engine="0",model_name="m"} 0.0
"""


def test_parse_spec_counters_sums_label_sets() -> None:
    got = parse_spec_counters(METRICS_BEFORE)
    assert got == {"vllm:spec_decode_num_drafts_total": 120.0, "vllm:spec_decode_num_draft_tokens_total": 360.0,
                   "vllm:spec_decode_num_accepted_tokens_total": 200.0, per_pos_key("0"): 95.0,
                   per_pos_key("1"): 70.0, per_pos_key("2"): 40.0}
    assert per_pos_key("1") == 'vllm:spec_decode_num_accepted_tokens_per_pos_total{position="1"}'
    assert parse_spec_counters("# TYPE sglang:num_running_reqs gauge\nsglang:num_running_reqs 3\n") == {}
    nan = METRICS_BEFORE.replace('model_name="m"} 360.0', 'model_name="m"} NaN')
    assert "vllm:spec_decode_num_draft_tokens_total" not in parse_spec_counters(nan)


def test_counter_delta_known_answer_and_reset() -> None:
    before = parse_spec_counters(METRICS_BEFORE)
    after = {**before, "vllm:spec_decode_num_drafts_total": 160.0, per_pos_key("0"): 127.0}
    after.pop(per_pos_key("2"))
    delta = counter_delta(before, after)
    assert delta is not None and delta["vllm:spec_decode_num_drafts_total"] == 40.0
    assert delta[per_pos_key("0")] == 32.0 and delta[per_pos_key("1")] == 0.0 and per_pos_key("2") not in delta
    assert counter_delta(before, {**before, "vllm:spec_decode_num_drafts_total": 3.0}) is None  # restarted


def test_counters_summary_and_witness_summary() -> None:
    before = (10, 12, {"vllm:spec_decode_num_drafts_total": 120.0})
    after = (900, 905, {"vllm:spec_decode_num_drafts_total": 160.0})
    s = counters_summary(before, after)
    assert s["delta"] == {"vllm:spec_decode_num_drafts_total": 40.0}
    times = (s["before_sent_ns"], s["before_answered_ns"], s["after_sent_ns"], s["after_answered_ns"])
    assert times == (10, 12, 900, 905)
    lost = counters_summary(before, None)
    assert lost["delta"] is None and lost["after"] is None
    w = witness_summary("w", 8, 100, 200, [], s)
    assert w["spec_counters"] == s and "spec_counters" not in witness_summary("w", 8, 100, 200, [])


def test_witness_reads_counters_before_and_after() -> None:
    texts = [METRICS_BEFORE, METRICS_BEFORE.replace("100.0", "130.0")]

    async def metrics(request: web.Request) -> web.StreamResponse:
        return web.Response(text=texts.pop(0) if texts else "", content_type="text/plain")

    async def main(url: str) -> dict[str, object] | None:
        w = MetricsWitness()
        before = await w.read_counters(url)
        assert before is not None
        w.note_counters(before, await w.read_counters(url))
        out = w.take_counters()
        assert w.take_counters() is None
        return out

    with serve(metrics, "/metrics") as srv:
        got = asyncio.run(main(srv.url))
    assert got is not None and got["delta"] == {"vllm:spec_decode_num_drafts_total": 30.0,
                                                "vllm:spec_decode_num_draft_tokens_total": 0.0,
                                                "vllm:spec_decode_num_accepted_tokens_total": 0.0,
                                                per_pos_key("0"): 0.0, per_pos_key("1"): 0.0, per_pos_key("2"): 0.0}
    times = [got["before_sent_ns"], got["before_answered_ns"], got["after_sent_ns"], got["after_answered_ns"]]
    assert times == sorted(times)  # type: ignore[type-var]


def test_wave_counter_readings_bracket_the_whole_wave() -> None:
    """A literal vLLM server counts 4 verify steps per finished request: the delta stored for a wave
    of 3 is 12, read before the first send and after the last request ended."""
    done = [0]

    def counters() -> str:
        n = done[0]
        return (f"vllm:num_requests_running 0\nvllm:spec_decode_num_drafts_total{{engine=\"0\"}} {100 + 4 * n}\n"
                f"vllm:spec_decode_num_accepted_tokens_total{{engine=\"0\"}} {50 + 6 * n}\n")

    async def metrics(request: web.Request) -> web.StreamResponse:
        return web.Response(text=counters(), content_type="text/plain")

    async def completions(request: web.Request) -> web.StreamResponse:
        resp = web.StreamResponse(headers={"Content-Type": "text/event-stream"})
        await resp.prepare(request)
        for p in _v_stream({"speculative_decoding": SPEC_METRICS}, ids=True)[:-1]:
            await resp.write(sse([p]))
        done[0] += 1  # the step is counted before the client can see the stream end
        await resp.write(sse([b"[DONE]"]))
        await resp.write_eof()
        return resp

    async def main(url: str) -> tuple[list[RequestRecord], dict[str, object] | None]:
        svc = RunningService(profile=None, url=url, process=None)  # type: ignore[arg-type]  # attached, no profile
        spec = WaveSpec(run_id="run", cell_id="c", wave_id="c.r0.w000", round_index=0, wave_index=0,
                        phase="measured", workload="decode", concurrency=3, max_new_tokens=10, ignore_eos=True,
                        cache="none")
        cases = [Case(f"c{i}", np.array([1, 2, 3], dtype=np.int32), f"h{i}", 3, {}) for i in range(3)]
        witness = MetricsWitness(interval_s=0.05)
        async with LoadClient(url, protocol="vllm", model="m", concurrency=3, timeout_s=30) as client:
            recs = await execute_wave(svc, client, spec, cases, witness)
        return recs, witness.take_counters()

    with serve(completions, "/v1/completions", {"/metrics": metrics}) as srv:
        recs, got = asyncio.run(main(srv.url))
    assert [r.error for r in recs] == [None] * 3 and all(r.spec_steps == 4 for r in recs)
    assert got is not None
    assert got["delta"] == {"vllm:spec_decode_num_drafts_total": 12.0,
                            "vllm:spec_decode_num_accepted_tokens_total": 18.0}
    assert int(got["before_answered_ns"]) <= min(r.send_ns for r in recs)  # type: ignore[call-overload]
    assert int(got["after_sent_ns"]) >= max(r.done_ns for r in recs)  # type: ignore[call-overload]
