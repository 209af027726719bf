"""Rule id reported-counts (harness.evidence.rules.reported, issue 37) on hand-made archive data: the
issue's lies are blocking findings naming the request, the field and the values, and the rows they name
withhold the matched verdict and the wave's acceptance rows."""

from __future__ import annotations

from dataclasses import replace
from typing import Any

import pyarrow as pa
from test_evidence import CLEAN

from harness.evidence.findings import ArchiveData
from harness.evidence.io import marked
from harness.evidence.rules import check, rule_reported_counts
from harness.evidence.verdict import WITHHELD, decide
from harness.measure.speculative import VLLM_ACCEPTED, VLLM_DRAFT_TOKENS, VLLM_DRAFTS

WAVE = "SD1.r0.w000"
SD_SVC = {"start_index": 2, "first_leg": "SD1", "speculation": {"algorithm": "EAGLE", "draft_tokens": 3}}


def req(rid: str, **spec: Any) -> dict[str, Any]:
    """A measured request that streamed 97 tokens exactly (1 prefill + 96 one-token steps)."""
    return {"rid": rid, "wave_id": WAVE, "phase": "measured", "workload": "decode", "cached_tokens": 0,
            "prompt_tokens": 512, "ok": True, "error": None, "round_index": 0, "count_method": "server-cumulative",
            "completion_tokens": 97, "n_tokens": 97, "spec_source": "sglang-meta-info"} | spec


def matched(*requests: dict[str, Any], counters: dict[str, Any] | None = None) -> ArchiveData:
    metrics = [{"wave_id": WAVE, "phase": "measured", "spec_counters": counters}] if counters else []
    return replace(CLEAN, run=CLEAN.run | {"kind": "matched-sd", "protocol_class": "matched-sd",
                                           "claim_class": "speculative-full-target"},
                   requests=list(requests), services=[*CLEAN.services, SD_SVC], extra={"server_metrics": metrics})


HONEST = req("r0", spec_steps=96, spec_proposed=288, spec_accepted=0, spec_histogram=[96, 0, 0, 0])


def test_true_counts_raise_nothing() -> None:
    assert rule_reported_counts(matched(HONEST)) == []
    assert rule_reported_counts(CLEAN) == []  # nothing reported: nothing claimed


def test_the_huge_sglang_lie_names_the_request_the_field_and_the_values() -> None:
    lie = req("r7", spec_steps=1, spec_proposed=3, spec_accepted=2147483647, spec_histogram=[])
    (f,) = rule_reported_counts(matched(HONEST, lie))
    assert (f.rule, f.severity, f.rows, f.scope) == ("reported-counts", "blocking", (WAVE,), "rows")
    assert "r7: spec_accepted (spec_accepted 2147483647, spec_proposed 3) breaks accepted <= proposed" in f.message
    assert f.message.startswith("2 reported count(s) of 1 request(s)")


def test_the_vllm_lies_per_request_and_in_the_counters() -> None:
    lie = req("r1", spec_steps=96, spec_proposed=0, spec_accepted=1000000, spec_source="vllm-request-metrics",
              count_method="usage-per-chunk")
    (f,) = rule_reported_counts(matched(lie))
    assert "r1: spec_accepted (spec_accepted 1000000, spec_proposed 0) breaks accepted <= proposed" in f.message
    before = {VLLM_DRAFTS: 10.0, VLLM_DRAFT_TOKENS: 30.0, VLLM_ACCEPTED: 5.0}
    after = {VLLM_DRAFTS: 106.0, VLLM_DRAFT_TOKENS: 30.0, VLLM_ACCEPTED: 1000005.0}
    (g,) = rule_reported_counts(matched(HONEST, counters={"before": before, "after": after}))
    assert g.rows == (WAVE,) and f"wave {WAVE}: {VLLM_ACCEPTED} (accepted 1000000, draft_tokens 0)" in g.message
    assert decide("a1", "simulated", [g]).shown_verdict("sd-faster") == WITHHELD


def test_the_believable_lie_is_caught_by_the_stream() -> None:
    lie = req("r2", spec_steps=96, spec_proposed=288, spec_accepted=288, spec_histogram=[0, 0, 0, 96])
    (f,) = rule_reported_counts(matched(lie))
    assert ("r2: spec_accepted (spec_accepted 288, spec_steps 96, completion_tokens 97) breaks accepted + steps "
            "<= completion tokens + draft tokens 3") in f.message


def test_usage_lies_and_warmup_requests() -> None:
    (f,) = rule_reported_counts(matched(req("r3", cached_tokens=600)))
    assert "r3: cached_tokens (cached_tokens 600, prompt_tokens 512)" in f.message
    warm = req("r4", phase="warmup", spec_steps=1, spec_proposed=3, spec_accepted=2147483647)
    assert rule_reported_counts(matched(warm)) == []  # a warmup's counts are never used


def test_the_finding_withholds_the_matched_verdict_and_the_wave_s_rows() -> None:
    lie = req("r7", spec_steps=1, spec_proposed=3, spec_accepted=2147483647)
    findings = [f for f in check(matched(lie)) if f.rule == "reported-counts"]
    v = decide("a1", "simulated", findings, [{"wave_id": WAVE, "phase": "measured"}])
    assert v.shown_verdict("sd-faster") == WITHHELD and not v.row_valid(WAVE) and v.row_valid("AR1.r0.w000")
    none = pa.array([None, None], pa.string())
    tables = {"matched_sd": pa.table({"verdict": ["sd-faster"], "valid": [True], "superseded_by": none[:1]}),
              "acceptance": pa.table({"wave_id": [WAVE, "SD2.r0.w000"], "valid": [True, True],
                                      "superseded_by": none}),
              "waves": pa.table({"wave_id": [WAVE, "AR1.r0.w000"], "phase": ["measured"] * 2,
                                 "valid": [True, True], "superseded_by": none})}
    out, changed = marked(tables, "a1", findings)
    assert out["matched_sd"].column("verdict").to_pylist() == [WITHHELD]
    assert out["matched_sd"].column("verdict_as_measured").to_pylist() == ["sd-faster"]
    assert out["acceptance"].column("valid").to_pylist() == [False, True]
    assert out["waves"].column("valid").to_pylist() == [False, True]
    assert changed == {"matched_sd": 1, "acceptance": 1, "waves": 1}
