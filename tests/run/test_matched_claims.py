"""Issue 37 end to end: a speculative simulator that lies in its per-request counts (the test-only
``speculative.forge_report`` fault; the stream stays true) cannot give a matched AR/SD verdict. The
issue's three lies: SGLang ``spec_verify_ct 1 / spec_num_correct_drafts 2147483647``, vLLM ``proposed 0 /
accepted 1000000``, and every draft accepted (a = 4) while the stream shows one token per step. The
SD arm's true step is 20% slower than AR's with nothing accepted: the truth is ``sd-slower``, each lie
alone would have said ``sd-faster``."""

from __future__ import annotations

import json
import math
from pathlib import Path
from typing import Any

import pytest
import yaml
from ledger_helpers import ledger_df
from testkit import run_cli

from harness.evidence.verdict import BLOCKING_EXIT, WITHHELD
from harness.inputs.spec import load_spec
from harness.report.collect import collect
from harness.report.config import ReportConfig
from harness.report.snapshot import snapshot_bytes
from harness.run.matched import run_matched

REPO = Path(__file__).resolve().parents[2]
NOTHING_ACCEPTED = {"draft_tokens": 3, "accept_probs": [0.0, 0.0, 0.0], "verify_cost": 1.2}


def spec_file(tmp: Path, forge: dict[str, Any], protocol: str = "sglang") -> Path:
    sim: dict[str, Any] = {"profile": "fast", "time_scale": 3}
    sd_sim = sim | {"speculative": NOTHING_ACCEPTED | {"forge_report": forge}
                    | ({"vllm_per_request": "summary"} if protocol != "sglang" else {})}
    data: dict[str, Any] = {
        "name": "t-lies", "kind": "matched-sd", "order": ["AR1", "SD1"],
        "ar": {"name": "ar", "backend": "sim", "protocol": protocol, "sim": sim, "startup_timeout_s": 60},
        "sd": {"name": "sd", "backend": "sim", "protocol": protocol, "sim": sd_sim, "startup_timeout_s": 60},
        "workload": {"corpus": str(REPO / "corpora" / "sim-code-512"), "concurrency": 2, "waves_per_leg": 1,
                     "warmup_waves": 1, "max_new_tokens": 48},
    }
    path = tmp / "matched.yaml"
    path.write_text(yaml.safe_dump(data))
    return path


@pytest.mark.slow
@pytest.mark.parametrize(("forge", "protocol", "shown"), [
    ({"steps": 1, "accepted": 2147483647}, "sglang", "spec_accepted 2147483647, spec_proposed"),
    ({"proposed": 0, "accepted": 1000000}, "openai-completions", "spec_accepted 1000000, spec_proposed 0"),
    ({"all_accepted": True}, "sglang", "breaks accepted + steps <= completion tokens + draft tokens 3"),
], ids=["sglang-huge", "vllm-zero-proposed", "all-accepted"])
def test_a_lying_server_gets_no_matched_verdict(tmp_path: Path, forge: dict[str, Any], protocol: str,
                                                shown: str) -> None:
    ws = tmp_path / "ws"
    out = run_matched(load_spec(spec_file(tmp_path, forge, protocol)), ws)
    assert out.status == "complete" and out.error is None
    r = out.result
    # the counts were not used: no a, no break-even from them
    assert r.counts is None and math.isnan(r.tokens_per_step) and r.verdict == "inconclusive"
    assert r.break_even.reason.startswith("a withheld: the speculative counts of SD1")
    (f,) = [f for f in out.findings if f.rule == "reported-counts"]
    assert f.severity == "blocking" and shown in f.message and f.rows and all(w.startswith("SD1.") for w in f.rows)
    assert out.verdict is not None and out.verdict.shown_verdict(r.verdict) == WITHHELD
    row = ledger_df(ws, "matched_sd").iloc[0]
    assert row.verdict == WITHHELD and not bool(row.valid)
    acc = ledger_df(ws, "acceptance")
    assert acc.empty or not (acc.source.isin(["sglang-meta-info", "vllm-request-metrics"])).any()
    (entry,) = json.loads(snapshot_bytes(collect(ws, ReportConfig())))["speculative"]["matched"]
    assert entry["verdict"] == WITHHELD and entry["tokens_per_step"] is None  # the report withholds it too


@pytest.mark.slow
def test_the_console_withholds_the_verdict_of_a_lying_server(tmp_path: Path) -> None:
    code, out, _ = run_cli("campaign", "run", str(spec_file(tmp_path, {"all_accepted": True})),
                           "-w", str(tmp_path / "ws"))
    assert code == BLOCKING_EXIT
    assert "verdict: withheld" in " ".join(out.split()) and "reported-counts" in out
    assert "sd-faster" not in out  # the lie's a = 4 never reaches a verdict, not even "as measured"
