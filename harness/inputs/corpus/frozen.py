"""Frozen token-ID corpora: on-disk format, loading, verification and cache salts (no tokenizer needed).

A corpus is a directory ``corpora/<name>/`` with two files (format version 1; ``corpora/README.md`` is the
normative description and keeps the format history):

``manifest.json``
    One JSON object: ``format_version`` (1), ``name``, ``description``, ``tokenizer`` (``name``, ``files``:
    file name -> SHA-256, optional ``vocab_size``), ``token_range`` (``min``/``max``, inclusive, in tokens),
    ``prompt_template``, ``chat_encoding`` (``"module:function"`` or null), ``source`` (``repository``,
    ``revision``, ``root``), ``history`` (one entry per build/extend step) and ``cases``: one entry per case
    in order, with ``case_id``, ``n_tokens``, ``sha256`` (of its IDs, see :mod:`harness.hashing`) and
    ``provenance`` (``path`` relative to the source root, ``line_start``/``line_end``: 1-based inclusive
    line numbers of the excerpt actually used, ``trimmed_tokens``).
``cases.jsonl``
    One compact JSON object per line, in manifest order: ``{"case_id": "c000", "input_ids": [...]}``.

The corpus identity is ``manifest_sha256``: the SHA-256 of the canonical JSON (:func:`harness.hashing.
canonical_json`) of the manifest object as stored, so re-indenting the file does not change it while any
change of content (a case hash, a provenance line, the tokenizer) does. Cases are checked against the manifest
on every load; the manifest itself is the trust anchor (record its hash wherever results are recorded).

This module never tokenizes or writes; the exact bytes written live in :mod:`harness.inputs.corpus.write`,
building in :mod:`harness.inputs.corpus.build`.
"""

from __future__ import annotations

import difflib
import json
import os
import re
from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal

import numpy as np
import numpy.typing as npt
from pydantic import ConfigDict, Field, model_validator

from harness.errors import CorpusError
from harness.formats import Strict, parse_model
from harness.hashing import INT32_MAX, ids_sha256, sha256_json

__all__ = [
    "CASES_FILE",
    "CORPUS_RECORD_FORMAT",
    "FORMAT_VERSION",
    "MANIFEST_FILE",
    "Case",
    "CaseEntry",
    "Corpus",
    "CorpusManifest",
    "HistoryStep",
    "Provenance",
    "SourceInfo",
    "TokenRange",
    "TokenizerIdentity",
    "cache_salt",
    "load_corpus",
    "parse_manifest",
    "resolve_corpus_path",
    "verify_corpus",
]

FORMAT_VERSION = 1
CORPUS_RECORD_FORMAT = 2  # the corpus record runs write to archives (Corpus.identity)
MANIFEST_FILE = "manifest.json"
CASES_FILE = "cases.jsonl"

_HEX64 = r"^[0-9a-f]{64}$"
_RESTORE_HINT = (
    "Rebuild the corpus with `dsv4h corpus build` (its manifest history lists the parameters) or restore "
    "its files from version control; never edit a frozen corpus by hand."
)


# ----------------------------------------------------------------------------------------------------
# Manifest schema (format_version 1)
# ----------------------------------------------------------------------------------------------------



class _StrictTypes(Strict):
    """Manifests are machine-written: no type coercion either."""

    model_config = ConfigDict(extra="forbid", frozen=True, strict=True)


class TokenizerIdentity(_StrictTypes):
    """Which tokenizer produced the IDs: a name and the SHA-256 of each of its files."""

    name: str = Field(min_length=1)
    files: dict[str, str] = Field(min_length=1)
    vocab_size: int | None = Field(default=None, ge=1)

    @model_validator(mode="after")
    def _hex_digests(self) -> TokenizerIdentity:
        for fname, digest in self.files.items():
            if not re.fullmatch(_HEX64, digest):
                raise ValueError(f"files[{fname!r}] must be a 64-digit lowercase hex SHA-256")
        return self


class TokenRange(_StrictTypes):
    """Inclusive bounds on every case's length, in tokens."""

    min: int = Field(ge=1)
    max: int = Field(ge=1)

    @model_validator(mode="after")
    def _ordered(self) -> TokenRange:
        if self.min > self.max:
            raise ValueError(f"min ({self.min}) must be <= max ({self.max})")
        return self


class SourceInfo(_StrictTypes):
    """Where the source text came from: repository, revision and the root the provenance paths start at."""

    repository: str
    revision: str
    root: str


