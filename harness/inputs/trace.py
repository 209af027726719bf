"""Mooncake-format request traces: parsing, the shared-prefix token ids they imply, and the prefix-cache
hits they imply (pure).

A trace is JSON Lines, one request per line, in send order (the format AIPerf and SGLang's
``bench_serving --dataset-name mooncake`` replay)::

    {"timestamp": 0, "input_length": 1200, "output_length": 40, "hash_ids": [0, 1, 2]}

``timestamp`` is the send time in milliseconds from the trace's start (non-decreasing down the file),
``input_length`` and ``output_length`` are token counts (``input_length`` >= 1, ``output_length`` >= 1),
``hash_ids`` names the prompt's blocks of ``block_size`` tokens (Mooncake's default 512) in order: the
same hash id at the same block position is the same block of tokens. A prompt needs
``ceil(input_length / block_size)`` blocks; ``hash_ids`` may name fewer (the rest of the prompt is the
request's own tokens, shared with nobody) but never more. The last named block may be partial: the
first ``input_length - (n - 1) x block_size`` tokens of that block.

**Token ids.** Block ``(position k, hash id h)`` is ``block_size`` ids drawn uniformly from ``[low, high)``
by a generator seeded with the SHA-256 of ``block:<seed>:<k>:<h>``; the unnamed tail of line *n* from one
seeded with that of ``tail:<seed>:<n>`` (domain-separated: a tail never shares a block's seed, and no two
(position, id) pairs share one, however large the ids). So equal (position, hash id) pairs give identical
blocks, in any trace and any order.

**Implied prefix-cache hits** (:func:`expected_cached`). A prefix cache (SGLang's radix cache, the
simulator's) reuses only a prompt's *prefix*, so the tokens the trace implies are cached for request
*i* are those of its longest run of leading blocks ``hash_ids[:k]`` that an earlier request's prompt
also began with, assuming an unbounded cache that holds every earlier prompt (nothing evicted) and
that each earlier request's prefill had finished (the cache fills at the end of prefill). A block an
earlier request held only partly counts the tokens both hold and ends the run. Since a server always
computes a prompt's last token, the count is at most ``input_length - 1``. A chance match of leading
tokens of two different blocks (ids drawn at random) is not counted; a server's cache may count it.
Mooncake's hash ids are hashes of the whole prefix, so "same id at the same position" already means
"same prefix"; in a trace whose ids are not, the rule above (a prefix, not any earlier block) is what
a prefix cache does.
"""

from __future__ import annotations

import hashlib
import json
import math
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from harness.errors import CorpusError

__all__ = ["expected_cached"]

DEFAULT_BLOCK_SIZE = 512
MAX_BLOCK_SIZE = 1 << 20
MAX_LENGTH = 1 << 20  # tokens per prompt or answer (a spec's max_new_tokens limit)
MAX_LINES = 1_000_000
FIELDS = ("timestamp", "input_length", "output_length", "hash_ids")


@dataclass(frozen=True)
class TraceRequest:
    """One trace line: 1-based ``line``, ``timestamp_ms``, token counts and the block hash ids."""

    line: int
    timestamp_ms: float
    input_length: int
    output_length: int
    hash_ids: tuple[int, ...]


def _bad(path: str, line: int, field: str, what: str, hint: str) -> CorpusError:
    return CorpusError(f"{path}: line {line}: field '{field}': {what}", hint=hint)


def _int_field(obj: dict[str, object], path: str, line: int, field: str, low: int) -> int:
    v = obj[field]
    if isinstance(v, bool) or not isinstance(v, int):
        raise _bad(path, line, field, f"{v!r} is not an integer", f"give {field} as a whole number of tokens")
    if v < low:
        what = "negative" if v < 0 else f"{v} (must be >= {low})"
        raise _bad(path, line, field, f"{what}", f"give {field} >= {low} tokens")
    if v > MAX_LENGTH:
        raise _bad(path, line, field, f"{v} is over the limit of {MAX_LENGTH} tokens", "split or drop the line")
    return v


def parse_line(text: str, *, path: str, line: int, block_size: int) -> TraceRequest:
    """One trace line, checked (``CorpusError`` naming file, line and field)."""
    try:
        obj = json.loads(text)
    except ValueError as exc:
        raise CorpusError(f"{path}: line {line}: not JSON: {exc}",
                          hint="each line is one JSON object {timestamp, input_length, output_length, hash_ids}"
                          ) from None
    if not isinstance(obj, dict):
        raise CorpusError(f"{path}: line {line}: a {type(obj).__name__}, not a JSON object",
                          hint="each line is one JSON object {timestamp, input_length, output_length, hash_ids}")
    for f in FIELDS:
        if f not in obj:
            raise _bad(path, line, f, "missing", f"every line needs {', '.join(FIELDS)}")
    ts = obj["timestamp"]
    if isinstance(ts, bool) or not isinstance(ts, int | float) or not math.isfinite(float(ts)):
        raise _bad(path, line, "timestamp", f"{ts!r} is not a finite number", "give the send time in ms")
    if ts < 0:
        raise _bad(path, line, "timestamp", f"negative ({ts})", "give the send time in ms from the trace start")
    n_in = _int_field(obj, path, line, "input_length", 1)
    n_out = _int_field(obj, path, line, "output_length", 1)
    ids = obj["hash_ids"]
    if not isinstance(ids, list) or any(isinstance(h, bool) or not isinstance(h, int) or h < 0 for h in ids):
        raise _bad(path, line, "hash_ids", "not a list of non-negative integers", "give the block hash ids")
    need = math.ceil(n_in / block_size)
    if len(ids) > need:
        raise _bad(path, line, "hash_ids", f"{len(ids)} blocks, but input_length {n_in} needs only {need} of "
                   f"{block_size} tokens", "check --block-size (Mooncake's is 512) or the line's input_length")
    return TraceRequest(line, float(ts), n_in, n_out, tuple(int(h) for h in ids))


