"""Local Hugging Face tokenizers: their identity (name and SHA-256 of their files) and loading them
(edge module: files). Training one on source files is ``harness.inputs.corpus.build.train_tokenizer``."""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

from harness.errors import CorpusError
from harness.hashing import sha256_file

__all__ = ["TOKENIZER_FILES", "load_tokenizer", "tokenizer_identity"]

TOKENIZER_FILES = ("tokenizer.json", "tokenizer_config.json", "special_tokens_map.json")


def _tokenizer_dir_and_file(tokenizer_path: Path) -> tuple[Path | None, Path]:
    if tokenizer_path.is_dir():
        return tokenizer_path, tokenizer_path / "tokenizer.json"
    if tokenizer_path.name == "tokenizer.json":
        return tokenizer_path.parent, tokenizer_path
    return None, tokenizer_path


def tokenizer_identity(tokenizer_path: str | os.PathLike[str]) -> dict[str, Any]:
    """``{"name", "files": {file name: sha256}, "vocab_size"}`` for a tokenizer directory or JSON file.

    A directory (or a ``tokenizer.json`` inside one) is named after the directory and contributes
    ``tokenizer.json`` plus ``tokenizer_config.json`` / ``special_tokens_map.json`` when present; any other
    JSON file is named after its stem. Raises ``CorpusError`` when ``tokenizer.json`` is missing.
    """
    path = Path(tokenizer_path)
    directory, tfile = _tokenizer_dir_and_file(path)
    if not tfile.is_file():
        raise CorpusError(f"{tfile}: tokenizer file not found",
                          hint="Pass a tokenizer directory or its tokenizer.json (see corpora/tokenizers/).")
    if directory is None:
        files = {tfile.name: sha256_file(tfile)}
        name = tfile.stem
    else:
        files = {f: sha256_file(directory / f) for f in TOKENIZER_FILES if (directory / f).is_file()}
        name = directory.resolve().name
    return {"name": name, "files": files, "vocab_size": load_tokenizer(path).get_vocab_size()}


def load_tokenizer(tokenizer_path: str | os.PathLike[str]) -> Any:
    """A ``tokenizers.Tokenizer`` from a directory holding ``tokenizer.json`` or the file itself."""
    from tokenizers import Tokenizer

    _, tfile = _tokenizer_dir_and_file(Path(tokenizer_path))
    try:
        return Tokenizer.from_file(str(tfile))
    except Exception as exc:  # tokenizers raises plain Exception subclasses from Rust
        raise CorpusError(f"{tfile}: cannot load tokenizer: {exc}",
                          hint="Pass a HF tokenizers tokenizer.json (see corpora/tokenizers/).") from exc