class Provenance(_StrictTypes):
    """The excerpt behind one case: ``path`` under the source root and 1-based inclusive line numbers.

    ``line_end`` is the last line any kept token comes from (the line may be cut short when the excerpt was
    trimmed); ``trimmed_tokens`` is how many excerpt tokens were dropped to land in the token range.
    """

    path: str = Field(min_length=1)
    line_start: int = Field(ge=1)
    line_end: int = Field(ge=1)
    trimmed_tokens: int = Field(default=0, ge=0)

    @model_validator(mode="after")
    def _ordered(self) -> Provenance:
        if self.line_end < self.line_start:
            raise ValueError(f"line_end ({self.line_end}) must be >= line_start ({self.line_start})")
        return self


class CaseEntry(_StrictTypes):
    """A case as the manifest records it."""

    case_id: str = Field(pattern=r"^[A-Za-z0-9_.-]+$")
    n_tokens: int = Field(ge=1)
    sha256: str = Field(pattern=_HEX64)
    provenance: Provenance
    output_tokens: int | None = Field(
        default=None, ge=1, description="declared answer length (corpora drawn from a distribution or imported "
        "from a ShareGPT file, harness.inputs.corpus.synth); absent in source-code corpora")


class HistoryStep(_StrictTypes):
    """One build step: a fresh ``build`` or an ``extend`` that appended cases after an existing corpus."""

    action: Literal["build", "extend"]
    first_case: str
    last_case: str
    n_cases: int = Field(ge=0, description="cases in the corpus after this step")
    include: list[str]
    exclude: list[str]
    max_per_file: int | None = Field(default=None, ge=1)
    extended_from: dict[str, str | int] | None = None


class CorpusManifest(_StrictTypes):
    """``manifest.json``, format version 1 (see ``corpora/README.md``)."""

    format_version: Literal[1]
    name: str = Field(min_length=1)
    description: str
    tokenizer: TokenizerIdentity
    token_range: TokenRange
    prompt_template: str
    chat_encoding: str | None = None
    source: SourceInfo
    history: list[HistoryStep] = Field(default_factory=list)
    cases: list[CaseEntry]

    @model_validator(mode="after")
    def _unique_ids(self) -> CorpusManifest:
        seen: set[str] = set()
        dups: set[str] = set()
        for c in self.cases:
            (dups if c.case_id in seen else seen).add(c.case_id)
        if dups:
            raise ValueError(f"duplicate case_id in cases: {', '.join(sorted(set(dups)))}")
        return self


# ----------------------------------------------------------------------------------------------------
# In-memory corpus
# ----------------------------------------------------------------------------------------------------


@dataclass(frozen=True, eq=False)
class Case:
    """One frozen input: its ID, token IDs (read-only ``np.int32`` array), hash, length and provenance.

    ``sha256`` is :func:`harness.hashing.ids_sha256` of ``input_ids``; ``n_tokens == len(input_ids)``.
    Equality is identity; compare ``sha256`` to compare content.
    """

    case_id: str
    input_ids: npt.NDArray[np.int32]
    sha256: str
    n_tokens: int
    provenance: Mapping[str, Any]
    output_tokens: int | None = None

    @property
    def hash16(self) -> str:
        """First 16 hex digits of ``sha256`` (the report's short form)."""
        return self.sha256[:16]

    def ids_list(self) -> list[int]:
        """The IDs as a list of Python ints (for JSON request bodies)."""
        return [int(x) for x in self.input_ids.tolist()]


