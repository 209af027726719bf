"""runtime_identity over literal service records: one changed component is named, and only it."""

from __future__ import annotations

import copy
from typing import Any

import pytest

from harness.hashing import sha256_json
from harness.service.identity.runtime_identity import (
    COMPONENTS,
    component_differences,
    entry_differences,
    identity_diff,
    runtime_identity,
    served_config,
)

_TREE: dict[str, Any] = {"name": "sglang", "path": "/opt/sglang", "error": None,
         "git": {"root": "/opt/sglang", "commit": "a" * 40, "branch": "main", "dirty_paths": [], "dirty": False,
                 "diff_sha256": "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855",
                 "untracked": [], "untracked_count": 0, "untracked_truncated": False,
                 "untracked_sha256": "4f53cda18c2baa0c0354bb5f9a3ecbe5ed12ab4d8e11ba873c2f11161202b945"},
         "distribution": {"name": "sglang", "version": "0.5.23", "location": "/opt/sglang/python",
                          "editable": True, "editable_points_here": True}}

RECORD: dict[str, Any] = {
    "name": "sglang-tp8", "backend": "sglang", "url": "http://127.0.0.1:30000", "start_index": 1,
    "command": ["python3", "-m", "sglang.launch_server", "--model-path", "/m", "--tp", "8", "--host", "127.0.0.1",
                "--port", "30000"],
    "env_diff": {"NCCL_ALGO": "Ring"},
    "server_info": {"model_path": "/m", "tp_size": 8, "port": 30000, "host": "127.0.0.1", "nccl_port": 31000,
                    "random_seed": 12345, "internal_states": [{"last_gen_throughput": 88.6}], "status": "ready",
                    "version": "0.5.23", "speculative_algorithm": None},
    "patches": {"series": "model_patches/series.yaml", "status": "applied", "series_sha256": "b" * 64},
    "stack": {
        "model": {"path": "/m", "statement": "SHA-256 of config ...", "files": {"config.json": "c" * 64},
                  "index": None, "shard_headers": {}, "weights": None, "hashed": ["config.json"], "not_hashed": []},
        "source_trees": [_TREE, _TREE | {"name": "aiter", "git": _TREE["git"] | {"commit": "d" * 40}}],
        "mapped": {"at_start": {"pids": {}, "files": {"/opt/ccl/lib/libccl.so.1": "1" * 64,
                                                     "/usr/lib/libc.so.6": "2" * 64}}, "at_end": None},
    },
}


def _changed(path: tuple[Any, ...], value: Any) -> dict[str, Any]:
    rec = copy.deepcopy(RECORD)
    node: Any = rec
    for key in path[:-1]:
        node = node[key]
    node[path[-1]] = value
    return rec


def test_shape_and_hash_over_sorted_component_hashes() -> None:
    ident = runtime_identity(RECORD)
    assert set(ident) == {"hash", "components"}
    assert tuple(sorted(ident["components"])) == tuple(sorted(COMPONENTS))
    assert ident["hash"] == sha256_json(sorted(ident["components"].values()))
    assert ident["components"]["packages"] == sha256_json(None)
    assert ident["components"]["launch"] == sha256_json(
        {"argv": ["python3", "-m", "sglang.launch_server", "--model-path", "/m", "--tp", "8"],
         "env_diff": {"NCCL_ALGO": "Ring"}})
    assert ident["components"]["mapped"] == sha256_json({"libc.so.6": ["2" * 64], "libccl.so.1": ["1" * 64]})


def test_volatile_keys_do_not_change_the_identity() -> None:
    other = _changed(("server_info",), RECORD["server_info"] | {
        "port": 40000, "host": "0.0.0.0", "nccl_port": 41000, "random_seed": 7, "status": "starting",
        "internal_states": [{"last_gen_throughput": 1.0}]})
    other["command"] = [*RECORD["command"][:-1], "40000"]
    other["url"] = "http://127.0.0.1:40000"
    other["stack"]["model"]["path"] = "/elsewhere/m"
    other["stack"]["source_trees"][0]["path"] = "/home/x/sglang"
    other["stack"]["source_trees"][0]["git"]["branch"] = "other-branch"
    assert runtime_identity(other) == runtime_identity(RECORD)
    assert served_config(RECORD["server_info"]) == {"model_path": "/m", "tp_size": 8, "version": "0.5.23",
                                                    "speculative_algorithm": None}


