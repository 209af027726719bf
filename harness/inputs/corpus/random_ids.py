"""Random token-ID prompts for a quick screen (``dsv4h bench``), as a frozen corpus (pure apart from
:func:`write_random_corpus`).

Lengths follow ``vllm bench serve``'s random dataset: with range ratio ``r`` each request's input and
output lengths are drawn uniformly from ``[L*(1-r), L*(1+r)]`` (at least 1), so ``r = 0`` (the default)
gives exactly ``L`` tokens. (``sglang.bench_serving`` reads its ratio differently: lengths in
``[L*r, L]``.) Token ids are uniform over ``[low, high)``: the server's vocabulary when it is known,
else :data:`SAFE_ID_RANGE`, ids every common tokenizer has as ordinary tokens. Request *k* draws from a
generator seeded with ``(seed, k)``, so a larger build starts with the requests of a smaller one.

The corpus is the ordinary frozen format (``manifest.json`` + ``cases.jsonl``,
:mod:`harness.inputs.corpus.frozen`); it has no tokenizer, so the manifest's tokenizer entry names the id range
instead (``files`` maps ``id-range`` to the SHA-256 of that range's canonical JSON).
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from harness.errors import SpecError
from harness.hashing import ids_sha256, sha256_json
from harness.inputs.corpus.frozen import FORMAT_VERSION, Corpus
from harness.inputs.corpus.write import case_id_for, encode_case_line, write_corpus

__all__ = ["RandomPrompts", "id_range", "write_random_corpus"]

SAFE_ID_RANGE = (1000, 30000)
"""Default token ids ``[low, high)`` when the server's vocabulary is unknown: inside every vocabulary of
32k tokens or more, past the special and byte tokens at its start."""
MAX_PROMPTS = 100_000
MAX_LEN = 1_000_000


@dataclass(frozen=True)
class RandomPrompts:
    """What to draw (module docstring): counts and lengths in tokens, ids in ``[id_low, id_high)``."""

    num_prompts: int
    input_len: int
    output_len: int
    range_ratio: float = 0.0
    seed: int = 0
    id_low: int = SAFE_ID_RANGE[0]
    id_high: int = SAFE_ID_RANGE[1]

    def check(self) -> None:
        """SpecError naming the flag of the first value out of range."""
        if not 1 <= self.num_prompts <= MAX_PROMPTS:
            raise SpecError(f"--num-prompts {self.num_prompts}: out of range", hint=f"give 1 to {MAX_PROMPTS}")
        for flag, v in (("--random-input-len", self.input_len), ("--random-output-len", self.output_len)):
            if not 1 <= v <= MAX_LEN:
                raise SpecError(f"{flag} {v}: out of range", hint=f"give 1 to {MAX_LEN} tokens")
        if not 0 <= self.range_ratio < 1:
            raise SpecError(f"--random-range-ratio {self.range_ratio:g}: out of range",
                            hint="give a ratio in [0, 1): lengths are drawn from [L*(1-r), L*(1+r)]")
        if not 0 <= self.id_low < self.id_high:
            raise SpecError(f"token id range [{self.id_low}, {self.id_high}) is empty",
                            hint="give --vocab-size of at least 2")

    def bounds(self, length: int) -> tuple[int, int]:
        """Inclusive (low, high) of a length drawn around ``length``."""
        lo = max(1, int(length * (1 - self.range_ratio)))
        hi = max(lo, int(length * (1 + self.range_ratio)))
        return lo, hi

    def to_json(self) -> dict[str, Any]:
        """The parameters as the manifest and the archive record them."""
        return {"num_prompts": self.num_prompts, "input_len": self.input_len, "output_len": self.output_len,
                "range_ratio": self.range_ratio, "seed": self.seed, "id_range": [self.id_low, self.id_high]}


def id_range(vocab_size: int | None) -> tuple[int, int]:
    """Token ids ``[low, high)`` to draw from: the whole vocabulary but its first 10 ids (commonly
    special tokens) when it is known, else :data:`SAFE_ID_RANGE`."""
    if vocab_size is None:
        return SAFE_ID_RANGE
    if vocab_size < 2:
        raise SpecError(f"vocabulary size {vocab_size}: too small", hint="give --vocab-size of at least 2")
    return (min(10, vocab_size - 1), vocab_size)


def draw(p: RandomPrompts) -> list[tuple[list[int], int]]:
    """Every request's (input ids, output length), in order (module docstring)."""
    p.check()
    in_lo, in_hi = p.bounds(p.input_len)
    out_lo, out_hi = p.bounds(p.output_len)
    out: list[tuple[list[int], int]] = []
    for k in range(p.num_prompts):
        rng = np.random.default_rng([p.seed, k])
        n_in = int(rng.integers(in_lo, in_hi + 1))
        n_out = int(rng.integers(out_lo, out_hi + 1))
        ids = [int(x) for x in rng.integers(p.id_low, p.id_high, size=n_in)]
        out.append((ids, n_out))
    return out


def corpus_files(p: RandomPrompts, name: str = "quick-bench-prompts") -> tuple[dict[str, Any], bytes]:
    """The frozen corpus of ``p``: (``manifest.json`` content, ``cases.jsonl`` bytes)."""
    drawn = draw(p)
    params = p.to_json()
    ident = {"name": f"none: random ids in [{p.id_low}, {p.id_high})",
             "files": {"id-range": sha256_json({"low": p.id_low, "high": p.id_high})},
             "vocab_size": p.id_high}
    entries = [{"case_id": case_id_for(k), "n_tokens": len(ids), "sha256": ids_sha256(ids),
                "provenance": {"path": f"random:{p.seed}", "line_start": k + 1, "line_end": k + 1,
                               "trimmed_tokens": 0}, "output_tokens": n_out}
               for k, (ids, n_out) in enumerate(drawn)]
    lengths = [len(ids) for ids, _ in drawn]
    manifest = {"format_version": FORMAT_VERSION, "name": name,
                "description": f"Random token IDs for a quick screen: {p.num_prompts} prompts of "
                               f"{p.input_len} tokens (range ratio {p.range_ratio:g}), {p.output_len} output "
                               f"tokens, seed {p.seed}",
                "tokenizer": ident, "token_range": {"min": min(lengths), "max": max(lengths)},
                "prompt_template": "{ids}", "chat_encoding": None,
                "source": {"repository": "dsv4h-random", "revision": sha256_json(params)[:16], "root": ""},
                "history": [{"action": "build", "first_case": entries[0]["case_id"],
                             "last_case": entries[-1]["case_id"], "n_cases": len(entries),
                             "include": [json.dumps(params, sort_keys=True)], "exclude": [],
                             "max_per_file": None, "extended_from": None}],
                "cases": entries}
    lines = b"".join(encode_case_line(str(e["case_id"]), ids) for e, (ids, _) in zip(entries, drawn, strict=True))
    return manifest, lines


def write_random_corpus(out: Path, p: RandomPrompts) -> Corpus:
    """Write the corpus of ``p`` to directory ``out`` (new) and load it back verified."""
    manifest, lines = corpus_files(p)
    return write_corpus(out, manifest, lines, overwrite=False)
