"""Tensor files read and written (edge module: files): ``.npy`` / ``.npz`` (numpy, no pickles) and
``.safetensors``, for the kernel-level comparisons of :mod:`harness.measure.tensors`.

``.safetensors`` is parsed here with numpy (the ``safetensors`` package is not needed): an 8-byte
little-endian header length, a UTF-8 JSON header mapping each name to ``dtype``, ``shape`` and
``data_offsets`` (relative to the end of the header; an optional ``__metadata__`` string map), then the
raw little-endian data. Supported dtypes: F64, F32, F16, BF16, I64, I32, I16, I8, U8, BOOL
(:data:`harness.measure.tensors.SAFETENSORS_DTYPES`); BF16 is widened exactly to float32 on read.

Everything here is usable from a notebook; nothing prints or exits. File problems raise ``OracleError``
naming the file.
"""

from __future__ import annotations

import itertools
import json
import math
import mmap
import os
import struct
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import numpy as np
import numpy.typing as npt

from harness.errors import OracleError
from harness.measure.tensors import (
    SAFETENSORS_DTYPES,
    FileComparison,
    LoadedTensor,
    bf16_bits_to_float32,
    compare_tensor_sets,
    dtype_label,
    float32_to_bf16_bits,
)

__all__ = ["compare_files", "encode_safetensors", "read_safetensors", "read_tensors"]

_MAX_HEADER = 100 * 1024 * 1024  # the safetensors reference limit


def compare_files(
    path_a: str | os.PathLike[str], path_b: str | os.PathLike[str], *, rtol: float = 0.0, atol: float = 0.0
) -> FileComparison:
    """Read both files (:func:`read_tensors`) and compare them
    (:func:`harness.measure.tensors.compare_tensor_sets`); ``b`` is the reference."""
    return compare_tensor_sets(str(path_a), str(path_b), read_tensors(path_a), read_tensors(path_b),
                               rtol=rtol, atol=atol)


def _bad(path: Path, what: str) -> OracleError:
    return OracleError(f"{path}: {what}", hint="Pass a .npy, .npz or .safetensors file written by numpy, "
                       "torch/safetensors or harness.store.tensor_files.encode_safetensors.")


def read_safetensors(path: str | os.PathLike[str]) -> dict[str, LoadedTensor]:
    """Parse a ``.safetensors`` file with numpy (memory-mapped, read-only arrays) in header order.

    Checks the header length, JSON, dtypes, shapes, that each tensor's byte range matches its shape and
    lies inside the data, and that ranges do not overlap. Raises ``OracleError`` naming the file.
    """
    p = Path(path)
    try:
        size = p.stat().st_size
        fh = p.open("rb")
    except OSError as exc:
        raise _bad(p, f"cannot read: {exc}") from exc
    with fh:
        if size < 8:
            raise _bad(p, f"too short for a safetensors file ({size} bytes)")
        buf = mmap.mmap(fh.fileno(), 0, access=mmap.ACCESS_READ)
    (hlen,) = struct.unpack("<Q", buf[:8])
    if hlen > min(_MAX_HEADER, size - 8):
        raise _bad(p, f"header length {hlen} exceeds the file ({size} bytes)")
    try:
        header = json.loads(bytes(buf[8 : 8 + hlen]).decode("utf-8"))
    except (UnicodeDecodeError, json.JSONDecodeError) as exc:
        raise _bad(p, f"header is not UTF-8 JSON: {exc}") from exc
    if not isinstance(header, dict):
        raise _bad(p, "header is not a JSON object")
    start = 8 + hlen
    data_len = size - start
    out: dict[str, LoadedTensor] = {}
    spans: list[tuple[int, int, str]] = []
    for name, entry in header.items():
        if name == "__metadata__":
            continue
        if not isinstance(entry, dict) or set(entry) != {"dtype", "shape", "data_offsets"}:
            raise _bad(p, f"tensor {name!r}: entry must have exactly dtype, shape, data_offsets")
        label, shape, offs = entry["dtype"], entry["shape"], entry["data_offsets"]
        if label not in SAFETENSORS_DTYPES:
            raise _bad(p, f"tensor {name!r}: unsupported dtype {label!r} (supported: "
                          f"{', '.join(SAFETENSORS_DTYPES)})")
        if not isinstance(shape, list) or not all(isinstance(d, int) and not isinstance(d, bool) and d >= 0
                                                  for d in shape):
            raise _bad(p, f"tensor {name!r}: shape must be a list of non-negative integers, got {shape!r}")
        if (not isinstance(offs, list) or len(offs) != 2
                or not all(isinstance(o, int) and not isinstance(o, bool) for o in offs)):
            raise _bad(p, f"tensor {name!r}: data_offsets must be [begin, end], got {offs!r}")
        begin, end = offs
        dt = SAFETENSORS_DTYPES[label]
        count = math.prod(shape)
        if not 0 <= begin <= end <= data_len:
            raise _bad(p, f"tensor {name!r}: data_offsets {offs} outside the {data_len}-byte data section")
        if end - begin != count * dt.itemsize:
            raise _bad(p, f"tensor {name!r}: {end - begin} bytes for shape {shape} of {label} "
                          f"({count * dt.itemsize} expected)")
        spans.append((begin, end, name))
        raw = np.frombuffer(buf, dtype=dt, count=count, offset=start + begin).reshape(shape)
        arr: npt.NDArray[Any] = bf16_bits_to_float32(raw) if label == "BF16" else raw.astype(dt.newbyteorder("="),
                                                                                              copy=False)
        out[name] = LoadedTensor(name=name, array=arr, dtype=label)
    spans.sort()
    for (_, e1, n1), (b2, _, n2) in itertools.pairwise(spans):
        if b2 < e1:
            raise _bad(p, f"tensors {n1!r} and {n2!r} overlap in the data section")
    return out


