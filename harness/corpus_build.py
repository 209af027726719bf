"""Build frozen token-ID corpora from source files with a HF ``tokenizers`` tokenizer; train toy tokenizers.

Building is deterministic: the same source tree, tokenizer, parameters and code give byte-identical
``manifest.json`` and ``cases.jsonl`` (no timestamps, no absolute paths). The walk:

1. List the files under ``source_dir`` whose POSIX path relative to it matches an ``include`` pattern and no
   ``exclude`` pattern (``fnmatch`` syntax, case-sensitive, ``*`` also matches ``/``), sorted by that path.
   Files that are not UTF-8 are skipped; ``\\r\\n`` becomes ``\\n``.
2. In each file, from a cursor line (first non-blank line at or after the previous excerpt's end), take the
   shortest run of whole lines whose prompt reaches ``lo`` tokens. The prompt is the template filled with
   ``{path}`` and ``{code}`` (the excerpt without its final newline), passed through the optional chat
   encoding, and tokenized without extra special tokens. Each file is tokenized once with offsets to
   estimate where the span ends; the final prompt is then tokenized exactly (a few times per case at most,
   never quadratically).
3. If the prompt has more than ``hi`` tokens, the last excerpt tokens are dropped (the template's closing text
   and the chat encoding's assistant turn stay intact), so every case has ``lo <= n_tokens <= hi``. The
   provenance records the real span: ``line_end`` is the line of the last kept excerpt token and
   ``trimmed_tokens`` how many were dropped. The next excerpt starts after ``line_end``.
4. At most ``max_per_file`` excerpts per file; files too short for another excerpt are passed over.

``extend`` keeps an existing corpus's cases byte for byte (same ids, same order) and appends new ones from
spans that overlap none of its spans; with the same parameters the result equals a fresh build of the larger
size. The tokenizer, token range, template and chat encoding must match the corpus being extended.
"""

from __future__ import annotations

import bisect
import fnmatch
import importlib
import os
import re
import shutil
import string
import sys
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
import numpy.typing as npt

from harness.corpus import (
    CASES_FILE,
    FORMAT_VERSION,
    MANIFEST_FILE,
    Corpus,
    case_id_for,
    encode_case_line,
    encode_manifest,
    load_corpus,
)
from harness.errors import CorpusError, SpecError
from harness.hashing import ids_sha256
from harness.tokenizer import load_tokenizer, tokenizer_identity

__all__ = [
    "DEEPSEEK_SPECIAL_TOKENS",
    "DEFAULT_EXCLUDE",
    "DEFAULT_INCLUDE",
    "DEFAULT_TEMPLATE",
    "STDLIB_EXCLUDE",
    "TINY_SPECIAL_TOKENS",
    "ChatEncoding",
    "build_corpus",
    "deepseek_v4_chat",
    "list_source_files",
    "load_tokenizer",
    "parse_token_range",
    "python_source_revision",
    "resolve_chat_encoding",
    "stdlib_dir",
    "tokenizer_identity",
    "train_tokenizer",
]

DEFAULT_TEMPLATE = (
    "Review the following source file excerpt and explain what it does.\n\n```python\n# {path}\n{code}\n```\n"
)
DEFAULT_INCLUDE: tuple[str, ...] = ("*.py",)
DEFAULT_EXCLUDE: tuple[str, ...] = (
    "test/*",
    "tests/*",
    "*/test/*",
    "*/tests/*",
    "__pycache__/*",
    "*/__pycache__/*",
    "site-packages/*",
)
#: The standard-library selection used for the shipped tokenizers and corpora: every ``.py`` file of ``Lib/``
#: except tests, bundled applications (IDLE, lib2to3, turtledemo), data-like modules (codec tables, pydoc
#: topics) and files generated when the interpreter was built (``_sysconfigdata_*``, ``config-*/``), which
#: differ between installations of the same version.
STDLIB_EXCLUDE: tuple[str, ...] = (
    *DEFAULT_EXCLUDE,
    "_sysconfigdata_*",
    "config-*/*",
    "idlelib/*",
    "lib2to3/*",
    "turtledemo/*",
    "pydoc_data/*",
    "encodings/*",
    "__phello__/*",
)
#: DeepSeek-style special tokens (BOS id 0, EOS id 1, then the chat markers) for the simulation tokenizer.
DEEPSEEK_SPECIAL_TOKENS: tuple[str, ...] = (
    "<｜begin▁of▁sentence｜>",
    "<｜end▁of▁sentence｜>",
    "<｜User｜>",
    "<｜Assistant｜>",
    "<think>",
    "</think>",
)
#: Llama-style special tokens for the tiny CPU-engine tokenizer: <pad>=0, <s>=1 (BOS), </s>=2 (EOS).
TINY_SPECIAL_TOKENS: tuple[str, ...] = ("<pad>", "<s>", "</s>")

