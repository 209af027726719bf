"""The id grammar: the spellings already on disk build and parse back exactly."""

from __future__ import annotations

from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from harness import ids
from harness.errors import ArchiveError
from harness.ids import RequestIdentity, WaveRef
from harness.records import RequestRecord

ARCHIVES = Path(__file__).resolve().parent / "fixtures" / "gpu-archives"
MATRIX = ARCHIVES / "2502f414f4f65bd1"  # a formal matrix run on a GPU
SCREEN = ARCHIVES / "e2c3efe4b4f4e37e"  # an ABBA screen run on a GPU


def _records(archive: Path) -> pa.Table:
    return pa.concat_tables([pq.read_table(p) for p in sorted((archive / "records").glob("*.parquet"))])


def test_literal_ids_from_archives_build_and_parse() -> None:
    assert ids.formal_cell_id("decode", 4, "daa02d4c" + "0" * 56) == "decode-c04-daa02d4c"
    assert ids.round_id("decode-c01-d4bd8690", 2) == "decode-c01-d4bd8690.r2"
    assert ids.wave_id("decode-c08-c09dbc00", 1, 1) == "decode-c08-c09dbc00.r1.w001"
    assert ids.wave_id("decode-c64-e480692a", -1, 0, service_start=1) == "decode-c64-e480692a.warmup1.w000"
    assert ids.wave_id("decode-c08-x", -1, 0) == "decode-c08-x.warmup.w000"
    assert ids.leg_wave_id("B2", "measured", 1) == "B2.measured.w001"
    assert ids.request_id("20261130T223821-44f978", "decode-c01-d4bd8690.warmup1.w000", 0) == (
        "20261130T223821-44f978.decode-c01-d4bd8690.warmup1.w000.000")
    assert ids.round_id("c1", 3, attempt=2) == "c1.r3.a2"
    assert ids.sweep_cell_id(0.5) == "sweep-0.5rps" and ids.sweep_cell_id(8.0) == "sweep-8rps"
    assert ids.wave_id(ids.sweep_cell_id(0.5), 0, 0) == "sweep-0.5rps.r0.w000"
    assert ids.sweep_request_id("T", "sweep-8rps", -1, 3) == "T-sweep-8rps--1-3"
    assert ids.quick_request_id("T", 7) == "T-00007"
    assert ids.fresh_salt("T", "T.c.r0.w000.001") == "T.T.c.r0.w000.001"

    assert ids.parse_wave_id("decode-c08-c09dbc00.r1.w001") == WaveRef("decode-c08-c09dbc00", 1, "measured", 1)
    assert ids.parse_wave_id("c1.r3.a2.w010") == WaveRef("c1", 10, "measured", 3, attempt=2)
    assert ids.parse_wave_id("decode-c64-e480692a.warmup1.w000") == WaveRef(
        "decode-c64-e480692a", 0, "warmup", service_start=1)
    assert ids.parse_wave_id("A1.measured.w001") == WaveRef("A1", 1)
    assert ids.parse_wave_id("A1.warmup.w000") == WaveRef("A1", 0, "warmup")
    assert ids.parse_wave_id("sweep-0.5rps.r0.w000") == WaveRef("sweep-0.5rps", 0, "measured", 0)
    assert ids.parse_wave_id("c.r0.w1000").wave == 1000
    assert ids.round_of("sweep-0.5rps.r0.w000") == "sweep-0.5rps.r0"
    assert ids.round_of("A1.measured.w001") == "A1.measured"
    assert ids.round_of("c1.r3.a2.w010") == "c1.r3.a2"
    assert ids.round_of("decode-c64-bench.r2.w00012") == "decode-c64-bench.r2"   # a synthetic spelling
    assert ids.parse_round_id("sweep-0.5rps.r2") == ("sweep-0.5rps", 2, 0)
    assert ids.parse_round_id("c1.r3.a2") == ("c1", 3, 2)


@pytest.mark.parametrize("bad", ["w", "w1", "other", "", "c1.r0", "c1.r0.w00", "c1.r01.w000", "c1.r0.a0.w000",
                                 "c1.warmup0.w000", "c1.x.w000", ".r0.w000", "c1.r-1.w000"])
def test_malformed_wave_ids_are_refused_by_name(bad: str) -> None:
    with pytest.raises(ArchiveError, match="is not a wave id"):
        ids.parse_wave_id(bad)


