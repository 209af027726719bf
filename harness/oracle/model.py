"""Oracles: frozen greedy completions, and the exact comparisons that check a service against them (pure).

An oracle file (``oracles/NAME.yaml``, format version 1; ``oracles/README.md`` is the normative description
and keeps the format history) pins one fixed-input greedy completion: the input token IDs, the expected
output token IDs and their short hash (:func:`harness.hashing.ids_hash16`), the ``max_new_tokens`` the
request uses, the tokenizer and service identity it belongs to, and two lists of sentences: what a pass
``certifies`` and what it ``does_not_certify`` (docs/evidence-rules.md, rule 2: a sentinel is not a quality claim).

This module holds the file model, ``load_oracle`` / ``dump_oracle`` / ``write_oracle``, and the pure
comparisons: ``compare_ids`` (first diverging position), ``repeat_verdict`` (the record notes' exact
repeated-capture gate, e.g. 70/70) and ``text_integrity`` (output IDs decode to the recorded text).
Nothing here talks to a server; :mod:`harness.oracle.live` does.

Positions are 0-based token indices into the output; capture numbers in ``RepeatResult`` are 1-based,
as reports print them ("captures 28 and 58 differed").
"""

from __future__ import annotations

import os
import re
from collections import Counter
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal, NamedTuple

import numpy as np
import numpy.typing as npt
import yaml
from pydantic import Field, field_validator, model_validator

from harness.errors import OracleError, SpecError
from harness.formats import Strict, atomic_write, parse_model
from harness.hashing import INT32_MAX, ids_hash16

__all__ = [
    "DEFAULT_MARGIN",
    "FORMAT_VERSION",
    "Decode",
    "Divergence",
    "IdComparison",
    "IdSeq",
    "Oracle",
    "OracleResult",
    "OracleTokenizer",
    "RepeatResult",
    "compare_ids",
    "count_text_failures",
    "dump_oracle",
    "evaluate",
    "integrity_over_records",
    "load_oracle",
    "parse_oracle",
    "repeat_verdict",
    "text_integrity",
    "write_oracle",
]

FORMAT_VERSION = 1
DEFAULT_MARGIN = 16
"""Extra new tokens allowed past the expected output when a file omits ``max_new_tokens``."""

_HEX64 = re.compile(r"^[0-9a-f]{64}$")
_HEX16 = r"^[0-9a-f]{16}$"

IdSeq = Sequence[int] | npt.NDArray[np.integer[Any]]
"""Token IDs: a sequence of ints or a 1-D integer numpy array."""

Decode = Callable[[Sequence[int]], str]
"""A tokenizer's decode: output token IDs -> text (special tokens skipped, as servers stream them)."""


# ----------------------------------------------------------------------------------------------------
# File model (format_version 1)
# ----------------------------------------------------------------------------------------------------



def _check_ids(ids: list[int], what: str) -> list[int]:
    if not ids:
        raise ValueError(f"{what} must not be empty")
    bad = [i for i in ids if isinstance(i, bool) or not 0 <= i <= INT32_MAX]
    if bad:
        raise ValueError(f"{what} must be token IDs in [0, 2**31 - 1]; got {bad[:5]}")
    return ids


class OracleTokenizer(Strict):
    """The tokenizer the IDs belong to: a name and, when known, the SHA-256 of each tokenizer file."""

    name: str = Field(min_length=1)
    files: dict[str, str] = Field(default_factory=dict)
    vocab_size: int | None = Field(default=None, ge=1)

    @field_validator("files")
    @classmethod
    def _hex_digests(cls, files: dict[str, str]) -> dict[str, str]:
        for fname, digest in files.items():
            if not _HEX64.fullmatch(digest):
                raise ValueError(f"files[{fname!r}] must be a 64-digit lowercase hex SHA-256")
        return files


