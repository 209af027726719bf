"""Matched AR/SD runs (kind matched-sd) end to end against real simulator services: the break-even
verdict on a profile pair where speculation wins and one where it loses, acceptance from two sources
that must agree, full-target outputs identical to AR, and the refusals before anything runs."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
import yaml
from ledger_helpers import ledger_df

from harness.errors import SpecError
from harness.inputs.spec import load_spec
from harness.run.matched import run_matched
from harness.sim.speculation import expected_tokens_per_step
from harness.store.archive import verify_archive

REPO = Path(__file__).resolve().parents[2]
WIN = {"draft_tokens": 3, "accept_probs": [0.8, 0.6, 0.4], "verify_cost": 1.25}
LOSE = {"draft_tokens": 3, "accept_probs": [0.2, 0.1, 0.1], "verify_cost": 1.5}


def spec_file(tmp: Path, speculative: dict[str, Any] | None, **over: Any) -> Path:
    # fast profile at 3x time: steps of 15-54 ms, so a busy 2-core machine keeps the model's time
    sim = {"profile": "fast", "time_scale": 3}
    data: dict[str, Any] = {
        "name": "t-matched", "kind": "matched-sd",
        "ar": {"name": "ar", "backend": "sim", "sim": sim, "startup_timeout_s": 60},
        "sd": {"name": "sd", "backend": "sim", "sim": sim | ({"speculative": speculative} if speculative else {}),
               "startup_timeout_s": 60},
        "workload": {"corpus": str(REPO / "corpora" / "sim-code-512"), "concurrency": 4, "waves_per_leg": 2,
                     "warmup_waves": 1, "max_new_tokens": 96},
    } | over
    path = tmp / "matched.yaml"
    path.write_text(yaml.safe_dump(data))
    return path


@pytest.mark.slow
@pytest.mark.parametrize(("speculative", "verdict"), [(WIN, "sd-faster"), (LOSE, "sd-slower")])
def test_the_break_even_verdict_follows_the_profile(tmp_path: Path, speculative: dict[str, Any],
                                                    verdict: str) -> None:
    out = run_matched(load_spec(spec_file(tmp_path, speculative)), tmp_path / "ws")
    r = out.result
    assert out.status == "complete" and out.error is None
    if out.blocking:  # a machine too busy for the simulator: the run must say so, not claim
        rules = {f.rule for f in out.blocking}
        load = rules & {"sim-lateness", "client-stalled", "client-bound"}
        # sd-reconcile (C*a/T_SD against the resident rate) is timed too: it blocks beside a load rule
        assert load and rules - {"sd-reconcile"} <= load, out.blocking
        return
    assert r.verdict == verdict, r.break_even.reason
    a_model = expected_tokens_per_step(speculative["accept_probs"])
    # 96-token answers: the last step of each is cut short, so a is a little under the model's E[a]
    assert 1.0 < r.tokens_per_step <= a_model * 1.02
    assert r.break_even.ratio == pytest.approx(speculative["verify_cost"], rel=0.05)
    assert r.reconciled is True  # C*a/T_SD from the stream agrees with the resident rate
    assert r.outputs.compared == 3 * 2 * 4 and r.outputs.identical == r.outputs.compared  # full target
    pids = [s["pid"] for s in out.leg_services.values()]
    assert len(set(pids)) == 4  # every leg on a freshly started service
    assert verify_archive(out.archive.path) == []
    ws = tmp_path / "ws"
    row = ledger_df(ws, "matched_sd").iloc[0]
    assert row.verdict == verdict and bool(row.valid) and row.protocol_class == "matched-sd"
    assert ledger_df(ws, "cells").empty and ledger_df(ws, "comparisons").empty  # never a cell or a screen
    acc = ledger_df(ws, "acceptance")
    assert set(acc.cell_id) == {"SD1", "SD2"}
    # the final meta_info counts and the server's /metrics counter deltas are two sources of one
    # quantity: per wave they must agree exactly
    by = acc.pivot_table(index="wave_id", columns="source", values=["verify_steps", "drafts_accepted",
                                                                     "drafts_proposed"])
    for col in ("verify_steps", "drafts_accepted", "drafts_proposed"):
        assert (by[col]["sglang-meta-info"] == by[col]["vllm-metrics-delta"]).all(), by
    runs = ledger_df(ws, "runs")
    assert list(runs.kind) == ["matched-sd"] and list(runs.claim_class) == ["speculative-full-target"]


def test_identical_profiles_are_refused_before_anything_runs(tmp_path: Path) -> None:
    with pytest.raises(SpecError, match="identical"):
        run_matched(load_spec(spec_file(tmp_path, None)), tmp_path / "ws")
    assert not (tmp_path / "ws" / "archives").exists()


def test_an_undeclared_profile_difference_is_refused(tmp_path: Path) -> None:
    path = spec_file(tmp_path, WIN)
    data = yaml.safe_load(path.read_text())
    data["sd"]["sim"]["step_factor"] = 0.5  # a faster model is not speculation
    path.write_text(yaml.safe_dump(data))
    with pytest.raises(SpecError, match=r"sim\.step_factor"):
        run_matched(load_spec(path), tmp_path / "ws")


def test_leg_names_are_checked_at_load(tmp_path: Path) -> None:
    with pytest.raises(SpecError, match="order"):
        load_spec(spec_file(tmp_path, WIN, order=["AR1", "AR2"]))
    with pytest.raises(SpecError, match="order"):
        load_spec(spec_file(tmp_path, WIN, order=["AR1", "XX1"]))


@pytest.mark.slow
def test_a_server_that_does_not_speculate_cannot_carry_the_sd_claim(tmp_path: Path) -> None:
    path = spec_file(tmp_path, WIN, declared_change=["sim.speculative", "sim.stream_interval"])
    data = yaml.safe_load(path.read_text())
    del data["sd"]["sim"]["speculative"]
    data["sd"]["sim"]["stream_interval"] = 2  # differs (declared), but the SD server is native
    path.write_text(yaml.safe_dump(data))
    out = run_matched(load_spec(path), tmp_path / "ws")
    assert out.status == "failed" and out.error is not None
    assert "leg SD1 failed" in out.error.message and "claim" in out.error.message
    assert [leg for leg in out.leg_services] == ["AR1"]  # AR1's waves kept in the archive
