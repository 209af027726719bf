"""The span walk of a corpus build: cut one file into excerpts whose prompts have ``lo``-``hi`` tokens.

Contract: given a tokenizer, the template split around ``{code}`` (:func:`harness.inputs.corpus.sources.
split_template`), an optional chat encoding and the token range, :class:`SpanWalker` yields spans
(:class:`Span`: prompt token ids plus provenance) from one :class:`SourceFile` at a time; it reads no files
and writes nothing.
Which files are walked, and in which order, is the build driver's business
(:func:`harness.inputs.corpus.build.build_corpus`).

The walk, per file:

1. From a cursor line (first non-blank line at or after the previous excerpt's end), take the shortest run of
   whole lines whose prompt reaches ``lo`` tokens. The prompt is the template filled with ``{path}`` and
   ``{code}`` (the excerpt without its final newline), passed through the optional chat encoding, and
   tokenized without extra special tokens. Each file is tokenized once with offsets to estimate where the
   span ends; the final prompt is then tokenized exactly (a few times per case at most, never
   quadratically).
2. If the prompt has more than ``hi`` tokens, the last excerpt tokens are dropped (the template's closing text
   and the chat encoding's assistant turn stay intact), so every span has ``lo <= len(ids) <= hi``.
   ``line_end`` is the line of the last kept excerpt token and ``trimmed`` how many were dropped. The next
   excerpt starts after ``line_end``.
3. At most ``max_per_file`` spans per file. Lines covered by spans already in ``SpanWalker.used`` (an
   extended corpus's, or earlier ones) are never reused; a file too short for another excerpt is left.
"""

from __future__ import annotations

import bisect
import re
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import numpy.typing as npt

from harness.errors import SpecError
from harness.inputs.corpus.sources import ChatEncoding

__all__ = ["SourceFile", "Span", "SpanWalker"]


@dataclass
class SourceFile:
    """One source file prepared for the walk: its text, line offsets and the prompt's fixed overhead."""

    path: str
    text: str
    line_starts: list[int]  # char offset of each line start; one extra entry = len(text)
    overhead: int  # prompt tokens with an empty excerpt

    @property
    def n_lines(self) -> int:
        """Number of lines of the file."""
        return len(self.line_starts) - 1


@dataclass(frozen=True)
class Span:
    """One excerpt: ``path``, 1-based inclusive lines actually used, excerpt tokens dropped, prompt ids."""

    path: str
    line_start: int
    line_end: int
    trimmed: int
    ids: list[int]


