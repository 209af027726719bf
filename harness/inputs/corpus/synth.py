"""Corpora beyond fixed lengths (edge module: files): input/output lengths drawn from a declared
distribution, and multi-turn conversations imported from a local ShareGPT-format file. Both write the
ordinary frozen corpus format (``manifest.json`` + ``cases.jsonl``, :mod:`harness.inputs.corpus.frozen`) with
each case's declared answer length in ``output_tokens``, so ``dsv4h corpus verify|show`` work unchanged.

**Distribution corpora.** A length distribution is declared as ``fixed:N``, ``uniform:LO:HI``
(inclusive), ``normal:MEAN:STD`` or ``lognormal:MEDIAN:SIGMA``, each clipped to ``[1, cap]``. Case *k*
draws its input length, output length and token IDs (uniform over the tokenizer's vocabulary, as
sglang.bench_serving's ``random`` dataset does) from a generator seeded with (seed, k), so the first
*n* cases of a larger build are the cases of a smaller one and ``--extend`` only appends. Provenance:
``path`` = ``synthetic:<seed>``, line numbers = the case's 1-based index.

**ShareGPT import.** The file is a JSON list of ``{"id", "conversations": [{"from": "human"|"gpt"|
"system", "value"}]}`` (the user's own file; nothing is downloaded). Every human turn followed by a gpt
turn becomes one case: the conversation up to that human turn (earlier answers as the dataset gives
them) rendered with :data:`SHAREGPT_TEMPLATE` and tokenized with the declared tokenizer, with
``output_tokens`` = the tokenized length of the dataset's answer. Provenance: ``path`` =
``<file name>#<conversation id>``, ``line_start`` = ``line_end`` = the 1-based turn number; the file's
SHA-256 is the source ``revision``.
"""

from __future__ import annotations

import json
import math
import re
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from harness.errors import CorpusError
from harness.formats import UnreadableFile, read_regular
from harness.hashing import ids_sha256, sha256_file, sha256_json
from harness.inputs.corpus.frozen import FORMAT_VERSION, Corpus, load_corpus
from harness.inputs.corpus.write import case_id_for, encode_case_line, history_steps, write_corpus
from harness.inputs.tokenizer import load_tokenizer, tokenizer_identity

__all__ = ["build_distribution_corpus", "import_sharegpt"]

SHAREGPT_TEMPLATE = "{role}: {text}\n"  # rendered per turn; the prompt ends with "Assistant: "
ROLES = {"human": "User", "user": "User", "gpt": "Assistant", "assistant": "Assistant", "system": "System"}
MAX_CASES = 1_000_000
MAX_CHARS_PER_TOKEN = 32  # a ShareGPT turn longer than this per token of the limits is never tokenized
_DIST = re.compile(r"^(fixed|uniform|normal|lognormal):([0-9.]+)(?::([0-9.]+))?$")


@dataclass(frozen=True)
class Distribution:
    """A declared length distribution (module docstring), clipped to ``[1, cap]``."""

    kind: str
    a: float
    b: float

    @classmethod
    def parse(cls, text: str) -> Distribution:
        """``fixed:N``, ``uniform:LO:HI``, ``normal:MEAN:STD`` or ``lognormal:MEDIAN:SIGMA``."""
        m = _DIST.match(text.strip())
        if not m or (m.group(1) != "fixed" and m.group(3) is None):
            raise CorpusError(f"cannot read the length distribution {text!r}",
                              hint="use fixed:N, uniform:LO:HI, normal:MEAN:STD or lognormal:MEDIAN:SIGMA")
        a = float(m.group(2))
        b = float(m.group(3)) if m.group(3) is not None else a
        if not (math.isfinite(a) and math.isfinite(b)) or a <= 0 or (m.group(1) == "uniform" and b < a):
            raise CorpusError(f"length distribution {text!r}: parameters out of range",
                              hint="lengths are >= 1 and a uniform range needs LO <= HI")
        return cls(m.group(1), a, b)

    def __str__(self) -> str:
        return f"fixed:{self.a:g}" if self.kind == "fixed" else f"{self.kind}:{self.a:g}:{self.b:g}"

    def draw(self, rng: np.random.Generator, cap: int) -> int:
        """One length."""
        if self.kind == "fixed":
            x = self.a
        elif self.kind == "uniform":
            x = float(rng.integers(int(self.a), int(self.b) + 1))
        elif self.kind == "normal":
            x = float(rng.normal(self.a, self.b))
        else:
            x = float(self.a * math.exp(float(rng.normal(0.0, self.b))))
        return int(min(max(round(x), 1), cap))


