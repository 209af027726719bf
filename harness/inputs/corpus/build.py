"""Build frozen token-ID corpora from source files with a HF ``tokenizers`` tokenizer (the build driver).

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

Contract of this module: :func:`build_corpus` resolves and checks the parameters (inheriting them from the
corpus being extended), drives the walk over the files and writes the corpus directory atomically. The
pieces live in sibling modules and are re-exported here, so ``harness.inputs.corpus.build`` stays the one
import path: :mod:`.sources` (file selection, template, chat encoding, token range),
:mod:`.walk` (steps 2-4 within one file) and :mod:`.train` (training toy tokenizers).
"""

from __future__ import annotations

import os
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from harness.errors import CorpusError, SpecError
from harness.hashing import ids_sha256
from harness.inputs.corpus.frozen import (
    CASES_FILE,
    FORMAT_VERSION,
    Corpus,
    load_corpus,
)
from harness.inputs.corpus.sources import (
    DEFAULT_EXCLUDE,
    DEFAULT_INCLUDE,
    DEFAULT_TEMPLATE,
    STDLIB_EXCLUDE,
    ChatEncoding,
    list_source_files,
    parse_token_range,
    python_source_revision,
    read_source_text,
    resolve_chat_encoding,
    split_template,
    stdlib_dir,
)
from harness.inputs.corpus.train import DEEPSEEK_SPECIAL_TOKENS, TINY_SPECIAL_TOKENS, train_tokenizer
from harness.inputs.corpus.walk import SpanWalker
from harness.inputs.corpus.write import case_id_for, encode_case_line, history_steps, write_corpus
from harness.inputs.tokenizer import load_tokenizer, tokenizer_identity

# The public names of the sibling modules are re-exported: ``harness.inputs.corpus.build`` is the import path
# of the whole build (CLI, tests, benchmarks).
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


def deepseek_v4_chat(prompt: str) -> str:
    """Wrap a user prompt the way the report's France input IDs are laid out (non-thinking mode).

    DeepSeek-V4 ships no Jinja chat template; its encoding is BOS, ``<｜User｜>``, the prompt,
    ``<｜Assistant｜>``, ``</think>`` (ids 0, 128803, ..., 128804, 128822 in the real tokenizer). With the
    simulation tokenizer these markers are single special tokens. Use as
    ``--chat-encoding harness.inputs.corpus.build:deepseek_v4_chat``.
    """
    return f"<｜begin▁of▁sentence｜><｜User｜>{prompt}<｜Assistant｜></think>"


# ----------------------------------------------------------------------------------------------------
# Parameters: given, inherited from the corpus being extended, then defaulted
# ----------------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class _Params:
    """The parameters of a build as given (``None`` = not given), then as inherited from an old corpus."""

    token_range: tuple[int, int] | None
    template: str | None
    chat_fn: ChatEncoding | None
    chat_name: str | None
    source_repository: str | None
    source_revision: str | None
    source_root: str | None
    include: Sequence[str] | None
    exclude: Sequence[str] | None
    max_per_file: int | None
    description: str | None


def _check_request(src: Path, n_cases: int, max_per_file: int | None) -> None:
    if not src.is_dir():
        raise CorpusError(f"source directory {src} not found",
                          hint="Pass --source DIR with the source files.")
    if n_cases < 1:
        raise SpecError(f"n_cases must be >= 1, got {n_cases}", hint="Pass --cases K with K >= 1.")
    if max_per_file is not None and max_per_file < 1:
        raise SpecError(f"max_per_file must be >= 1, got {max_per_file}", hint="Omit it for no limit.")


def _inherit(old: Corpus, p: _Params, *, chat_given: bool) -> _Params:
    """Every parameter not given taken from ``old`` (include, exclude and max_per_file from its last step)."""
    om = old.manifest
    last = om.history[-1] if om.history else None
    chat_fn, chat_name = (p.chat_fn, p.chat_name) if chat_given else resolve_chat_encoding(om.chat_encoding)
    return _Params(
        token_range=(om.token_range.min, om.token_range.max) if p.token_range is None else p.token_range,
        template=om.prompt_template if p.template is None else p.template,
        chat_fn=chat_fn,
        chat_name=chat_name,
        source_repository=om.source.repository if p.source_repository is None else p.source_repository,
        source_revision=om.source.revision if p.source_revision is None else p.source_revision,
        source_root=om.source.root if p.source_root is None else p.source_root,
        include=last.include if p.include is None and last is not None else p.include,
        exclude=last.exclude if p.exclude is None and last is not None else p.exclude,
        max_per_file=last.max_per_file if p.max_per_file is None and last is not None else p.max_per_file,
        description=om.description if p.description is None else p.description,
    )


