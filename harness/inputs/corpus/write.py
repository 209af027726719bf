"""Writing frozen token-ID corpora (edge of :mod:`harness.inputs.corpus.frozen`): the exact bytes of
``cases.jsonl`` lines and ``manifest.json``, the manifest's history step, and the atomic write of a
corpus directory that is then loaded back verified. Used by building, extending and synthesizing
(:mod:`harness.inputs.corpus.build`, :mod:`harness.inputs.corpus.synth`).
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import numpy as np
import numpy.typing as npt

from harness.errors import CorpusError
from harness.formats import atomic_write_dir
from harness.inputs.corpus.frozen import CASES_FILE, MANIFEST_FILE, Corpus, load_corpus

__all__ = ["case_id_for", "encode_case_line", "encode_manifest", "history_steps", "write_corpus"]


def case_id_for(index: int) -> str:
    """The case id of the ``index``-th case (0-based): ``c000``, ``c001``, ... (more digits past 999)."""
    if index < 0:
        raise ValueError(f"case index must be >= 0, got {index}")
    return f"c{index:03d}"


def encode_case_line(case_id: str, ids: Sequence[int] | npt.NDArray[np.integer[Any]]) -> bytes:
    """One ``cases.jsonl`` line (compact JSON, ``\\n``-terminated) for a case: the exact bytes written."""
    id_list = np.asarray(ids).tolist()
    body = ",".join(str(int(x)) for x in id_list)
    return ('{"case_id":' + json.dumps(case_id) + ',"input_ids":[' + body + "]}\n").encode("utf-8")


def encode_manifest(manifest: Mapping[str, Any]) -> bytes:
    """``manifest.json`` bytes: indented (2 spaces), keys in the given order, UTF-8, trailing newline.

    The corpus hash does not depend on this layout (it is over canonical JSON).
    """
    return (json.dumps(manifest, indent=2, ensure_ascii=False, allow_nan=False) + "\n").encode("utf-8")


def history_steps(old: Corpus | None, entries: Sequence[Mapping[str, Any]], n_cases: int, include: list[str],
                  exclude: list[str], max_per_file: int | None) -> list[dict[str, Any]]:
    """``old``'s manifest history plus this build's (or extension's) step, for a corpus of ``n_cases``
    cases whose manifest entries are ``entries`` (the old cases first)."""
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
    return history


def write_corpus(out: Path, manifest: Mapping[str, Any], cases: bytes, *, overwrite: bool) -> Corpus:
    """Write a corpus directory (``manifest.json`` and ``cases.jsonl`` at once, atomically) and load
    it back verified. An existing ``out`` is refused unless ``overwrite``."""
    try:
        atomic_write_dir(out, {MANIFEST_FILE: encode_manifest(manifest), CASES_FILE: cases}, overwrite=overwrite)
    except FileExistsError:
        raise CorpusError(f"{out} already exists; refusing to overwrite a corpus",
                          hint="Choose a new --out, or pass --force to replace it.") from None
    return load_corpus(out)
