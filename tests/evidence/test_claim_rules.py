"""Rule ids speculative-native and claim-vs-server (issue 26): the run's claim class against the
recorded services' speculative configuration, for archives made anywhere."""

from __future__ import annotations

import json
from dataclasses import replace
from typing import Any

from test_evidence import CLEAN, SVC, rules_hit

from harness.evidence.findings import ArchiveData
from harness.evidence.rules import check, rule_claim_vs_server, rule_speculative_native

EAGLE_INFO = {"tp_size": 8, "_source": "/server_info", "speculative_algorithm": "EAGLE",
              "speculative_num_steps": 3, "speculative_eagle_topk": 1, "speculative_num_draft_tokens": 4}
NATIVE_INFO = {"tp_size": 8, "_source": "/server_info", "speculative_algorithm": None}
VLLM_SD = {"start_index": 2, "url": "http://127.0.0.1:2", "backend": "vllm",
           "server_info": {"_source": "/v1/models", "models": {"data": [{"id": "/m"}]}},
           "command": ["py", "-m", "vllm.entrypoints.openai.api_server", "--model", "/m", "--speculative-config",
                       json.dumps({"method": "ngram", "num_speculative_tokens": 3})]}


def claimed(claim: str, *services: dict[str, Any]) -> ArchiveData:
    return replace(CLEAN, run=CLEAN.run | {"claim_class": claim}, services=list(services))


def test_speculative_claim_on_native_server_is_blocking() -> None:
    d = claimed("speculative-full-target", SVC | {"server_info": NATIVE_INFO})
    (f,) = rule_claim_vs_server(d)
    assert (f.rule, f.severity, f.scope, f.rows) == ("claim-vs-server", "blocking", "run", ("service#1",))
    assert "claim_class is speculative-full-target" in f.message and "no speculative algorithm" in f.message
    assert "claim-vs-server" in rules_hit(d, "blocking")
    # an archive from before servers reported the key at all: native too
    assert [x.rule for x in rule_claim_vs_server(claimed("speculative-approximate", SVC))] == ["claim-vs-server"]


def test_matching_claims_raise_nothing() -> None:
    assert check(claimed("speculative-full-target", SVC | {"server_info": EAGLE_INFO})) == []
    assert check(claimed("speculative-approximate", SVC | {"server_info": EAGLE_INFO})) == []
    assert rule_claim_vs_server(claimed("speculative-full-target", VLLM_SD)) == []
    assert rule_claim_vs_server(claimed("native-ar", SVC)) == []  # native-ar: speculative-native's business
    assert rule_claim_vs_server(claimed("external", SVC)) == []


def test_relaxed_verification_under_full_target_is_blocking() -> None:
    relaxed = SVC | {"server_info": EAGLE_INFO | {"speculative_accept_threshold_single": 0.7}}
    (f,) = rule_claim_vs_server(claimed("speculative-full-target", relaxed))
    assert "relaxes acceptance" in f.message and f.blocking
    assert rule_claim_vs_server(claimed("speculative-approximate", relaxed)) == []


def test_only_the_disagreeing_service_is_named() -> None:
    d = claimed("speculative-full-target", SVC | {"server_info": EAGLE_INFO}, SVC | {"start_index": 2})
    (f,) = rule_claim_vs_server(d)
    assert f.rows == ("service#2",)


def test_speculative_native_reads_vllm_launch_argv() -> None:
    (f,) = rule_speculative_native(claimed("native-ar", VLLM_SD))
    assert (f.rule, f.severity, f.rows) == ("speculative-native", "blocking", ("service#2",))
    assert rule_speculative_native(claimed("native-ar", SVC | {"server_info": NATIVE_INFO})) == []
    # the server's report wins over a launch flag (rule 5)
    flagged = SVC | {"server_info": NATIVE_INFO, "command": ["--speculative-algorithm", "EAGLE"]}
    assert rule_speculative_native(claimed("native-ar", flagged)) == []


def test_matched_run_checks_each_arm_under_its_own_claim() -> None:
    ar = SVC | {"start_index": 1, "first_leg": "AR1", "server_info": NATIVE_INFO}
    sd = SVC | {"start_index": 2, "first_leg": "SD1", "server_info": EAGLE_INFO}
    run = CLEAN.run | {"claim_class": "speculative-full-target", "protocol_class": "matched-sd"}
    both = replace(CLEAN, run=run, services=[ar, sd])
    assert rule_speculative_native(both) == rule_claim_vs_server(both) == []
    swapped = replace(CLEAN, run=run, services=[ar | {"server_info": EAGLE_INFO}, sd | {"server_info": NATIVE_INFO}])
    assert [(f.rule, f.rows) for f in rule_speculative_native(swapped)] == [("speculative-native", ("service#1",))]
    assert [(f.rule, f.rows) for f in rule_claim_vs_server(swapped)] == [("claim-vs-server", ("service#2",))]
    # outside a matched run, an AR-named leg is just a leg of the run's claim
    abba = replace(swapped, run=run | {"protocol_class": "abba-screen"})
    assert [f.rows for f in rule_claim_vs_server(abba)] == [("service#2",)]
    assert rule_speculative_native(abba) == []
