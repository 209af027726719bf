"""Kernel-level numeric comparisons and tensor-file readers: known answers, hand-written safetensors bytes."""

from __future__ import annotations

import json
import math
import struct
import subprocess
import sys
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from hypothesis.extra import numpy as hnp
from typer.testing import CliRunner

from harness.errors import OracleError
from harness.measure.tensors import bf16_bits_to_float32, compare_arrays, dtype_label, float32_to_bf16_bits
from harness.store.tensor_files import compare_files, encode_safetensors, read_safetensors, read_tensors

runner = CliRunner()


def safetensors_bytes(entries: list[tuple[str, str, list[int], bytes]], pad: bool = True,
                      metadata: dict[str, str] | None = None) -> bytes:
    """Hand-written safetensors: (name, dtype, shape, raw little-endian bytes) laid out in order."""
    header: dict[str, Any] = {"__metadata__": metadata} if metadata else {}
    off = 0
    for name, dtype, shape, raw in entries:
        header[name] = {"dtype": dtype, "shape": shape, "data_offsets": [off, off + len(raw)]}
        off += len(raw)
    h = json.dumps(header).encode()
    if pad:
        h += b" " * (-len(h) % 8)
    return struct.pack("<Q", len(h)) + h + b"".join(raw for *_, raw in entries)


# ---------------------------------------------------------------------------------------------- known answers


def test_relative_l2_cosine_max_abs_known_answers() -> None:
    c = compare_arrays(np.array([1.0, 2.0, 3.0]), np.array([1.0, 2.0, 4.0]))
    # ||a-b|| = 1, ||b|| = sqrt(21); a.b = 17, |a||b| = sqrt(14 * 21) = sqrt(294)
    assert c.rel_l2 == pytest.approx(0.2182178902359924, rel=1e-12)
    assert c.cosine == pytest.approx(0.9914601339836674, rel=1e-12)
    assert c.max_abs_error == 1.0
    assert c.n_elements == 3 and c.n_bitwise_equal == 2 and c.n_finite == 3
    assert c.shape_match and c.dtype_match and c.dtype_a == "F64"
    assert c.n_close == 2 and not c.passed and not c.bitwise_equal
    loose = compare_arrays(np.array([1.0, 2.0, 3.0]), np.array([1.0, 2.0, 4.0]), rtol=0.25)
    assert loose.n_close == 3 and loose.passed  # |3 - 4| = 1 <= 0.25 * 4


def test_identical_and_orthogonal_and_opposite() -> None:
    x = np.arange(12, dtype=np.float32).reshape(3, 4)
    same = compare_arrays(x, x.copy())
    assert same.bitwise_equal and same.passed and same.rel_l2 == 0.0 and same.cosine == pytest.approx(1.0)
    orth = compare_arrays(np.array([1.0, 0.0]), np.array([0.0, 1.0]))
    assert orth.cosine == 0.0 and orth.rel_l2 == pytest.approx(math.sqrt(2))
    opp = compare_arrays(np.array([1.0, -2.0]), np.array([-1.0, 2.0]))
    assert opp.cosine == pytest.approx(-1.0) and opp.rel_l2 == pytest.approx(2.0) and opp.max_abs_error == 4.0


def test_zero_vectors() -> None:
    z = compare_arrays(np.zeros(3), np.zeros(3))
    assert z.rel_l2 == 0.0 and z.cosine == 1.0 and z.passed
    one = compare_arrays(np.ones(3), np.zeros(3))
    assert one.rel_l2 == math.inf and one.cosine == 0.0
    assert one.to_dict()["rel_l2"] == "inf"


def test_extreme_magnitudes_do_not_overflow() -> None:
    huge = compare_arrays(np.array([1e308, -1e308]), np.array([-1e308, 1e308]))
    assert huge.max_abs_error == math.inf  # the true difference exceeds float64
    assert huge.cosine == pytest.approx(-1.0) and huge.rel_l2 == pytest.approx(2.0)
    tiny = compare_arrays(np.array([3e-310, 4e-310]), np.array([3e-310, 4e-310]))
    assert tiny.cosine == pytest.approx(1.0) and tiny.rel_l2 == 0.0


