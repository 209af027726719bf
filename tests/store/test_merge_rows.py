"""Another host's governance rows validated column by column (harness.store.ledger.merge_rows): the refused
rows and reasons are those of validating each row on its own; a failing cast is bisected to its values."""

from __future__ import annotations

import pyarrow as pa
import pytest

from harness.store.ledger.merge_rows import check_rows, rows_label, uncastable

A, B = "0123456789abcdef", "fedcba9876543210"
AT = "2026-12-01T00:00:00.000001+00:00"


def closure(**kw: object) -> dict[str, object]:
    return {"direction": "faster-x", "action": "close", "evidence_archive_id": A, "reason": "no gain", "at": AT,
            "closing_archive_id": None, "source": "cli", "append_key": "20261201T000000000000-00000001"} | kw


ROWS = [closure(), closure(action="delete"), closure(reason=None), closure(evidence_archive_id=B),
        closure(at="not a time"), closure(action=None, closing_archive_id=B), closure(reason="kept")]


def test_each_row_refused_for_its_own_problems() -> None:
    good, bad = check_rows("closures", pa.Table.from_pylist(ROWS), {A})
    assert good is not None and good.column("reason").to_pylist() == ["no gain", "kept"]
    assert bad == [
        ([1], "refused (1 problem(s)): action 'delete': not one of close, reopen"),
        ([2], "refused (1 problem(s)): required column 'reason' is missing or null"),
        ([3], "refused (1 problem(s)): evidence_archive_id 'fedcba9876543210': not an archive of this workspace "
              "(merge its archive first)"),
        ([4], "refused (1 problem(s)): column 'at' cannot be read as timestamp[ns, tz=UTC]"),
        ([5], "refused (3 problem(s)): required column 'action' is missing or null; action None: not one of close, "
              "reopen; closing_archive_id 'fedcba9876543210': not an archive of this workspace (merge its archive "
              "first)"),
    ]


def test_same_rows_as_one_row_at_a_time() -> None:
    raw = pa.Table.from_pylist(ROWS * 3)
    _, bad = check_rows("closures", raw, {A})
    together = {i: why for rows, why in bad for i in rows}
    alone = {}
    for i in range(raw.num_rows):
        good, why = check_rows("closures", raw.slice(i, 1), {A})
        if good is None:
            alone[i] = why[0][1]
    assert together == alone and len(alone) == 15


def test_identical_problems_are_one_refusal_and_an_unknown_column_refuses_all() -> None:
    _, bad = check_rows("closures", pa.Table.from_pylist([closure(action="x")] * 7), {A})
    assert [(rows_label(r), len(r)) for r, _ in bad] == [("#row0,1,2,3,4… (7 rows)", 7)]
    assert rows_label([3]) == "#row3"
    good, bad = check_rows("closures", pa.Table.from_pylist([closure(pwn=1)] * 3), {A})
    assert good is None and bad == [([0, 1, 2], "column 'pwn' is not in the closures schema")]


def test_a_failing_cast_is_bisected_to_its_values() -> None:
    col = pa.chunked_array([pa.array([1, 2**64 - 1, 3, None, 2**63], pa.uint64())])
    assert uncastable(col, pa.int64()).tolist() == [False, True, False, False, True]
    freezes = [{"action": "freeze", "path": "p", "sha256": "0" * 64, "at": AT, "outcome": "frozen", "passed": True,
                "bytes": b} for b in (1, 2**64 - 1, 3)]
    t = pa.Table.from_pylist(freezes, schema=pa.schema([(k, pa.uint64() if k == "bytes" else
                                                        pa.bool_() if k == "passed" else pa.string())
                                                       for k in freezes[0]]))
    good, bad = check_rows("freezes", t, set())
    assert good is not None and good.column("bytes").to_pylist() == [1, 3]
    assert bad == [([1], "refused (1 problem(s)): column 'bytes' cannot be read as int64")]


@pytest.mark.parametrize("n", [100_000])
def test_a_hundred_thousand_rows_at_once(n: int) -> None:
    # issue 37: validated one row at a time, 100,000 rows took 60 s and 3.15 GB
    raw = pa.Table.from_pylist([closure(reason=f"r{i}") for i in range(n)] + [closure(action="x")])
    good, bad = check_rows("closures", raw, {A})  # its time and memory at the cap: benchmarks/bounded_readers.py
    assert good is not None and good.num_rows == n and bad == [([n], "refused (1 problem(s)): action 'x': not one "
                                                                     "of close, reopen")]
