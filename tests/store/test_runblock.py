"""The archive manifest's run block: typed, versioned, format-1 blocks read through the reader."""

from __future__ import annotations

import pytest

from harness.errors import ArchiveError
from harness.store.runblock import RUN_BLOCK_VERSION, RunBlock, read_run_block

V1_CAMPAIGN: dict[str, object] = {
    "campaign": "demo", "kind": "formal-matrix", "claim_class": "native-ar", "protocol_class": "formal",
    "backend": "sim", "service_name": "sim", "plan_id": "abc", "created_wall": "2026-11-29T10:00:00+0000",
    "run_token": "t1", "service_starts": 1, "resumed_from": None, "labels": ["simulated"], "error": None,
    "oracles_failed": 0, "identity_hash": "h", "direction": None, "analysis_plan": None}
V1_ABBA: dict[str, object] = {
    "campaign": "s", "kind": "abba", "claim_class": "native-ar", "protocol_class": "abba-screen",
    "backend": "sim", "service_name": "a vs b", "created_wall": "2026-11-29T10:00:00+0000", "run_token": "t2",
    "labels": [], "error": None, "failed_leg": None, "oracles_failed": 0, "identity_hash": "h",
    "direction": None, "candidate_identity_hash": "k"}


@pytest.mark.parametrize("raw", [V1_CAMPAIGN, V1_ABBA])
def test_format_1_blocks_of_both_writers_are_read(raw: dict[str, object]) -> None:
    run = read_run_block({"run": raw})
    assert run.run_format == RUN_BLOCK_VERSION
    assert run.campaign == raw["campaign"] and run.kind == raw["kind"]
    assert run.simulated


def test_format_1_block_missing_optional_keys_gets_defaults() -> None:
    run = read_run_block({"run": {"campaign": "x", "kind": "formal-matrix", "claim_class": "native-ar",
                                  "protocol_class": "formal", "backend": "sglang", "created_wall": ""}})
    assert (run.labels, run.identity_hash, run.run_token, run.plan_id) == ((), "", "", None)
    assert not run.simulated


def test_round_trip_through_json() -> None:
    run = RunBlock.model_validate(V1_CAMPAIGN)
    assert read_run_block({"run": run.to_json()}) == run
    assert run.to_json()["run_format"] == 2


def test_mixed_backend_screen_is_simulated_when_one_side_is() -> None:
    assert RunBlock.model_validate(V1_ABBA | {"backend": "sglang+sim", "labels": []}).simulated


@pytest.mark.parametrize(("manifest", "match"), [
    ({}, "no 'run' block"),
    ({"run": V1_CAMPAIGN | {"run_format": 9}}, "run block format 9 is not supported"),
    ({"run": V1_CAMPAIGN | {"kind": "nope"}}, "invalid run block"),
    ({"run": V1_CAMPAIGN | {"surprise": 1}}, "unknown key 'surprise'"),
])
def test_malformed_blocks_are_archive_errors(manifest: dict[str, object], match: str) -> None:
    with pytest.raises(ArchiveError, match=match):
        read_run_block(manifest)
