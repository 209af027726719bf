"""Kernel-level numeric comparisons of tensors (report section 10.3; pure).

The correctness hierarchy starts at the kernel: are two tensors bitwise equal, and if not, how far apart
are they? :func:`compare_arrays` answers with every kernel-level figure at once, never raising on a shape
or dtype mismatch (it reports it): element counts, bitwise-equal elements, max absolute error, relative
L2 error ``||a - b|| / ||b||`` (``b`` is the reference), cosine similarity, NaN and Inf counts of each
side, and how many elements lie within ``atol + rtol * |b|``. These are distinct claims
(docs/evidence-rules.md#rule-2-a-sentinel-is-not-a-quality-claim, rule 2): a high cosine does not make
a tensor bitwise equal, and neither says anything about model output.

Dtypes are named as safetensors names them (:data:`SAFETENSORS_DTYPES`, :func:`dtype_label`). BF16 has no
numpy dtype: it is widened exactly to float32 (bits << 16), and the file's dtype name is kept on the
tensor (:class:`LoadedTensor`) so comparisons still say "BF16". Reading and writing tensor files
(``.npy``, ``.npz``, ``.safetensors``) is the edge module :mod:`harness.store.tensor_files`.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import asdict, dataclass
from typing import Any

import numpy as np
import numpy.typing as npt

__all__ = [
    "SAFETENSORS_DTYPES",
    "FileComparison",
    "LoadedTensor",
    "TensorComparison",
    "bf16_bits_to_float32",
    "compare_arrays",
    "compare_tensor_sets",
    "compare_tensors",
    "dtype_label",
    "float32_to_bf16_bits",
]

SAFETENSORS_DTYPES: dict[str, np.dtype[Any]] = {
    "F64": np.dtype("<f8"),
    "F32": np.dtype("<f4"),
    "F16": np.dtype("<f2"),
    "BF16": np.dtype("<u2"),  # raw bits; widened to float32 on read
    "I64": np.dtype("<i8"),
    "I32": np.dtype("<i4"),
    "I16": np.dtype("<i2"),
    "I8": np.dtype("i1"),
    "U8": np.dtype("u1"),
    "BOOL": np.dtype("?"),
}
"""Safetensors dtype name -> the little-endian numpy dtype of its raw data."""

_LABELS = {np.dtype(v).newbyteorder("="): k for k, v in SAFETENSORS_DTYPES.items() if k != "BF16"}


def dtype_label(dtype: npt.DTypeLike) -> str:
    """The safetensors name of a numpy dtype (``F32``, ``I64``, ...), else numpy's own name."""
    dt = np.dtype(dtype)
    return _LABELS.get(dt.newbyteorder("="), dt.name)


def bf16_bits_to_float32(bits: npt.NDArray[np.uint16]) -> npt.NDArray[np.float32]:
    """Widen bfloat16 bit patterns (uint16) to float32, exactly: the bits become the high half."""
    return (np.asarray(bits, dtype=np.uint16).astype(np.uint32) << np.uint32(16)).view(np.float32)


def float32_to_bf16_bits(values: npt.ArrayLike) -> npt.NDArray[np.uint16]:
    """Round float32 values to bfloat16 bit patterns (round to nearest even; NaN stays NaN)."""
    f = np.asarray(values, dtype=np.float32)
    shape = f.shape
    flat = np.ascontiguousarray(f).reshape(-1)
    u = flat.view(np.uint32).astype(np.uint64)
    rounded = (u + np.uint64(0x7FFF) + ((u >> np.uint64(16)) & np.uint64(1))) >> np.uint64(16)
    out = rounded.astype(np.uint16)
    nan = np.isnan(flat)
    out[nan] = ((u[nan] >> np.uint64(16)) | np.uint64(0x40)).astype(np.uint16)  # keep a quiet NaN
    return out.reshape(shape)


# ----------------------------------------------------------------------------------------------------
# Tensors and comparisons
# ----------------------------------------------------------------------------------------------------


@dataclass(frozen=True, eq=False)
class LoadedTensor:
    """A tensor read from a file: ``name``, the values as a numpy array, and ``dtype`` as the file names it
    (``BF16`` tensors hold float32 values widened exactly from their bits)."""

    name: str
    array: npt.NDArray[Any]
    dtype: str

    @property
    def shape(self) -> tuple[int, ...]:
        """The tensor's shape."""
        return tuple(int(d) for d in self.array.shape)