ChatEncoding = Callable[[str], str]


def deepseek_v4_chat(prompt: str) -> str:
    """Wrap a user prompt the way the report's France input IDs are laid out (non-thinking mode).

    DeepSeek-V4 ships no Jinja chat template; its encoding is BOS, ``<｜User｜>``, the prompt,
    ``<｜Assistant｜>``, ``</think>`` (ids 0, 128803, ..., 128804, 128822 in the real tokenizer). With the
    simulation tokenizer these markers are single special tokens. Use as
    ``--chat-encoding harness.corpus_build:deepseek_v4_chat``.
    """
    return f"<｜begin▁of▁sentence｜><｜User｜>{prompt}<｜Assistant｜></think>"


# ----------------------------------------------------------------------------------------------------
# Parameters
# ----------------------------------------------------------------------------------------------------


def parse_token_range(text: str) -> tuple[int, int]:
    """Parse ``"N"`` or ``"N-M"`` (tokens, inclusive) into ``(lo, hi)``; raises ``SpecError`` when invalid."""
    parts = text.strip().split("-")
    try:
        nums = [int(p) for p in parts]
    except ValueError:
        nums = []
    if len(nums) not in (1, 2) or min(nums, default=0) < 1 or nums[0] > nums[-1]:
        raise SpecError(
            f"token range {text!r} is not N or N-M with 1 <= N <= M",
            hint="Write e.g. --tokens 512 or --tokens 511-512.",
        )
    return nums[0], nums[-1]


def resolve_chat_encoding(spec: str | ChatEncoding | None) -> tuple[ChatEncoding | None, str | None]:
    """Turn ``"module:function"`` (or a callable) into ``(function, recorded name)``; ``None`` -> no hook.

    Raises ``SpecError`` when the module or attribute cannot be imported or is not callable.
    """
    if spec is None:
        return None, None
    if callable(spec):
        module = getattr(spec, "__module__", None) or "builtins"
        qualname = getattr(spec, "__qualname__", None) or type(spec).__qualname__
        return spec, f"{module}:{qualname}"
    mod_name, sep, attr = spec.partition(":")
    if not sep or not mod_name or not attr:
        raise SpecError(f"chat encoding {spec!r} is not module:function",
                        hint="Example: --chat-encoding harness.corpus_build:deepseek_v4_chat")
    try:
        obj: Any = importlib.import_module(mod_name)
        for part in attr.split("."):
            obj = getattr(obj, part)
    except (ImportError, AttributeError) as exc:
        raise SpecError(f"cannot import chat encoding {spec!r}: {exc}",
                        hint="Check the module is importable from this environment (PYTHONPATH).") from exc
    if not callable(obj):
        raise SpecError(f"chat encoding {spec!r} is not callable", hint="Point at a function str -> str.")
    fn: ChatEncoding = obj
    return fn, spec


def _split_template(template: str) -> tuple[str, str]:
    """Validate a template (fields ``{path}`` and exactly one ``{code}``) and split it around ``{code}``."""
    try:
        fields = [f for _, f, _, _ in string.Formatter().parse(template) if f is not None]
    except ValueError as exc:
        raise SpecError(f"prompt template is malformed: {exc}",
                        hint="Escape literal braces as {{ and }}.") from exc
    bad = sorted({f for f in fields if f not in ("path", "code")})
    if bad or fields.count("code") != 1:
        raise SpecError(
            f"prompt template must use {{code}} exactly once and only {{path}} otherwise (found {fields})",
            hint="Example: 'Explain this code.\\n# {path}\\n{code}\\n'",
        )
    return _split_at_code_field(template)


def _split_at_code_field(template: str) -> tuple[str, str]:
    # Scan rather than str.split: an escaped "{{code}}" may also occur and is literal text.
    i = 0
    while i < len(template):
        if template.startswith("{{", i) or template.startswith("}}", i):
            i += 2
            continue
        if template.startswith("{code}", i):
            return template[:i], template[i + len("{code}"):]
        i += 1
    raise SpecError("prompt template has no {code} field", hint="Add {code} where the excerpt goes.")