@dataclass(frozen=True)
class _Built:
    ids: list[int]
    output_tokens: int
    provenance: dict[str, Any]


def _write(out: Path, *, name: str, description: str, ident: dict[str, Any], template: str,
           source: dict[str, str], include: list[str], cases: Sequence[_Built], old: Corpus | None,
           overwrite: bool) -> Corpus:
    if not cases:
        raise CorpusError(f"{out}: no cases to write", hint="ask for at least one case")
    if old is not None:
        for case, new in zip(old.cases, cases, strict=False):
            if case.sha256 != ids_sha256(new.ids) or case.output_tokens != new.output_tokens:
                raise CorpusError(f"--extend {old.path}: case {case.case_id} would change with these parameters",
                                  hint="extend with the parameters (distribution, seed, file, tokenizer) the "
                                  "corpus was built with; its manifest's source and history name them")
    entries = [{"case_id": case_id_for(i), "n_tokens": len(c.ids), "sha256": ids_sha256(c.ids),
                "provenance": c.provenance, "output_tokens": c.output_tokens} for i, c in enumerate(cases)]
    lengths = [len(c.ids) for c in cases]
    history = history_steps(old, entries, len(entries), include, [], None)
    manifest = {"format_version": FORMAT_VERSION, "name": name, "description": description, "tokenizer": ident,
                "token_range": {"min": min(lengths), "max": max(lengths)}, "prompt_template": template,
                "chat_encoding": None, "source": source, "history": history, "cases": entries}
    lines = b"".join(encode_case_line(str(e["case_id"]), c.ids) for e, c in zip(entries, cases, strict=True))
    return write_corpus(out, manifest, lines, overwrite=overwrite)


def _checked_old(extend: Path | None, n_cases: int) -> Corpus | None:
    old = load_corpus(extend) if extend is not None else None
    if old is not None and n_cases < len(old.cases):
        raise CorpusError(f"--extend {extend}: it has {len(old.cases)} cases, {n_cases} requested",
                          hint="an extension only appends cases; ask for more than it has")
    if not 1 <= n_cases <= MAX_CASES:
        raise CorpusError(f"{n_cases} cases requested", hint=f"ask for 1 to {MAX_CASES} cases")
    return old


def build_distribution_corpus(  # noqa: PLR0913 - one keyword per `dsv4h corpus synth` option
        out: Path, *, tokenizer: Path, n_cases: int, inputs: str, outputs: str,
                              seed: int, max_input: int = 32768, max_output: int = 32768,
                              name: str | None = None, extend: Path | None = None,
                              overwrite: bool = False) -> Corpus:
    """A corpus whose input and output lengths are drawn from declared distributions (module docstring)."""
    old = _checked_old(extend, n_cases)
    din, dout = Distribution.parse(inputs), Distribution.parse(outputs)
    ident = tokenizer_identity(tokenizer)
    vocab = int(ident["vocab_size"])
    cases = []
    for k in range(n_cases):
        rng = np.random.default_rng([seed, k])
        n_in = din.draw(rng, max_input)
        n_out = dout.draw(rng, max_output)
        ids = [int(x) for x in rng.integers(0, vocab, size=n_in)]
        cases.append(_Built(ids, n_out, {"path": f"synthetic:{seed}", "line_start": k + 1, "line_end": k + 1,
                                         "trimmed_tokens": 0}))
    params = {"inputs": str(din), "outputs": str(dout), "seed": seed, "max_input": max_input,
              "max_output": max_output}
    return _write(out, name=name or out.name,
                  description=f"Random token IDs; input lengths {din}, output lengths {dout}, seed {seed}",
                  ident=ident, template="{ids}", include=[json.dumps(params, sort_keys=True)],
                  source={"repository": "dsv4h-synthetic", "revision": sha256_json(params)[:16], "root": ""},
                  cases=cases, old=old, overwrite=overwrite)


