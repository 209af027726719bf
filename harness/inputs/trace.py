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
import numpy.typing as npt

from harness.errors import CorpusError
from harness.formats import UnreadableFile, read_regular

__all__ = [
    "DEFAULT_MAX_BLOCKS",
    "DEFAULT_MAX_BYTES",
    "DEFAULT_MAX_LINES",
    "DEFAULT_MAX_TOTAL_TOKENS",
    "TraceLimits",
    "expected_cached",
]

DEFAULT_BLOCK_SIZE = 512
MAX_BLOCK_SIZE = 1 << 20
MAX_LENGTH = 1 << 20  # tokens per prompt or answer (a spec's max_new_tokens limit)
MAX_TIMESTAMP_MS = 1 << 53  # every integer up to it is exact as a float (285,000 years of ms)
MAX_HASH_ID = (1 << 64) - 1
# bounds of one import (each a flag of 'dsv4h corpus import-trace'): the file, its requests (a corpus
# case each), the prompt tokens of all lines (what is drawn and written), the blocks all lines name (a
# seeded generator per distinct one). At these defaults an import takes < 1 GB and < 20 s
# (benchmarks/bounded_readers.py).
DEFAULT_MAX_BYTES = 64 << 20
DEFAULT_MAX_LINES = 100_000
DEFAULT_MAX_TOTAL_TOKENS = 1 << 24
DEFAULT_MAX_BLOCKS = 1 << 18
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
    if isinstance(ts, bool) or not isinstance(ts, int | float):
        raise _bad(path, line, "timestamp", f"{str(ts)[:40]!r} is not a number", "give the send time in ms")
    if ts < 0:
        raise _bad(path, line, "timestamp", f"negative ({str(ts)[:40]})",
                   "give the send time in ms from the trace start")
    # compared before any float(): a 400-digit integer is no float at all (OverflowError)
    if not (isinstance(ts, int) or math.isfinite(ts)) or ts > MAX_TIMESTAMP_MS:
        raise _bad(path, line, "timestamp", f"{_short(ts)} is over the limit of {MAX_TIMESTAMP_MS} ms",
                   "give the send time in ms from the trace start")
    n_in = _int_field(obj, path, line, "input_length", 1)
    n_out = _int_field(obj, path, line, "output_length", 1)
    ids = obj["hash_ids"]
    if not isinstance(ids, list) or any(isinstance(h, bool) or not isinstance(h, int) or h < 0 for h in ids):
        raise _bad(path, line, "hash_ids", "not a list of non-negative integers", "give the block hash ids")
    need = math.ceil(n_in / block_size)
    if len(ids) > need:
        raise _bad(path, line, "hash_ids", f"{len(ids)} blocks, but input_length {n_in} needs only {need} of "
                   f"{block_size} tokens", "check --block-size (Mooncake's is 512) or the line's input_length")
    if any(h > MAX_HASH_ID for h in ids):
        raise _bad(path, line, "hash_ids", f"an id over the limit of {MAX_HASH_ID} (2^64 - 1)",
                   "give the block hash ids as 64-bit integers")
    return TraceRequest(line, float(ts), n_in, n_out, tuple(int(h) for h in ids))


def _short(v: object) -> str:
    """A number for a message: a huge integer by its digit count (never its 400 digits, never float())."""
    if isinstance(v, int) and abs(v) >= 10**20:
        return f"an integer of {len(str(abs(v)))} digits"
    return repr(v)


@dataclass(frozen=True)
class TraceLimits:
    """Bounds of one trace read (module constants; each a flag of ``dsv4h corpus import-trace``): file
    bytes, requests (non-blank lines), prompt tokens of all lines (``input_length`` summed), blocks
    all lines name (``hash_ids`` entries summed: each distinct one is drawn by its own seeded
    generator, each is copied into its prompt). None: unbounded."""

    max_bytes: int | None = DEFAULT_MAX_BYTES
    max_lines: int | None = DEFAULT_MAX_LINES
    max_total_tokens: int | None = DEFAULT_MAX_TOTAL_TOKENS
    max_blocks: int | None = DEFAULT_MAX_BLOCKS


DEFAULT_LIMITS = TraceLimits()
UNBOUNDED = TraceLimits(None, None, None, None)


def _over(path: str, line: int, field: str, what: str, limit: int, flag: str) -> CorpusError:
    return _bad(path, line, field, f"{what} is over the limit of {limit} ({flag})",
                f"raise {flag} if this machine has the memory and time, or split the trace")


def parse_trace(lines: Iterable[str], *, path: str, block_size: int = DEFAULT_BLOCK_SIZE,
                limits: TraceLimits = UNBOUNDED) -> list[TraceRequest]:
    """Every request of a trace (module docstring); blank lines are skipped. ``CorpusError`` naming the
    file, line and field of the first bad line, of a timestamp earlier than the line before, or of the
    line that takes the trace past ``limits.max_total_tokens`` or ``limits.max_blocks`` (checked line
    by line, before anything is drawn)."""
    if not 1 <= block_size <= MAX_BLOCK_SIZE:
        raise CorpusError(f"block size {block_size}: out of range", hint=f"give 1 to {MAX_BLOCK_SIZE} tokens")
    out: list[TraceRequest] = []
    tokens = blocks = 0
    for n, text in enumerate(lines, start=1):
        if not text.strip():
            continue
        if limits.max_lines is not None and len(out) >= limits.max_lines:
            raise CorpusError(f"{path}: line {n}: more than {limits.max_lines} requests, the limit (--max-lines)",
                              hint="raise --max-lines if this machine has the memory and time, or split the trace")
        r = parse_line(text, path=path, line=n, block_size=block_size)
        if out and r.timestamp_ms < out[-1].timestamp_ms:
            raise _bad(path, n, "timestamp", f"{r.timestamp_ms:g} ms is before line {out[-1].line}'s "
                       f"{out[-1].timestamp_ms:g} ms (timestamps must not decrease)",
                       "sort the trace by timestamp")
        tokens += r.input_length
        blocks += len(r.hash_ids)
        if limits.max_total_tokens is not None and tokens > limits.max_total_tokens:
            raise _over(path, n, "input_length", f"the trace's total up to here ({tokens} tokens)",
                        limits.max_total_tokens, "--max-total-tokens")
        if limits.max_blocks is not None and blocks > limits.max_blocks:
            raise _over(path, n, "hash_ids", f"the blocks the trace names up to here ({blocks})",
                        limits.max_blocks, "--max-blocks")
        out.append(r)
    if not out:
        raise CorpusError(f"{path}: no requests", hint="a trace has one JSON object per line")
    return out


