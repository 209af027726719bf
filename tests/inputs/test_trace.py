"""Mooncake traces (harness.inputs.trace): parsing with errors naming file, line and field; the shared-
prefix token ids; the prefix-cache hits a trace implies (known answers and properties)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from harness.errors import CorpusError
from harness.inputs.trace import (
    TraceRequest,
    block_lengths,
    expected_cached,
    parse_trace,
    prompt_ids,
    read_trace,
)

ROOT = Path(__file__).resolve().parents[2]
SMALL = ROOT / "tests" / "fixtures" / "traces" / "mooncake-small.jsonl"
# what the fixture implies, worked by hand (docs/replay.md): e.g. line 4 [0,1,2] of 1536 tokens finds blocks
# 0 and 1 whole and 176 tokens of line 1's partial block 2; line 12 is capped at input_length - 1
SMALL_EXPECTED = [0, 1024, 0, 1200, 0, 600, 1536, 0, 512, 512, 0, 1699, 999, 0, 1300, 519, 0, 1024, 512, 1100]


def line(ts: float, n_in: int, n_out: int, ids: list[int]) -> str:
    return json.dumps({"timestamp": ts, "input_length": n_in, "output_length": n_out, "hash_ids": ids})


def test_the_fixture_parses_with_its_known_prefix_hits() -> None:
    t = read_trace(SMALL, block_size=512)
    assert len(t) == 20 and t[0] == TraceRequest(1, 0.0, 1200, 8, (0, 1, 2))
    assert expected_cached(t, 512) == SMALL_EXPECTED
    assert block_lengths(t[0], 512) == [512, 512, 176]


@pytest.mark.parametrize(("text", "field", "what"), [
    ('{"timestamp": 0, "output_length": 4, "hash_ids": []}', "input_length", "missing"),
    ('{"timestamp": 0, "input_length": 9, "hash_ids": []}', "output_length", "missing"),
    ('{"input_length": 9, "output_length": 4, "hash_ids": []}', "timestamp", "missing"),
    ('{"timestamp": 0, "input_length": 9, "output_length": 4}', "hash_ids", "missing"),
    ('{"timestamp": 0, "input_length": -3, "output_length": 4, "hash_ids": []}', "input_length", "negative"),
    ('{"timestamp": 0, "input_length": 9, "output_length": -1, "hash_ids": []}', "output_length", "negative"),
    ('{"timestamp": -5, "input_length": 9, "output_length": 4, "hash_ids": []}', "timestamp", "negative"),
    ('{"timestamp": 0, "input_length": 20, "output_length": 4, "hash_ids": [1, 2, 3]}', "hash_ids",
     "3 blocks, but input_length 20 needs only 2"),
    ('{"timestamp": 0, "input_length": 9.5, "output_length": 4, "hash_ids": []}', "input_length", "not an integer"),
    ('{"timestamp": 0, "input_length": 9, "output_length": 4, "hash_ids": [1, -2]}', "hash_ids", "non-negative"),
])
def test_a_malformed_line_names_file_line_and_field(text: str, field: str, what: str) -> None:
    good = line(0, 16, 4, [7])
    with pytest.raises(CorpusError) as err:
        parse_trace([good, text], path="t.jsonl", block_size=16)
    assert err.value.message.startswith(f"t.jsonl: line 2: field '{field}': ") and what in err.value.message


def test_a_timestamp_before_the_previous_line_is_refused() -> None:
    with pytest.raises(CorpusError) as err:
        parse_trace([line(100, 8, 1, []), "", line(50, 8, 1, [])], path="t.jsonl", block_size=16)
    assert err.value.message.startswith("t.jsonl: line 3: field 'timestamp': 50 ms is before line 1's 100 ms")


def test_not_json_and_empty_traces_are_refused() -> None:
    with pytest.raises(CorpusError, match="line 1: not JSON"):
        parse_trace(["{oops"], path="t.jsonl")
    with pytest.raises(CorpusError, match="no requests"):
        parse_trace(["", "  "], path="t.jsonl")


def test_same_hash_at_same_position_is_the_same_block_and_the_tail_is_private() -> None:
    a, b = TraceRequest(1, 0, 40, 1, (5, 6)), TraceRequest(2, 0, 37, 1, (5, 9))
    c = TraceRequest(3, 0, 20, 1, (5,))
    pa, pb, pc = (prompt_ids(r, 16, seed=1, low=10, high=1000) for r in (a, b, c))
    assert pa[:16] == pb[:16] == pc[:16] and pa[16:32] != pb[16:32]
    assert len(pa) == 40 and len(pb) == 37 and pc[16:] != pa[16:20]  # c's 4 tail tokens are its own
    assert all(10 <= x < 1000 for x in pa + pb + pc)
    assert prompt_ids(a, 16, seed=2, low=10, high=1000)[:16] != pa[:16]  # the seed changes every block


def test_partial_blocks_count_only_what_both_hold() -> None:
    t = [TraceRequest(1, 0, 20, 1, (1, 2)), TraceRequest(2, 0, 40, 1, (1, 2, 3)), TraceRequest(3, 0, 40, 1, (1, 2, 3))]
    # 1: nothing earlier; 2: block 1 whole + 4 tokens of 1's partial block 2 (then it stops); 3: all but the last
    assert expected_cached(t, 16) == [0, 20, 39]
    # a block seen earlier behind another prefix is no prefix hit
    assert expected_cached([TraceRequest(1, 0, 32, 1, (1, 2)), TraceRequest(2, 0, 32, 1, (3, 2))], 16) == [0, 0]


requests = st.lists(st.tuples(st.integers(1, 80), st.lists(st.integers(0, 3), max_size=6), st.integers(1, 9)),
                    min_size=1, max_size=12)


@settings(max_examples=60, deadline=None)
@given(requests, st.integers(1, 16))
def test_properties_of_the_prefix_builder(rows: list[tuple[int, list[int], int]], block: int) -> None:
    lines = []
    for k, (n_in, ids, n_out) in enumerate(rows):
        need = -(-n_in // block)
        lines.append(line(k * 10, n_in, n_out, ids[:need]))
    trace = parse_trace(lines, path="p.jsonl", block_size=block)
    exp = expected_cached(trace, block)
    prompts = [prompt_ids(r, block, seed=3, low=0, high=1 << 20) for r in trace]
    for i, (r, p, e) in enumerate(zip(trace, prompts, exp, strict=True)):
        assert len(p) == r.input_length and 0 <= e <= r.input_length - 1
        # the implied hit never exceeds the longest common prefix with an earlier prompt, and equals it
        # (capped) when the ids are drawn from a vocabulary too large for chance matches
        lcp = max((_lcp(p, q) for q in prompts[:i]), default=0)
        assert e == min(lcp, r.input_length - 1)
    assert exp[0] == 0


def _lcp(a: list[int], b: list[int]) -> int:
    n = 0
    for x, y in zip(a, b, strict=False):
        if x != y:
            break
        n += 1
    return n


@settings(max_examples=40, deadline=None)
@given(st.text(max_size=80))
def test_any_line_is_parsed_or_refused_with_its_line(text: str) -> None:
    message = ""
    try:
        parse_trace([text], path="f.jsonl", block_size=8)
    except CorpusError as exc:
        message = exc.message
    assert message == "" or message.startswith(("f.jsonl: line 1", "f.jsonl: no requests"))
