"""Simulator profiles as YAML files, the scale profile, calibration and the fast event encoder."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from harness.errors import SpecError
from harness.sim import PROFILES, analytic_decode_rate, analytic_prefill_rate, load_profile_file, profile_for
from harness.sim.calibrate import calibrate_profile, fit_prefill, profile_yaml
from harness.sim.profiles import PAPER_DECODE, PROFILE_DIR
from harness.sim.protocol import EventEncoder
from harness.sim.scheduler import Chunk


def test_builtins_are_files() -> None:
    assert sorted(PROFILES) == ["fast", "fast-power", "paper-tp8", "scale-20ms", "single-slot"]
    assert PROFILES["paper-tp8"].decode_tiers == PAPER_DECODE
    assert load_profile_file(PROFILE_DIR / "paper-tp8.yaml") == PROFILES["paper-tp8"]
    assert profile_for("fast") == PROFILES["fast"]
    assert profile_for("ignored", PROFILE_DIR / "fast.yaml") == PROFILES["fast"]


def test_scale_profile_reaches_4096() -> None:
    p = PROFILES["scale-20ms"]
    assert p.max_running == 4096
    assert analytic_decode_rate(p, 1024) == pytest.approx(51_200.0)
    assert analytic_decode_rate(p, 2048, 0.5) == pytest.approx(204_800.0)


def test_profile_file_errors_name_the_field(tmp_path: Path) -> None:
    text = (PROFILE_DIR / "fast.yaml").read_text().replace("max_running: 64", "max_running: 100000")
    bad = tmp_path / "bad.yaml"
    bad.write_text(text)
    with pytest.raises(SpecError, match="max_running"):
        load_profile_file(bad)


def test_calibrate_reproduces_paper_tp8(tmp_path: Path) -> None:
    paper = PROFILES["paper-tp8"]
    prefill = {n: analytic_prefill_rate(paper, n, 8192) for n in (1, 2, 4, 8)}
    a, p = fit_prefill(prefill, 8192, gather_s=0.02, chunk_budget=32768, admission=16)
    assert a == pytest.approx(0.463, rel=1e-6)
    assert p == pytest.approx(12325.0, rel=1e-6)
    prof = calibrate_profile("cal", dict(PAPER_DECODE), prefill, source="test")
    for (b1, r1), (b2, r2) in zip(prof.decode_tiers, paper.decode_tiers, strict=True):
        assert b1 == b2 and r1 == pytest.approx(r2)
    out = tmp_path / "cal.yaml"
    out.write_text(profile_yaml(prof))
    assert load_profile_file(out) == prof


def test_encode_progress_matches_encode() -> None:
    for mode in ("delta", "cumulative", "skip-tokenizer-init"):
        slow, fast = EventEncoder('r"1\u00e9', mode, 7), EventEncoder('r"1\u00e9', mode, 7)
        for ids in ([5], [6, 7], [300, 12]):
            x = slow.encode(Chunk(ids, None), cached_tokens=3, e2e_latency=None)
            y = fast.encode_progress(Chunk(ids, None), cached_tokens=3)
            assert re.sub(rb'"sim_emit_ns":\d+', b"", x) == re.sub(rb'"sim_emit_ns":\d+', b"", y)
            assert y.rstrip(b"}").rsplit(b":", 1)[0].endswith(b'"sim_emit_ns"')