@pytest.mark.parametrize(("path", "value", "component", "entries"), [
    (("stack", "source_trees", 1, "git", "diff_sha256"), "f" * 64, "source_trees", ["aiter"]),
    (("stack", "mapped", "at_start", "files", "/opt/ccl/lib/libccl.so.1"), "9" * 64, "mapped", ["libccl.so.1"]),
    (("stack", "model", "files", "config.json"), "0" * 64, "model", ["config.json"]),
    (("env_diff", "NCCL_ALGO"), "Tree", "launch", ["env.NCCL_ALGO"]),
    (("server_info", "tp_size"), 4, "served_config", ["tp_size"]),
    (("patches", "status"), "unapplied", "patches", [""]),
    (("server_info", "speculative_algorithm"), "EAGLE", "speculation", [""]),
])
def test_one_changed_component_is_named_alone(path: tuple[Any, ...], value: Any, component: str,
                                              entries: list[str]) -> None:
    other = _changed(path, value)
    if component == "speculation":  # the server argument is both served config and speculation
        diffs = [d[0] for d in identity_diff(runtime_identity(RECORD), runtime_identity(other))]
        assert diffs == ["served_config", "speculation"]
        return
    a, b = runtime_identity(RECORD), runtime_identity(other)
    diff = identity_diff(a, b)
    assert [d[0] for d in diff] == [component]
    assert diff[0][1] == a["components"][component] and diff[0][2] == b["components"][component]
    assert entry_differences(RECORD, other) == {component: entries}
    assert a["hash"] != b["hash"]


def test_packages_component_from_the_environment() -> None:
    a = runtime_identity(RECORD, packages={"torch": "2.11.0", "sglang": "0.5.23"})
    b = runtime_identity(RECORD, packages={"torch": "2.11.1", "sglang": "0.5.23"})
    assert [d[0] for d in identity_diff(a, b)] == ["packages"]
    declared, undeclared = component_differences(RECORD, RECORD, ["packages"], packages_a={"torch": "2.11.0"},
                                                 packages_b={"torch": "2.11.1"})
    assert declared == ["packages.torch"] and undeclared == []


def test_declared_and_undeclared_differences() -> None:
    other = _changed(("stack", "source_trees", 1, "git", "commit"), "e" * 40)
    other["stack"]["mapped"]["at_start"]["files"]["/opt/ccl/lib/libccl.so.1"] = "8" * 64
    other["env_diff"] = {"NCCL_ALGO": "Ring", "SGLANG_FLAG": "1"}
    assert component_differences(RECORD, other, ["source_trees.aiter", "mapped.libccl.so.1"]) == (
        ["source_trees.aiter", "mapped.libccl.so.1"], ["launch.env.SGLANG_FLAG"])
    assert component_differences(RECORD, other, ["source_trees", "launch"]) == (
        ["source_trees.aiter", "launch.env.SGLANG_FLAG"], ["mapped.libccl.so.1"])
    # the entry part is a glob over the whole entry name: a prefix alone covers nothing
    assert component_differences(RECORD, other, ["source_trees.ait", "mapped.libccl", "launch.env"]) == (
        [], ["source_trees.aiter", "launch.env.SGLANG_FLAG", "mapped.libccl.so.1"])
    assert component_differences(RECORD, other, ["mapped.libccl.so*", "launch.env.SGLANG_*"]) == (
        ["launch.env.SGLANG_FLAG", "mapped.libccl.so.1"], ["source_trees.aiter"])
    assert component_differences(RECORD, RECORD, ["model"]) == ([], [])


def test_a_component_present_on_one_side_only() -> None:
    other = copy.deepcopy(RECORD)
    del other["stack"]["mapped"]
    assert [d[0] for d in identity_diff(runtime_identity(RECORD), runtime_identity(other))] == ["mapped"]
    assert entry_differences(RECORD, other) == {"mapped": ["libc.so.6", "libccl.so.1"]}
    bare = {"command": RECORD["command"], "env_diff": {}}
    assert entry_differences(bare, bare | {"patches": None}) == {}
    assert identity_diff({"components": {"x": "1"}}, {"components": {}}) == [("x", "1", None)]