def list_source_files(
    source_dir: Path, include: Sequence[str] = DEFAULT_INCLUDE, exclude: Sequence[str] = DEFAULT_EXCLUDE
) -> list[str]:
    """POSIX paths (relative to ``source_dir``) of regular files selected by the patterns, sorted.

    Directories that an exclude pattern ending in ``/*`` covers entirely are not descended into.
    """
    prune = [p[:-2] for p in exclude if p.endswith("/*")]
    out: list[str] = []
    root = str(source_dir)
    for dirpath, dirnames, filenames in os.walk(root):
        rel_dir = os.path.relpath(dirpath, root).replace(os.sep, "/")
        prefix = "" if rel_dir == "." else rel_dir + "/"
        dirnames[:] = sorted(
            d for d in dirnames if not any(fnmatch.fnmatchcase(prefix + d, p) for p in prune)
        )
        for fname in filenames:
            rel = prefix + fname
            if not any(fnmatch.fnmatchcase(rel, p) for p in include):
                continue
            if any(fnmatch.fnmatchcase(rel, p) for p in exclude):
                continue
            if os.path.isfile(os.path.join(dirpath, fname)):
                out.append(rel)
    return sorted(out)


def _read_text(path: Path) -> str | None:
    try:
        return path.read_bytes().decode("utf-8").replace("\r\n", "\n")
    except (UnicodeDecodeError, OSError):
        return None


def train_tokenizer(
    source_dir: str | os.PathLike[str],
    out_dir: str | os.PathLike[str],
    *,
    vocab_size: int,
    special_tokens: Sequence[str] = DEEPSEEK_SPECIAL_TOKENS,
    include: Sequence[str] = DEFAULT_INCLUDE,
    exclude: Sequence[str] = DEFAULT_EXCLUDE,
    min_frequency: int = 2,
    bos_token: str | None = None,
    eos_token: str | None = None,
    model_max_length: int = 1 << 20,
    source_revision: str | None = None,
    overwrite: bool = False,
) -> dict[str, Any]:
    """Train a byte-level BPE tokenizer (total vocabulary ``vocab_size``, special tokens first, ids 0..)
    on the selected source files and write ``tokenizer.json`` plus a transformers-style
    ``tokenizer_config.json`` into ``out_dir``, and ``training.json`` with what it was trained on
    (``source_revision`` defaults to this interpreter, e.g. ``"CPython 3.11.7 Lib/"``; no absolute paths).
    Deterministic for the same inputs and ``tokenizers`` version; seconds for ~10 MB of source.

    Returns the tokenizer identity plus training facts (file count, characters). Raises ``SpecError`` for a
    vocabulary smaller than the byte alphabet plus the special tokens, ``CorpusError`` when ``out_dir``
    already holds a tokenizer and ``overwrite`` is false or no source file is found.
    """
    from tokenizers import Tokenizer, decoders, models, pre_tokenizers, trainers

    src = Path(source_dir)
    out = Path(out_dir)
    if vocab_size < 256 + len(special_tokens):
        raise SpecError(f"vocab_size {vocab_size} is below 256 byte tokens + {len(special_tokens)} specials",
                        hint="Use a vocabulary of at least 512.")
    if (out / "tokenizer.json").exists() and not overwrite:
        raise CorpusError(f"{out / 'tokenizer.json'} already exists",
                          hint="Pass --force to replace it (corpora built with it will stop verifying).")
    files = list_source_files(src, include, exclude)
    texts = [t for t in (_read_text(src / f) for f in files) if t is not None]
    if not texts:
        raise CorpusError(f"no readable source files under {src} match {list(include)}",
                          hint="Check --source and the include/exclude patterns.")
    tok = Tokenizer(models.BPE())
    tok.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    tok.decoder = decoders.ByteLevel()
    trainer = trainers.BpeTrainer(
        vocab_size=vocab_size,
        min_frequency=min_frequency,
        special_tokens=list(special_tokens),
        initial_alphabet=pre_tokenizers.ByteLevel.alphabet(),
        show_progress=False,
    )
    tok.train_from_iterator(texts, trainer=trainer, length=len(texts))
    out.mkdir(parents=True, exist_ok=True)
    tok.save(str(out / "tokenizer.json"), pretty=False)
    config: dict[str, Any] = {
        "tokenizer_class": "PreTrainedTokenizerFast",
        "model_max_length": model_max_length,
        "clean_up_tokenization_spaces": False,
    }
    if bos_token is not None:
        config["bos_token"] = bos_token
    if eos_token is not None:
        config["eos_token"] = eos_token
    (out / "tokenizer_config.json").write_bytes(encode_manifest(config))
    import tokenizers

    training = {
        "source_revision": python_source_revision() if source_revision is None else source_revision,
        "include": list(include),
        "exclude": list(exclude),
        "n_files": len(texts),
        "n_chars": sum(len(t) for t in texts),
        "vocab_size": vocab_size,
        "min_frequency": min_frequency,
        "special_tokens": list(special_tokens),
        "model": "byte-level BPE (tokenizers.models.BPE, ByteLevel pre-tokenizer and decoder)",
        "tokenizers_version": tokenizers.__version__,
    }
    (out / "training.json").write_bytes(encode_manifest(training))
    ident = tokenizer_identity(out)
    ident["training"] = training
    return ident


