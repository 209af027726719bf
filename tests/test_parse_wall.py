"""One wall-time parser (harness.formats.parse_wall): an offset is required; the ledger's cast and the
governance rules use the same one."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta, timezone
from typing import Any

import pyarrow as pa
import pytest

from harness.formats import parse_wall
from harness.governance import history, record_claims
from harness.store.ledger.layout import WALL, canonical, wall_or_null

T = datetime(2026, 11, 29, 19, 43, 46, tzinfo=UTC)


@pytest.mark.parametrize("value", [
    "2026-11-29T19:43:46+0000", "2026-11-29T19:43:46+00:00", "2026-11-29T19:43:46Z",
    "2026-11-29T20:43:46+01:00", " 2026-11-29T19:43:46+0000\n", int(T.timestamp()) * 10**9,
    T, T.astimezone(timezone(timedelta(hours=-5))),
])
def test_a_wall_time_with_an_offset_is_one_utc_instant(value: Any) -> None:
    got = parse_wall(value)
    assert got == T and got.utcoffset() == timedelta(0)


@pytest.mark.parametrize("value", ["2026-11-29T19:43:46", datetime(2026, 11, 29, 19, 43, 46), "yesterday", ""])
def test_a_time_without_an_offset_or_not_a_time_is_refused(value: Any) -> None:
    with pytest.raises(ValueError, match=r"offset|isoformat|Invalid"):
        parse_wall(value)


def test_governance_and_the_ledger_use_the_same_parser() -> None:
    assert record_claims.parse_wall is parse_wall and history.parse_wall is parse_wall  # type: ignore[attr-defined]
    assert wall_or_null("2026-11-29T19:43:46+0000") == T
    assert [wall_or_null(v) for v in ("2026-11-29T19:43:46", "yesterday", "", None)] == [None] * 4
    t = canonical("closures", pa.table({"at": ["2026-11-29T19:43:46+0000", "2026-11-29T19:43:46"]}))
    assert t.schema.field("at").type == WALL and t.column("at").to_pylist() == [T, None]
