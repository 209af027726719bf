"""``dsv4h sim calibrate`` and the archive's verdict: invalid cells refused unless --allow-invalid, then recorded."""

from __future__ import annotations

from pathlib import Path

import pytest
from synthetic_archives import write_formal_archive
from testkit import run_cli

from harness.errors import EvidenceError
from harness.evidence.findings import Finding
from harness.evidence.io import apply_findings
from harness.sim import load_profile_file
from harness.sim.calibrate import calibrate_profile, check_cells, profile_yaml
from harness.sim.profiles import CalibrationSource
from harness.store.archive import Archive
from harness.store.ledger import ingest_archive

BAD = "decode-c02-syn0000"


def _ingested(ws: Path, *findings: Finding) -> Archive:
    """A two-tier formal matrix (C1, C2; one round) in ``ws``'s ledger with ``findings`` stored."""
    a = write_formal_archive(ws, tiers=(1, 2), rounds=1)
    ingest_archive(ws, a)
    apply_findings(ws, a.archive_id, list(findings))
    return a


def _calibrate(ws: Path, a: Archive, out: Path, *extra: str) -> tuple[int, str, str]:
    return run_cli("sim", "calibrate", a.archive_id, "-w", str(ws), "--out", str(out), *extra)


def test_a_valid_archive_calibrates_and_records_its_source(tmp_path: Path) -> None:
    a = _ingested(tmp_path)
    code, out, err = _calibrate(tmp_path, a, tmp_path / "p.yaml")
    assert code == 0, err
    assert "decode C1:" in out and "decode C2:" in out and "warning" not in out
    prof = load_profile_file(tmp_path / "p.yaml")
    assert prof.calibration == CalibrationSource(archive_id=a.archive_id, data_origin="simulated")
    assert [b for b, _ in prof.decode_tiers] == [1, 2] and "INVALID" not in prof.description


def test_an_invalid_cell_is_refused_naming_it_and_its_rule(tmp_path: Path) -> None:
    a = _ingested(tmp_path, Finding("rule-x", "blocking", "m", "r", "", (BAD,)))
    code, out, err = _calibrate(tmp_path, a, tmp_path / "p.yaml")
    assert code == EvidenceError.exit_code
    assert err.startswith("error: ") and f"{BAD} (rule-x)" in err and "decode-c01" not in err
    assert "--allow-invalid" in err and not (tmp_path / "p.yaml").exists() and "decode C" not in out


def test_allow_invalid_fits_warns_and_records_the_invalid_cells(tmp_path: Path) -> None:
    a = _ingested(tmp_path, Finding("rule-x", "blocking", "m", "r", "", (BAD,)),
                  Finding("rule-y", "warning", "m", "r", "", ("decode-c01-syn0000",)))  # not blocking: stays valid
    code, out, err = _calibrate(tmp_path, a, tmp_path / "p.yaml", "--allow-invalid")
    assert code == 0, err
    (warning,) = [ln for ln in out.splitlines() if ln.startswith("warning:")]
    assert f"{BAD} (rule-x)" in warning and "decode-c01" not in warning
    prof = load_profile_file(tmp_path / "p.yaml")
    assert prof.calibration is not None and prof.calibration.invalid_cells == {BAD: ("rule-x",)}
    assert f"INVALID cells used: {BAD} (rule-x)" in prof.description
    assert [b for b, _ in prof.decode_tiers] == [1, 2]  # the invalid cell's rate was used


def test_a_run_scoped_finding_invalidates_every_cell(tmp_path: Path) -> None:
    a = _ingested(tmp_path, Finding("rule-run", "blocking", "m", "r", "", (), "run"))
    code, _, err = _calibrate(tmp_path, a, tmp_path / "p.yaml")
    assert code == EvidenceError.exit_code and "4 cells" in err
    assert all(f"{wl}-c{c:02d}-syn0000 (rule-run)" in err for wl in ("decode", "prefill") for c in (1, 2))


def test_check_cells_and_the_recorded_profile_round_trip(tmp_path: Path) -> None:
    check_cells("a", {}, allow_invalid=False)
    check_cells("a", {"c": ("r",)}, allow_invalid=True)
    with pytest.raises(EvidenceError, match=r"c \(r, s\); d \(t\)") as exc:
        check_cells("a", {"c": ("r", "s"), "d": ("t",)}, allow_invalid=False)
    assert exc.value.hint is not None and "--allow-invalid" in exc.value.hint
    cal = CalibrationSource(archive_id="a", data_origin="measured", invalid_cells={"c": ("r",)})
    prof = calibrate_profile("cal", {1: 90.0, 2: 110.0}, calibration=cal)
    (tmp_path / "p.yaml").write_text(profile_yaml(prof))
    assert load_profile_file(tmp_path / "p.yaml") == prof
    plain = calibrate_profile("cal", {1: 90.0})
    assert plain.calibration is None and "calibration" not in profile_yaml(plain)
