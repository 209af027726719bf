"""Gates: every quantity once passing and once failing, on literal archives; the shipped gate files."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
import yaml
from hypothesis import given
from hypothesis import strategies as st
from test_governance_support import make_abba, make_formal, stream_record

from harness.errors import EvidenceError, SpecError
from harness.governance import record_claims as gv
from harness.governance.io import check_gate, gate_failure, load_gate, table_rows
from harness.store.archive import Archive

REPO = Path(__file__).resolve().parents[2]
GATES = REPO / "campaigns" / "gates"


def gate_file(tmp: Path, quantity: str, op: str, threshold: float, **selectors: Any) -> Path:
    p = tmp / f"g-{quantity.replace('.', '-')}-{len(list(tmp.glob('g-*')))}.yaml"
    data: dict[str, Any] = {"name": quantity.replace(".", "-").replace("_", "-"), "quantity": quantity, "op": op,
                            "threshold": threshold, "unit": "u"}
    if selectors:
        data["selectors"] = selectors
    p.write_text(yaml.safe_dump(data), encoding="utf-8")
    return p


def formal_with(records: list[Any]) -> Callable[[Path], Archive]:
    return lambda ws: make_formal(ws, value=100.0, records=records)


REPAIRED, OLD = "a" * 64, "b" * 64


def _pid(*libs: tuple[str, str]) -> dict[str, Any]:
    return {"role": None, "error": None,
            "libraries": [{"path": p, "sha256": h, "size": 1, "deleted": False} for p, h in libs]}


CUDA = ("/usr/lib/x86_64-linux-gnu/libcuda.so.1", "c" * 64)
RANKS = {"root": 100, "files": {}, "pids": {
    "100": _pid(CUDA),  # the launcher: maps the GPU driver but not libccl; not a worker
    "101": _pid(CUDA, ("/opt/ccl/lib/libccl.so.1", REPAIRED)),
    "102": _pid(CUDA, ("/opt/ccl/lib/libccl.so.1", REPAIRED)),
    "103": _pid(CUDA, ("/opt/ccl/lib/libccl.so.1", REPAIRED)),
    "104": _pid(CUDA, ("/opt/ccl/lib/libccl.so.1", OLD)),
    "105": _pid(("/usr/lib/x86_64-linux-gnu/libssl.so.3", "d" * 64)),  # tokenizer: no GPU, not a worker
}}


def with_stack(ws: Path, at_start: dict[str, Any]) -> Archive:
    return make_formal(ws, value=100.0, records=[stream_record(0)],
                       stack={"mapped": {"at_start": at_start, "at_end": None}})


REPEATS = [stream_record(k, case_id=f"c{k % 2}", output=[1, 2, 3]) for k in range(4)]
DIVERGED = [*REPEATS[:3], stream_record(7, case_id="c1", output=[1, 2, 4])]
CACHED = [stream_record(0), stream_record(1, cached=128)]
UNREPORTED = [stream_record(0), stream_record(1, cached=None)]
FAILED = [stream_record(0), stream_record(1, error="http 500")]
WARMUP_ONLY_BAD = [stream_record(0), stream_record(1, cached=512, phase="warmup")]
SPEED = [stream_record(k, step_ms=s) for k, s in enumerate((10.0, 12.5, 20.0))]  # 100, 80, 50 tok/s

# (quantity, op, threshold, selectors, archive builder, expected value, passes)
CASES: list[tuple[str, str, float, dict[str, Any], Callable[[Path], Archive], float | None, bool]] = [
    ("cell.median", ">=", 90.0, {"workload": "decode", "concurrency": 1}, formal_with([stream_record(0)]), 100.0, True),
    ("cell.median_tok_s", ">=", 110.0, {"workload": "decode", "concurrency": 1}, formal_with([stream_record(0)]), 100.0,
     False),
    ("cell.median", ">=", 1.0, {"workload": "decode", "concurrency": 8}, formal_with([stream_record(0)]), None, False),
    ("cell.http_rate", ">", 89.0, {"workload": "decode", "concurrency": 1}, formal_with([stream_record(0)]), 90.0,
     True),
    ("cell.http_output_tok_s", "<", 89.0, {"workload": "decode", "concurrency": 1},
     formal_with([stream_record(0)]), 90.0, False),
    ("abba.change_pct", ">=", 5.0, {}, lambda ws: make_abba(ws, change_pct=10.0), 10.0, True),
    ("abba.change_pct", ">=", 5.0, {}, lambda ws: make_abba(ws, change_pct=1.5), 1.5, False),
    ("abba.change_pct", ">=", 5.0, {}, formal_with([stream_record(0)]), None, False),  # not a screen
    ("abba.drift_pct", "<=", 0.5, {}, lambda ws: make_abba(ws, drift_pct=0.2), 0.2, True),
    ("abba.drift_pct", "<=", 0.5, {}, lambda ws: make_abba(ws, drift_pct=0.9), 0.9, False),
    ("abba.spread_pct", "<", 1.0, {}, lambda ws: make_abba(ws, spread_pct=0.094), 0.094, True),
    ("abba.spread_pct", "<", 1.0, {}, lambda ws: make_abba(ws, spread_pct=2.0), 2.0, False),
    ("abba.ms_per_token_saved", ">=", 0.5, {}, lambda ws: make_abba(ws, control_mean=1000.0, candidate_mean=1100.0),
     1000 * 32 / 1000.0 - 1000 * 32 / 1100.0, True),
    ("abba.ms_per_token_saved", ">=", 0.5, {}, lambda ws: make_abba(ws, control_mean=1044.611, candidate_mean=1060.705),
     1000 * 32 / 1044.611 - 1000 * 32 / 1060.705, False),
    ("requests.max_cached_tokens", "==", 0, {}, formal_with([stream_record(0), stream_record(1)]), 0.0, True),
    ("requests.max_cached_tokens", "==", 0, {}, formal_with(CACHED), 128.0, False),
    ("requests.max_cached_tokens", "==", 0, {}, formal_with(UNREPORTED), None, False),
    ("requests.max_cached_tokens", "==", 0, {}, formal_with(WARMUP_ONLY_BAD), 0.0, True),  # warmups never count
    ("requests.failed", "==", 0, {}, formal_with(REPEATS), 0.0, True),
    ("requests.failed", "==", 0, {}, formal_with(FAILED), 1.0, False),
    ("requests.measured", ">=", 4, {}, formal_with(REPEATS), 4.0, True),
    ("requests.measured", ">=", 70, {}, formal_with(REPEATS), 4.0, False),
    ("requests.distinct_outputs_per_case_max", "==", 1, {}, formal_with(REPEATS), 1.0, True),
    ("requests.distinct_outputs_per_case_max", "==", 1, {}, formal_with(DIVERGED), 2.0, False),
    ("single_stream.median_tps", ">=", 75.0, {"concurrency": 1}, formal_with(SPEED), 80.0, True),
    ("single_stream.median_tps", ">=", 75.0, {"concurrency": 4}, formal_with(SPEED), None, False),
    ("single_stream.p10_tps", ">=", 75.0, {}, formal_with(SPEED), 56.0, False),
    # four TP ranks (children of launcher 100, which maps libcuda too) and a tokenizer process without a GPU
    ("mapped.library_workers", ">=", 4, {"library": "libccl.so*"}, lambda ws: with_stack(ws, RANKS), 4.0, True),
    ("mapped.library_workers", ">=", 4, {"library": "libccl.so*", "sha256": REPAIRED},
     lambda ws: with_stack(ws, RANKS), 3.0, False),  # rank 104 maps the old build
    ("mapped.library_workers", ">=", 3, {"library": "libccl.so*", "sha256": REPAIRED},
     lambda ws: with_stack(ws, RANKS), 3.0, True),
    ("mapped.library_workers", ">=", 1, {"library": "libnotthere.so*"}, lambda ws: with_stack(ws, RANKS), 0.0,
     False),
    ("mapped.library_workers", ">=", 1, {}, lambda ws: with_stack(ws, RANKS), None, False),  # no library selector
    ("mapped.library_workers", ">=", 1, {"library": "libccl.so*"}, formal_with([stream_record(0)]), None,
     False),  # no stack recorded
]


@pytest.mark.parametrize(("quantity", "op", "threshold", "selectors", "build", "value", "passes"), CASES,
                         ids=[f"{c[0]}-{'pass' if c[6] else 'fail'}-{i}" for i, c in enumerate(CASES)])
def test_gate_quantities(tmp_path: Path, quantity: str, op: str, threshold: float, selectors: dict[str, Any],
                         build: Callable[[Path], Archive], value: float | None, passes: bool) -> None:
    archive = build(tmp_path)
    row = check_gate(gate_file(tmp_path, quantity, op, threshold, **selectors), archive.archive_id, tmp_path,
                     candidate="cand")
    assert row["passed"] is passes, row["detail"]
    if value is None:
        assert row["value"] is None
    else:
        assert row["value"] == pytest.approx(value)
    stored = table_rows(tmp_path, "gates")
    assert len(stored) == 1 and stored[0]["passed"] is passes and stored[0]["candidate"] == "cand"
    assert stored[0]["archive_id"] == archive.archive_id and stored[0]["data_origin"] == "simulated"
    if not passes:
        err = gate_failure(row)
        assert isinstance(err, EvidenceError) and row["gate"] in err.message


def test_library_workers_counts_every_service_and_names_what() -> None:
    spec = gv.GateSpec(name="ccl", quantity="mapped.library_workers", op=">=", threshold=8, unit="processes",
                       selectors=gv.GateSelectors(library="libccl.so*", sha256=REPAIRED))
    svc = {"stack": {"mapped": {"at_start": RANKS}}}
    m = gv.gate_value(spec, gv.GateInputs("x", services=[svc, svc, {"stack": None}]))
    assert (m.value, m.n) == (6.0, 8)
    assert m.detail == "6 of 8 worker processes over 2 service(s) map libccl.so* with sha256 aaaaaaaaaaaa... at start"


def test_library_workers_selector_sha256_is_checked() -> None:
    with pytest.raises(ValueError, match="sha256"):
        gv.GateSelectors(library="libccl.so*", sha256="ABC")


def test_shipped_gate_files_load() -> None:
    fresh, exact, hw = (load_gate(GATES / f) for f in ("fresh-response.yaml", "exact-repeat.yaml",
                                                        "hw-gate-0.5ms-per-token.yaml"))
    assert (fresh.quantity, fresh.op, fresh.threshold) == ("requests.max_cached_tokens", "==", 0)
    assert (exact.quantity, exact.op, exact.threshold) == ("requests.distinct_outputs_per_case_max", "==", 1)
    assert (hw.quantity, hw.op, hw.threshold, hw.unit) == ("abba.ms_per_token_saved", ">=", 0.5, "ms/token")


def test_hw_gate_on_the_record_notes_numbers(tmp_path: Path) -> None:
    # record notes (2026-07-15): control 41.991191 tok/s, record 43.766673 tok/s at one stream:
    # "removes approximately 0.84-0.97 ms from every decoded token"
    assert gv.ms_per_token_saved(1, 41.991191, 43.766673) == pytest.approx(0.966, abs=0.001)
    screen = make_abba(tmp_path, control_mean=41.991191, candidate_mean=43.766673, concurrency=1)
    row = check_gate(GATES / "hw-gate-0.5ms-per-token.yaml", screen.archive_id, tmp_path, candidate="direct-moe")
    assert row["passed"] and row["value"] == pytest.approx(0.966, abs=0.001)


def test_bad_gate_file_names_file_and_field(tmp_path: Path) -> None:
    p = tmp_path / "bad.yaml"
    p.write_text(yaml.safe_dump({"name": "x", "quantity": "cell.mean", "op": "=>", "threshold": 1, "unit": "u",
                                 "selector": {}}), encoding="utf-8")
    with pytest.raises(SpecError) as exc:
        load_gate(p)
    msg = exc.value.message
    assert "bad.yaml" in msg and "quantity" in msg and "op" in msg and "did you mean 'selectors'" in msg


@given(st.sampled_from([">=", "<=", "==", ">", "<"]), st.floats(-1e6, 1e6), st.floats(-1e6, 1e6))
def test_gate_ops_match_python(op: str, value: float, threshold: float) -> None:
    expected = {">=": value >= threshold, "<=": value <= threshold, "==": value == threshold,
                ">": value > threshold, "<": value < threshold}[op]
    assert gv.gate_passes(op, value, threshold) is expected
    assert gv.gate_passes(op, None, threshold) is False
    assert gv.gate_passes(op, float("nan"), threshold) is False


@given(st.integers(1, 64), st.floats(1.0, 1e5), st.floats(1.0, 1e5))
def test_ms_per_token_saved_sign_and_symmetry(c: int, control: float, candidate: float) -> None:
    saved = gv.ms_per_token_saved(c, control, candidate)
    assert (saved > 0) == (candidate > control) or saved == 0 or abs(saved) < 1e-9
    assert saved == pytest.approx(-gv.ms_per_token_saved(c, candidate, control))
