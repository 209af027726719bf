"""Frozen token-ID corpora (stage 1, inputs): the format, and building, extending and synthesizing them.

- :mod:`.frozen`: the on-disk format (``manifest.json`` + ``cases.jsonl``), loading, verification,
  path resolution and cache salts; no tokenizer needed. Its public names used elsewhere are
  re-exported here (``from harness.inputs.corpus import load_corpus``).
- :mod:`.write`: the exact bytes written and the atomic write of a corpus directory.
- :mod:`.build`: the build driver (``dsv4h corpus build``) over :mod:`.sources` (file selection,
  prompt template, chat encoding, token range), :mod:`.walk` (spans within one file) and
  :mod:`.train` (training toy tokenizers).
- :mod:`.synth`: corpora drawn from length distributions and imported from ShareGPT files.
- :mod:`.random_ids`: random token-ID prompts for a quick screen (``dsv4h bench``).
"""

from __future__ import annotations

from harness.inputs.corpus.frozen import (
    CASES_FILE,
    MANIFEST_FILE,
    Case,
    Corpus,
    cache_salt,
    load_corpus,
    resolve_corpus_path,
    verify_corpus,
)

__all__ = [
    "CASES_FILE",
    "MANIFEST_FILE",
    "Case",
    "Corpus",
    "cache_salt",
    "load_corpus",
    "resolve_corpus_path",
    "verify_corpus",
]