class Oracle(Strict):
    """One oracle file (format version 1). See ``oracles/README.md`` for every field.

    Invariants checked on construction: ``output_hash16 == ids_hash16(expected_output_ids)``,
    ``max_new_tokens >= len(expected_output_ids)`` (default: that length plus ``DEFAULT_MARGIN``),
    every ID in ``[0, 2**31 - 1]``, and at least one sentence in ``certifies`` and ``does_not_certify``.
    """

    format_version: Literal[1] = 1
    name: str = Field(pattern=r"^[A-Za-z0-9_.-]+$")
    description: str = ""
    input_ids: list[int]
    expected_output_ids: list[int]
    expected_text: str | None = None
    output_hash16: str = Field(pattern=_HEX16)
    max_new_tokens: int | None = Field(default=None, ge=1)
    ignore_eos: bool = False
    tokenizer: OracleTokenizer | None = None
    service: dict[str, Any] = Field(default_factory=dict)
    certifies: list[str] = Field(min_length=1)
    does_not_certify: list[str] = Field(min_length=1)
    provenance: dict[str, Any] = Field(default_factory=dict)

    @field_validator("input_ids")
    @classmethod
    def _input_ids(cls, ids: list[int]) -> list[int]:
        return _check_ids(ids, "input_ids")

    @field_validator("expected_output_ids")
    @classmethod
    def _output_ids(cls, ids: list[int]) -> list[int]:
        return _check_ids(ids, "expected_output_ids")

    @field_validator("certifies", "does_not_certify")
    @classmethod
    def _sentences(cls, items: list[str]) -> list[str]:
        if any(not s.strip() for s in items):
            raise ValueError("sentences must not be empty")
        return items

    @model_validator(mode="after")
    def _consistent(self) -> Oracle:
        got = ids_hash16(self.expected_output_ids)
        if got != self.output_hash16:
            raise ValueError(
                f"output_hash16 is {self.output_hash16} but expected_output_ids hash to {got} "
                "(first 16 hex of SHA-256 over little-endian int32)"
            )
        n = len(self.expected_output_ids)
        if self.max_new_tokens is None:
            object.__setattr__(self, "max_new_tokens", n + DEFAULT_MARGIN)
        elif self.max_new_tokens < n:
            raise ValueError(f"max_new_tokens ({self.max_new_tokens}) is below the expected length ({n})")
        return self

    @property
    def request_max_new_tokens(self) -> int:
        """``max_new_tokens`` of the check request (always set after validation)."""
        assert self.max_new_tokens is not None
        return self.max_new_tokens


_HINT = "Fix the named field (oracles/README.md describes the format), or capture the oracle again with " \
        "`dsv4h oracle capture`."


def parse_oracle(raw: Any, *, source: str = "oracle") -> Oracle:
    """Validate a parsed oracle document; raise ``SpecError`` naming ``source`` and every bad field."""
    if not isinstance(raw, dict):
        raise SpecError(f"{source}: an oracle must be a mapping, got {type(raw).__name__}", hint=_HINT)
    version = raw.get("format_version")
    if version != FORMAT_VERSION:
        raise SpecError(
            f"{source}: unsupported format_version {version!r} (this dsv4h reads {FORMAT_VERSION})",
            hint="Upgrade dsv4h, or convert the file (oracles/README.md keeps the format history).",
        )
    return parse_model(Oracle, raw, source, what="invalid oracle:", hint=_HINT)


def load_oracle(path: str | os.PathLike[str]) -> Oracle:
    """Read and validate an oracle YAML file; any problem raises ``SpecError`` naming the file."""
    p = Path(path)
    try:
        text = p.read_text(encoding="utf-8")
    except FileNotFoundError:
        raise SpecError(f"{p}: no such oracle file", hint="Pass an existing file, e.g. oracles/france.yaml.") \
            from None
    except (OSError, UnicodeDecodeError) as exc:
        raise SpecError(f"{p}: cannot read oracle: {exc}", hint=_HINT) from exc
    try:
        raw = yaml.safe_load(text)
    except yaml.YAMLError as exc:
        mark = getattr(exc, "problem_mark", None)
        where = f":{mark.line + 1}:{mark.column + 1}" if mark is not None else ""
        raise SpecError(f"{p}{where}: YAML syntax error: {exc}", hint="Fix the YAML syntax.") from exc
    return parse_oracle(raw, source=str(p))