def read_tensors(path: str | os.PathLike[str]) -> dict[str, LoadedTensor]:
    """Read every tensor of a ``.npy`` (one tensor, named after the file's stem), ``.npz`` (by member name)
    or ``.safetensors`` file (by name). The format comes from the extension, else from the first bytes.
    Raises ``OracleError`` naming the file when it cannot be read or holds pickled objects."""
    p = Path(path)
    try:
        with p.open("rb") as fh:
            magic = fh.read(6)
    except OSError as exc:
        raise _bad(p, f"cannot read: {exc}") from exc
    suffix = p.suffix.lower()
    if suffix == ".safetensors" or (suffix not in (".npy", ".npz") and not magic.startswith((b"\x93NUMPY", b"PK"))):
        return read_safetensors(p)
    try:
        loaded = np.load(p, allow_pickle=False)
    except (ValueError, OSError, EOFError) as exc:
        raise _bad(p, f"not a readable numpy file: {exc}") from exc
    if isinstance(loaded, np.ndarray):
        return {p.stem: LoadedTensor(p.stem, loaded, dtype_label(loaded.dtype))}
    try:
        with loaded:
            arrays = {k: loaded[k] for k in loaded.files}
    except ValueError as exc:
        raise _bad(p, f"not a readable numpy file: {exc}") from exc
    return {k: LoadedTensor(k, v, dtype_label(v.dtype)) for k, v in arrays.items()}


def encode_safetensors(
    tensors: Mapping[str, npt.ArrayLike],
    *,
    metadata: Mapping[str, str] | None = None,
    bf16: frozenset[str] | set[str] = frozenset(),
) -> bytes:
    """Encode tensors as safetensors bytes (tensors laid out in the given order, header padded with
    spaces to a multiple of 8 bytes). Names in ``bf16`` are stored as BF16, rounded from their values
    (:func:`float32_to_bf16_bits`). Raises ``ValueError`` for a dtype safetensors cannot hold."""
    header: dict[str, Any] = {}
    if metadata:
        header["__metadata__"] = {str(k): str(v) for k, v in metadata.items()}
    blobs: list[bytes] = []
    offset = 0
    for name, value in tensors.items():
        arr = np.asarray(value)
        if name in bf16:
            label, data = "BF16", float32_to_bf16_bits(arr).astype("<u2").tobytes()
        else:
            label = dtype_label(arr.dtype)
            if label not in SAFETENSORS_DTYPES:
                raise ValueError(f"tensor {name!r}: dtype {arr.dtype} cannot be stored in safetensors")
            data = np.ascontiguousarray(arr, dtype=SAFETENSORS_DTYPES[label]).tobytes()
        header[name] = {"dtype": label, "shape": [int(d) for d in arr.shape],
                        "data_offsets": [offset, offset + len(data)]}
        blobs.append(data)
        offset += len(data)
    hbytes = json.dumps(header, separators=(",", ":")).encode("utf-8")
    hbytes += b" " * (-len(hbytes) % 8)
    return struct.pack("<Q", len(hbytes)) + hbytes + b"".join(blobs)