def parse_trace(lines: Iterable[str], *, path: str, block_size: int = DEFAULT_BLOCK_SIZE) -> list[TraceRequest]:
    """Every request of a trace (module docstring); blank lines are skipped. ``CorpusError`` naming the
    file, line and field of the first bad line, or of a timestamp earlier than the line before."""
    if not 1 <= block_size <= MAX_BLOCK_SIZE:
        raise CorpusError(f"block size {block_size}: out of range", hint=f"give 1 to {MAX_BLOCK_SIZE} tokens")
    out: list[TraceRequest] = []
    for n, text in enumerate(lines, start=1):
        if not text.strip():
            continue
        if len(out) >= MAX_LINES:
            raise CorpusError(f"{path}: more than {MAX_LINES} requests", hint="split the trace")
        r = parse_line(text, path=path, line=n, block_size=block_size)
        if out and r.timestamp_ms < out[-1].timestamp_ms:
            raise _bad(path, n, "timestamp", f"{r.timestamp_ms:g} ms is before line {out[-1].line}'s "
                       f"{out[-1].timestamp_ms:g} ms (timestamps must not decrease)",
                       "sort the trace by timestamp")
        out.append(r)
    if not out:
        raise CorpusError(f"{path}: no requests", hint="a trace has one JSON object per line")
    return out


def read_trace(path: Path, *, block_size: int = DEFAULT_BLOCK_SIZE) -> list[TraceRequest]:
    """:func:`parse_trace` of a file (``CorpusError`` when it cannot be read)."""
    try:
        text = path.read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as exc:
        raise CorpusError(f"{path}: cannot read the trace: {exc}", hint="pass a Mooncake JSONL trace file") from None
    return parse_trace(text.splitlines(), path=str(path), block_size=block_size)


def block_lengths(r: TraceRequest, block_size: int) -> list[int]:
    """Tokens of each named block of ``r`` (the last may be partial)."""
    return [min(block_size, r.input_length - k * block_size) for k in range(len(r.hash_ids))]


def _rng(*parts: object) -> np.random.Generator:
    """A generator seeded with the SHA-256 of ``parts`` joined by ``:`` (module docstring)."""
    digest = hashlib.sha256(":".join(str(p) for p in parts).encode()).digest()
    return np.random.default_rng(int.from_bytes(digest, "big"))


def block_ids(position: int, hash_id: int, block_size: int, *, seed: int, low: int, high: int) -> list[int]:
    """The full block at ``position`` named ``hash_id`` (module docstring)."""
    rng = _rng("block", seed, position, hash_id)
    return [int(x) for x in rng.integers(low, high, size=block_size)]


def prompt_ids(r: TraceRequest, block_size: int, *, seed: int, low: int, high: int,
               cache: dict[tuple[int, int], list[int]] | None = None) -> list[int]:
    """The prompt of ``r``: its named blocks, then its own tail (module docstring); ``cache`` keeps
    blocks already drawn."""
    out: list[int] = []
    for k, (h, n) in enumerate(zip(r.hash_ids, block_lengths(r, block_size), strict=True)):
        key = (k, h)
        block = cache.get(key) if cache is not None else None
        if block is None:
            block = block_ids(k, h, block_size, seed=seed, low=low, high=high)
            if cache is not None:
                cache[key] = block
        out.extend(block[:n])
    tail = r.input_length - len(out)
    if tail > 0:
        rng = _rng("tail", seed, r.line)
        out.extend(int(x) for x in rng.integers(low, high, size=tail))
    return out


def expected_cached(trace: Sequence[TraceRequest], block_size: int) -> list[int]:
    """Per request, the prompt tokens the trace implies a prefix cache holds (module docstring)."""
    seen: dict[tuple[int, ...], int] = {}  # leading hash ids -> most tokens of the last block seen
    out: list[int] = []
    for r in trace:
        lengths = block_lengths(r, block_size)
        hit = 0
        for k, n in enumerate(lengths):
            held = seen.get(r.hash_ids[:k + 1], 0)
            hit += min(n, held)
            if held < n:
                break
        out.append(min(hit, r.input_length - 1))
        for k, n in enumerate(lengths):
            key = r.hash_ids[:k + 1]
            seen[key] = max(seen.get(key, 0), n)
    return out
