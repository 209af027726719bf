"""Deterministic token model (pure): prompt tokenization, greedy outputs, natural EOS, detokenization.

Outputs depend only on the prompt's token IDs (never on batch composition, timing, cache salt or
sampling temperature: the simulator is always greedy).  Token ``k`` of a completion is a position-
addressable hash of the prompt, so any prefix can be produced without the rest.  The natural
completion ends with ``EOS_ID`` at a length drawn from ``[eos_min, eos_max]``; with ``ignore_eos``
generation continues past it.  The report's France sentinel returns its exact output.
"""

from __future__ import annotations

import hashlib
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np
import numpy.typing as npt

__all__ = ["decode_tokens"]

VOCAB_SIZE = 129_280
BOS_ID = 0
EOS_ID = 1
TEXT_TOKEN_OFFSET = 3
"""Text prompts tokenize to their UTF-8 bytes plus this offset (IDs 3..258)."""

FRANCE_INPUT_IDS: tuple[int, ...] = (0, 128803, 3085, 344, 270, 6102, 294, 8760, 2755, 128804, 128822)
FRANCE_OUTPUT_IDS: tuple[int, ...] = (671, 6102, 294, 8760, 344, 2619, 51119, 42499, 1)
FRANCE_TEXT = "The capital of France is **Paris**."

_SPECIAL_TEXT = {
    671: "The", 6102: " capital", 294: " of", 8760: " France", 344: " is", 2619: " **", 51119: "Paris",
    42499: "**.",
}
_WORDS: tuple[str, ...] = (
    " the", " of", " and", " to", " in", " is", " for", " on", " that", " with", " as", " it", " at",
    " by", " from", " this", " be", " are", " or", " an", " was", " which", " not", " but", " have",
    " return", " def", " self", " if", " else", " for", " while", " import", " class", " value", " data",
    " list", " node", " index", " result", " error", " count", " true", " false", " none", " int", " str",
    " key", " item", " path", " file", " line", " name", " type", " size", " time", " state", " model",
    " token", " batch", " step", " rate", " cache", " page", " query", " score", " total", " sum", " mean",
    " max", " min", " loop", " next", " call", " args", " kwargs", " yield",
)

U64 = npt.NDArray[np.uint64]
_GOLDEN = np.uint64(0x9E3779B97F4A7C15)
_M1 = np.uint64(0xBF58476D1CE4E5B9)
_M2 = np.uint64(0x94D049BB133111EB)


def encode_text(text: str) -> list[int]:
    """Tokenize a text prompt: UTF-8 bytes plus ``TEXT_TOKEN_OFFSET``."""
    return [b + TEXT_TOKEN_OFFSET for b in text.encode("utf-8")]


def token_text(token_id: int) -> str:
    """Text of one output token: non-empty for every ID except the special BOS/EOS (empty, as SGLang
    skips special tokens)."""
    if token_id in (BOS_ID, EOS_ID):
        return ""
    special = _SPECIAL_TEXT.get(token_id)
    return special if special is not None else _WORDS[token_id % len(_WORDS)]


def decode_tokens(token_ids: Sequence[int]) -> str:
    """Detokenize a sequence of output IDs."""
    return "".join(token_text(t) for t in token_ids)


def prompt_hash(input_ids: Sequence[int] | npt.NDArray[np.int32]) -> bytes:
    """SHA-256 of the prompt IDs packed as little-endian int32."""
    return hashlib.sha256(np.asarray(input_ids, dtype="<i4").tobytes()).digest()


def _splitmix(values: U64) -> U64:
    z = values
    z = (z ^ (z >> np.uint64(30))) * _M1
    z = (z ^ (z >> np.uint64(27))) * _M2
    return z ^ (z >> np.uint64(31))


@dataclass(frozen=True)
class OutputPlan:
    """The greedy completion of one prompt: ``forced`` prefix, then hashed tokens; natural EOS at
    position ``natural_len - 1``."""

    seed: int
    natural_len: int
    forced: tuple[int, ...] = ()

    def tokens(self, start: int, count: int) -> list[int]:
        """Output tokens at positions ``start .. start+count-1``."""
        if count <= 0:
            return []
        pos = np.arange(start, start + count, dtype=np.uint64)
        with np.errstate(over="ignore"):
            hashed = _splitmix(np.uint64(self.seed) + (pos + np.uint64(1)) * _GOLDEN)
        out: list[int] = (hashed % np.uint64(VOCAB_SIZE - 2) + np.uint64(2)).astype(np.int64).tolist()
        eos_at = self.natural_len - 1 - start
        if 0 <= eos_at < count:
            out[eos_at] = EOS_ID
        n_forced = min(len(self.forced) - start, count)
        if n_forced > 0:
            out[:n_forced] = self.forced[start : start + n_forced]
        return out


def plan_output(input_ids: Sequence[int] | npt.NDArray[np.int32], eos_min: int, eos_max: int) -> OutputPlan:
    """Deterministic greedy completion for a prompt; natural length drawn from ``[eos_min, eos_max]``."""
    ids = tuple(map(int, input_ids))
    if ids == FRANCE_INPUT_IDS:
        return OutputPlan(seed=0, natural_len=len(FRANCE_OUTPUT_IDS), forced=FRANCE_OUTPUT_IDS)
    digest = prompt_hash(ids)
    seed = int.from_bytes(digest[:8], "little")
    span = eos_max - eos_min + 1
    natural_len = eos_min + int.from_bytes(digest[8:16], "little") % span
    return OutputPlan(seed=seed, natural_len=natural_len)