class _FlowList(list[int]):
    """A list of IDs written in YAML flow style (``[1, 2, 3]``)."""


def _represent_flow(dumper: yaml.SafeDumper, data: _FlowList) -> yaml.Node:
    return dumper.represent_sequence("tag:yaml.org,2002:seq", data, flow_style=True)


class _Dumper(yaml.SafeDumper):
    pass


_Dumper.add_representer(_FlowList, _represent_flow)


def dump_oracle(oracle: Oracle) -> str:
    """The YAML text of ``oracle``: fields in model order, ID lists in flow style, ``None`` fields left out.

    ``load_oracle`` of the written text gives back an equal oracle.
    """
    doc = oracle.model_dump(mode="json", exclude_none=True)
    doc["input_ids"] = _FlowList(doc["input_ids"])
    doc["expected_output_ids"] = _FlowList(doc["expected_output_ids"])
    header = f"# dsv4h oracle, format version {FORMAT_VERSION} (oracles/README.md). Do not edit by hand.\n"
    body = yaml.dump(doc, Dumper=_Dumper, sort_keys=False, allow_unicode=True, width=120)
    return header + body


def write_oracle(oracle: Oracle, path: str | os.PathLike[str], *, force: bool = False) -> Path:
    """Write ``oracle`` to ``path`` (parents created) and return the path.

    Refuses to replace an existing file (``OracleError``) unless ``force``; the write is atomic (a
    temporary file renamed into place), so a reader never sees half a file.
    """
    p = Path(path)
    if p.exists() and not force:
        raise OracleError(f"{p} already exists; an oracle is never overwritten silently",
                          hint="Choose another --out, or pass --force to replace it deliberately.")
    p.parent.mkdir(parents=True, exist_ok=True)
    try:
        atomic_write(p, dump_oracle(oracle).encode("utf-8"), exclusive=not force)
    except FileExistsError:
        raise OracleError(f"{p} already exists", hint="Pass --force to replace it.") from None
    return p


# ----------------------------------------------------------------------------------------------------
# Comparisons
# ----------------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class IdComparison:
    """Exact comparison of two output-ID sequences.

    ``first_divergence`` is the 0-based position of the first differing token, or ``min(lengths)`` when
    one sequence is a strict prefix of the other, or ``None`` when both are identical (then ``passed``).
    """

    passed: bool
    first_divergence: int | None
    expected_len: int
    got_len: int


def _ints(ids: IdSeq) -> list[int]:
    tolist = getattr(ids, "tolist", None)
    return [int(x) for x in (tolist() if tolist is not None else ids)]


def compare_ids(expected: IdSeq, got: IdSeq) -> IdComparison:
    """Compare ``got`` with ``expected`` token by token (lists, tuples or 1-D integer arrays)."""
    e, g = _ints(expected), _ints(got)
    first: int | None = None
    for i, (x, y) in enumerate(zip(e, g, strict=False)):
        if x != y:
            first = i
            break
    if first is None and len(e) != len(g):
        first = min(len(e), len(g))
    return IdComparison(passed=first is None, first_divergence=first, expected_len=len(e), got_len=len(g))


