"""Train toy byte-level BPE tokenizers on source files (the simulation and tiny CPU-engine tokenizers).

Contract: :func:`train_tokenizer` reads the selected source files (the same selection and text as a corpus
build, see :mod:`harness.inputs.corpus.sources`) and writes ``tokenizer.json``, ``tokenizer_config.json``
and ``training.json`` into one directory; nothing else is written. Deterministic for the same inputs and
``tokenizers`` version. Loading and identifying tokenizers lives in :mod:`harness.inputs.tokenizer`.
"""

from __future__ import annotations

import os
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from harness.errors import CorpusError, SpecError
from harness.inputs.corpus.sources import (
    DEFAULT_EXCLUDE,
    DEFAULT_INCLUDE,
    list_source_files,
    python_source_revision,
    read_source_text,
)
from harness.inputs.corpus.write import encode_manifest
from harness.inputs.tokenizer import tokenizer_identity

__all__ = ["DEEPSEEK_SPECIAL_TOKENS", "TINY_SPECIAL_TOKENS", "train_tokenizer"]

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


def train_tokenizer(  # noqa: PLR0913 - one keyword per `dsv4h corpus train-tokenizer` option
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
    texts = [t for t in (read_source_text(src / f) for f in files) if t is not None]
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
