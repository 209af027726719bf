"""``dsv4h identity show|diff|model`` (harness/cli/identity_cmd.py) on small hand-made archives."""

from __future__ import annotations

import copy
import json
import struct
from pathlib import Path
from typing import Any

from testkit import run_block, run_cli

from harness.hashing import sha256_json
from harness.service.identity.runtime_identity import runtime_identity
from harness.store.archive import ArchiveWriter

_GIT = {"commit": "a" * 40, "branch": "main", "dirty_paths": [], "dirty": False, "diff_sha256": "0" * 64,
        "untracked": [], "untracked_count": 0, "untracked_truncated": False, "untracked_sha256": "1" * 64}
SERVICE: dict[str, Any] = {
    "name": "sim", "backend": "sim", "url": "http://127.0.0.1:0", "start_index": 1,
    "command": ["dsv4h", "sim", "serve", "--profile", "paper-tp8", "--port", "0"], "env_diff": {},
    "server_info": {"model_path": "sim://m", "tp_size": 8, "port": 0, "internal_states": [{"x": 1}]},
    "patches": None,
    "stack": {"model": None,
              "source_trees": [{"name": "sglang", "path": "/opt/sglang", "git": _GIT, "distribution": None,
                                "error": None},
                               {"name": "aiter", "path": "/opt/aiter", "git": _GIT, "distribution": None,
                                "error": None}],
              "mapped": {"at_start": {"pids": {}, "files": {"/opt/ccl/libccl.so": "2" * 64}}, "at_end": None}},
}


def _archive(ws: Path, service: dict[str, Any], campaign: str, *, second: dict[str, Any] | None = None) -> str:
    w = ArchiveWriter(ws)
    w.write_json("service.json", {"services": [service, *([second] if second else [])]})
    w.write_json("environment.json", {"packages": {"torch": "2.11.0"}})
    return w.finalize(status="complete", run=run_block(campaign=campaign)).name


def _json(*args: str) -> Any:
    code, out, err = run_cli(*args, "--json")
    assert code == 0, err
    return json.loads(out)


def test_show_computes_the_identity_of_an_archive_without_one(tmp_path: Path) -> None:
    aid = _archive(tmp_path, SERVICE, "a")
    shown = _json("identity", "show", aid, "-w", str(tmp_path))
    want = runtime_identity(SERVICE, packages={"torch": "2.11.0"})
    assert shown["hash"] == want["hash"] and shown["components"] == want["components"]
    assert shown["source"] == "computed from the service record" and shown["archive_id"] == aid
    code, text, err = run_cli("identity", "show", aid, "-w", str(tmp_path))
    assert code == 0, err
    assert want["components"]["source_trees"] in text  # hashes are never cut
    assert "none recorded (the hash of null): model, patches, speculation" in text


def test_show_prefers_the_recorded_identity_and_picks_a_service(tmp_path: Path) -> None:
    recorded = {"hash": "f" * 64, "components": {"model": "e" * 64}}
    second = copy.deepcopy(SERVICE) | {"start_index": 2}
    second["stack"]["runtime_identity"] = recorded
    aid = _archive(tmp_path, SERVICE, "a", second=second)
    shown = _json("identity", "show", aid, "--service", "2", "-w", str(tmp_path))
    assert shown["service"] == 2 and shown["source"] == "recorded" and shown["hash"] == "f" * 64
    code, _, err = run_cli("identity", "show", aid, "--service", "3", "-w", str(tmp_path))
    assert code == 6 and "no service with start index 3 (it has: 1, 2)" in err


def test_diff_names_the_one_differing_component_and_entry(tmp_path: Path) -> None:
    other = copy.deepcopy(SERVICE)
    other["stack"]["source_trees"][1]["git"] = _GIT | {"commit": "b" * 40, "dirty": True}
    other["server_info"]["port"] = 4321  # volatile: not a difference
    a, b = _archive(tmp_path, SERVICE, "a"), _archive(tmp_path, other, "b")
    out = _json("identity", "diff", a, b, "-w", str(tmp_path))
    assert out["same"] is False
    assert [(d["component"], d["entries"]) for d in out["differences"]] == [("source_trees", ["aiter"])]
    d = out["differences"][0]
    assert d["a"] == runtime_identity(SERVICE)["components"]["source_trees"] != d["b"]
    same = _json("identity", "diff", a, a, "-w", str(tmp_path))
    assert same["same"] is True and same["differences"] == []
    code, text, err = run_cli("identity", "diff", a, b, "-w", str(tmp_path))
    assert code == 0, err
    assert "1 of 8 components differ" in text and "aiter" in text


def test_diff_of_mapped_libraries_by_basename(tmp_path: Path) -> None:
    other = copy.deepcopy(SERVICE)
    other["stack"]["mapped"]["at_start"]["files"] = {"/opt/ccl-fixed/libccl.so": "3" * 64}
    a, b = _archive(tmp_path, SERVICE, "a"), _archive(tmp_path, other, "b")
    out = _json("identity", "diff", a, b, "-w", str(tmp_path))
    assert [(d["component"], d["entries"]) for d in out["differences"]] == [("mapped", ["libccl.so"])]


def test_archive_without_services_is_refused(tmp_path: Path) -> None:
    w = ArchiveWriter(tmp_path)
    aid = w.finalize(status="complete", run=run_block()).name
    code, _, err = run_cli("identity", "show", aid, "-w", str(tmp_path))
    assert code == 6 and "has no service.json" in err


def test_model_command_hashes_the_small_files_and_headers(tmp_path: Path) -> None:
    m = tmp_path / "model"
    m.mkdir()
    (m / "config.json").write_text('{"architectures": ["X"]}')
    header = json.dumps({"w": {"dtype": "F32", "shape": [1], "data_offsets": [0, 4]}}).encode()
    (m / "model.safetensors").write_bytes(struct.pack("<Q", len(header)) + header + b"\0\0\0\0")
    ident = _json("identity", "model", str(m))
    assert set(ident["files"]) == {"config.json"}
    assert ident["weights"] is None and list(ident["shard_headers"]) == ["model.safetensors"]
    assert ident["shard_headers"]["model.safetensors"]["tensors"] == 1
    hashed = _json("identity", "model", str(m), "--hash-weights")
    assert list(hashed["weights"]) == ["model.safetensors"] and sha256_json(hashed) != sha256_json(ident)
    code, _, err = run_cli("identity", "model", str(tmp_path / "none"))
    assert code == 4 and "none" in err
