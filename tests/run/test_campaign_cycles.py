"""A formal cell's speculative cycle time (T_SD) is a ledger table, ``cycles`` (issue 37 item 8): one
row per formal cell of a speculative server, the same figures as ``cycles.json``, archive columns and
validity like every archive table."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from ledger_helpers import ledger_df

from harness.run.campaign import run_campaign
from harness.sim.speculation import expected_tokens_per_step

REPO = Path(__file__).resolve().parents[2]
D512 = REPO / "corpora" / "sim-code-512"
PROBS = [0.8, 0.6, 0.4]
# fast profile at 3x time: steps of tens of ms, so a busy 2-core machine keeps the model's time
SPEC = f"""
name: cycles
claim_class: speculative-full-target
service:
  backend: sim
  startup_timeout_s: 60
  sim: {{profile: fast, time_scale: 3, speculative: {{draft_tokens: 3, accept_probs: {PROBS}, verify_cost: 1.25}}}}
corpora: {{decode: {D512}}}
decode: {{tiers: [2, 4], rounds: 1, min_resident_seconds: 0.25, warmup_waves: 1, max_new_tokens: 64}}
"""


@pytest.mark.slow
def test_a_speculative_formal_cell_has_its_cycle_in_the_ledger(tmp_path: Path) -> None:
    (tmp_path / "spec.yaml").write_text(SPEC)
    out = run_campaign(tmp_path / "spec.yaml", tmp_path / "ws")
    assert out.status == "complete" and out.error is None
    assert (out.archive.path / "cycles.parquet").is_file()
    doc = {c["cell_id"]: c for c in json.loads((out.archive.path / "cycles.json").read_text())["cells"]}
    rows = ledger_df(tmp_path / "ws", "cycles")
    assert sorted(rows.concurrency) == [2, 4] and set(rows.cell_id) == set(doc)
    assert set(rows.protocol_class) == {"formal"} and set(rows.archive_id) == {out.archive.archive_id}
    a = expected_tokens_per_step(PROBS)  # 1 + 0.8 + 0.48 + 0.192 = 2.472
    for row in rows.to_dict("records"):
        cell = doc[row["cell_id"]]
        assert row["t_sd_stream_s"] == cell["t_sd_stream_s"] and row["t_sd_stream_s"] > 0  # seconds, as cycles.json
        assert row["t_sd_implied_s"] == cell["t_sd_implied_s"] and row["step_samples"] == cell["step_samples"] > 0
        assert row["tokens_per_step"] == pytest.approx(a, rel=0.15)
    blocking = {f.rule for f in out.findings if f.severity == "blocking"}
    # valid like its cells: invalid only when a machine too busy for the simulator says so
    assert rows.valid.all() if not blocking else blocking <= {"sim-lateness", "client-stalled", "sd-reconcile"}
