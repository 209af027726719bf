"""``dsv4h archive timeline``: figures per cell or per wave, --json rows, unknown wave ids, verification."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from testkit import run_cli
from timeline_archives import FAILED_WAVE, write_timeline_archive

PNG_MAGIC = b"\x89PNG\r\n\x1a\n"


@pytest.fixture(scope="module")
def archive(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, str]:
    ws = tmp_path_factory.mktemp("ws")
    return ws, write_timeline_archive(ws).archive_id


def test_default_draws_the_first_measured_wave_of_each_cell_into_a_directory(archive: tuple[Path, str],
                                                                              tmp_path: Path) -> None:
    ws, aid = archive
    code, out, err = run_cli("archive", "timeline", aid, "-w", str(ws), "--out", str(tmp_path / "figs"))
    assert code == 0, err
    names = sorted(p.name for p in (tmp_path / "figs").iterdir())
    assert names == [f"timeline-{aid}-decode-c02.r0.w0.png", f"timeline-{aid}-decode-c02.r0.w0.svg",
                     f"timeline-{aid}-decode-c03.r0.w0.png", f"timeline-{aid}-decode-c03.r0.w0.svg"]
    assert (tmp_path / "figs" / names[0]).read_bytes().startswith(PNG_MAGIC)
    assert (tmp_path / "figs" / names[1]).read_text().lstrip().startswith(("<?xml", "<svg"))
    assert "2 requests, 1 failed" in out and "3 requests, 0 failed" in out


def test_one_wave_into_one_png_file(archive: tuple[Path, str], tmp_path: Path) -> None:
    ws, aid = archive
    target = tmp_path / "one.png"
    code, _, err = run_cli("archive", "timeline", aid[:8], "-w", str(ws), "--wave", "decode-c03.r0.w1",
                           "--out", str(target))
    assert code == 0, err
    assert target.read_bytes().startswith(PNG_MAGIC)
    assert [p.name for p in tmp_path.iterdir()] == ["one.png"]


def test_one_file_for_several_waves_is_refused(archive: tuple[Path, str], tmp_path: Path) -> None:
    ws, aid = archive
    code, _, err = run_cli("archive", "timeline", aid, "-w", str(ws), "--out", str(tmp_path / "x.png"))
    assert code == 6
    assert "names one file but 2 waves are drawn" in err
    assert not (tmp_path / "x.png").exists()


def test_json_prints_the_rows_and_writes_no_figure(archive: tuple[Path, str], tmp_path: Path,
                                                   monkeypatch: pytest.MonkeyPatch) -> None:
    ws, aid = archive
    monkeypatch.chdir(tmp_path)
    code, out, err = run_cli("archive", "timeline", aid, "-w", str(ws), "--wave", FAILED_WAVE, "--json")
    assert code == 0, err
    assert list(tmp_path.iterdir()) == []
    (t,) = json.loads(out)
    assert (t["archive_id"], t["wave_id"], t["cell_id"], t["concurrency"], t["simulated"]) == (
        aid, FAILED_WAVE, "decode-c02", 2, True)
    q0, q1 = t["rows"]
    # q0: sent at 0, tokens every 50 ms from 100 ms (8 tokens), done 10 ms after the last
    assert (q0["rid"], q0["send_s"], q0["first_token_s"], q0["last_token_s"], q0["done_s"], q0["ok"],
            q0["n_tokens"]) == (f"{FAILED_WAVE}.q0", 0.0, pytest.approx(0.1), pytest.approx(0.45),
                                pytest.approx(0.46), True, 8)
    assert (q1["send_s"], q1["done_s"], q1["ok"], q1["error"], q1["n_tokens"]) == (
        pytest.approx(0.01), pytest.approx(0.17), False, "http 500", 2)
    # only q0 succeeded: its own first and last token bound the resident window
    assert t["resident"] == pytest.approx([0.1, 0.45]) and t["http"] == pytest.approx([0.0, 0.46])


def test_unknown_wave_lists_the_first_valid_ones(archive: tuple[Path, str]) -> None:
    ws, aid = archive
    code, _, err = run_cli("archive", "timeline", aid, "-w", str(ws), "--wave", "decode-c99.r0.w0")
    assert code == 6
    assert f"archive {aid} has no wave 'decode-c99.r0.w0'" in err
    assert "decode-c02.warmup.w0, decode-c02.r0.w0, decode-c02.r0.w1, decode-c03.warmup.w0, decode-c03.r0.w0" in err
    assert "(and 1 more)" in err


def test_a_changed_archive_draws_nothing(tmp_path: Path) -> None:
    ws = tmp_path / "ws"
    a = write_timeline_archive(ws)
    (a.path / "results.json").write_text("{}")
    code, _, err = run_cli("archive", "timeline", a.archive_id, "-w", str(ws), "--out", str(tmp_path / "figs"))
    assert code == 6
    assert "failed verification" in err and "results.json" in err
    assert not (tmp_path / "figs").exists()


def test_rules_run_now_mark_the_failed_wave_invalid_in_json(archive: tuple[Path, str],
                                                            monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    """Outside the ledger the verdict is the rules' now: the wave with a failed request is invalid."""
    ws, aid = archive
    monkeypatch.chdir(tmp_path)
    code, out, err = run_cli("archive", "timeline", aid, "-w", str(ws), "--json")
    assert code == 0, err
    got = {t["wave_id"]: t["invalid_rules"] for t in json.loads(out)}
    assert got == {FAILED_WAVE: ["failed-requests"], "decode-c03.r0.w0": []}
    assert {t["data_origin"] for t in json.loads(out)} == {"simulated"}


def test_an_invalid_cell_is_marked_and_warned_about(tmp_path: Path) -> None:
    from harness.evidence.findings import Finding
    from harness.evidence.io import apply_findings
    from harness.store.ledger import ingest_archive

    ws = tmp_path / "ws"
    a = write_timeline_archive(ws)
    ingest_archive(ws, a)  # the verdict is then the ledger's: only the finding stored below
    apply_findings(ws, a.archive_id, [Finding("rule-x", "blocking", "m", "r", a.archive_id, ("decode-c03",))])
    code, out, err = run_cli("archive", "timeline", a.archive_id, "-w", str(ws), "--out", str(tmp_path / "figs"))
    assert code == 0, err
    lines = out.splitlines()
    (c3,) = [ln for ln in lines if ln.startswith("wave decode-c03.r0.w0")]
    (c2,) = [ln for ln in lines if ln.startswith(f"wave {FAILED_WAVE}")]
    assert "INVALID (rule-x)" in c3 and "INVALID" not in c2
    (warning,) = [ln for ln in lines if ln.startswith("warning:")]
    assert "decode-c03" in warning and "rule-x" in warning and "decode-c02" not in warning
    code, out, _ = run_cli("archive", "timeline", a.archive_id, "-w", str(ws), "--wave", "decode-c03.r0.w1", "--json")
    assert code == 0 and json.loads(out)[0]["invalid_rules"] == ["rule-x"]  # every wave of the invalid cell