def _check_extension(old: Corpus, p: _Params, ident: dict[str, Any], n_cases: int, out: Path,
                     overwrite: bool) -> None:
    """Refuse an extension whose (inherited) parameters differ from ``old``'s, that shrinks it, or that
    would overwrite it without ``overwrite``."""
    om = old.manifest
    mismatches = []
    old_tok = om.tokenizer.model_dump()
    if old_tok["files"] != ident["files"]:
        mismatches.append(f"tokenizer: old {old_tok['name']} {old_tok['files']}, new {ident['name']} "
                          f"{ident['files']}")
    for label, a, b in (
        ("token range", (om.token_range.min, om.token_range.max), p.token_range),
        ("prompt template", om.prompt_template, p.template),
        ("chat encoding", om.chat_encoding, p.chat_name),
        ("source", (om.source.repository, om.source.revision, om.source.root),
         (p.source_repository, p.source_revision, p.source_root)),
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


def _checked_range(token_range: tuple[int, int] | None) -> tuple[int, int]:
    if token_range is None:
        raise SpecError("a token range is required", hint="Pass --tokens N or --tokens N-M.")
    lo, hi = token_range
    if not 1 <= lo <= hi:
        raise SpecError(f"token range ({lo}, {hi}) must satisfy 1 <= lo <= hi",
                        hint="Example: --tokens 511-512.")
    return lo, hi


# ----------------------------------------------------------------------------------------------------
# The walk over the files, and the manifest
# ----------------------------------------------------------------------------------------------------


def _walk_sources(walker: SpanWalker, src: Path, include: Sequence[str], exclude: Sequence[str],
                  max_per_file: int | None, need: int, entries: list[dict[str, Any]], lines: list[bytes]) -> int:
    """Append up to ``need`` new cases (manifest entries and case lines), file by file in path order;
    returns how many are still missing."""
    for rel in list_source_files(src, include, exclude):
        text = read_source_text(src / rel)
        if text is None or not text.strip():
            continue
        if max_per_file is not None and len(walker.used.get(rel, [])) >= max_per_file:
            continue
        if len(walker.render(rel, text)[0].encode("utf-8")) < walker.lo:
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
    return need


# ----------------------------------------------------------------------------------------------------
# build_corpus
# ----------------------------------------------------------------------------------------------------


def build_corpus(  # noqa: PLR0913 - one keyword per `dsv4h corpus build` option
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
    _check_request(src, n_cases, max_per_file)
    ident = tokenizer_identity(tokenizer_path)
    chat_fn, chat_name = resolve_chat_encoding(chat_encoding)
    p = _Params(token_range, template, chat_fn, chat_name, source_repository, source_revision, source_root,
                include, exclude, max_per_file, description)
    old: Corpus | None = load_corpus(extend) if extend is not None else None
    old_lines: list[bytes] = []
    if old is not None:
        p = _inherit(old, p, chat_given=chat_encoding is not None)
        _check_extension(old, p, ident, n_cases, out, overwrite)
        raw_lines = (Path(old.path) / CASES_FILE).read_bytes().split(b"\n")
        old_lines = [ln + b"\n" for ln in raw_lines if ln.strip()]

    lo, hi = _checked_range(p.token_range)
    template = DEFAULT_TEMPLATE if p.template is None else p.template
    head_t, tail_t = split_template(template)
    includes = list(DEFAULT_INCLUDE if p.include is None else p.include)
    excludes = list(DEFAULT_EXCLUDE if p.exclude is None else p.exclude)
    repository = "local" if p.source_repository is None else p.source_repository
    revision = "unknown" if p.source_revision is None else p.source_revision
    root = src.resolve().name if p.source_root is None else p.source_root

    walker = SpanWalker(load_tokenizer(tokenizer_path), head_t, tail_t, p.chat_fn, lo, hi)
    entries: list[dict[str, Any]] = []
    lines: list[bytes] = list(old_lines)
    if old is not None:
        for c in old.manifest.cases:
            entries.append(c.model_dump(exclude_none=True))
            prov = c.provenance
            walker.used.setdefault(prov.path, []).append((prov.line_start, prov.line_end))

    need = n_cases - len(entries)
    if need > 0:
        need = _walk_sources(walker, src, includes, excludes, p.max_per_file, need, entries, lines)
    if need > 0:
        raise CorpusError(
            f"the sources under {src} supply only {len(entries)} spans of {lo}-{hi} tokens, "
            f"{n_cases} requested (include {includes}, exclude {excludes}, max_per_file {p.max_per_file})",
            hint="Widen --include, raise --max-per-file, or ask for fewer cases.",
        )

    description = p.description
    if description is None:
        description = (f"Prompts of {lo}-{hi} tokens: excerpts of {repository} {revision} "
                       f"{root}/ wrapped in the prompt template")
    manifest: dict[str, Any] = {
        "format_version": FORMAT_VERSION,
        "name": out.name if name is None else name,
        "description": description,
        "tokenizer": ident,
        "token_range": {"min": lo, "max": hi},
        "prompt_template": template,
        "chat_encoding": p.chat_name,
        "source": {"repository": repository, "revision": revision, "root": root},
        "history": history_steps(old, entries, n_cases, includes, excludes, p.max_per_file),
        "cases": entries,
    }
    return write_corpus(out, manifest, b"".join(lines), overwrite=overwrite)