def read_trace(path: Path, *, block_size: int = DEFAULT_BLOCK_SIZE,
               limits: TraceLimits = DEFAULT_LIMITS) -> list[TraceRequest]:
    """:func:`parse_trace` of a regular file of at most ``limits.max_bytes`` (refused unread when
    larger); ``CorpusError`` when it cannot be read."""
    limit = limits.max_bytes
    try:
        text = (path.read_bytes() if limit is None else read_regular(path, limit)).decode("utf-8")
    except UnreadableFile as exc:  # not a regular file, or over the limit: refused unread
        raise CorpusError(f"{path}: the trace file is refused unread: {exc} (a regular file of at most {limit} "
                          "bytes, --max-bytes)", hint="pass a Mooncake JSONL trace file; raise --max-bytes if "
                          "this machine has the memory, or split the trace") from None
    except (OSError, UnicodeDecodeError) as exc:
        raise CorpusError(f"{path}: cannot read the trace: {exc}", hint="pass a Mooncake JSONL trace file") from None
    return parse_trace(text.splitlines(), path=str(path), block_size=block_size, limits=limits)


def block_lengths(r: TraceRequest, block_size: int) -> list[int]:
    """Tokens of each named block of ``r`` (the last may be partial)."""
    return [min(block_size, r.input_length - k * block_size) for k in range(len(r.hash_ids))]


def _rng(*parts: object) -> np.random.Generator:
    """A generator seeded with the SHA-256 of ``parts`` joined by ``:`` (module docstring)."""
    digest = hashlib.sha256(":".join(str(p) for p in parts).encode()).digest()
    return np.random.default_rng(int.from_bytes(digest, "big"))


def _block_array(position: int, hash_id: int, block_size: int, *, seed: int, low: int,
                 high: int) -> npt.NDArray[np.int64]:
    return _rng("block", seed, position, hash_id).integers(low, high, size=block_size)


def block_ids(position: int, hash_id: int, block_size: int, *, seed: int, low: int, high: int) -> list[int]:
    """The full block at ``position`` named ``hash_id`` (module docstring)."""
    return [int(x) for x in _block_array(position, hash_id, block_size, seed=seed, low=low, high=high)]


def prompt_array(r: TraceRequest, block_size: int, *, seed: int, low: int, high: int,
                 cache: dict[tuple[int, int], npt.NDArray[np.int64]] | None = None) -> npt.NDArray[np.int64]:
    """The prompt of ``r`` as an array: its named blocks, then its own tail (module docstring);
    ``cache`` keeps blocks already drawn (8 bytes a token)."""
    parts: list[npt.NDArray[np.int64]] = []
    for k, (h, n) in enumerate(zip(r.hash_ids, block_lengths(r, block_size), strict=True)):
        key = (k, h)
        block = cache.get(key) if cache is not None else None
        if block is None:
            block = _block_array(k, h, block_size, seed=seed, low=low, high=high)
            if cache is not None:
                cache[key] = block
        parts.append(block[:n])
    tail = r.input_length - sum(len(p) for p in parts)
    if tail > 0:
        parts.append(_rng("tail", seed, r.line).integers(low, high, size=tail))
    return np.concatenate(parts) if parts else np.zeros(0, np.int64)


def prompt_ids(r: TraceRequest, block_size: int, *, seed: int, low: int, high: int,
               cache: dict[tuple[int, int], npt.NDArray[np.int64]] | None = None) -> list[int]:
    """:func:`prompt_array` as a list of ints."""
    return [int(x) for x in prompt_array(r, block_size, seed=seed, low=low, high=high, cache=cache)]


def expected_cached(trace: Sequence[TraceRequest], block_size: int) -> list[int]:
    """Per request, the prompt tokens the trace implies a prefix cache holds (module docstring).

    Linear in the blocks named: a prefix ``hash_ids[:k + 1]`` is a node of a trie, keyed by (its
    parent prefix's node, the hash id), never by the prefix itself (a tuple of k ids per block)."""
    nodes: dict[tuple[int, int], int] = {}  # (parent node, hash id) -> node; the empty prefix is node 0
    held: list[int] = [0]  # node -> most tokens of its last block an earlier request held
    out: list[int] = []
    for r in trace:
        lengths = block_lengths(r, block_size)
        path: list[int] = []
        node = 0
        for h in r.hash_ids:
            key = (node, h)
            if key not in nodes:
                nodes[key] = len(held)
                held.append(0)
            node = nodes[key]
            path.append(node)
        hit = 0
        for node, n in zip(path, lengths, strict=True):
            hit += min(n, held[node])
            if held[node] < n:
                break
        out.append(min(hit, r.input_length - 1))
        for node, n in zip(path, lengths, strict=True):
            held[node] = max(held[node], n)
    return out