MAX_SHAREGPT_BYTES = 256 << 20  # per file: read and parsed whole; --max-bytes raises it


def _read_regular(path: Path, max_bytes: int) -> bytes:
    """The bytes of a regular file of at most ``max_bytes`` (``formats.read_regular``: a FIFO, a device
    or a directory is refused before it is read, and a FIFO without a writer does not hang)."""
    try:
        return read_regular(path, max_bytes)
    except UnreadableFile as exc:
        if str(exc).startswith("not a regular file"):
            raise CorpusError(f"{path}: {exc}; a ShareGPT file is read whole",
                              hint="pass the JSON file itself (copy a stream to a file first)") from None
        raise CorpusError(f"{path}: over the ShareGPT import limit of {max_bytes} bytes ({exc}; the file is "
                          "parsed whole, several times its size in memory)",
                          hint="raise the limit with --max-bytes if this machine has the memory, or split "
                          "the file") from None
    except OSError as exc:
        raise CorpusError(f"{path}: cannot read a ShareGPT JSON file: {exc.strerror or exc}",
                          hint="pass a JSON list of {id, conversations: [{from, value}]}") from None


def _conversations(path: Path, max_bytes: int) -> list[dict[str, Any]]:
    data = _read_regular(path, max_bytes)
    try:  # invalid UTF-8 bytes become lone surrogates here, refused with their conversation (_valid_text)
        convs = json.loads(data.decode("utf-8", errors="surrogateescape"))
    except (ValueError, RecursionError) as exc:
        raise CorpusError(f"{path}: cannot read a ShareGPT JSON file: {exc}",
                          hint="pass a JSON list of {id, conversations: [{from, value}]}") from None
    del data
    if isinstance(convs, dict):
        convs = [convs]
    if not isinstance(convs, list):
        raise CorpusError(f"{path}: a ShareGPT file is a JSON list of conversations",
                          hint="pass a JSON list of {id, conversations: [{from, value}]}")
    return [c for c in convs if isinstance(c, dict)]


def _role(turn: Any) -> str | None:
    return ROLES.get(str(turn.get("from", turn.get("role", ""))).lower()) if isinstance(turn, dict) else None


def _text(turn: dict[str, Any]) -> Any:
    return turn.get("value", turn.get("content", ""))


def conversation_turns(conv: dict[str, Any]) -> Iterator[tuple[int, str, Any, Any]]:
    """(0-based turn, role, text, the answer when a User turn is followed by an Assistant turn, else
    None) of one conversation, up to its first turn of unknown role (pure)."""
    turns = conv.get("conversations") or conv.get("conversation") or []
    if not isinstance(turns, list):
        return
    for i, turn in enumerate(turns):
        role = _role(turn)
        if role is None:
            return
        nxt = turns[i + 1] if i + 1 < len(turns) else None
        answer = _text(nxt) if role == "User" and nxt is not None and _role(nxt) == "Assistant" else None
        yield i, role, _text(turn), answer


def sharegpt_turns(conversations: Sequence[dict[str, Any]]) -> Iterator[tuple[str, int, str, str]]:
    """(conversation id, 1-based turn, prompt text, reference answer) for every human turn followed by
    an answer, in file order (pure; the prompt texts that :func:`import_sharegpt` tokenizes turn by turn)."""
    for index, conv in enumerate(conversations):
        cid = str(conv.get("id", index))
        prompt = ""
        human = 0
        for _, role, text, answer in conversation_turns(conv):
            if role == "User":
                human += 1
                if answer is not None:
                    turn = SHAREGPT_TEMPLATE.format(role=role, text=text)
                    yield cid, human, prompt + turn + "Assistant: ", str(answer)
            prompt += SHAREGPT_TEMPLATE.format(role=role, text=text)


def _valid_text(value: Any, where: str) -> str:
    """A turn's text (or a conversation's id); refused (one error naming the file and conversation) when
    it is not text or not valid UTF-8 (an invalid byte in the file or a lone surrogate escape)."""
    if not isinstance(value, str):
        raise CorpusError(f"{where}: a {type(value).__name__}, not text", hint="every turn's value must be a string")
    try:
        value.encode("utf-8")
    except UnicodeEncodeError:
        raise CorpusError(f"{where}: not valid UTF-8 text (an invalid byte or a lone surrogate escape)",
                          hint="fix or drop that conversation") from None
    return value