def test_shape_mismatch_is_reported_not_raised() -> None:
    c = compare_arrays(np.zeros((2, 3), np.float32), np.zeros((3, 2), np.float32), name="w")
    assert not c.shape_match and not c.passed
    assert c.shape_a == (2, 3) and c.shape_b == (3, 2)
    assert c.n_elements is None and c.max_abs_error is None and c.cosine is None and c.n_bitwise_equal is None


def test_dtype_mismatch_is_reported_and_not_bitwise() -> None:
    c = compare_arrays(np.array([1, 2], np.float32), np.array([1, 2], np.float64))
    assert not c.dtype_match and c.dtype_a == "F32" and c.dtype_b == "F64"
    assert c.n_bitwise_equal is None and c.passed and c.max_abs_error == 0.0


def test_nan_inf_counts_and_bitwise_nan() -> None:
    nan = np.float32("nan")
    a = np.array([1.0, nan, np.inf, -np.inf, 0.0], dtype=np.float32)
    b = np.array([1.0, nan, np.inf, 5.0, -0.0], dtype=np.float32)
    c = compare_arrays(a, b)
    assert (c.nan_a, c.nan_b, c.inf_a, c.inf_b) == (1, 1, 2, 1)
    # equal bits: 1.0, the identical NaN and +inf; -inf vs 5 differ; +0 vs -0 differ in the sign bit
    assert c.n_bitwise_equal == 3
    assert c.n_finite == 2 and c.max_abs_error == 0.0  # only positions 0 and 4 are finite on both sides
    assert c.n_close == 4  # NaN matches NaN, inf matches inf, 0 == -0 numerically; -inf vs 5 does not
    other_nan = np.array([1.0, np.float32(-np.nan)], dtype=np.float32)  # a different NaN bit pattern
    d = compare_arrays(np.array([1.0, nan], np.float32), other_nan)
    assert d.n_bitwise_equal == 1 and d.n_close == 2


def test_integers_and_bools() -> None:
    c = compare_arrays(np.array([1, 2, 3], np.int64), np.array([1, 2, 5], np.int64))
    assert c.dtype_a == "I64" and c.n_bitwise_equal == 2 and c.max_abs_error == 2.0
    b = compare_arrays(np.array([True, False]), np.array([True, True]))
    assert b.dtype_a == "BOOL" and b.n_bitwise_equal == 1 and b.nan_a == 0


def test_big_endian_npy_values_compare_bitwise(tmp_path: Path) -> None:
    le = np.array([1.5, -2.25], dtype="<f4")
    be = le.astype(">f4")
    c = compare_arrays(be, le)
    assert c.dtype_match and c.bitwise_equal


def test_bad_inputs() -> None:
    with pytest.raises(ValueError, match="tolerances"):
        compare_arrays(np.zeros(1), np.zeros(1), rtol=-1)
    with pytest.raises(ValueError, match="complex"):
        compare_arrays(np.zeros(1, np.complex64), np.zeros(1))


# ---------------------------------------------------------------------------------------------- bf16


def test_bf16_known_bits() -> None:
    bits = np.array([0x3F80, 0xC000, 0x3F00, 0x7FC0, 0x7F80, 0x0000, 0x8000], dtype=np.uint16)
    f = bf16_bits_to_float32(bits)
    assert f[:3].tolist() == [1.0, -2.0, 0.5] and np.isnan(f[3]) and f[4] == np.inf
    assert f.dtype == np.float32 and np.signbit(f[6])
    assert float32_to_bf16_bits(f).tolist() == bits.tolist()
    # round to nearest even: 1 + 2**-8 is halfway between 1 and 1 + 2**-7 -> even (1.0); a bit more -> up
    assert float32_to_bf16_bits(np.float32(1 + 2**-8)).tolist() == 0x3F80
    assert float32_to_bf16_bits(np.float32(1 + 2**-8 + 2**-12)).tolist() == 0x3F81


