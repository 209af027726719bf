"""Service identity fingerprints ignore start-to-start noise and catch configuration changes."""

from __future__ import annotations

from harness.service.identity.identity import identity_hash

BASE = {"backend": "sglang", "command": ["python", "-m", "sglang.launch_server", "--tp-size", "8", "--port", "30021"],
        "env_diff": {"X": "1"}, "server_info": {"tp_size": 8, "port": 30021, "internal_states": [{"a": 1}]},
        "witnesses": [{"tp_rank": 0, "attention": "triton", "pid": 11}], "patches": {"series_sha256": "ab"}}


def test_same_config_different_start_same_hash() -> None:
    other = BASE | {"command": [*BASE["command"][:-1], "30099"],  # type: ignore[index]
                    "server_info": {"tp_size": 8, "port": 30099, "internal_states": [{"a": 2}]},
                    "witnesses": [{"tp_rank": 0, "attention": "triton", "pid": 99}]}
    assert identity_hash([BASE]) == identity_hash([other]) != ""


def test_config_changes_change_hash() -> None:
    h = identity_hash([BASE])
    assert identity_hash([BASE | {"env_diff": {"X": "2"}}]) != h
    assert identity_hash([BASE | {"server_info": {"tp_size": 4}}]) != h
    assert identity_hash([BASE | {"witnesses": [{"tp_rank": 0, "attention": "fa3"}]}]) != h
    assert identity_hash([BASE | {"patches": {"series_sha256": "cd"}}]) != h
    assert identity_hash([]) == ""