# ----------------------------------------------------------------------------------------------------
# The span walk
# ----------------------------------------------------------------------------------------------------


@dataclass
class _File:
    path: str
    text: str
    line_starts: list[int]  # char offset of each line start; one extra entry = len(text)
    overhead: int  # prompt tokens with an empty excerpt

    @property
    def n_lines(self) -> int:
        return len(self.line_starts) - 1


@dataclass(frozen=True)
class _Span:
    path: str
    line_start: int
    line_end: int
    trimmed: int
    ids: list[int]


@dataclass
class _Walker:
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
        self.encodes += 1
        return self.tok.encode(text, add_special_tokens=False)

    def prepare(self, path: str, text: str) -> _File:
        starts = [0, *(m.end() for m in re.finditer("\n", text))]
        if starts[-1] != len(text):
            starts.append(len(text))
        overhead = len(self.encode(self.render(path, "")[0]).ids)
        return _File(path, text, starts, overhead)

    def window(self, f: _File, s: int, need: int) -> tuple[npt.NDArray[np.int64], int]:
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

    def _code(self, f: _File, s: int, e: int) -> str:
        """Lines s..e (1-based inclusive) without the final newline."""
        code = f.text[f.line_starts[s - 1]: f.line_starts[e]]
        return code[:-1] if code.endswith("\n") else code

    def _counts(self, f: _File, s: int, ends: Sequence[int]) -> list[tuple[Any, int, int]]:
        """Exact encodings of the prompts for lines ``s..e``, ``e`` in ``ends`` (one parallel batch)."""
        rendered = [self.render(f.path, self._code(f, s, e)) for e in ends]
        self.encodes += len(rendered)
        encs = self.tok.encode_batch([r[0] for r in rendered], add_special_tokens=False)
        return [(enc, c0, c1) for enc, (_, c0, c1) in zip(encs, rendered, strict=True)]

    def span_at(self, f: _File, s: int) -> _Span | None:
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
        return _Span(f.path, s, max(line_end, s), max(excess, 0), ids)

    def file_spans(self, f: _File, budget: int, max_per_file: int | None) -> Iterable[_Span]:
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


# ----------------------------------------------------------------------------------------------------
# build_corpus
# ----------------------------------------------------------------------------------------------------


def _write_atomically(out_dir: Path, files: dict[str, bytes], *, overwrite: bool) -> None:
    if out_dir.exists() and not overwrite:
        raise CorpusError(f"{out_dir} already exists; refusing to overwrite a corpus",
                          hint="Choose a new --out, or pass --force to replace it.")
    out_dir.parent.mkdir(parents=True, exist_ok=True)
    tmp = out_dir.parent / f".{out_dir.name}.tmp-{os.getpid()}"
    old = out_dir.parent / f".{out_dir.name}.old-{os.getpid()}"
    for p in (tmp, old):
        if p.exists():
            shutil.rmtree(p)
    tmp.mkdir()
    for fname, data in files.items():
        (tmp / fname).write_bytes(data)
    if out_dir.exists():
        out_dir.rename(old)
        tmp.rename(out_dir)
        shutil.rmtree(old)
    else:
        tmp.rename(out_dir)