def test_read_hand_written_bf16_safetensors(tmp_path: Path) -> None:
    bits = np.array([[0x3F80, 0xC000], [0x7FC0, 0x7F80]], dtype="<u2")
    p = tmp_path / "bf16.safetensors"
    p.write_bytes(safetensors_bytes([("x", "BF16", [2, 2], bits.tobytes())]))
    (t,) = read_safetensors(p).values()
    assert t.name == "x" and t.dtype == "BF16" and t.shape == (2, 2) and t.array.dtype == np.float32
    assert t.array[0].tolist() == [1.0, -2.0] and np.isnan(t.array[1, 0]) and t.array[1, 1] == np.inf
    c = compare_files(p, p)
    (cmp,) = c.comparisons
    assert cmp.dtype_a == cmp.dtype_b == "BF16" and cmp.bitwise_equal and cmp.nan_a == 1 and cmp.inf_a == 1


# ---------------------------------------------------------------------------------------------- readers


def test_read_hand_written_multi_tensor_file(tmp_path: Path) -> None:
    entries = [
        ("a", "F32", [3], struct.pack("<3f", 1.0, 2.0, 3.0)),
        ("b", "I64", [2, 1], struct.pack("<2q", -5, 7)),
        ("c", "F16", [2], np.array([0.5, -1.0], "<f2").tobytes()),
        ("d", "BOOL", [2], b"\x01\x00"),
        ("e", "U8", [], b"\xff"),
        ("f", "I8", [2], b"\xff\x01"),
        ("g", "I16", [1], struct.pack("<h", -300)),
        ("h", "I32", [0], b""),
        ("i", "F64", [1], struct.pack("<d", math.pi)),
    ]
    p = tmp_path / "m.safetensors"
    p.write_bytes(safetensors_bytes(entries, pad=False, metadata={"format": "pt"}))
    t = read_tensors(p)
    assert list(t) == list("abcdefghi")
    assert t["a"].array.tolist() == [1.0, 2.0, 3.0] and t["a"].dtype == "F32"
    assert t["b"].array.tolist() == [[-5], [7]] and t["b"].array.dtype == np.int64
    assert t["c"].array.tolist() == [0.5, -1.0]
    assert t["d"].array.tolist() == [True, False]
    assert t["e"].shape == () and int(t["e"].array) == 255
    assert t["f"].array.tolist() == [-1, 1] and t["g"].array.tolist() == [-300]
    assert t["h"].shape == (0,) and t["i"].array.tolist() == [math.pi]


@pytest.mark.parametrize(
    ("mutate", "needle"),
    [
        (lambda b: b[:5], "too short"),
        (lambda b: struct.pack("<Q", 10**6) + b[8:], "header length"),
        (lambda b: struct.pack("<Q", 4) + b"[1] " + b"", "not a JSON object"),
        (lambda b: struct.pack("<Q", 4) + b"\xff\xfe{}", "not UTF-8 JSON"),
    ],
)
def test_malformed_safetensors(tmp_path: Path, mutate: Any, needle: str) -> None:
    good = safetensors_bytes([("a", "F32", [1], struct.pack("<f", 1.0))])
    p = tmp_path / "bad.safetensors"
    p.write_bytes(mutate(good))
    with pytest.raises(OracleError, match=needle) as ei:
        read_tensors(p)
    assert str(p) in str(ei.value)


@pytest.mark.parametrize(
    ("entry", "needle"),
    [
        ({"dtype": "F8_E4M3", "shape": [1], "data_offsets": [0, 1]}, "unsupported dtype"),
        ({"dtype": "F32", "shape": [2], "data_offsets": [0, 4]}, "4 bytes for shape"),
        ({"dtype": "F32", "shape": [1], "data_offsets": [0, 400]}, "outside"),
        ({"dtype": "F32", "shape": [-1], "data_offsets": [0, 4]}, "shape"),
        ({"dtype": "F32", "shape": [1]}, "exactly dtype"),
    ],
)
def test_bad_safetensors_entries(tmp_path: Path, entry: dict[str, Any], needle: str) -> None:
    h = json.dumps({"x": entry}).encode()
    p = tmp_path / "bad.safetensors"
    p.write_bytes(struct.pack("<Q", len(h)) + h + b"\x00" * 8)
    with pytest.raises(OracleError, match=needle):
        read_safetensors(p)


