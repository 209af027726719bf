"""``dsv4h ledger merge`` bounds (harness.store.ledger.merge.MergeLimits): another host's Delta table with too
many commits, or a governance table with too many rows, is refused before it is read, with one error naming
the table, the count, the limit and the flag; at the limit it merges."""

from __future__ import annotations

from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from testkit import run_cli

from harness.errors import LedgerError
from harness.store.ledger import append_rows, read_table
from harness.store.ledger.merge import MergeLimits, Refusal, merge_governance


def entries(n: int, start: int = 0) -> list[dict[str, object]]:
    return [{"entry_id": f"syn-{k:06d}", "source": "synthetic", "value": float(k)} for k in range(start, start + n)]


def host(tmp_path: Path, commits: int, per_commit: int) -> tuple[Path, Path]:
    here, other = tmp_path / "here", tmp_path / "other"
    here.mkdir()
    for c in range(commits):
        append_rows(other, "historical", entries(per_commit, c * per_commit))
    return here, other


def test_rows_over_the_limit_are_refused_unread_and_at_the_limit_merge(tmp_path: Path) -> None:
    here, other = host(tmp_path, 2, 30)
    table = other / "ledgers" / "delta" / "historical"
    with pytest.raises(LedgerError) as err:
        merge_governance(here, other, MergeLimits(max_rows=59))
    assert err.value.message == (f"{table}: at least 60 rows in its data files (field: rows), over the limit of 59 "
                                 "(--max-rows); nothing of it is merged")
    assert err.value.hint and "--max-rows" in err.value.hint
    assert read_table(here, "historical") is None
    added, refused = merge_governance(here, other, MergeLimits(max_rows=60))
    assert (added, refused) == ({"historical": 60}, [])


def test_commits_over_the_limit_are_refused_before_anything_is_copied(tmp_path: Path) -> None:
    here, other = host(tmp_path, 6, 1)
    log = other / "ledgers" / "delta" / "historical" / "_delta_log"
    n = len(list(log.iterdir()))  # the table's creation and 6 appends (a checkpoint, if its writer made one)
    assert n >= 7
    with pytest.raises(LedgerError) as err:
        merge_governance(here, other, MergeLimits(max_commits=n - 1))
    assert err.value.message.startswith(f"{log}: {n} log entries (commits), over the limit of {n - 1} (--max-commits)")
    assert not list(here.rglob(".foreign-*")) and read_table(here, "historical") is None
    assert merge_governance(here, other, MergeLimits(max_commits=n))[0] == {"historical": 6}


def test_parquet_layout_files_count_their_rows(tmp_path: Path) -> None:
    here, other = tmp_path / "here", tmp_path / "other"
    d = other / "ledgers" / "historical"
    d.mkdir(parents=True)
    here.mkdir()
    for i in range(3):
        pq.write_table(pa.Table.from_pylist(entries(4, 4 * i)), d / f"20261201T00000000000{i}-0000000{i}.parquet")
    with pytest.raises(LedgerError, match=r"historical: at least 12 rows in its files .* over the limit of 11 "
                                          r"\(--max-rows\)"):
        merge_governance(here, other, MergeLimits(max_rows=11))
    assert merge_governance(here, other, MergeLimits(max_rows=12)) == ({"historical": 12}, [])


def test_cli_one_error_line_naming_the_flag(tmp_path: Path) -> None:
    here, other = host(tmp_path, 1, 8)
    code, _, err = run_cli("ledger", "merge", str(other), "-w", str(here), "--max-rows", "7")
    errors = [ln for ln in err.splitlines() if ln.startswith("error:")]
    assert code == 6 and len(errors) == 1 and "over the limit of 7 (--max-rows)" in errors[0]
    code, out, _ = run_cli("ledger", "merge", str(other), "-w", str(here), "--max-rows", "8")
    assert code == 0 and "governance rows added: historical +8" in out


def test_refused_delta_rows_are_named_by_row_and_the_rest_merges(tmp_path: Path) -> None:
    here, other = host(tmp_path, 1, 3)
    append_rows(other, "historical", [{"entry_id": None, "source": "synthetic"}] * 2)
    added, refused = merge_governance(here, other)
    table = other / "ledgers" / "delta" / "historical"
    assert added == {"historical": 3}
    assert refused == [Refusal(f"{table}#row3,4 (2 rows)", "refused (1 problem(s)): required column 'entry_id' is "
                                                            "missing or null")]