def build_corpus(
    source_dir: str | os.PathLike[str],
    tokenizer_path: str | os.PathLike[str],
    token_range: tuple[int, int] | None,
    n_cases: int,
    out_dir: str | os.PathLike[str],
    *,
    name: str | None = None,
    description: str | None = None,
    template: str | None = None,
    extend: str | os.PathLike[str] | None = None,
    chat_encoding: str | ChatEncoding | None = None,
    source_revision: str | None = None,
    source_repository: str | None = None,
    source_root: str | None = None,
    include: Sequence[str] | None = None,
    exclude: Sequence[str] | None = None,
    max_per_file: int | None = None,
    overwrite: bool = False,
) -> Corpus:
    """Build (or extend) a corpus of ``n_cases`` cases with ``token_range = (lo, hi)`` tokens each (inclusive)
    into ``out_dir`` and return it loaded and verified. See the module docstring for the walk.

    Without ``extend``, ``token_range`` is required and ``template`` defaults to :data:`DEFAULT_TEMPLATE`,
    ``include``/``exclude`` to :data:`DEFAULT_INCLUDE`/:data:`DEFAULT_EXCLUDE`, ``source_repository`` to
    ``"local"``, ``source_revision`` to ``"unknown"`` and ``source_root`` to the source directory's name.
    With ``extend`` (an existing corpus directory, verified first) every ``None`` parameter is taken from it,
    ``n_cases`` is the total after extension, and the tokenizer, range, template, chat encoding and source
    must equal the old corpus's. ``name`` defaults to ``out_dir``'s name. ``out_dir`` may equal ``extend``
    only with ``overwrite``. The directory is written atomically (temporary sibling, then rename).

    Raises ``SpecError`` for invalid parameters, ``CorpusError`` when the sources cannot supply ``n_cases``
    spans, the tokenizer is missing, ``extend`` does not verify or ``out_dir`` exists without ``overwrite``.
    """
    src = Path(source_dir)
    out = Path(out_dir)
    if not src.is_dir():
        raise CorpusError(f"source directory {src} not found",
                          hint="Pass --source DIR with the source files.")
    if n_cases < 1:
        raise SpecError(f"n_cases must be >= 1, got {n_cases}", hint="Pass --cases K with K >= 1.")
    if max_per_file is not None and max_per_file < 1:
        raise SpecError(f"max_per_file must be >= 1, got {max_per_file}", hint="Omit it for no limit.")

    ident = tokenizer_identity(tokenizer_path)
    chat_fn, chat_name = resolve_chat_encoding(chat_encoding)
    old: Corpus | None = load_corpus(extend) if extend is not None else None
    old_lines: list[bytes] = []
    if old is not None:
        om = old.manifest
        if token_range is None:
            token_range = (om.token_range.min, om.token_range.max)
        template = om.prompt_template if template is None else template
        if chat_encoding is None:
            chat_fn, chat_name = resolve_chat_encoding(om.chat_encoding)
        source_repository = om.source.repository if source_repository is None else source_repository
        source_revision = om.source.revision if source_revision is None else source_revision
        source_root = om.source.root if source_root is None else source_root
        last = om.history[-1] if om.history else None
        if include is None and last is not None:
            include = last.include
        if exclude is None and last is not None:
            exclude = last.exclude
        if max_per_file is None and last is not None:
            max_per_file = last.max_per_file
        description = om.description if description is None else description
        mismatches = []
        old_tok = om.tokenizer.model_dump()
        if old_tok["files"] != ident["files"]:
            mismatches.append(f"tokenizer: old {old_tok['name']} {old_tok['files']}, new {ident['name']} "
                              f"{ident['files']}")
        for label, a, b in (
            ("token range", (om.token_range.min, om.token_range.max), token_range),
            ("prompt template", om.prompt_template, template),
            ("chat encoding", om.chat_encoding, chat_name),
            ("source", (om.source.repository, om.source.revision, om.source.root),
             (source_repository, source_revision, source_root)),
        ):
            if a != b:
                mismatches.append(f"{label}: old {a!r}, new {b!r}")
        if mismatches:
            raise SpecError(
                f"cannot extend {old.path}: parameters differ from the old corpus: " + "; ".join(mismatches),
                hint="Extend with the old corpus's tokenizer and parameters (omit them to inherit).",
            )
        if n_cases < len(old.cases):
            raise SpecError(f"--cases {n_cases} is below the {len(old.cases)} cases of {old.path}",
                            hint="--cases is the total after extension.")
        if out.resolve() == Path(old.path).resolve() and not overwrite:
            raise CorpusError(f"{out} is the corpus being extended; refusing to overwrite it",
                              hint="Pass --force to extend in place, or choose a new --out.")
        raw_lines = (Path(old.path) / CASES_FILE).read_bytes().split(b"\n")
        old_lines = [ln + b"\n" for ln in raw_lines if ln.strip()]

    if token_range is None:
        raise SpecError("a token range is required", hint="Pass --tokens N or --tokens N-M.")
    lo, hi = token_range
    if not 1 <= lo <= hi:
        raise SpecError(f"token range ({lo}, {hi}) must satisfy 1 <= lo <= hi",
                        hint="Example: --tokens 511-512.")
    template = DEFAULT_TEMPLATE if template is None else template
    head_t, tail_t = _split_template(template)
    include = list(DEFAULT_INCLUDE if include is None else include)
    exclude = list(DEFAULT_EXCLUDE if exclude is None else exclude)
    source_repository = "local" if source_repository is None else source_repository
    source_revision = "unknown" if source_revision is None else source_revision
    source_root = src.resolve().name if source_root is None else source_root

    walker = _Walker(load_tokenizer(tokenizer_path), head_t, tail_t, chat_fn, lo, hi)
    entries: list[dict[str, Any]] = []
    lines: list[bytes] = list(old_lines)
    if old is not None:
        for c in old.manifest.cases:
            entries.append(c.model_dump())
            p = c.provenance
            walker.used.setdefault(p.path, []).append((p.line_start, p.line_end))

    need = n_cases - len(entries)
    if need > 0:
        for rel in list_source_files(src, include, exclude):
            text = _read_text(src / rel)
            if text is None or not text.strip():
                continue
            if max_per_file is not None and len(walker.used.get(rel, [])) >= max_per_file:
                continue
            if len(walker.render(rel, text)[0].encode("utf-8")) < lo:
                continue  # byte-level BPE: every token covers >= 1 byte, so this file cannot reach lo
            f = walker.prepare(rel, text)
            for span in walker.file_spans(f, need, max_per_file):
                case_id = case_id_for(len(entries))
                arr = np.asarray(span.ids, dtype=np.int32)
                entries.append({
                    "case_id": case_id,
                    "n_tokens": len(span.ids),
                    "sha256": ids_sha256(arr),
                    "provenance": {"path": span.path, "line_start": span.line_start,
                                   "line_end": span.line_end, "trimmed_tokens": span.trimmed},
                })
                lines.append(encode_case_line(case_id, arr))
                walker.used.setdefault(rel, []).append((span.line_start, span.line_end))
                need -= 1
            if need == 0:
                break
    if need > 0:
        raise CorpusError(
            f"the sources under {src} supply only {len(entries)} spans of {lo}-{hi} tokens, "
            f"{n_cases} requested (include {include}, exclude {exclude}, max_per_file {max_per_file})",
            hint="Widen --include, raise --max-per-file, or ask for fewer cases.",
        )

    n_old = len(old.cases) if old is not None else 0
    history = [h.model_dump() for h in old.manifest.history] if old is not None else []
    history.append({
        "action": "extend" if old is not None else "build",
        "first_case": entries[n_old]["case_id"] if n_cases > n_old else "",
        "last_case": entries[-1]["case_id"] if n_cases > n_old else "",
        "n_cases": n_cases,
        "include": include,
        "exclude": exclude,
        "max_per_file": max_per_file,
        "extended_from": (
            None if old is None
            else {"name": old.name, "manifest_sha256": old.manifest_sha256, "n_cases": n_old}
        ),
    })
    if description is None:
        description = (f"Prompts of {lo}-{hi} tokens: excerpts of {source_repository} {source_revision} "
                       f"{source_root}/ wrapped in the prompt template")
    manifest: dict[str, Any] = {
        "format_version": FORMAT_VERSION,
        "name": out.name if name is None else name,
        "description": description,
        "tokenizer": ident,
        "token_range": {"min": lo, "max": hi},
        "prompt_template": template,
        "chat_encoding": chat_name,
        "source": {"repository": source_repository, "revision": source_revision, "root": source_root},
        "history": history,
        "cases": entries,
    }
    _write_atomically(out, {MANIFEST_FILE: encode_manifest(manifest), CASES_FILE: b"".join(lines)},
                      overwrite=overwrite)
    return load_corpus(out)


def python_source_revision() -> str:
    """E.g. ``"CPython 3.11.7 Lib/"``: the interpreter whose standard library is the default source."""
    impl = sys.implementation.name
    label = "CPython" if impl == "cpython" else impl
    v = sys.version_info
    return f"{label} {v.major}.{v.minor}.{v.micro} Lib/"


def stdlib_dir() -> Path:
    """This interpreter's standard-library source directory (``Lib/`` of the installed CPython)."""
    import sysconfig

    return Path(sysconfig.get_paths()["stdlib"])