@dataclass
class SpanWalker:
    """Walks files into spans with tokenizer ``tok`` (a ``tokenizers.Tokenizer``). ``used`` maps a path to
    the (line_start, line_end) ranges already taken; ``encodes`` counts tokenizations."""

    tok: Any
    head_t: str
    tail_t: str
    chat: ChatEncoding | None
    lo: int
    hi: int
    encodes: int = 0
    used: dict[str, list[tuple[int, int]]] = field(default_factory=dict)

    def render(self, path: str, code: str) -> tuple[str, int, int]:
        """Final text to tokenize and the [start, end) char range of the excerpt in it."""
        head = self.head_t.format(path=path)
        prompt = head + code + self.tail_t.format(path=path)
        text = prompt if self.chat is None else self.chat(prompt)
        at = text.find(prompt) if self.chat is not None else 0
        if at < 0:
            raise SpecError(
                "the chat encoding must contain the prompt verbatim (it may only add text around it)",
                hint="Wrap the prompt; do not rewrite it.",
            )
        return text, at + len(head), at + len(head) + len(code)

    def encode(self, text: str) -> Any:
        """``text`` tokenized without extra special tokens (a ``tokenizers.Encoding``)."""
        self.encodes += 1
        return self.tok.encode(text, add_special_tokens=False)

    def prepare(self, path: str, text: str) -> SourceFile:
        """``text`` (of the file at ``path``) with its line offsets and the prompt overhead counted."""
        starts = [0, *(m.end() for m in re.finditer("\n", text))]
        if starts[-1] != len(text):
            starts.append(len(text))
        overhead = len(self.encode(self.render(path, "")[0]).ids)
        return SourceFile(path, text, starts, overhead)

    def window(self, f: SourceFile, s: int, need: int) -> tuple[npt.NDArray[np.int64], int]:
        """Tokenize lines ``s..j`` once (with offsets), ``j`` the first line end past ``5 * need`` characters,
        doubling until the window holds ``need`` tokens or reaches the end of the file. Returns ``cum`` with
        ``cum[k]`` = tokens starting in the first ``k`` lines of the window, and ``j``."""
        c_start = f.line_starts[s - 1]
        width = max(5 * need, 4096)
        while True:
            j = bisect.bisect_left(f.line_starts, c_start + width)
            j = min(max(j, s), f.n_lines)
            enc = self.encode(f.text[c_start: f.line_starts[j]])
            offsets = enc.offsets
            tok_starts = np.fromiter((o[0] for o in offsets), dtype=np.int64, count=len(offsets))
            rel = np.asarray(f.line_starts[s - 1: j + 1], dtype=np.int64) - c_start
            cum = np.searchsorted(tok_starts, rel, side="left").astype(np.int64)
            if int(cum[-1]) >= need or j == f.n_lines:
                return cum, j
            width *= 2

    def _code(self, f: SourceFile, s: int, e: int) -> str:
        """Lines s..e (1-based inclusive) without the final newline."""
        code = f.text[f.line_starts[s - 1]: f.line_starts[e]]
        return code[:-1] if code.endswith("\n") else code

    def _counts(self, f: SourceFile, s: int, ends: Sequence[int]) -> list[tuple[Any, int, int]]:
        """Exact encodings of the prompts for lines ``s..e``, ``e`` in ``ends`` (one parallel batch)."""
        rendered = [self.render(f.path, self._code(f, s, e)) for e in ends]
        self.encodes += len(rendered)
        encs = self.tok.encode_batch([r[0] for r in rendered], add_special_tokens=False)
        return [(enc, c0, c1) for enc, (_, c0, c1) in zip(encs, rendered, strict=True)]

    def span_at(self, f: SourceFile, s: int) -> Span | None:
        """The excerpt starting at line ``s`` (1-based), or None when the rest of the file is too short.

        A rest of file whose estimated prompt falls short of ``lo`` by more than the estimate's slack is
        rejected without an exact tokenization (the estimate, from tokenizing a window of lines once, differs
        from the exact count by a few tokens at the excerpt's edges; the slack is 16 tokens plus 2%).
        """
        slack = 16 + self.lo // 50
        need = max(self.lo - f.overhead, 0)
        cum, j = self.window(f, s, need + slack)
        if j == f.n_lines and int(cum[-1]) + f.overhead < self.lo - slack:
            return None
        k = int(np.searchsorted(cum, need, side="left"))  # lines needed by the estimate
        e = min(max(s + k - 1, s), f.n_lines)
        # The estimate is usually exact to a line: encode e and e - 1 together, then walk if it was not.
        first = [e, e - 1] if e > s else [e]
        cache = dict(zip(first, self._counts(f, s, first), strict=True))

        def count(end: int) -> tuple[Any, int, int]:
            if end not in cache:
                cache[end] = self._counts(f, s, [end])[0]
            return cache[end]

        enc, c0, c1 = count(e)
        while len(enc.ids) < self.lo:
            if e >= f.n_lines:
                return None
            e += 1
            enc, c0, c1 = count(e)
        while e > s:
            prev = count(e - 1)
            if len(prev[0].ids) < self.lo:
                break
            e -= 1
            enc, c0, c1 = prev
        ids: list[int] = list(enc.ids)
        excess = len(ids) - self.hi
        line_end = e
        if excess > 0:
            offsets = enc.offsets  # a fresh list on every property access: read once
            special = enc.special_tokens_mask
            # excerpt tokens lie wholly inside [c0, c1); only those are dropped, so the text around the
            # excerpt survives even when a token straddles its edge
            code_idx = [i for i, (a, b) in enumerate(offsets) if c0 <= a and b <= c1 and not special[i]]
            if len(code_idx) <= excess:
                raise SpecError(
                    f"the prompt around the excerpt alone needs {len(ids) - len(code_idx)} tokens, more "
                    f"than the range allows ({self.lo}-{self.hi})",
                    hint="Use a shorter template or a larger token range.",
                )
            drop = code_idx[-excess:]
            if drop != list(range(drop[0], drop[0] + excess)):
                raise SpecError("excerpt tokens are not contiguous in the prompt",
                                hint="Use a template with a single {code} field.")
            ids = ids[: drop[0]] + ids[drop[-1] + 1:]
            last_kept = code_idx[-excess - 1]
            char_in_code = offsets[last_kept][1] - 1 - c0
            abs_char = f.line_starts[s - 1] + max(char_in_code, 0)
            line_end = bisect.bisect_right(f.line_starts, abs_char)
        return Span(f.path, s, max(line_end, s), max(excess, 0), ids)

    def file_spans(self, f: SourceFile, budget: int, max_per_file: int | None) -> Iterable[Span]:
        """Yield up to ``budget`` new spans from ``f``, skipping lines used by existing spans."""
        used = sorted(self.used.get(f.path, []))
        count = len(used)
        s = 1
        produced = 0
        while produced < budget and (max_per_file is None or count < max_per_file):
            while s <= f.n_lines and not f.text[f.line_starts[s - 1]: f.line_starts[s]].strip():
                s += 1
            if s > f.n_lines:
                return
            inside = next(((a, b) for a, b in used if a <= s <= b), None)
            if inside is not None:
                s = inside[1] + 1
                continue
            span = self.span_at(f, s)
            if span is None:
                return
            clash = next(((a, b) for a, b in used if s <= b and a <= span.line_end), None)
            if clash is not None:
                s = clash[1] + 1
                continue
            yield span
            produced += 1
            count += 1
            used.append((span.line_start, span.line_end))
            used.sort()
            s = span.line_end + 1
