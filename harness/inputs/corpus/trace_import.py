"""A frozen corpus from a Mooncake-format trace (``dsv4h corpus import-trace``; edge module: files).

One case per trace request, in trace order: the prompt is the shared-prefix token ids the trace implies
(:mod:`harness.inputs.trace`: the same hash id at the same block position is the identical block of ids,
seeded), ``output_tokens`` is the line's ``output_length``. The corpus has no tokenizer: like the quick
screen's random prompts (:mod:`harness.inputs.corpus.random_ids`) the manifest's tokenizer names the id
range. Provenance: ``path`` = ``<trace file name>``, ``line_start`` = ``line_end`` = the 1-based trace
line. The trace file's SHA-256 is the source ``revision``, and the import's parameters (block size, seed,
id range) are its history's ``include`` entry (:func:`trace_params`), so a replay can check that the
trace it schedules from is the one the corpus was built from.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import numpy as np
import numpy.typing as npt

from harness.errors import CorpusError
from harness.hashing import ids_sha256, sha256_file, sha256_json
from harness.inputs.corpus.frozen import FORMAT_VERSION, Corpus
from harness.inputs.corpus.random_ids import id_range
from harness.inputs.corpus.write import case_id_for, encode_case_line, write_corpus
from harness.inputs.trace import (
    DEFAULT_BLOCK_SIZE,
    DEFAULT_LIMITS,
    UNBOUNDED,
    TraceLimits,
    TraceRequest,
    prompt_array,
    read_trace,
)

__all__ = ["check_trace_matches", "import_trace", "trace_params"]

TRACE_REPOSITORY = "mooncake-trace"


def corpus_files(trace: list[TraceRequest], *, file_name: str, digest: str, name: str, block_size: int,
                 seed: int, low: int, high: int) -> tuple[dict[str, Any], bytes]:
    """The corpus of a parsed trace: (``manifest.json`` content, ``cases.jsonl`` bytes) (pure)."""
    params = {"format": "mooncake", "file": file_name, "block_size": block_size, "seed": seed,
              "id_range": [low, high]}
    blocks: dict[tuple[int, int], npt.NDArray[np.int64]] = {}
    entries: list[dict[str, Any]] = []
    lines: list[bytes] = []
    for i, r in enumerate(trace):
        ids = prompt_array(r, block_size, seed=seed, low=low, high=high, cache=blocks)
        cid = case_id_for(i)
        entries.append({"case_id": cid, "n_tokens": len(ids), "sha256": ids_sha256(ids),
                        "provenance": {"path": file_name, "line_start": r.line, "line_end": r.line,
                                       "trimmed_tokens": 0}, "output_tokens": r.output_length})
        lines.append(encode_case_line(cid, ids))
    lengths = [int(e["n_tokens"]) for e in entries]
    manifest = {"format_version": FORMAT_VERSION, "name": name,
                "description": f"Mooncake trace {file_name} (sha256 {digest[:16]}): {len(trace)} requests, "
                               f"shared prefixes in blocks of {block_size} tokens, seed {seed}",
                "tokenizer": {"name": f"none: random ids in [{low}, {high})",
                              "files": {"id-range": sha256_json({"low": low, "high": high})}, "vocab_size": high},
                "token_range": {"min": min(lengths), "max": max(lengths)}, "prompt_template": "{ids}",
                "chat_encoding": None,
                "source": {"repository": TRACE_REPOSITORY, "revision": digest, "root": ""},
                "history": [{"action": "build", "first_case": entries[0]["case_id"],
                             "last_case": entries[-1]["case_id"], "n_cases": len(entries),
                             "include": [json.dumps(params, sort_keys=True)], "exclude": [],
                             "max_per_file": None, "extended_from": None}],
                "cases": entries}
    return manifest, b"".join(lines)


def import_trace(source: Path, out: Path, *, block_size: int = DEFAULT_BLOCK_SIZE, seed: int = 0,
                 vocab_size: int | None = None, name: str | None = None, overwrite: bool = False,
                 limits: TraceLimits = DEFAULT_LIMITS) -> Corpus:
    """Write the corpus of the trace ``source`` to ``out`` and load it back verified (module docstring);
    the trace is refused (``CorpusError`` naming the file, line, field, limit and flag) past ``limits``,
    before any token is drawn."""
    trace = read_trace(source, block_size=block_size, limits=limits)
    low, high = id_range(vocab_size)
    manifest, lines = corpus_files(trace, file_name=source.name, digest=sha256_file(source), name=name or out.name,
                                   block_size=block_size, seed=seed, low=low, high=high)
    return write_corpus(out, manifest, lines, overwrite=overwrite)


def trace_params(corpus: Corpus) -> dict[str, Any]:
    """The import parameters of a trace corpus (``block_size``, ``seed``, ``id_range``, ``file``);
    ``CorpusError`` for a corpus not imported from a trace."""
    m = corpus.manifest
    if m.source.repository != TRACE_REPOSITORY or not m.history or not m.history[0].include:
        raise CorpusError(f"{corpus.path}: not a corpus imported from a trace",
                          hint="build it with 'dsv4h corpus import-trace TRACE.jsonl --out DIR'")
    params: dict[str, Any] = json.loads(m.history[0].include[0])
    return params


def check_trace_matches(corpus: Corpus, trace_path: Path) -> list[TraceRequest]:
    """The trace ``trace_path`` parsed with the corpus's block size, refused (``CorpusError``) unless it is
    the file the corpus was imported from (same SHA-256) with one request per case."""
    params = trace_params(corpus)
    digest = sha256_file(trace_path)
    if digest != corpus.manifest.source.revision:
        raise CorpusError(f"{trace_path}: sha256 {digest[:16]} is not the trace corpus {corpus.name} was imported "
                          f"from ({corpus.manifest.source.revision[:16]})",
                          hint="name the trace file the corpus was built from, or import this one")
    # the file the corpus was imported from (its digest matched): within whatever limits that import had
    trace = read_trace(trace_path, block_size=int(params["block_size"]), limits=UNBOUNDED)
    if len(trace) != len(corpus.cases):
        raise CorpusError(f"{trace_path}: {len(trace)} requests for {len(corpus.cases)} corpus cases",
                          hint="re-import the trace")
    return trace