@dataclass(frozen=True, eq=False)
class Corpus:
    """A loaded, verified corpus. ``manifest_sha256`` identifies it; ``cases`` are in manifest order."""

    name: str
    path: Path
    manifest: CorpusManifest
    cases: tuple[Case, ...]
    manifest_sha256: str

    def __len__(self) -> int:
        return len(self.cases)

    def __iter__(self) -> Iterator[Case]:
        return iter(self.cases)

    @property
    def token_range(self) -> tuple[int, int]:
        """Inclusive (min, max) case length in tokens."""
        return (self.manifest.token_range.min, self.manifest.token_range.max)

    def case(self, case_id: str) -> Case:
        """The case with this id (raises ``CorpusError`` naming the corpus when absent)."""
        for c in self.cases:
            if c.case_id == case_id:
                return c
        raise CorpusError(
            f"corpus {self.name} ({self.path}) has no case {case_id!r}",
            hint=f"`dsv4h corpus show {self.path}` lists its {len(self.cases)} cases.",
        )

    def first(self, n: int) -> tuple[Case, ...]:
        """The first ``n`` cases in order (raises ``CorpusError`` if the corpus has fewer)."""
        if n < 0 or n > len(self.cases):
            raise CorpusError(
                f"corpus {self.name} has {len(self.cases)} cases, {n} requested",
                hint="Use a larger corpus or extend this one with `dsv4h corpus build --extend`.",
            )
        return self.cases[:n]

    def identity(self) -> dict[str, Any]:
        """A JSON-ready record of which corpus this is, as every run writes it to its archive's
        ``corpora.json`` (one per corpus role) and ledgers read it.

        Keys: ``name``, ``path`` (as loaded), ``manifest_sha256``, ``n_cases``, ``token_range`` (the
        manifest's declared [min, max] case length, tokens), ``tokenizer`` (its name),
        ``tokenizer_sha256`` (SHA-256 of the canonical JSON of the tokenizer's file -> SHA-256 map),
        ``vocab_size`` (or None), ``input_tokens`` ([min, max] length over the cases, tokens) and
        ``token_ids`` ([min, max] token id over every case).

        Record history (``record_format``, :data:`CORPUS_RECORD_FORMAT`):
          1 - (no key) formal matrices and sweeps wrote ``name``, ``path``, ``manifest_sha256``,
              ``n_cases``; ABBA screens also ``token_range`` and ``tokenizer`` (name).
          2 - (2026-12-01) every run writes every key above.
        """
        tok = self.manifest.tokenizer
        lengths = [c.n_tokens for c in self.cases]
        lows = [int(c.input_ids.min()) for c in self.cases if c.input_ids.size]
        highs = [int(c.input_ids.max()) for c in self.cases if c.input_ids.size]
        return {
            "record_format": CORPUS_RECORD_FORMAT,
            "name": self.name,
            "path": str(self.path),
            "manifest_sha256": self.manifest_sha256,
            "n_cases": len(self.cases),
            "token_range": [self.manifest.token_range.min, self.manifest.token_range.max],
            "tokenizer": tok.name,
            "tokenizer_sha256": sha256_json(dict(tok.files)),
            "vocab_size": tok.vocab_size,
            "input_tokens": [min(lengths), max(lengths)] if lengths else None,
            "token_ids": [min(lows), max(highs)] if lows else None,
        }


# ----------------------------------------------------------------------------------------------------
# Formats (pure)
# ----------------------------------------------------------------------------------------------------


def parse_manifest(raw: Any, *, source: str = MANIFEST_FILE) -> CorpusManifest:
    """Validate a parsed ``manifest.json`` object; raise ``CorpusError`` naming every bad field."""
    if not isinstance(raw, dict):
        raise CorpusError(f"{source}: a manifest must be a JSON object, got {type(raw).__name__}",
                          hint=_RESTORE_HINT)
    version = raw.get("format_version")
    if version != FORMAT_VERSION:
        raise CorpusError(
            f"{source}: unsupported format_version {version!r} (this dsv4h reads {FORMAT_VERSION})",
            hint="Upgrade dsv4h, or rebuild the corpus with this one (corpora/README.md has the history).",
        )
    return parse_model(CorpusManifest, raw, source, what="invalid manifest:", hint=_RESTORE_HINT, error=CorpusError)


def cache_salt(*parts: str | int) -> str:
    """A deterministic cache salt: 32 hex digits of SHA-256 over ``parts`` (e.g. run id, cell, round, case).

    Distinct parts give distinct salts (with overwhelming probability), so each prefill request can get a
    fresh salt that is still reproducible from the plan; 32 characters fit vLLM's 1-1024 limit.
    """
    return sha256_json(["dsv4h-cache-salt", *parts])[:32]


# ----------------------------------------------------------------------------------------------------
# Resolution, loading, verification
# ----------------------------------------------------------------------------------------------------


def _repo_root() -> Path:
    return Path(__file__).resolve().parents[3]


def missing_corpus_hint(directory: Path) -> str:
    """The hint for a corpus directory that does not exist: the closest corpus name beside it
    (``did you mean``), and what corpora that folder holds; else how to find or build one."""
    parent = directory.parent
    names = sorted(d.name for d in parent.iterdir() if (d / MANIFEST_FILE).is_file()) if parent.is_dir() else []
    close = difflib.get_close_matches(directory.name, names, n=1, cutoff=0.6)
    if close:
        return f"did you mean '{parent / close[0]}'? (corpora in {parent}: {', '.join(names)})"
    if names:
        return f"corpora in {parent}: {', '.join(names)}; or build one with `dsv4h corpus build`"
    return "Pass a corpus directory or a name under corpora/ (`ls corpora`), or build one with `dsv4h corpus build`."