@dataclass(frozen=True)
class TensorComparison:
    """Kernel-level comparison of tensor ``a`` against reference ``b``.

    When ``shape_match`` is false no element-wise figure is computed (they are None) and ``passed`` is
    false. ``n_elements`` is the element count compared. ``n_bitwise_equal`` counts elements whose bit
    patterns are identical (same dtype only, else None; a NaN with identical bits counts as equal; +0 and
    -0 do not). ``max_abs_error``, ``rel_l2`` (``||a - b||_2 / ||b||_2``; 0 when both are zero, inf when
    only ``b`` is) and ``cosine`` (``a.b / (|a||b|)``; 1 when both are zero vectors, 0 when one is) are
    computed in float64 over the ``n_finite`` positions where both values are finite. ``n_close`` counts
    elements with ``|a - b| <= atol + rtol * |b|``, NaN matching NaN and equal infinities matching.
    ``passed`` means shapes match and every element is close. Errors are in the tensors' own units.
    """

    name: str
    shape_a: tuple[int, ...]
    shape_b: tuple[int, ...]
    dtype_a: str
    dtype_b: str
    shape_match: bool
    dtype_match: bool
    n_elements: int | None
    n_bitwise_equal: int | None
    n_finite: int | None
    max_abs_error: float | None
    rel_l2: float | None
    cosine: float | None
    nan_a: int
    nan_b: int
    inf_a: int
    inf_b: int
    rtol: float
    atol: float
    n_close: int | None

    @property
    def passed(self) -> bool:
        """Shapes match and every element is within tolerance."""
        return self.shape_match and self.n_close is not None and self.n_close == self.n_elements

    @property
    def bitwise_equal(self) -> bool:
        """Same dtype and shape and every element bitwise identical."""
        return self.n_bitwise_equal is not None and self.n_bitwise_equal == self.n_elements

    def to_dict(self) -> dict[str, Any]:
        """JSON-ready dict (infinite figures as the strings ``"inf"``/``"-inf"``, NaN as ``"nan"``)."""
        out = asdict(self)
        for k, v in out.items():
            if isinstance(v, float) and not math.isfinite(v):
                out[k] = str(v)
            elif isinstance(v, tuple):
                out[k] = list(v)
        out["passed"] = self.passed
        out["bitwise_equal"] = self.bitwise_equal
        return out


def _count(mask: npt.NDArray[np.bool_]) -> int:
    return int(np.count_nonzero(mask))


def _nonfinite_counts(x: npt.NDArray[Any]) -> tuple[int, int]:
    if x.dtype.kind not in "fc":
        return 0, 0
    return _count(np.isnan(x)), _count(np.isinf(x))


def _bitwise_equal(a: npt.NDArray[Any], b: npt.NDArray[Any]) -> int:
    n = a.size
    if n == 0:
        return 0
    width = a.dtype.itemsize
    ab = np.ascontiguousarray(a.astype(a.dtype.newbyteorder("="), copy=False)).reshape(-1).view(np.uint8)
    bb = np.ascontiguousarray(b.astype(b.dtype.newbyteorder("="), copy=False)).reshape(-1).view(np.uint8)
    return _count(np.all(ab.reshape(n, width) == bb.reshape(n, width), axis=1))