def test_overlapping_tensors_refused(tmp_path: Path) -> None:
    h = json.dumps({"x": {"dtype": "F32", "shape": [2], "data_offsets": [0, 8]},
                    "y": {"dtype": "F32", "shape": [1], "data_offsets": [4, 8]}}).encode()
    p = tmp_path / "o.safetensors"
    p.write_bytes(struct.pack("<Q", len(h)) + h + b"\x00" * 8)
    with pytest.raises(OracleError, match="overlap"):
        read_safetensors(p)


def test_npy_npz_and_cross_format(tmp_path: Path) -> None:
    x = np.linspace(-1, 1, 6, dtype=np.float32).reshape(2, 3)
    np.save(tmp_path / "out.npy", x)
    np.savez(tmp_path / "ref.npz", w=x, b=np.arange(3, dtype=np.int32))
    (tmp_path / "ref.safetensors").write_bytes(encode_safetensors({"w": x, "b": np.arange(3, dtype=np.int32)}))
    one = read_tensors(tmp_path / "out.npy")
    assert list(one) == ["out"] and one["out"].dtype == "F32"
    by_name = compare_files(tmp_path / "ref.npz", tmp_path / "ref.safetensors")
    assert by_name.passed and [c.name for c in by_name.comparisons] == ["w", "b"]
    assert all(c.bitwise_equal for c in by_name.comparisons)
    single = compare_files(tmp_path / "out.npy", tmp_path / "ref.npz")
    assert not single.passed and single.only_in_a == ("out",) and set(single.only_in_b) == {"w", "b"}
    obj = tmp_path / "obj.npy"
    np.save(obj, np.array([{"a": 1}], dtype=object), allow_pickle=True)
    with pytest.raises(OracleError, match="not a readable numpy file"):
        read_tensors(obj)
    with pytest.raises(OracleError, match="cannot read"):
        read_tensors(tmp_path / "missing.npy")


def test_compare_files_single_tensor_any_name(tmp_path: Path) -> None:
    a = np.array([1.0, 2.0], np.float32)
    np.save(tmp_path / "cand.npy", a)
    (tmp_path / "ref.safetensors").write_bytes(encode_safetensors({"logits": a + np.float32(1e-3)}))
    res = compare_files(tmp_path / "cand.npy", tmp_path / "ref.safetensors", atol=1e-2)
    (c,) = res.comparisons
    assert res.passed and c.name == "cand vs logits" and c.n_bitwise_equal == 0
    assert c.max_abs_error == pytest.approx(1e-3, rel=1e-3)


# ---------------------------------------------------------------------------------------------- round trip


_DTYPES = [np.float64, np.float32, np.float16, np.int64, np.int32, np.int16, np.int8, np.uint8, np.bool_]


@settings(max_examples=60, deadline=None)
@given(
    arrays=st.lists(
        st.sampled_from(_DTYPES).flatmap(
            lambda dt: hnp.arrays(dt, hnp.array_shapes(min_dims=0, max_dims=3, min_side=0, max_side=4))
        ),
        min_size=1,
        max_size=4,
    ),
    bf16_bits=hnp.arrays(np.uint16, hnp.array_shapes(min_dims=1, max_dims=2, max_side=5)),
    data=st.data(),
)
def test_safetensors_round_trip(tmp_path_factory: pytest.TempPathFactory, arrays: list[np.ndarray[Any, Any]],
                                bf16_bits: np.ndarray[Any, Any], data: st.DataObject) -> None:
    tensors = {f"t{i}": a for i, a in enumerate(arrays)}
    # bf16 values built from bit patterns (NaNs excluded: their payloads are not preserved by rounding)
    bits = bf16_bits[~np.isnan(bf16_bits_to_float32(bf16_bits))]
    tensors["bf"] = bf16_bits_to_float32(bits)
    meta = data.draw(st.dictionaries(st.text(max_size=5), st.text(max_size=5), max_size=2))
    p = tmp_path_factory.mktemp("rt") / "x.safetensors"
    blob = encode_safetensors(tensors, metadata=meta, bf16={"bf"})
    (hlen,) = struct.unpack("<Q", blob[:8])
    assert hlen % 8 == 0
    p.write_bytes(blob)
    back = read_tensors(p)
    assert list(back) == list(tensors)
    for name, arr in tensors.items():
        t = back[name]
        assert t.shape == arr.shape
        assert t.dtype == ("BF16" if name == "bf" else dtype_label(arr.dtype))
        assert t.array.tobytes() == np.ascontiguousarray(arr).tobytes()
        assert compare_arrays(t.array, arr).n_bitwise_equal == arr.size


