"""Hostile Mooncake traces (harness.inputs.trace, ``dsv4h corpus import-trace``): every bound refused with one
``error:`` line naming the file, the line, the field, the limit and the flag, before any token is drawn;
huge numbers refused, never an OverflowError; the prefix-cache count linear in the blocks named."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from testkit import run_cli

from harness.errors import CorpusError
from harness.inputs.corpus.trace_import import import_trace
from harness.inputs.trace import (
    MAX_HASH_ID,
    MAX_TIMESTAMP_MS,
    TraceLimits,
    TraceRequest,
    expected_cached,
    parse_trace,
    read_trace,
)


def line(ts: object, n_in: int, ids: list[int] | None = None) -> str:
    return json.dumps({"timestamp": ts, "input_length": n_in, "output_length": 1, "hash_ids": ids or []})


def _refusal(path: Path, limits: TraceLimits, block_size: int = 512) -> str:
    with pytest.raises(CorpusError) as err:
        read_trace(path, block_size=block_size, limits=limits)
    assert err.value.hint
    return err.value.message


@pytest.mark.parametrize(("ts", "words"), [
    (10**400, "field 'timestamp': an integer of 401 digits is over the limit of 9007199254740992 ms"),
    (MAX_TIMESTAMP_MS + 1, "9007199254740993 is over the limit"),
    (1e300, "1e+300 is over the limit"),
])
def test_huge_timestamps_are_refused_not_overflow(ts: object, words: str) -> None:
    with pytest.raises(CorpusError) as err:
        parse_trace([line(0, 4), line(ts, 4)], path="t.jsonl")
    assert err.value.message.startswith("t.jsonl: line 2: ") and words in err.value.message


def test_the_largest_timestamp_and_hash_id_pass_and_one_more_is_refused() -> None:
    (r,) = parse_trace([line(MAX_TIMESTAMP_MS, 4, [MAX_HASH_ID])], path="t.jsonl")
    assert (r.timestamp_ms, r.hash_ids) == (float(MAX_TIMESTAMP_MS), (MAX_HASH_ID,))
    with pytest.raises(CorpusError, match=r"line 1: field 'hash_ids': an id over the limit of 18446744073709551615"):
        parse_trace([line(0, 4, [MAX_HASH_ID + 1])], path="t.jsonl")


def test_every_cap_names_file_line_field_limit_and_flag(tmp_path: Path) -> None:
    p = tmp_path / "t.jsonl"
    p.write_text("".join(line(i, 1000, [i, i + 1]) + "\n" for i in range(5)))
    size = p.stat().st_size
    assert len(read_trace(p, limits=TraceLimits(size, 5, 5000, 10))) == 5  # every cap exactly met
    assert _refusal(p, TraceLimits(max_bytes=size - 1)).startswith(
        f"{p}: the trace file is refused unread: {size} bytes, more than the {size - 1} accepted")
    assert "--max-bytes" in _refusal(p, TraceLimits(max_bytes=size - 1))
    assert _refusal(p, TraceLimits(max_lines=4)) == f"{p}: line 5: more than 4 requests, the limit (--max-lines)"
    assert _refusal(p, TraceLimits(max_total_tokens=4999)) == (
        f"{p}: line 5: field 'input_length': the trace's total up to here (5000 tokens) is over the limit of "
        "4999 (--max-total-tokens)")
    assert _refusal(p, TraceLimits(max_blocks=9)) == (
        f"{p}: line 5: field 'hash_ids': the blocks the trace names up to here (10) is over the limit of 9 "
        "(--max-blocks)")


def test_forty_lines_of_a_million_tokens_are_refused_at_once(tmp_path: Path) -> None:
    # the measured case of issue 37: 3 KB asking 40 x 2^20 tokens (took 36 s and 1 GB, wrote 228 MB)
    p = tmp_path / "big.jsonl"
    p.write_text("".join(line(i, 1 << 20) + "\n" for i in range(40)))
    with pytest.raises(CorpusError, match=r"line 17: field 'input_length'.*over the limit of 16777216 "
                                          r"\(--max-total-tokens\)"):
        import_trace(p, tmp_path / "out")
    assert not (tmp_path / "out").exists()  # refused at line 17 (its timing: benchmarks/bounded_readers.py)


def test_cli_refusal_is_one_error_line_and_the_flag_raises_it(tmp_path: Path) -> None:
    p = tmp_path / "t.jsonl"
    p.write_text(line(0, 600, [1, 2]) + "\n" + line(1, 600, [1, 3]) + "\n")
    code, _, err = run_cli("corpus", "import-trace", str(p), "--out", str(tmp_path / "a"), "--max-total-tokens", "1000")
    lines = [x for x in err.splitlines() if x.startswith("error:")]
    assert code == 3 and len(lines) == 1 and "line 2: field 'input_length'" in lines[0]
    assert "--max-total-tokens" in lines[0]
    code, out, _ = run_cli("corpus", "import-trace", str(p), "--out", str(tmp_path / "b"), "--max-total-tokens", "1200")
    assert code == 0 and "imported b: 2 cases" in out


def test_a_fifo_is_refused_unread(tmp_path: Path) -> None:
    import os

    fifo = tmp_path / "t.jsonl"
    os.mkfifo(fifo)
    assert "not a regular file (a FIFO)" in _refusal(fifo, TraceLimits())


def test_expected_cached_is_linear_in_the_blocks_named() -> None:
    # block size 1, 2^17 blocks per line: prefix tuples as keys made this quadratic (minutes)
    n = 1 << 17
    ids = tuple(range(n))
    trace = [TraceRequest(1, 0, n, 1, ids), TraceRequest(2, 1, n, 1, ids), TraceRequest(3, 2, n, 1, (*ids[:5], 7))]
    assert expected_cached(trace, 1) == [0, n - 1, 5]  # its time at the cap: benchmarks/bounded_readers.py
