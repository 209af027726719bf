"""The served speculative configuration (issue 26): read from the server, part of the identity, checked
against the claim class at service start."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from harness.errors import IdentityMismatch
from harness.inputs.spec import ServiceProfile
from harness.service.identity.identity import identity_hash, service_fingerprint
from harness.service.identity.speculative_identity import claim_conflicts, launch_speculation, served_speculation
from harness.service.launch.manager import check_identity, start_service, verify_identity

# what SGLang 0.5.23 /server_info reports (sglang/srt/arg_groups/fields/spec.py names and defaults)
NATIVE = {"model_path": "/m", "tp_size": 8, "speculative_algorithm": None, "speculative_draft_model_path": None,
          "speculative_num_steps": None, "speculative_eagle_topk": None, "speculative_num_draft_tokens": None,
          "speculative_accept_threshold_single": 1.0, "speculative_accept_threshold_acc": 1.0}
EAGLE = NATIVE | {"speculative_algorithm": "EAGLE", "speculative_draft_model_path": "/draft",
                  "speculative_num_steps": 3, "speculative_eagle_topk": 1, "speculative_num_draft_tokens": 4}
VLLM_ARGV = ["py", "-m", "vllm.entrypoints.openai.api_server", "--model", "/m", "--speculative-config",
             json.dumps({"method": "eagle3", "model": "/d3", "num_speculative_tokens": 2}), "--port", "8000"]
MODELS = {"_source": "/v1/models", "models": {"data": [{"id": "/m", "max_model_len": 4096}]}}


def test_sglang_server_info_read_literally() -> None:
    assert served_speculation(NATIVE) is None
    assert served_speculation(NATIVE | {"speculative_algorithm": "NONE"}) is None
    assert served_speculation(EAGLE) == {"algorithm": "EAGLE", "draft_model": "/draft", "num_steps": 3,
                                         "eagle_topk": 1, "num_draft_tokens": 4, "draft_tokens": 3,
                                         "approximate": False, "source": "server_info"}
    tree = served_speculation(EAGLE | {"speculative_eagle_topk": 4, "speculative_num_draft_tokens": 8})
    assert tree is not None and tree["draft_tokens"] == 3  # a tree: k is the step count, not the node count
    relaxed = served_speculation(EAGLE | {"speculative_accept_threshold_acc": 0.5})
    assert relaxed is not None and relaxed["approximate"] is True


def test_server_report_wins_over_launch_flags() -> None:
    argv = ["--speculative-algorithm", "EAGLE", "--speculative-num-draft-tokens", "4"]
    assert served_speculation(NATIVE, argv) is None  # the server says native: flags prove nothing
    got = served_speculation({}, argv)
    assert got is not None and got["source"] == "launch-argv" and got["draft_tokens"] == 3


def test_vllm_from_launch_argv_and_dev_server_info() -> None:
    assert served_speculation(MODELS, VLLM_ARGV[:5]) is None
    got = served_speculation(MODELS, VLLM_ARGV)
    assert got == {"algorithm": "eagle3", "draft_model": "/d3", "num_steps": None, "eagle_topk": None,
                   "num_draft_tokens": None, "draft_tokens": 2, "approximate": False, "source": "launch-argv"}
    eq = launch_speculation(["--speculative-config={\"method\": \"ngram\", \"num_speculative_tokens\": 5}"])
    assert eq is not None and (eq["algorithm"], eq["draft_tokens"]) == ("ngram", 5)
    dotted = launch_speculation(["-sc.method", "ngram", "--speculative-config.num_speculative_tokens=4"])
    assert dotted is not None and (dotted["algorithm"], dotted["draft_tokens"]) == ("ngram", 4)
    short = launch_speculation(["-sc", json.dumps({"method": "mtp", "num_speculative_tokens": 1})])
    assert short is not None and (short["algorithm"], short["draft_tokens"]) == ("mtp", 1)
    # vLLM 0.32.0 VLLM_SERVER_DEV_MODE=1: GET /server_info?config_format=json
    dev = {"vllm_config": {"speculative_config": {"method": "draft_model", "model": "/small",
                                                  "num_speculative_tokens": 4, "rejection_sample_method": "synthetic"}}}
    got = served_speculation(dev, VLLM_ARGV)
    assert got is not None and (got["source"], got["draft_tokens"], got["approximate"]) == ("vllm-server-info", 4, True)
    assert served_speculation({"vllm_config": {"speculative_config": None}}, VLLM_ARGV) is None


def test_claim_conflicts_name_the_field_and_the_fix() -> None:
    eagle = served_speculation(EAGLE)
    assert claim_conflicts("native-ar", None) == []
    assert claim_conflicts("speculative-full-target", eagle) == []
    assert claim_conflicts("speculative-approximate", eagle) == []  # the claim class is its own declaration
    assert claim_conflicts("external", None) == []
    (native,) = claim_conflicts("native-ar", eagle)
    assert "claim_class is native-ar" in native and "'EAGLE'" in native and "speculative-full-target" in native
    (spec,) = claim_conflicts("speculative-full-target", None, where="--claim-class")
    assert "--claim-class is speculative-full-target" in spec and "no speculative algorithm" in spec
    assert "set --claim-class to native-ar" in spec
    (approx,) = claim_conflicts("speculative-full-target", served_speculation(EAGLE | {
        "speculative_accept_threshold_single": 0.9}))
    assert "relaxes acceptance" in approx and "speculative-approximate" in approx


def _profile(**kw: Any) -> ServiceProfile:
    return ServiceProfile.model_validate({"name": "t", "backend": "sglang", "model_path": "/m", "python": "/py"} | kw)


def test_check_identity_claims_on_both_protocols() -> None:
    prof = _profile(tp_size=8)
    assert check_identity(prof, NATIVE, "native-ar") == []
    refused = check_identity(prof, NATIVE, "speculative-full-target")
    assert [d.split(":")[0] for d in refused] == ["speculative_algorithm"]
    assert check_identity(prof, EAGLE, "speculative-full-target") == []
    assert len(check_identity(prof, EAGLE, "native-ar")) == 1
    vllm = _profile(backend="vllm")
    assert check_identity(vllm, MODELS, "native-ar", VLLM_ARGV[:5]) == []
    assert len(check_identity(vllm, MODELS, "native-ar", VLLM_ARGV)) == 1
    assert check_identity(vllm, MODELS, "speculative-full-target", VLLM_ARGV) == []
    assert len(check_identity(vllm, MODELS, "speculative-full-target", VLLM_ARGV[:5])) == 1


def test_speculation_is_part_of_the_identity() -> None:
    base = {"backend": "sglang", "command": ["python", "-m", "sglang.launch_server"], "server_info": NATIVE}
    assert "speculation" not in service_fingerprint(base)  # native fingerprints are unchanged by issue 26
    eagle = base | {"server_info": EAGLE}
    assert service_fingerprint(eagle)["speculation"]["draft_tokens"] == 3
    longer = base | {"server_info": EAGLE | {"speculative_num_steps": 5, "speculative_num_draft_tokens": 6}}
    assert len({identity_hash([base]), identity_hash([eagle]), identity_hash([longer])}) == 3
    vllm = {"backend": "vllm", "command": VLLM_ARGV, "server_info": MODELS}
    assert service_fingerprint(vllm)["speculation"]["algorithm"] == "eagle3"


def test_native_simulator_passes_native_ar_and_is_refused_as_speculative(tmp_path: Path) -> None:
    prof = ServiceProfile.model_validate({"name": "spec-id-sim", "backend": "sim", "sim": {"profile": "fast"},
                                          "startup_timeout_s": 60})
    svc = start_service(prof, tmp_path, label="spec-id")
    try:
        assert svc.server_info.get("speculative_algorithm") is None
        verify_identity(svc, "native-ar")
        assert svc.identity()["speculation"] is None
        with pytest.raises(IdentityMismatch, match="no speculative algorithm") as exc:
            verify_identity(svc, "speculative-full-target")
        assert exc.value.hint is not None and "claim_class" in exc.value.hint
    finally:
        svc.stop()


def test_speculative_simulator_passes_its_claim_and_is_refused_as_native(tmp_path: Path) -> None:
    from harness.sim.profiles import SPECULATIVE_PROFILE_DIR

    prof = ServiceProfile.model_validate({"name": "spec-id-eagle", "backend": "sim", "startup_timeout_s": 60,
                                          "sim": {"profile_file": str(SPECULATIVE_PROFILE_DIR / "fast-eagle.yaml")}})
    svc = start_service(prof, tmp_path, label="spec-id-eagle")
    try:
        verify_identity(svc, "speculative-full-target")
        spec = svc.identity()["speculation"]
        assert (spec["algorithm"], spec["draft_tokens"], spec["source"]) == ("EAGLE", 3, "server_info")
        with pytest.raises(IdentityMismatch, match="claim_class is native-ar but the server runs 'EAGLE'"):
            verify_identity(svc, "native-ar")
    finally:
        svc.stop()