def resolve_corpus_path(name_or_path: str | os.PathLike[str], *, cwd: Path | None = None) -> Path:
    """Find a corpus directory: an existing path as given, else ``corpora/NAME`` under ``cwd``, else under
    the dsv4h repository. Raises ``CorpusError`` listing every place tried."""
    base = Path.cwd() if cwd is None else cwd
    given = Path(name_or_path)
    direct = given if given.is_absolute() else base / given
    if direct.is_dir():
        return direct
    tried = [direct]
    if len(given.parts) == 1:
        for root in (base, _repo_root()):
            cand = root / "corpora" / given
            if cand.is_dir():
                return cand
            tried.append(cand)
    hints = [missing_corpus_hint(t) for t in tried]
    raise CorpusError(
        f"no corpus {str(name_or_path)!r}: tried " + ", ".join(str(t) for t in dict.fromkeys(tried)),
        hint=next((h for h in hints if h.startswith("did you mean")), hints[-1]),
    )


@dataclass(frozen=True)
class _Row:
    case_id: str
    ids: npt.NDArray[np.int32]
    line: int


def _read_manifest(directory: Path) -> tuple[CorpusManifest, str]:
    mpath = directory / MANIFEST_FILE
    try:
        text = mpath.read_text(encoding="utf-8")
    except FileNotFoundError:
        raise CorpusError(f"{mpath}: manifest not found", hint=_RESTORE_HINT) from None
    except (OSError, UnicodeDecodeError) as exc:
        raise CorpusError(f"{mpath}: cannot read manifest: {exc}", hint=_RESTORE_HINT) from exc
    try:
        raw = json.loads(text)
    except json.JSONDecodeError as exc:
        raise CorpusError(
            f"{mpath}: malformed JSON at line {exc.lineno}, column {exc.colno}: {exc.msg}", hint=_RESTORE_HINT
        ) from exc
    manifest = parse_manifest(raw, source=str(mpath))
    return manifest, sha256_json(raw)


def _parse_ids(value: Any, where: str) -> npt.NDArray[np.int32]:
    if not isinstance(value, list) or not value:
        raise CorpusError(f"{where}: input_ids must be a non-empty list of token IDs", hint=_RESTORE_HINT)
    try:
        arr = np.array(value)
    except (ValueError, OverflowError) as exc:
        raise CorpusError(f"{where}: input_ids is not a flat list of integers", hint=_RESTORE_HINT) from exc
    if arr.ndim != 1 or arr.dtype.kind not in "iu":
        raise CorpusError(f"{where}: input_ids must contain only integers", hint=_RESTORE_HINT)
    if int(arr.min()) < 0 or int(arr.max()) > INT32_MAX:
        raise CorpusError(f"{where}: token IDs must lie in [0, 2**31 - 1]", hint=_RESTORE_HINT)
    out = arr.astype(np.int32)
    out.setflags(write=False)
    return out


def _read_cases(cpath: Path) -> list[_Row]:
    try:
        data = cpath.read_bytes()
    except FileNotFoundError:
        raise CorpusError(f"{cpath}: cases file not found", hint=_RESTORE_HINT) from None
    except OSError as exc:
        raise CorpusError(f"{cpath}: cannot read cases: {exc}", hint=_RESTORE_HINT) from exc
    rows: list[_Row] = []
    for lineno, line in enumerate(data.split(b"\n"), start=1):
        if not line.strip():
            continue
        where = f"{cpath} line {lineno}"
        try:
            obj = json.loads(line)
        except (json.JSONDecodeError, UnicodeDecodeError) as exc:
            raise CorpusError(f"{where}: malformed JSON: {exc}", hint=_RESTORE_HINT) from exc
        if not isinstance(obj, dict) or set(obj) != {"case_id", "input_ids"}:
            keys = sorted(obj) if isinstance(obj, dict) else type(obj).__name__
            raise CorpusError(
                f"{where}: expected an object with exactly case_id and input_ids, got {keys}",
                hint=_RESTORE_HINT,
            )
        case_id = obj["case_id"]
        if not isinstance(case_id, str):
            raise CorpusError(f"{where}: case_id must be a string", hint=_RESTORE_HINT)
        rows.append(_Row(case_id, _parse_ids(obj["input_ids"], f"{where} (case {case_id})"), lineno))
    return rows


