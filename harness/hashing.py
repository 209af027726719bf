"""Stable hashes of token IDs, files and JSON documents (pure).

Conventions used everywhere in dsv4h:

- Token IDs are hashed as **little-endian int32**, one 4-byte word per ID, no header, no separator
  (docs/oracles.md#token-id-hash). ``ids_hash16`` is the first 16 hex digits of that digest; the report's France output
  ``[671, 6102, 294, 8760, 344, 2619, 51119, 42499, 1]`` hashes to ``6f41fe2f01d52507``.
- JSON documents are hashed over their *canonical* encoding: keys sorted, compact separators
  (``","`` and ``":"``), UTF-8 without ASCII escaping, NaN/Infinity refused. Two documents with the same
  content therefore hash the same regardless of how they were indented on disk.
- All digests are lowercase hexadecimal SHA-256 strings (64 characters).
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Sequence
from os import PathLike
from typing import Any

import numpy as np
import numpy.typing as npt

__all__ = [
    "INT32_MAX",
    "INT32_MIN",
    "canonical_json",
    "ids_hash16",
    "ids_le_int32_bytes",
    "ids_sha256",
    "sha256_bytes",
    "sha256_file",
    "sha256_json",
]

INT32_MIN = -(2**31)
INT32_MAX = 2**31 - 1

_LE_INT32 = np.dtype("<i4")
_CHUNK = 1 << 20  # bytes read per step by sha256_file


def ids_le_int32_bytes(ids: Sequence[int] | npt.NDArray[np.integer[Any]]) -> bytes:
    """Pack token IDs as little-endian int32 words (4 bytes per ID, in order).

    Accepts any sequence of Python ints or a 1-D integer numpy array. Raises ``ValueError`` when an ID is
    outside the int32 range or the input is not one-dimensional, or ``TypeError`` for non-integer input
    (a float array, for example): silently wrapping or rounding would change the hash.
    """
    arr = np.asarray(ids)
    if arr.ndim != 1:
        raise ValueError(f"token IDs must be one-dimensional, got shape {arr.shape}")
    if arr.size == 0:
        return b""
    if not np.issubdtype(arr.dtype, np.integer):
        raise TypeError(f"token IDs must be integers, got dtype {arr.dtype}")
    if arr.dtype.itemsize > 4 or arr.dtype.kind == "u":
        lo, hi = int(arr.min()), int(arr.max())
        if lo < INT32_MIN or hi > INT32_MAX:
            raise ValueError(f"token IDs must fit in int32, got range [{lo}, {hi}]")
    return arr.astype(_LE_INT32, copy=False).tobytes()


def ids_sha256(ids: Sequence[int] | npt.NDArray[np.integer[Any]]) -> str:
    """Hex SHA-256 of ``ids`` packed as little-endian int32 (see :func:`ids_le_int32_bytes`)."""
    return hashlib.sha256(ids_le_int32_bytes(ids)).hexdigest()


def ids_hash16(ids: Sequence[int] | npt.NDArray[np.integer[Any]]) -> str:
    """First 16 hex digits of :func:`ids_sha256`: the short output hash the report prints."""
    return ids_sha256(ids)[:16]


def sha256_bytes(data: bytes) -> str:
    """Hex SHA-256 of a byte string."""
    return hashlib.sha256(data).hexdigest()


def sha256_file(path: str | PathLike[str]) -> str:
    """Hex SHA-256 of a file's bytes, read in 1 MiB chunks (raises ``OSError`` if it cannot be read)."""
    digest = hashlib.sha256()
    with open(path, "rb") as fh:
        while chunk := fh.read(_CHUNK):
            digest.update(chunk)
    return digest.hexdigest()


def canonical_json(obj: Any) -> bytes:
    """The canonical JSON encoding of ``obj``: sorted keys, compact separators, UTF-8, no NaN.

    Raises ``TypeError`` for values JSON cannot represent and ``ValueError`` for NaN or infinities.
    Tuples encode as lists, so ``canonical_json((1, 2)) == canonical_json([1, 2])``.
    """
    text = json.dumps(obj, sort_keys=True, separators=(",", ":"), ensure_ascii=False, allow_nan=False)
    return text.encode("utf-8")


def sha256_json(obj: Any) -> str:
    """Hex SHA-256 of :func:`canonical_json` of ``obj``."""
    return hashlib.sha256(canonical_json(obj)).hexdigest()