def test_malformed_round_ids_are_refused() -> None:
    for bad in ("c1", "c1.r", "c1.r0.w000", "c1.r0.a0", "A1.measured"):
        with pytest.raises(ArchiveError, match="is not a round id"):
            ids.parse_round_id(bad)
    with pytest.raises(ValueError, match="no round id"):
        ids.round_id("c1", -1)


@pytest.mark.parametrize("archive", [MATRIX, SCREEN])
def test_every_id_of_a_real_archive_round_trips(archive: Path) -> None:
    t = _records(archive)
    rows = t.select(["rid", "run_id", "cell_id", "round_index", "wave_id", "wave_index", "phase"]).to_pylist()
    assert len(rows) > 100
    for r in rows:
        ref = ids.parse_wave_id(r["wave_id"])
        assert ref.wave_id == r["wave_id"]
        assert ref.cell == r["cell_id"] and ref.wave == r["wave_index"] and ref.phase == r["phase"]
        if archive == MATRIX and r["phase"] == "measured":
            assert ref.round == r["round_index"]
            assert ids.wave_id(r["cell_id"], r["round_index"], r["wave_index"], ref.attempt) == r["wave_id"]
        if archive == SCREEN:
            assert ids.leg_wave_id(r["cell_id"], ref.phase, r["wave_index"]) == r["wave_id"]
        prefix = f"{r['run_id']}.{r['wave_id']}."
        assert r["rid"].startswith(prefix)
        assert ids.request_id(r["run_id"], r["wave_id"], int(r["rid"][len(prefix):])) == r["rid"]
    if archive == MATRIX:  # an ABBA screen has legs, not rounds
        rounds = pq.read_table(archive / "rounds.parquet").to_pylist()
        assert len(rounds) >= 3
        for row in rounds:
            assert ids.round_id(*ids.parse_round_id(row["round_id"])) == row["round_id"]
            assert ids.parse_round_id(row["round_id"])[:2] == (row["cell_id"], row["round_index"])


def test_a_records_identity_is_its_identity_columns() -> None:
    ident = RequestIdentity(run_id="R", cell_id="c1", round_index=2, wave_id="c1.r2.w000", wave_index=0,
                            phase="measured", workload="prefill", case_id="k", input_hash="ab")
    rec = RequestRecord(rid="R.c1.r2.w000.000", send_ns=1, done_ns=2, **ident.fields())
    assert RequestIdentity.of(rec) == ident == rec.identity
    assert ids.IDENTITY_FIELDS == ("run_id", "cell_id", "round_index", "wave_id", "wave_index", "phase",
                                   "workload", "case_id", "input_hash", "request_index", "corpus_sha256")


_cells = st.one_of(
    st.builds(ids.formal_cell_id, st.sampled_from(["decode", "prefill"]),
              st.integers(1, 512), st.text("0123456789abcdef", min_size=8, max_size=8)),
    st.builds(ids.sweep_cell_id, st.floats(0.01, 1e4, allow_nan=False)),
    st.sampled_from(["A1", "B1", "B2", "A2", "quick"]),
)


@settings(max_examples=200, deadline=None)
@given(_cells, st.integers(-1, 40), st.integers(0, 2000), st.integers(0, 5), st.integers(0, 9))
def test_wave_ids_round_trip(cell: str, k: int, j: int, attempt: int, start: int) -> None:
    w = ids.wave_id(cell, k, j, attempt, start)
    ref = ids.parse_wave_id(w)
    assert ref.wave_id == w and ref.cell == cell and ref.wave == j
    assert ids.round_of(w) == w.rsplit(".w", 1)[0]     # the spelling the ledgers already hold
    if k < 0:
        assert (ref.phase, ref.round, ref.service_start) == ("warmup", None, start)
    else:
        assert (ref.phase, ref.round, ref.attempt) == ("measured", k, attempt)
        assert ids.parse_round_id(ref.round_id) == (cell, k, attempt)


@settings(max_examples=100, deadline=None)
@given(st.sampled_from(["A1", "B1", "B2", "A2"]), st.sampled_from(["measured", "warmup"]), st.integers(0, 1500))
def test_leg_wave_ids_round_trip(leg: str, phase: ids.Phase, j: int) -> None:
    w = ids.leg_wave_id(leg, phase, j)
    ref = ids.parse_wave_id(w)
    assert (ref.cell, ref.phase, ref.wave, ref.round, ref.wave_id) == (leg, phase, j, None, w)