def _check(directory: Path) -> tuple[CorpusManifest, str, list[_Row], list[str], dict[str, list[str]]]:
    """Read and compare; structural failures raise ``CorpusError``, content mismatches are returned."""
    if not directory.is_dir():
        raise CorpusError(f"{directory}: corpus directory not found", hint=missing_corpus_hint(directory))
    manifest, manifest_sha = _read_manifest(directory)
    cpath = directory / CASES_FILE
    rows = _read_cases(cpath)

    problems: list[str] = []
    kinds: dict[str, list[str]] = {"changed": [], "missing": [], "extra": [], "duplicate": []}
    first_line: dict[str, int] = {}
    for row in rows:
        if row.case_id in first_line:
            kinds["duplicate"].append(row.case_id)
            problems.append(
                f"case {row.case_id} appears more than once in {cpath} "
                f"(lines {first_line[row.case_id]} and {row.line})"
            )
        else:
            first_line[row.case_id] = row.line
    by_id = {r.case_id: r for r in reversed(rows)}  # first occurrence wins
    lo, hi = manifest.token_range.min, manifest.token_range.max
    expected_ids = [c.case_id for c in manifest.cases]
    for entry in manifest.cases:
        found = by_id.get(entry.case_id)
        if found is None:
            kinds["missing"].append(entry.case_id)
            problems.append(f"case {entry.case_id} is in {MANIFEST_FILE} but missing from {cpath}")
            continue
        row = found
        n = int(row.ids.shape[0])
        digest = ids_sha256(row.ids)
        if digest != entry.sha256 or n != entry.n_tokens:
            kinds["changed"].append(entry.case_id)
            problems.append(
                f"case {entry.case_id} changed ({cpath} line {row.line}): manifest has {entry.n_tokens} "
                f"tokens sha256 {entry.sha256[:16]}..., file has {n} tokens sha256 {digest[:16]}..."
            )
        if not lo <= entry.n_tokens <= hi:
            problems.append(
                f"case {entry.case_id}: manifest n_tokens {entry.n_tokens} is outside "
                f"token_range [{lo}, {hi}]"
            )
    expected = set(expected_ids)
    for row in rows:
        if row.case_id not in expected and row.case_id not in kinds["extra"]:
            kinds["extra"].append(row.case_id)
            problems.append(f"case {row.case_id} ({cpath} line {row.line}) is not listed in {MANIFEST_FILE}")
    present = [r.case_id for r in rows if r.case_id in expected]
    present_unique = list(dict.fromkeys(present))
    order_expected = [c for c in expected_ids if c in by_id]
    if present_unique != order_expected:
        idx = next(i for i, (a, b) in enumerate(zip(present_unique, order_expected, strict=True)) if a != b)
        problems.append(
            f"{cpath}: cases are out of manifest order (position {idx}: expected "
            f"{order_expected[idx]}, found {present_unique[idx]})"
        )
    return manifest, manifest_sha, rows, problems, kinds


def verify_corpus(path: str | os.PathLike[str]) -> list[str]:
    """Check a corpus directory against its manifest; return one line per problem (empty when intact).

    Problems include changed, missing, extra, duplicated or reordered cases and lengths outside the token
    range. A missing directory or file, malformed JSON or an invalid manifest is also returned as a single
    problem rather than raised, so callers can report everything the same way.
    """
    try:
        _, _, _, problems, _ = _check(Path(path))
    except CorpusError as exc:
        return [exc.message]
    return problems


def load_corpus(path: str | os.PathLike[str]) -> Corpus:
    """Load and verify a corpus directory (``manifest.json`` + ``cases.jsonl``).

    Raises ``CorpusError`` for a missing directory or file, malformed JSON (naming file and line), an invalid
    or unsupported manifest, or any case that does not match the manifest: the message names every changed,
    missing, extra and duplicated case id and the cases file, with a hint to rebuild or restore.
    Loading a 64 x 8192-token corpus takes well under a second (JSON parsing plus vectorised numpy).
    """
    directory = Path(path)
    manifest, manifest_sha, rows, problems, kinds = _check(directory)
    if problems:
        summary = "; ".join(f"{k}: {', '.join(v)}" for k, v in kinds.items() if v) or "see details"
        raise CorpusError(
            f"corpus {manifest.name} ({directory / CASES_FILE}) does not match its manifest "
            f"[{summary}]\n  " + "\n  ".join(problems),
            hint=_RESTORE_HINT,
        )
    by_id = {r.case_id: r for r in rows}
    cases = tuple(
        Case(
            case_id=e.case_id,
            input_ids=by_id[e.case_id].ids,
            sha256=e.sha256,
            n_tokens=e.n_tokens,
            provenance=e.provenance.model_dump(),
            output_tokens=e.output_tokens,
        )
        for e in manifest.cases
    )
    return Corpus(
        name=manifest.name, path=directory, manifest=manifest, cases=cases, manifest_sha256=manifest_sha
    )
