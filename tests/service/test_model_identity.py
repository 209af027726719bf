"""Model identity without reading the weights (issue 27): known-answer hashes over the exact bytes, the
weight-hash cache, and model directories handed over by someone else."""

from __future__ import annotations

import hashlib
import json
import os
import struct
from pathlib import Path
from typing import Any

import numpy as np
import pytest

import harness.service.identity.model_identity as mi
from harness.engines.tiny_model import make_tiny_llama
from harness.errors import DsvError, ServiceError
from harness.service.identity.model_identity import model_identity, model_statement, read_index, read_shard_header

CONFIG = b'{"model_type": "llama", "hidden_size": 8}\n'
GEN = b'{"eos_token_id": 2}\n'
TOK = b'{"version": "1.0", "model": {"type": "BPE"}}\n'
TOK_CFG = b'{"bos_token": "<s>"}\n'


def sha(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


def shard_bytes(tensors: dict[str, np.ndarray]) -> tuple[bytes, bytes]:
    """(the file's bytes, its 8-byte length + JSON header) for float32 tensors, written by hand."""
    header: dict[str, Any] = {"__metadata__": {"format": "pt"}}
    blobs, offset = [], 0
    for name, arr in tensors.items():
        data = np.ascontiguousarray(arr, dtype="<f4").tobytes()
        header[name] = {"dtype": "F32", "shape": list(arr.shape), "data_offsets": [offset, offset + len(data)]}
        blobs.append(data)
        offset += len(data)
    hjson = json.dumps(header).encode()
    head = struct.pack("<Q", len(hjson)) + hjson
    return head + b"".join(blobs), head


def meta_files(d: Path) -> None:
    d.mkdir(parents=True, exist_ok=True)
    for name, data in (("config.json", CONFIG), ("generation_config.json", GEN), ("tokenizer.json", TOK),
                       ("tokenizer_config.json", TOK_CFG)):
        (d / name).write_bytes(data)


SHARDS: dict[str, dict[str, np.ndarray]] = {
    "model-00001-of-00002.safetensors": {"a.weight": np.arange(6, dtype=np.float32).reshape(2, 3),
                                         "b.weight": np.ones(4, dtype=np.float32)},
    "model-00002-of-00002.safetensors": {"c.weight": np.full((3, 2), 0.5, dtype=np.float32)}}


def sharded_model(d: Path) -> tuple[dict[str, bytes], dict[str, bytes], bytes]:
    """An index + 2 shards model: ({shard: file bytes}, {shard: header bytes}, index bytes)."""
    meta_files(d)
    full, heads = {}, {}
    for name, tensors in SHARDS.items():
        full[name], heads[name] = shard_bytes(tensors)
        (d / name).write_bytes(full[name])
    wmap = {t: name for name, tensors in SHARDS.items() for t in tensors}
    index = json.dumps({"metadata": {"total_size": 64}, "weight_map": wmap}, indent=2).encode()
    (d / mi.INDEX_NAME).write_bytes(index)
    return full, heads, index


def test_sharded_model_known_answers(tmp_path: Path) -> None:
    d = tmp_path / "m"
    full, heads, index = sharded_model(d)
    (d / "README.md").write_text("hello\n")
    ident = model_identity(d)
    assert ident["path"] == str(d)
    assert ident["files"] == {"config.json": sha(CONFIG), "generation_config.json": sha(GEN),
                              "tokenizer.json": sha(TOK), "tokenizer_config.json": sha(TOK_CFG),
                              mi.INDEX_NAME: sha(index)}
    wmap = {"a.weight": "model-00001-of-00002.safetensors", "b.weight": "model-00001-of-00002.safetensors",
            "c.weight": "model-00002-of-00002.safetensors"}
    canonical = json.dumps(wmap, sort_keys=True, separators=(",", ":")).encode()
    assert ident["index"] == {"sha256": sha(index), "total_size": 64, "weight_map_sha256": sha(canonical),
                              "shards": sorted(SHARDS)}
    for name, tensors in SHARDS.items():
        assert ident["shard_headers"][name] == {"header_len": len(heads[name]) - 8,
                                                "header_sha256": sha(heads[name]),
                                                "tensors": len(tensors), "file_size": len(full[name])}
    assert ident["weights"] is None and ident["errors"] == {} and ident["outside_links"] == {}
    assert "model-00001-of-00002.safetensors (weight bytes)" in ident["not_hashed"]
    assert "README.md (file, not read)" in ident["not_hashed"]
    assert "model-00002-of-00002.safetensors (safetensors header)" in ident["hashed"]
    assert ident["statement"] == ("SHA-256 of config, generation config, tokenizer files, the shard index and "
                                  "each of 2 shards' safetensors header; not the weight bytes.")
    assert model_statement(ident) == ident["statement"]
    json.dumps(ident, allow_nan=False)  # plain JSON
    assert model_identity(d) == ident  # deterministic


def test_header_changes_with_layout_not_values(tmp_path: Path) -> None:
    d = tmp_path / "m"
    sharded_model(d)
    before = model_identity(d)["shard_headers"]
    name = "model-00002-of-00002.safetensors"
    same_layout, _ = shard_bytes({"c.weight": np.full((3, 2), 0.25, dtype=np.float32)})
    (d / name).write_bytes(same_layout)
    assert model_identity(d)["shard_headers"] == before  # what the statement says: not the weight bytes
    other_layout, _ = shard_bytes({"c.weight": np.full((2, 3), 0.5, dtype=np.float32)})
    (d / name).write_bytes(other_layout)
    assert model_identity(d)["shard_headers"][name]["header_sha256"] != before[name]["header_sha256"]


def test_single_file_model(tmp_path: Path) -> None:
    d = tmp_path / "m"
    meta_files(d)
    (d / "generation_config.json").unlink()
    full, head = shard_bytes({"w": np.zeros((4, 4), dtype=np.float32)})
    (d / "model.safetensors").write_bytes(full)
    ident = model_identity(d)
    assert ident["index"] is None
    assert ident["shard_headers"] == {"model.safetensors": {"header_len": len(head) - 8, "header_sha256": sha(head),
                                                            "tensors": 1, "file_size": len(full)}}
    assert "generation_config.json (absent)" in ident["not_hashed"]
    assert ident["statement"] == ("SHA-256 of config, tokenizer files and the safetensors header; "
                                  "not the weight bytes.")
    weighed = model_identity(d, hash_weights=True)
    assert weighed["weights"] == {"model.safetensors": sha(full)}
    assert weighed["statement"] == ("SHA-256 of config, tokenizer files and the safetensors header, and every "
                                    "weight byte of 1 shard.")
    assert "model.safetensors (all bytes)" in weighed["hashed"]


def test_hash_weights_parallel_cached(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    d = tmp_path / "m"
    full, _, _ = sharded_model(d)
    cache = tmp_path / "cache" / "weight-hashes.json"
    calls: list[str] = []
    real = mi.hash_file

    def counting(path: Path, **kw: Any) -> str:
        if path.suffix == ".safetensors":
            calls.append(path.name)
        return real(path, **kw)

    monkeypatch.setattr(mi, "hash_file", counting)
    seen: list[tuple[int, int]] = []
    first = model_identity(d, hash_weights=True, cache_file=cache, progress=lambda a, b: seen.append((a, b)),
                           workers=2)
    total = sum(len(b) for b in full.values())
    assert first["weights"] == {name: sha(data) for name, data in full.items()}
    assert sorted(calls) == sorted(SHARDS)
    assert seen[0] == (0, total) and seen[-1] == (total, total)
    assert first["statement"].endswith("safetensors header, and every weight byte of 2 shards.")
    calls.clear()
    second = model_identity(d, hash_weights=True, cache_file=cache, workers=2)
    assert calls == [] and second == first
    # a cache entry whose key (path, size, mtime_ns) no longer matches is ignored
    name = "model-00002-of-00002.safetensors"
    changed, _ = shard_bytes({"c.weight": np.full((3, 2), 7.0, dtype=np.float32)})
    (d / name).write_bytes(changed)
    st = (d / name).stat()
    os.utime(d / name, ns=(st.st_atime_ns, st.st_mtime_ns + 1_000_000_000))
    third = model_identity(d, hash_weights=True, cache_file=cache)
    assert calls == [name] and third["weights"][name] == sha(changed)
    # a foreign or corrupt cache file is an empty cache, never an error
    cache.write_text("{not json")
    calls.clear()
    assert model_identity(d, hash_weights=True, cache_file=cache)["weights"] == third["weights"]
    assert sorted(calls) == sorted(SHARDS)


def test_tiny_llama_without_weights(tmp_path: Path) -> None:
    d = make_tiny_llama(tmp_path / "tiny")
    ident = model_identity(d, hash_weights=True)
    assert set(ident["files"]) == {"config.json", "generation_config.json", "tokenizer.json",
                                   "tokenizer_config.json"}
    assert ident["files"]["tokenizer.json"] == sha((d / "tokenizer.json").read_bytes())
    assert ident["shard_headers"] == {} and ident["weights"] == {}
    assert ident["statement"] == ("SHA-256 of config, generation config and tokenizer files; "
                                  "no safetensors weight files were found.")


# --- hostile model directories ------------------------------------------------------------------------


def header_file(path: Path, hlen: int, body: bytes) -> Path:
    path.write_bytes(struct.pack("<Q", hlen) + body)
    return path


@pytest.mark.parametrize(("hlen", "body", "problem"), [
    (10_000, b"{}", "header length 10000 exceeds the file (10 bytes)"),
    (mi.MAX_HEADER + 1, None, f"exceeds the {mi.MAX_HEADER}-byte limit"),
    (-1, b"not json!", "header is not UTF-8 JSON"),
    (-1, b"[1,2]", "header is not a JSON object (a list)"),
    (-1, b"\xff\xfe", "header is not UTF-8 JSON"),
    (-1, b"{}", None),  # an empty header is valid
    (-1, b'{"t":{"dtype":"F32","shape":[4],"data_offsets":[0,16]}}', "data section (truncated file?)"),
    (-1, b'{"t":{"dtype":"F32","data_offsets":3}}', "data_offsets must be [begin, end]"),
    (-1, b"[" * 100_000 + b"]" * 100_000, "header is not UTF-8 JSON"),  # nesting past the recursion limit
])
def test_hostile_headers(tmp_path: Path, hlen: int, body: bytes | None, problem: str | None) -> None:
    d = tmp_path / "m"
    meta_files(d)
    path = d / "model.safetensors"
    if body is None:  # a header length beyond the cap, in a file that is big enough (sparse)
        with path.open("wb") as fh:
            fh.write(struct.pack("<Q", hlen))
            fh.truncate(hlen + 16)
    else:
        header_file(path, len(body) if hlen < 0 else hlen, body)  # -1: the body's own length
    if problem is None:
        assert read_shard_header(path).tensors == 0
        return
    with pytest.raises(ServiceError) as err:
        read_shard_header(path)
    assert str(path) in err.value.message and problem in err.value.message
    ident = model_identity(d)
    assert ident["shard_headers"]["model.safetensors"] == {"error": err.value.message}
    assert ident["errors"] == {"model.safetensors": err.value.message}
    assert "model.safetensors (error)" in ident["not_hashed"]
    assert "1 file could not be read (see errors: model.safetensors)" in ident["statement"]
    assert "safetensors header" not in ident["statement"]


def test_short_file_and_fifo(tmp_path: Path) -> None:
    short = tmp_path / "short.safetensors"
    short.write_bytes(b"\x01\x00")
    with pytest.raises(ServiceError, match="too short"):
        read_shard_header(short)
    fifo = tmp_path / "fifo.safetensors"
    os.mkfifo(fifo)
    with pytest.raises(ServiceError, match="not a regular file"):
        read_shard_header(fifo)  # never blocks waiting for a writer


def test_missing_shard_named_by_index(tmp_path: Path) -> None:
    d = tmp_path / "m"
    sharded_model(d)
    (d / "model-00002-of-00002.safetensors").unlink()
    ident = model_identity(d, hash_weights=True)
    msg = f"{d / 'model-00002-of-00002.safetensors'}: named by {mi.INDEX_NAME} but missing"
    assert ident["errors"] == {"model-00002-of-00002.safetensors": msg}
    assert ident["shard_headers"]["model-00002-of-00002.safetensors"] == {"error": msg}
    assert list(ident["weights"]) == ["model-00001-of-00002.safetensors"]
    assert ident["statement"].startswith("SHA-256 of config, generation config, tokenizer files, the shard index "
                                         "and 1 shard's safetensors header, and every weight byte of 1 of 2 shards.")


@pytest.mark.parametrize(("index", "problem"), [
    ({"weight_map": ["a", "b"]}, "weight_map is not a mapping (a list)"),
    ({"metadata": {}}, "weight_map is not a mapping (a NoneType)"),
    ([1], "not a JSON object (a list)"),
    ({"weight_map": {"a": 3}}, "weight_map['a'] is not a file name: 3"),
    ({"weight_map": {"a": "../../etc/passwd"}}, "weight_map['a'] names '../../etc/passwd': not a relative name inside"),
    ({"weight_map": {"\ud800": "x.safetensors"}}, "holds a tensor name that is not UTF-8"),
    ({"weight_map": {"a": "\ud800.safetensors"}}, "not a relative name inside the model directory"),
    ({"weight_map": {"a": "/etc/passwd"}}, "names '/etc/passwd': not a relative name inside the model directory"),
])
def test_hostile_index(tmp_path: Path, index: Any, problem: str) -> None:
    d = tmp_path / "m"
    _, heads, _ = sharded_model(d)
    raw = json.dumps(index).encode()
    (d / mi.INDEX_NAME).write_bytes(raw)
    with pytest.raises(ServiceError) as err:
        read_index(d / mi.INDEX_NAME)
    assert isinstance(err.value, DsvError) and str(d / mi.INDEX_NAME) in err.value.message
    assert problem in err.value.message
    ident = model_identity(d)
    assert ident["index"] is None and ident["errors"] == {mi.INDEX_NAME: err.value.message}
    assert ident["files"][mi.INDEX_NAME] == sha(raw)  # its bytes are still recorded
    # the shards present are still read (top-level *.safetensors), and nothing outside is
    assert {n: h["header_sha256"] for n, h in ident["shard_headers"].items()} == {n: sha(h) for n, h in heads.items()}


def test_index_not_json(tmp_path: Path) -> None:
    d = tmp_path / "m"
    sharded_model(d)
    (d / mi.INDEX_NAME).write_bytes(b"\x00\x01garbage")
    ident = model_identity(d)
    assert "not UTF-8 JSON" in ident["errors"][mi.INDEX_NAME] and ident["index"] is None


def test_symlink_out_of_the_model_dir_is_recorded(tmp_path: Path) -> None:
    d = tmp_path / "m"
    full, _, _ = sharded_model(d)
    elsewhere = tmp_path / "blobs"
    elsewhere.mkdir()
    name = "model-00002-of-00002.safetensors"
    (d / name).rename(elsewhere / "abc")
    (d / name).symlink_to(elsewhere / "abc")
    (d / "config.json").unlink()
    (elsewhere / "cfg").write_bytes(b'{"other": 1}')
    (d / "config.json").symlink_to(Path("..") / "blobs" / "cfg")
    inner = d / "sub"
    inner.mkdir()
    (inner / "t.json").write_bytes(TOK)
    (d / "tokenizer.json").unlink()
    (d / "tokenizer.json").symlink_to(Path("sub") / "t.json")  # inside: followed, not recorded
    ident = model_identity(d, hash_weights=True)
    assert ident["outside_links"] == {"config.json": str(elsewhere / "cfg"), name: str(elsewhere / "abc")}
    assert ident["files"]["config.json"] == sha(b'{"other": 1}') and ident["files"]["tokenizer.json"] == sha(TOK)
    assert ident["weights"][name] == sha(full[name])
    assert ident["statement"].endswith(" 2 files are symlinks leaving the model directory "
                                       f"(config.json, {name}).")


def test_dangling_link_and_not_a_directory(tmp_path: Path) -> None:
    d = tmp_path / "m"
    meta_files(d)
    (d / "generation_config.json").unlink()
    (d / "generation_config.json").symlink_to(tmp_path / "gone.json")
    ident = model_identity(d)
    assert "cannot read" in ident["errors"]["generation_config.json"]
    assert ident["outside_links"] == {"generation_config.json": str(tmp_path / "gone.json")}
    assert "generation_config.json (error)" in ident["not_hashed"]
    with pytest.raises(ServiceError, match="not a directory"):
        model_identity(d / "config.json")


def test_undecodable_file_name(tmp_path: Path) -> None:
    d = tmp_path / "m"
    meta_files(d)
    full, _ = shard_bytes({"w": np.zeros(2, dtype=np.float32)})
    raw_name = os.fsencode(d) + b"/\xff.safetensors"
    with open(raw_name, "wb") as fh:
        fh.write(full)
    ident = model_identity(d)
    assert ident["errors"] == {"\\xff.safetensors": f"{d}/\\xff.safetensors: file name is not UTF-8; not read"}
    assert ident["shard_headers"] == {}
    json.dumps(ident, ensure_ascii=False).encode("utf-8")  # no lone surrogate reaches the record