@dataclass(frozen=True)
class OracleResult:
    """The outcome of one oracle check against one service.

    ``passed`` means the request succeeded and its output IDs equal the expected IDs exactly.
    ``got_ids`` are the IDs received (partial when ``error`` is set); ``first_divergence`` is as in
    :class:`IdComparison`. ``text`` is ``decode(got_ids)`` when a tokenizer decode was available (else
    None) and ``text_matches`` whether it equals the oracle's ``expected_text`` (None when either is
    unknown); text never decides ``passed``. ``cached_tokens`` is the server's report (0 expected:
    each check uses a fresh cache salt).
    """

    oracle: str
    passed: bool
    got_ids: tuple[int, ...]
    got_hash16: str
    expected_hash16: str
    first_divergence: int | None
    expected_len: int
    text: str | None = None
    text_matches: bool | None = None
    finish_reason: str | None = None
    error: str | None = None
    service_url: str = ""
    cached_tokens: int | None = None
    cache_salt: str | None = None

    def summary(self) -> str:
        """One line: PASS/FAIL, oracle name, hashes, lengths and the first diverging position or error."""
        got = f"hash {self.got_hash16} ({len(self.got_ids)} tokens, finish {self.finish_reason or '-'})"
        where = f" at {self.service_url}" if self.service_url else ""
        if self.passed:
            line = f"PASS {self.oracle}: {got}{where}"
        elif self.error is not None:
            line = f"FAIL {self.oracle}: request failed after {len(self.got_ids)} tokens: {self.error}{where}"
        else:
            line = (f"FAIL {self.oracle}: got {got}, expected hash {self.expected_hash16} "
                    f"({self.expected_len} tokens); first divergence at position {self.first_divergence}{where}")
        if self.text_matches is False:
            line += " [decoded text differs from expected_text]"
        return line


def evaluate(
    oracle: Oracle,
    got_ids: IdSeq,
    *,
    error: str | None = None,
    finish_reason: str | None = None,
    service_url: str = "",
    decode: Decode | None = None,
    cached_tokens: int | None = None,
    cache_salt: str | None = None,
) -> OracleResult:
    """Judge a received output against ``oracle`` (pure): exact IDs, and no request error."""
    got = tuple(_ints(got_ids))
    cmp = compare_ids(oracle.expected_output_ids, got)
    text = decode(got) if decode is not None and got else None
    matches = None if text is None or oracle.expected_text is None else text == oracle.expected_text
    return OracleResult(
        oracle=oracle.name,
        passed=cmp.passed and error is None,
        got_ids=got,
        got_hash16=ids_hash16(list(got)),
        expected_hash16=oracle.output_hash16,
        first_divergence=cmp.first_divergence,
        expected_len=cmp.expected_len,
        text=text,
        text_matches=matches,
        finish_reason=finish_reason,
        error=error,
        service_url=service_url,
        cached_tokens=cached_tokens,
        cache_salt=cache_salt,
    )


class Divergence(NamedTuple):
    """One capture that differs from the reference: 1-based ``capture`` number, 0-based token ``position``."""

    capture: int
    position: int


@dataclass(frozen=True)
class RepeatResult:
    """The repeated-capture gate over ``n`` captures of the same request.

    ``unique`` counts distinct outputs; ``passed`` is true only when there is exactly one, no capture
    failed, and (when ``expected`` was given) it equals the expected output. ``reference_hash16`` is the
    output the others are compared with: the expected one when given, else the most common (ties go to
    the earliest). ``differing`` lists every capture whose output differs from the reference, in order, as
    (1-based capture number, first diverging position); ``errors`` lists failed captures as (capture
    number, reason). ``capture_hashes[k]`` is the hash16 of capture ``k + 1``.
    """

    n: int
    unique: int
    passed: bool
    reference_hash16: str
    differing: tuple[Divergence, ...]
    capture_hashes: tuple[str, ...]
    errors: tuple[tuple[int, str], ...] = ()
    expected_given: bool = False
    counts: Mapping[str, int] = field(default_factory=dict)

    def summary(self) -> str:
        """One line: ``PASS 70/70 identical (hash ...)`` or ``FAIL 68/70 ...`` with the differing captures."""
        same = self.n - len(self.differing)
        ref = "expected" if self.expected_given else "majority"
        head = f"{'PASS' if self.passed else 'FAIL'} {same}/{self.n} captures equal the {ref} output " \
               f"(hash {self.reference_hash16}), {self.unique} unique output{'s' if self.unique != 1 else ''}"
        if self.differing:
            shown = ", ".join(f"#{d.capture}@{d.position}" for d in self.differing[:10])
            more = f" and {len(self.differing) - 10} more" if len(self.differing) > 10 else ""
            head += f"; differing (capture@position): {shown}{more}"
        if self.errors:
            head += f"; {len(self.errors)} failed capture{'s' if len(self.errors) != 1 else ''}"
        return head


