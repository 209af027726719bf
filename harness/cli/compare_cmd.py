"""``dsv4h compare tensors``: kernel-level numeric comparison of two tensor files (files read by
harness.store.tensor_files, compared by harness.measure.tensors)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Annotated

import typer

from harness.cli.common import console
from harness.errors import OracleError
from harness.measure.tensors import TensorComparison
from harness.store.tensor_files import compare_files

app = typer.Typer(
    help="Numeric comparisons (report 10.3, kernel level): bitwise equality, max abs error, relative L2, "
    "cosine, NaN/Inf counts.\n\nExample: dsv4h compare tensors out.safetensors ref.safetensors --atol 1e-3",
    no_args_is_help=True,
)


@app.callback()
def _compare() -> None:
    """Numeric comparisons of tensors."""


def _say(text: str) -> None:
    console.print(text, highlight=False, markup=False, soft_wrap=True)


def _num(x: float | None, fmt: str = ".3e") -> str:
    return "-" if x is None else format(x, fmt)


def _bitwise(c: TensorComparison) -> str:
    if c.n_elements is None:
        return "-"
    if c.n_bitwise_equal is None:
        return "- (dtypes differ)"
    pct = 100.0 * c.n_bitwise_equal / c.n_elements if c.n_elements else 100.0
    return f"{c.n_bitwise_equal}/{c.n_elements} ({pct:.2f}%)"


@app.command("tensors")
def tensors_cmd(
    a: Annotated[Path, typer.Argument(help="tensor file under test (.npy, .npz or .safetensors)")],
    b: Annotated[Path, typer.Argument(help="reference tensor file (same formats)")],
    rtol: Annotated[float, typer.Option("--rtol", help="relative tolerance: |a-b| <= atol + rtol*|b|", min=0)
                    ] = 0.0,
    atol: Annotated[float, typer.Option("--atol", help="absolute tolerance, in the tensors' units", min=0)
                    ] = 0.0,
    as_json: Annotated[bool, typer.Option("--json", help="print the comparison as JSON")] = False,
) -> None:
    """Compare A against the reference B tensor by tensor (by name; one tensor each side is compared
    whatever its name): shape and dtype, bitwise-equal elements, max abs error, relative L2 (||a-b||/||b||),
    cosine similarity, NaN/Inf counts, and elements within tolerance. BF16 is read exactly. Exits with
    code 8 when a shape differs, a tensor is missing on one side or an element is outside the tolerance
    (default tolerance 0: exact equality, NaN matching NaN).

    Example: dsv4h compare tensors candidate.safetensors reference.safetensors --rtol 1e-2 --atol 1e-3

    Example: dsv4h compare tensors out.npy ref.npy --json
    """
    res = compare_files(a, b, rtol=rtol, atol=atol)
    if as_json:
        typer.echo(json.dumps(res.to_dict(), indent=1))
    else:
        _say(f"{a} vs reference {b} (rtol {rtol:g}, atol {atol:g})")
        for c in res.comparisons:
            _say(f"tensor {c.name}: {'ok' if c.passed else 'DIFFERS'}")
            shape = (str(list(c.shape_a)) if c.shape_match
                     else f"{list(c.shape_a)} != {list(c.shape_b)} (shape mismatch)")
            dtype = c.dtype_a if c.dtype_match else f"{c.dtype_a} vs {c.dtype_b} (dtype mismatch)"
            _say(f"  shape {shape}, dtype {dtype}")
            if c.shape_match:
                _say(f"  bitwise equal {_bitwise(c)}")
                _say(f"  max abs error {_num(c.max_abs_error)}, relative L2 {_num(c.rel_l2)}, cosine "
                     f"{_num(c.cosine, '.9f')} (over {c.n_finite} finite pairs)")
                _say(f"  within tolerance {c.n_close}/{c.n_elements}")
            _say(f"  NaN a/b {c.nan_a}/{c.nan_b}, Inf a/b {c.inf_a}/{c.inf_b}")
        for name in res.only_in_a:
            _say(f"only in {a}: {name}")
        for name in res.only_in_b:
            _say(f"only in {b}: {name}")
    if not res.passed:
        bad = [c.name for c in res.comparisons if not c.passed]
        parts = []
        if bad:
            parts.append(f"{len(bad)} tensor(s) differ beyond tolerance: {', '.join(bad)}")
        if res.only_in_a or res.only_in_b:
            parts.append(f"{len(res.only_in_a) + len(res.only_in_b)} tensor(s) present on one side only")
        raise OracleError(f"{a} does not match {b}: " + "; ".join(parts),
                          hint="Bitwise equality, max abs error, relative L2 and cosine are distinct claims; "
                          "choose tolerances for the claim you make (report 10.3).")
