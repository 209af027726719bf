"""The README's notebook examples run verbatim after a campaign (issue 17: "the README's examples run
verbatim in CI"). A short formal matrix and a short rate sweep on the simulator fill a fresh workspace,
as the README's main command fills the checkout; every README code block that starts with ``# README example`` is then
executed, in order and in one namespace (as in a notebook), with that workspace as the current
directory."""

from __future__ import annotations

import contextlib
import io
import os
import re
from collections.abc import Iterator
from pathlib import Path

import pytest
from testkit import quick_decode_run, tiny_sweep_spec

import harness.ledger as hl

REPO = Path(__file__).resolve().parents[1]
MARK = "# README example"


def readme_examples() -> list[str]:
    """The README's Python blocks whose first line is the marker comment."""
    text = (REPO / "README.md").read_text(encoding="utf-8")
    blocks = re.findall(r"```python\n(.*?)```", text, flags=re.DOTALL)
    return [b for b in blocks if b.startswith(MARK)]


@contextlib.contextmanager
def cwd(path: Path) -> Iterator[None]:
    old = Path.cwd()
    os.chdir(path)
    try:
        yield
    finally:
        os.chdir(old)


def test_the_readme_has_the_ledger_examples() -> None:
    blocks = readme_examples()
    assert len(blocks) == 6
    joined = "\n".join(blocks)
    for needle in ('DeltaTable("ledgers/delta/cells").to_pandas()', "import harness.ledger", "import duckdb",
                   "import polars", "scan_pyarrow_dataset", 'DeltaTable("ledgers/delta/cells", version=1)',
                   "to_pyarrow_dataset()"):
        assert needle in joined, needle


@pytest.mark.slow
def test_readme_ledger_examples_run_verbatim(tmp_path: Path) -> None:
    pytest.importorskip("duckdb")
    pytest.importorskip("polars")
    from harness.run.sweep import run_sweep

    out, ws = quick_decode_run(tmp_path, "readme", 8)
    assert run_sweep(tiny_sweep_spec(tmp_path, "readme-sweep"), ws).error is None
    namespace: dict[str, object] = {"__name__": "readme"}
    printed = io.StringIO()
    with cwd(ws), contextlib.redirect_stdout(printed):
        for block in readme_examples():
            exec(compile(block, "README.md", "exec"), namespace)  # the README's own code
    text = printed.getvalue()
    assert out.archive.archive_id in text  # the pandas example lists the archive's cells
    assert "median_tok_s" in text
    assert "NaN" not in text  # no query mixes a sweep's cells into a column only formal cells fill (issue 24)
    sweep_rows = [line.split() for line in text.splitlines() if "readme-sweep" in line]
    # the DuckDB sweep query (WHERE valid): one row per offered rate that is valid in the ledger; on a
    # busy machine a rate the simulator fell behind in is invalid (sim-lateness) and rightly missing
    cells = hl.read(ws, "sweep_cells")
    valid = sorted(f"{r:.1f}" for r, ok in zip(cells["arrival_rate_req_s"], cells["valid"], strict=True) if ok)
    assert len(cells) == 2 and [row[2] for row in sweep_rows] == valid
    assert all(float(row[3]) > 0 and float(row[4]) > 0 for row in sweep_rows)  # output tok/s, goodput
    n_delta = [line.split() for line in text.splitlines()
               if re.fullmatch(r"[0-9]+ [0-9]+ [0-9]+ [0-9]+", line.strip())]
    assert n_delta and n_delta[0][0] == n_delta[0][1] != "0"  # polars and pandas count the Delta table's cells
    assert 0 < int(n_delta[0][2]) <= int(n_delta[0][1])  # version 1: the first archive's cells
    rate = float(text.strip().splitlines()[-1])  # the recomputed round: a positive resident rate
    assert rate > 0