def import_sharegpt(  # noqa: PLR0913 - one keyword per `dsv4h corpus import-sharegpt` option
        out: Path, *, source: Path, tokenizer: Path, n_cases: int | None = None,
        max_input: int = 32768, max_output: int = 32768, min_output: int = 1,
        name: str | None = None, extend: Path | None = None, overwrite: bool = False,
        max_bytes: int = MAX_SHAREGPT_BYTES) -> Corpus:
    """Frozen token-ID cases from a local ShareGPT-format file (module docstring). Turns whose prompt is
    longer than ``max_input`` tokens or whose answer is shorter than ``min_output`` are skipped;
    answers longer than ``max_output`` are capped (``trimmed_tokens`` says by how much).

    Linear in the file: each turn is tokenized once, on its own (a prompt's IDs are its turns' IDs in
    order, then those of ``"Assistant: "``), an answer once more for its length, and a conversation is
    left at the first turn that makes its history longer than ``max_input`` tokens (every later prompt
    would be longer still). A turn longer than :data:`MAX_CHARS_PER_TOKEN` characters per token of
    ``max(max_input, max_output)`` is never handed to the tokenizer: the conversation ends there."""
    convs = _conversations(source, max_bytes)
    tok = load_tokenizer(tokenizer)
    encode: Callable[[str], list[int]] = lambda s: list(tok.encode(s, add_special_tokens=False).ids)  # noqa: E731
    suffix = encode("Assistant: ")
    max_chars = MAX_CHARS_PER_TOKEN * max(max_input, max_output)
    cases: list[_Built] = []
    for index, conv in enumerate(convs):
        if n_cases is not None and len(cases) >= n_cases:
            break
        raw_id = conv.get("id", index)
        cid = _valid_text(raw_id if isinstance(raw_id, str) else str(raw_id), f"{source}: conversation {index}: its id")
        at = f"{source}: conversation {index} (id {cid!r:.80})"
        history: list[int] = []
        human = 0
        for i, role, value, answer_value in conversation_turns(conv):
            text = _valid_text(value, f"{at}, turn {i + 1}")
            if len(text) > max_chars:
                break  # too long to be part of any prompt that fits; never tokenized
            turn_ids = encode(SHAREGPT_TEMPLATE.format(role=role, text=text))
            if role == "User":
                human += 1
                n_prompt = len(history) + len(turn_ids) + len(suffix)
                if answer_value is not None and n_prompt <= max_input and \
                        (n_cases is None or len(cases) < n_cases):
                    answer = _valid_text(answer_value, f"{at}, turn {i + 2}")
                    if len(answer) > max_chars:
                        break  # the next turn ends the conversation anyway
                    n_out = len(encode(answer))
                    if n_out >= min_output:
                        cases.append(_Built([*history, *turn_ids, *suffix], min(n_out, max_output),
                                            {"path": f"{source.name}#{cid}", "line_start": human, "line_end": human,
                                             "trimmed_tokens": max(n_out - max_output, 0)}))
            history += turn_ids
            if len(history) > max_input:
                break  # every later prompt of this conversation is longer
    if n_cases is not None and len(cases) < n_cases:
        raise CorpusError(f"{source}: {len(cases)} usable turns, {n_cases} requested",
                          hint="ask for fewer cases or raise --max-input")
    old = _checked_old(extend, len(cases)) if cases else None
    digest = sha256_file(source)
    return _write(out, name=name or out.name,
                  description=f"Multi-turn conversations imported from the ShareGPT-format file {source.name} "
                  f"(sha256 {digest[:16]}); output_tokens = the dataset answer's length",
                  ident=tokenizer_identity(tokenizer), template=SHAREGPT_TEMPLATE + "...Assistant: ",
                  include=[json.dumps({"file": source.name, "max_input": max_input, "max_output": max_output,
                                       "min_output": min_output}, sort_keys=True)],
                  source={"repository": f"sharegpt-file:{source.name}", "revision": digest, "root": ""},
                  cases=cases, old=old, overwrite=overwrite)
