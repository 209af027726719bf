"""Rule ids sd-reconcile, sd-outputs and acceptance-sources (harness.evidence.rules.speculative), with
literal matched.json and acceptance rows."""

from __future__ import annotations

from dataclasses import replace
from typing import Any

from test_evidence import CLEAN

from harness.evidence.findings import ArchiveData
from harness.evidence.rules import rule_acceptance_sources, rule_sd_outputs, rule_sd_reconcile
from harness.evidence.verdict import WITHHELD, decide


def matched(result: dict[str, Any], claim: str = "speculative-full-target") -> ArchiveData:
    return replace(CLEAN, run=CLEAN.run | {"claim_class": claim, "protocol_class": "matched-sd"},
                   extra={"matched": {"result": result}})


def test_a_disagreeing_matched_cycle_blocks_and_an_agreeing_one_is_nothing() -> None:
    # issue 37: the stream contradicting a or T_SD withholds the matched verdict (was a warning)
    (f,) = rule_sd_reconcile(matched({"reconciled": False, "reconcile_rel": -0.375, "t_sd_s": 0.02,
                                      "tokens_per_step": 2.2}))
    assert (f.rule, f.severity, f.scope) == ("sd-reconcile", "blocking", "run")
    assert decide("a1", "simulated", [f]).shown_verdict("sd-faster") == WITHHELD
    assert "by -37.5%" in f.message
    assert rule_sd_reconcile(matched({"reconciled": True, "reconcile_rel": 0.001})) == []
    assert rule_sd_reconcile(matched({"reconciled": None})) == []  # nothing measured: nothing claimed
    assert rule_sd_reconcile(CLEAN) == []


def test_full_target_outputs_that_differ_are_named() -> None:
    out = {"reference_leg": "AR1", "compared": 24, "identical": 22, "differing": 2,
           "first_differences": [["SD1", 0, "c3", 17], ["SD2", 1, "c5", 40]]}
    (f,) = rule_sd_outputs(matched({"outputs": out}))
    assert (f.rule, f.severity) == ("sd-outputs", "warning")
    assert "2 of 24 greedy outputs differ from AR1's" in f.message
    assert "SD1 wave 0 case c3 at token 17; SD2 wave 1 case c5 at token 40" in f.message
    assert rule_sd_outputs(matched({"outputs": out}, claim="speculative-approximate")) == []  # declared
    assert rule_sd_outputs(matched({"outputs": out | {"differing": 0}})) == []


def test_two_sources_of_one_wave_must_agree() -> None:
    same = {"verify_steps": 100, "drafts_proposed": 300, "drafts_accepted": 147}
    rows = [{"wave_id": "SD1.measured.w000", "source": "sglang-meta-info"} | same,
            {"wave_id": "SD1.measured.w000", "source": "vllm-metrics-delta"} | same,
            {"wave_id": "SD1.measured.w001", "source": "sglang-meta-info"} | same,
            {"wave_id": "SD1.measured.w001", "source": "vllm-metrics-delta"} | same | {"drafts_accepted": 150}]
    (f,) = rule_acceptance_sources(replace(CLEAN, extra={"acceptance": rows}))
    assert (f.rule, f.severity, f.rows) == ("acceptance-sources", "warning", ("SD1.measured.w001",))
    assert rule_acceptance_sources(replace(CLEAN, extra={"acceptance": rows[:3]})) == []


def test_formal_cells_whose_cycle_disagrees_are_named() -> None:
    cycles = {"cells": [{"cell_id": "decode-c16", "reconciled": True, "reconcile_rel": 0.004},
                        {"cell_id": "decode-c64", "reconciled": False, "reconcile_rel": 0.21}]}
    (f,) = rule_sd_reconcile(replace(CLEAN, extra={"cycles": cycles}))
    assert (f.rule, f.severity, f.rows) == ("sd-reconcile", "warning", ("decode-c64",))
    assert "decode-c64: +21.0%" in f.message
    assert rule_sd_reconcile(replace(CLEAN, extra={"cycles": {"cells": cycles["cells"][:1]}})) == []