def compare_arrays(
    a: npt.ArrayLike,
    b: npt.ArrayLike,
    *,
    rtol: float = 0.0,
    atol: float = 0.0,
    name: str = "",
    dtype_a: str | None = None,
    dtype_b: str | None = None,
) -> TensorComparison:
    """Compare ``a`` with the reference ``b`` (see :class:`TensorComparison` for every figure).

    ``dtype_a`` / ``dtype_b`` override the dtype labels (e.g. ``"BF16"`` for widened bfloat16 values);
    bitwise equality is only counted when the labels agree. Integer and boolean values are converted to
    float64 for the error figures (exact below 2**53). Raises ``ValueError`` for negative tolerances.
    """
    if rtol < 0 or atol < 0:
        raise ValueError(f"tolerances must be >= 0, got rtol={rtol}, atol={atol}")
    xa, xb = np.asarray(a), np.asarray(b)
    for side, x in (("a", xa), ("b", xb)):
        if x.dtype.kind not in "biuf":
            raise ValueError(f"{side}: only boolean, integer and real floating tensors compare, got {x.dtype}")
    la = dtype_a or dtype_label(xa.dtype)
    lb = dtype_b or dtype_label(xb.dtype)
    nan_a, inf_a = _nonfinite_counts(xa)
    nan_b, inf_b = _nonfinite_counts(xb)
    shape_match = xa.shape == xb.shape
    same_dtype = la == lb and xa.dtype.newbyteorder("=") == xb.dtype.newbyteorder("=")
    common: dict[str, Any] = {
        "name": name, "shape_a": tuple(int(d) for d in xa.shape), "shape_b": tuple(int(d) for d in xb.shape),
        "dtype_a": la, "dtype_b": lb, "shape_match": shape_match, "dtype_match": same_dtype,
        "nan_a": nan_a, "nan_b": nan_b, "inf_a": inf_a, "inf_b": inf_b, "rtol": float(rtol), "atol": float(atol),
    }
    if not shape_match:
        return TensorComparison(**common, n_elements=None, n_bitwise_equal=None, n_finite=None,
                                max_abs_error=None, rel_l2=None, cosine=None, n_close=None)
    bitwise = _bitwise_equal(xa, xb) if common["dtype_match"] else None
    fa = xa.astype(np.float64).reshape(-1)
    fb = xb.astype(np.float64).reshape(-1)
    finite = np.isfinite(fa) & np.isfinite(fb)
    da, db = fa[finite], fb[finite]
    with np.errstate(over="ignore"):
        diff = da - db  # inf only when the true difference exceeds float64
    max_abs = float(np.max(np.abs(diff))) if diff.size else 0.0
    scale = float(max(np.max(np.abs(da)), np.max(np.abs(db)))) if da.size else 0.0
    if scale > 0 and not 1e-100 < scale < 1e100:
        # rescale extreme magnitudes so norms and dot products neither overflow nor underflow
        da, db = da / scale, db / scale
        diff = da - db
    n_diff = float(np.linalg.norm(diff))
    n_b = float(np.linalg.norm(db))
    n_a = float(np.linalg.norm(da))
    if n_b > 0:
        rel = n_diff / n_b
    else:
        rel = 0.0 if n_diff == 0 else math.inf
    if n_a > 0 and n_b > 0:
        cos = float(np.dot(da / n_a, db / n_b))
        cos = max(-1.0, min(1.0, cos))
    else:
        cos = 1.0 if n_a == 0 and n_b == 0 else 0.0
    with np.errstate(invalid="ignore", over="ignore"):
        close = np.abs(fa - fb) <= atol + rtol * np.abs(fb)
    both_nan = np.isnan(fa) & np.isnan(fb)
    same_inf = np.isinf(fa) & (fa == fb)
    n_close = _count(close | both_nan | same_inf)
    return TensorComparison(**common, n_elements=int(xa.size), n_bitwise_equal=bitwise, n_finite=int(da.size),
                            max_abs_error=max_abs, rel_l2=rel, cosine=cos, n_close=n_close)


def compare_tensors(a: LoadedTensor, b: LoadedTensor, *, rtol: float = 0.0, atol: float = 0.0) -> TensorComparison:
    """:func:`compare_arrays` of two loaded tensors, keeping their file dtype names (named after ``a``)."""
    name = a.name if a.name == b.name else f"{a.name} vs {b.name}"
    return compare_arrays(a.array, b.array, rtol=rtol, atol=atol, name=name, dtype_a=a.dtype, dtype_b=b.dtype)


@dataclass(frozen=True)
class FileComparison:
    """Two tensor files compared tensor by tensor (by name; a single tensor on each side is compared
    whatever its name). ``only_in_a`` / ``only_in_b`` list names present on one side only."""

    path_a: str
    path_b: str
    comparisons: tuple[TensorComparison, ...]
    only_in_a: tuple[str, ...]
    only_in_b: tuple[str, ...]

    @property
    def passed(self) -> bool:
        """Every tensor present on both sides and within tolerance."""
        return not self.only_in_a and not self.only_in_b and all(c.passed for c in self.comparisons)

    def to_dict(self) -> dict[str, Any]:
        """JSON-ready dict."""
        return {"path_a": self.path_a, "path_b": self.path_b, "passed": self.passed,
                "only_in_a": list(self.only_in_a), "only_in_b": list(self.only_in_b),
                "tensors": [c.to_dict() for c in self.comparisons]}


def compare_tensor_sets(
    path_a: str, path_b: str, ta: Mapping[str, LoadedTensor], tb: Mapping[str, LoadedTensor], *,
    rtol: float = 0.0, atol: float = 0.0,
) -> FileComparison:
    """Compare the tensors of two files, already read (``b`` is the reference): by name, or the single
    tensor of each side whatever its name. ``path_a`` / ``path_b`` only label the result."""
    if len(ta) == 1 and len(tb) == 1:
        (x,), (y,) = ta.values(), tb.values()
        return FileComparison(path_a, path_b, (compare_tensors(x, y, rtol=rtol, atol=atol),), (), ())
    comps = tuple(compare_tensors(ta[n], tb[n], rtol=rtol, atol=atol) for n in ta if n in tb)
    return FileComparison(path_a, path_b, comps,
                          tuple(n for n in ta if n not in tb), tuple(n for n in tb if n not in ta))