def repeat_verdict(
    outputs: Sequence[IdSeq],
    expected: IdSeq | None = None,
    *,
    errors: Mapping[int, str] | None = None,
) -> RepeatResult:
    """The exact repeated-capture gate (record notes: e.g. 70/70 identical) over captures in order.

    ``outputs[k]`` is the output of capture ``k + 1``; ``errors`` maps 1-based capture numbers to the
    reason a capture failed (its output, possibly partial, still counts). Raises ``ValueError`` for no
    captures.
    """
    if not outputs:
        raise ValueError("repeat_verdict needs at least one capture")
    outs = [tuple(_ints(o)) for o in outputs]
    counts = Counter(outs)
    if expected is not None:
        ref = tuple(_ints(expected))
    else:
        best = max(counts.values())
        ref = next(o for o in outs if counts[o] == best)  # earliest of the most common
    differing = tuple(
        Divergence(k + 1, cmp.first_divergence)
        for k, o in enumerate(outs)
        if (cmp := compare_ids(ref, o)).first_divergence is not None
    )
    errs = tuple(sorted((int(k), str(v)) for k, v in (errors or {}).items()))
    unique = len(counts)
    passed = unique == 1 and not differing and not errs
    hashes = tuple(ids_hash16(list(o)) for o in outs)
    hash_counts = dict(Counter(hashes))
    return RepeatResult(
        n=len(outs),
        unique=unique,
        passed=passed,
        reference_hash16=ids_hash16(list(ref)),
        differing=differing,
        capture_hashes=hashes,
        errors=errs,
        expected_given=expected is not None,
        counts=hash_counts,
    )


def text_integrity(output_ids: IdSeq, text: str, decode: Decode) -> bool:
    """True when ``decode(output_ids) == text``: the recorded text is what the IDs say (exact match)."""
    return decode(_ints(output_ids)) == text


def count_text_failures(pairs: Sequence[tuple[IdSeq, str]], decode: Decode) -> int:
    """How many (output IDs, text) pairs fail :func:`text_integrity`."""
    return sum(1 for ids, text in pairs if not text_integrity(ids, text, decode))


@dataclass(frozen=True)
class IntegrityResult:
    """ID/text integrity over records: ``checked`` records had cumulative text and output IDs,
    ``failed`` lists the rids whose decoded IDs differ from the streamed text; ``skipped`` had no
    text, failed, or streamed deltas (whose last event is not the whole answer)."""

    checked: int
    passed: int
    failed: tuple[str, ...]
    skipped: int

    @property
    def ok(self) -> bool:
        """True when every checked record passed and at least one was checked."""
        return self.checked > 0 and not self.failed


def integrity_over_records(records: Sequence[Any], decode: Decode) -> IntegrityResult:
    """Check ``decode(output_ids) == final_text`` for every successful record with cumulative text."""
    checked = passed = skipped = 0
    failed: list[str] = []
    for r in records:
        if not r.ok or r.final_text is None or r.output_mode != "cumulative":
            skipped += 1
            continue
        checked += 1
        if text_integrity(r.output_ids, r.final_text, decode):
            passed += 1
        else:
            failed.append(r.rid)
    return IntegrityResult(checked, passed, tuple(failed), skipped)