# ---------------------------------------------------------------------------------------------- CLI


def test_cli_compare_tensors(tmp_path: Path) -> None:
    from harness.cli.compare_cmd import app

    a = np.array([1.0, 2.0, np.nan], np.float32)
    (tmp_path / "a.safetensors").write_bytes(encode_safetensors({"x[0]": a}))
    (tmp_path / "b.safetensors").write_bytes(encode_safetensors({"x[0]": a}))
    (tmp_path / "c.safetensors").write_bytes(encode_safetensors({"x[0]": a + np.float32(0.5)}))
    ok = runner.invoke(app, ["tensors", str(tmp_path / "a.safetensors"), str(tmp_path / "b.safetensors")])
    assert ok.exit_code == 0, ok.output
    assert "tensor x[0]: ok" in ok.output and "bitwise equal 3/3 (100.00%)" in ok.output
    js = runner.invoke(app, ["tensors", str(tmp_path / "c.safetensors"), str(tmp_path / "b.safetensors"),
                             "--json", "--atol", "1"])
    assert js.exit_code == 0, js.output
    doc = json.loads(js.output)
    (t,) = doc["tensors"]
    assert doc["passed"] and t["max_abs_error"] == 0.5 and t["n_bitwise_equal"] == 1 and t["nan_a"] == 1
    bad = runner.invoke(app, ["tensors", str(tmp_path / "c.safetensors"), str(tmp_path / "b.safetensors")])
    assert isinstance(bad.exception, OracleError) and "differ beyond tolerance" in str(bad.exception)
    assert "tensor x[0]: DIFFERS" in bad.output and "within tolerance 1/3" in bad.output


def test_cli_exit_code_8_end_to_end(tmp_path: Path) -> None:
    np.save(tmp_path / "a.npy", np.zeros(3, np.float32))
    np.save(tmp_path / "b.npy", np.zeros(4, np.float32))
    proc = subprocess.run([sys.executable, "-c", "from harness.cli import main; main()", "compare", "tensors",
                           str(tmp_path / "a.npy"), str(tmp_path / "b.npy")],
                          capture_output=True, text=True, timeout=60, check=False)
    assert proc.returncode == 8, proc.stderr
    assert "shape [3] != [4] (shape mismatch)" in proc.stdout and "hint:" in proc.stderr


def test_cli_failure_output_ends_its_lines_before_the_error(tmp_path: Path) -> None:
    """stdout and stderr into one log (``2>&1``): the last report line stays whole and the
    ``error:`` line starts on its own line after it (issue 17)."""
    np.save(tmp_path / "a.npy", np.arange(4.0))
    np.save(tmp_path / "b.npy", np.arange(4.0) + 1)
    r = subprocess.run([sys.executable, "-m", "harness.cli", "compare", "tensors", "a.npy", "b.npy"],
                       cwd=tmp_path, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, timeout=60,
                       check=False)
    assert r.returncode == 8
    lines = r.stdout.splitlines()
    at = next(i for i, line in enumerate(lines) if line.startswith("error:"))
    assert lines[at - 1] == "  NaN a/b 0/0, Inf a/b 0/0"
    assert lines[at] == "error: a.npy does not match b.npy: 1 tensor(s) differ beyond tolerance: a vs b"
    assert lines[at + 1].startswith("hint: ")
