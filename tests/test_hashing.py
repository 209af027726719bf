"""Hashes of token IDs, files and canonical JSON: known answers and round trips."""

from __future__ import annotations

import hashlib
import json
import struct
from pathlib import Path

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

from harness.hashing import (
    INT32_MAX,
    INT32_MIN,
    canonical_json,
    ids_hash16,
    ids_le_int32_bytes,
    ids_sha256,
    sha256_file,
    sha256_json,
)

FRANCE_OUTPUT_IDS = [671, 6102, 294, 8760, 344, 2619, 51119, 42499, 1]


def test_france_output_hash16_known_answer() -> None:
    assert ids_hash16(FRANCE_OUTPUT_IDS) == "6f41fe2f01d52507"
    assert ids_sha256(FRANCE_OUTPUT_IDS).startswith("6f41fe2f01d52507")
    assert len(ids_sha256(FRANCE_OUTPUT_IDS)) == 64


def test_packing_is_little_endian_int32() -> None:
    assert ids_le_int32_bytes([1, 256, -1]) == b"\x01\x00\x00\x00\x00\x01\x00\x00\xff\xff\xff\xff"
    assert ids_sha256([]) == hashlib.sha256(b"").hexdigest()


@pytest.mark.parametrize("dtype", [np.int32, np.int64, np.uint16, np.dtype(">i4")])
def test_array_dtypes_hash_like_lists(dtype: np.dtype[np.generic] | type) -> None:
    assert ids_sha256(np.asarray(FRANCE_OUTPUT_IDS, dtype=dtype)) == ids_sha256(FRANCE_OUTPUT_IDS)


def test_bad_ids_are_refused() -> None:
    with pytest.raises(ValueError, match="int32"):
        ids_sha256([INT32_MAX + 1])
    with pytest.raises(ValueError, match="int32"):
        ids_sha256(np.asarray([2**31], dtype=np.uint32))
    with pytest.raises(TypeError, match="integers"):
        ids_sha256(np.asarray([1.0, 2.0]))
    with pytest.raises(ValueError, match="one-dimensional"):
        ids_sha256(np.zeros((2, 2), dtype=np.int32))


def test_canonical_json_is_sorted_compact_utf8() -> None:
    assert canonical_json({"b": 1, "a": [1, 2], "é": "ü"}) == '{"a":[1,2],"b":1,"é":"ü"}'.encode()
    assert sha256_json({"x": 1, "y": {"b": 2, "a": 1}}) == sha256_json({"y": {"a": 1, "b": 2}, "x": 1})
    assert sha256_json({"x": 1}) == hashlib.sha256(b'{"x":1}').hexdigest()
    with pytest.raises(ValueError, match="not JSON compliant"):
        canonical_json({"x": float("nan")})


def test_sha256_file(tmp_path: Path) -> None:
    p = tmp_path / "f.bin"
    data = bytes(range(256)) * 5000  # > 1 MiB chunk
    p.write_bytes(data)
    assert sha256_file(p) == hashlib.sha256(data).hexdigest()


@given(st.lists(st.integers(INT32_MIN, INT32_MAX), max_size=200))
def test_ids_sha256_matches_numpy_and_struct_packing(ids: list[int]) -> None:
    packed = ids_le_int32_bytes(ids)
    assert packed == np.asarray(ids, dtype="<i4").tobytes() == struct.pack(f"<{len(ids)}i", *ids)
    assert np.frombuffer(packed, dtype="<i4").tolist() == ids
    assert ids_sha256(ids) == hashlib.sha256(packed).hexdigest()
    assert ids_sha256(np.asarray(ids, dtype=np.int64)) == ids_sha256(ids)
    assert ids_hash16(ids) == ids_sha256(ids)[:16]


@given(st.dictionaries(st.text(max_size=5), st.integers() | st.text(max_size=5), max_size=8))
def test_canonical_json_round_trip(obj: dict[str, int | str]) -> None:
    assert json.loads(canonical_json(obj)) == obj
    assert canonical_json(json.loads(canonical_json(obj))) == canonical_json(obj)
