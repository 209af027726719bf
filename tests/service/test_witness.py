"""Backend witnesses: the comparison with the profile (literal witness dicts), reading a run's files,
and the SGLang-side helper module of the backend-witness patch executed with stub objects."""

from __future__ import annotations

import enum
import importlib.util
import json
import os
import sys
from pathlib import Path
from types import ModuleType, SimpleNamespace
from typing import Any

import pytest

from harness.errors import ServiceError
from harness.hashing import sha256_bytes
from harness.inputs.spec import ServiceProfile
from harness.patches import series as P
from harness.patches import unified_diff as U
from harness.service.identity.witness import compare_witnesses, read_witnesses, summarize_witnesses

ROOT = Path(__file__).resolve().parents[2]
SERIES = ROOT / "model_patches" / "series.yaml"
BS = [1, 2, 4, 8, 16, 32, 64]


def profile(**kw: Any) -> ServiceProfile:
    base: dict[str, Any] = {"backend": "sglang", "model_path": "/m", "tp_size": 8, "attention_backend": "triton",
                            "moe_backend": "triton", "cuda_graph_bs": [64, 1, 2, 4, 8, 16, 32, 32]}
    base.update(kw)
    return ServiceProfile.model_validate(base)


def wit(rank: int, event: str, **kw: Any) -> dict[str, Any]:
    w: dict[str, Any] = {
        "format": "dsv4h-backend-witness", "format_version": 1, "event": event, "role": "target",
        "pid": 1000 + rank, "hostname": "h", "time_unix": 1.0, "tp_rank": rank, "tp_size": 8, "pp_rank": 0,
        "pp_size": 1, "gpu_id": rank, "attention_backend_class": "TritonAttnBackend",
        "attention_backend_components": {}, "decode_attention_backend_class": None,
        "prefill_attention_backend": "triton", "decode_attention_backend": "triton",
        "requested_attention_backend": "triton", "moe_runner_backend": "triton",
        "requested_moe_runner_backend": "triton", "moe_layer_runner_backends": {"triton": 43}, "errors": [],
    }
    if event == "graphs":
        w["cuda_graph_bs_decode"] = list(BS)
    w.update(kw)
    return w


def full(**kw: Any) -> list[dict[str, Any]]:
    return [wit(r, e, **kw) for r in range(8) for e in ("startup", "graphs")]


def test_matching_witnesses_have_no_differences() -> None:
    assert compare_witnesses(full(), profile()) == []
    # nothing named in the profile: only completeness and agreement are checked
    assert compare_witnesses(full(), profile(attention_backend=None, moe_backend=None, cuda_graph_bs=None)) == []


def test_no_witnesses() -> None:
    (d,) = compare_witnesses([], profile())
    assert "no backend witness files" in d and "DSV4H_WITNESS_DIR" in d


def test_attention_backend_class_differs_on_one_rank() -> None:
    ws = full()
    ws[6] = wit(3, "startup", attention_backend_class="FlashInferAttnBackend")
    diffs = compare_witnesses(ws, profile())
    assert ("rank 3 (pid 1003, startup): attention backend class FlashInferAttnBackend, but the profile asks "
            "'triton' (TritonAttnBackend)") in diffs
    assert any(d.startswith("startup: ranks disagree on attention_backend_class") for d in diffs)


def test_resolved_backend_name_differs() -> None:
    ws = [wit(r, e, decode_attention_backend="flashinfer") for r in range(8) for e in ("startup", "graphs")]
    diffs = compare_witnesses(ws, profile())
    assert len(diffs) == 16
    assert diffs[0] == "rank 0 (pid 1000, startup): decode attention backend is 'flashinfer', the profile asks " \
                       "attention_backend 'triton'"


def test_wrapper_backends_are_judged_by_their_components() -> None:
    comps = {"prefill_backend": "TritonAttnBackend", "decode_backend": "TritonAttnBackend"}
    ok = full(attention_backend_class="HybridAttnBackend", attention_backend_components=comps)
    assert compare_witnesses(ok, profile()) == []
    bad = full(attention_backend_class="HybridAttnBackend",
               attention_backend_components={**comps, "decode_backend": "FlashInferAttnBackend"})
    diffs = compare_witnesses(bad, profile())
    assert len(diffs) == 16 and all("FlashInferAttnBackend, but the profile asks 'triton'" in d for d in diffs)
    bare = full(attention_backend_class="TboAttnBackend")
    assert all("without the components" in d for d in compare_witnesses(bare, profile()))


def test_unknown_backend_name_has_no_class_table() -> None:
    ws = full(prefill_attention_backend="fancy", decode_attention_backend="fancy",
              attention_backend_class="FancyBackend")
    diffs = compare_witnesses(ws, profile(attention_backend="fancy"))
    assert diffs and all("no class table for attention_backend 'fancy'" in d for d in diffs)


def test_dsv4_backend_classes() -> None:
    ws = full(prefill_attention_backend="dsv4", decode_attention_backend="dsv4",
              attention_backend_class="DeepseekV4HipRadixBackend")
    assert compare_witnesses(ws, profile(attention_backend="dsv4")) == []


def test_moe_runner_differences() -> None:
    ws = full()
    ws[0] = wit(0, "startup", moe_runner_backend="auto", moe_layer_runner_backends={"triton": 40, "aiter": 3})
    diffs = compare_witnesses(ws, profile())
    assert "rank 0 (pid 1000, startup): MoE runner backend is 'auto', the profile asks moe_backend 'triton'" in diffs
    assert "rank 0 (pid 1000, startup): MoE layers run 3 layer(s) 'aiter', the profile asks moe_backend 'triton'" \
        in diffs
    # 'auto' lets SGLang choose; only agreement between ranks is checked
    assert [d for d in compare_witnesses(ws, profile(moe_backend="auto")) if "MoE" in d] == []


def test_graph_batch_sizes_differ() -> None:
    ws = full()
    ws[15] = wit(7, "graphs", cuda_graph_bs_decode=[1, 2, 4, 8, 16, 32])
    diffs = compare_witnesses(ws, profile())
    assert ("rank 7 (pid 1007, graphs): captured decode CUDA graph batch sizes [1, 2, 4, 8, 16, 32], the profile "
            "asks cuda_graph_bs [1, 2, 4, 8, 16, 32, 64]") in diffs


def test_fewer_ranks_than_tp_size() -> None:
    ws = [w for w in full() if w["tp_rank"] not in (2, 5) or w["event"] == "startup"]
    ws = [w for w in ws if not (w["tp_rank"] == 6 and w["event"] == "startup")]
    diffs = compare_witnesses(ws, profile())
    assert "startup: 1 of 8 tp ranks wrote no witness (ranks 6)" in diffs
    assert "graphs: 2 of 8 tp ranks wrote no witness (ranks 2, 5)" in diffs


def test_tp_size_pp_and_extra_ranks() -> None:
    ws = [*full(), wit(8, "startup")]
    ws[0] = wit(0, "startup", tp_size=4)
    ws[1] = wit(0, "graphs", pp_size=2)
    diffs = compare_witnesses(ws, profile())
    assert "rank 0 (pid 1000, startup): tp_size 4, the profile has 8" in diffs
    assert "rank 0 (pid 1000, graphs): pp_size 2, the profile has no pipeline parallelism" in diffs
    assert "startup: witnesses from tp ranks outside 0..7: 8" in diffs


def test_stale_or_restarted_processes() -> None:
    ws = [*full(), wit(1, "startup", pid=555)]
    diffs = compare_witnesses(ws, profile())
    assert any(d.startswith("startup: tp rank 1 reported by 2 processes (pids 1001, 555)") for d in diffs)
    ws = full()
    ws[3] = wit(1, "graphs", pid=777)
    assert "tp rank 1: startup by pid(s) [1001] but graphs by [777] (a rank restarted?)" in compare_witnesses(
        ws, profile())


def test_data_parallel_copies_and_draft_witnesses() -> None:
    ws = full() + [wit(r, e, pid=2000 + r) for r in range(8) for e in ("startup", "graphs")]
    assert compare_witnesses(ws, profile(dp_size=2)) == []
    assert any("reported by 2 processes" in d for d in compare_witnesses(ws, profile()))
    draft = wit(0, "startup", role="draft", attention_backend_class="FlashInferAttnBackend")
    assert compare_witnesses([*full(), draft], profile()) == []
    bad_draft = {**draft, "errors": ["tp_rank: AttributeError: x"]}
    assert compare_witnesses([*full(), bad_draft], profile()) == [
        "rank 0 (pid 1000, startup): the witness could not read tp_rank: AttributeError: x"]


def test_format_version_and_errors() -> None:
    ws = full()
    ws[0] = {**ws[0], "format_version": 2, "_file": "rank0-1000-startup.json"}
    ws[1] = {**ws[1], "errors": ["cuda_graph_bs_decode: TypeError: boom"]}
    diffs = compare_witnesses(ws, profile())
    assert "rank0-1000-startup.json: witness format_version 2, dsv4h reads 1" in diffs
    assert "rank 0 (pid 1000, graphs): the witness could not read cuda_graph_bs_decode: TypeError: boom" in diffs


def test_read_witnesses(tmp_path: Path) -> None:
    assert read_witnesses(tmp_path / "absent") == []
    for w in full()[:3]:
        name = f"rank{w['tp_rank']}-{w['pid']}-{w['event']}.json"
        (tmp_path / name).write_text(json.dumps(w))
    (tmp_path / "notes.txt").write_text("ignored")
    got = read_witnesses(tmp_path)
    assert [w["_file"] for w in got] == ["rank0-1000-graphs.json", "rank0-1000-startup.json",
                                         "rank1-1001-startup.json"]
    summary = summarize_witnesses(got)
    assert summary["events"]["startup"]["ranks"] == [0, 1]
    assert summary["events"]["graphs"]["cuda_graph_bs_decode"] == [BS]
    (tmp_path / "rank9-1-startup.json").write_text('{"format": "dsv4h-backend-witness", ')
    with pytest.raises(ServiceError, match=r"rank9-1-startup\.json is unreadable"):
        read_witnesses(tmp_path)
    (tmp_path / "rank9-1-startup.json").write_text("[]")
    with pytest.raises(ServiceError, match="is not a dsv4h-backend-witness file"):
        read_witnesses(tmp_path)


# --- the SGLang-side helper, executed in isolation ----------------------------------------------


@pytest.fixture(scope="module")
def witness_module(tmp_path_factory: pytest.TempPathFactory) -> ModuleType:
    """``sglang/srt/dsv4h_witness.py`` as the series creates it (the new file needs no base tree),
    imported on its own: SGLang and torch are not importable here."""
    series = P.load_series(SERIES)
    patch = next(p for p in series.patches if p.spec.id == "backend-witness")
    (fd,) = [f for f in patch.files if f.path == "sglang/srt/dsv4h_witness.py"]
    source = U.apply_file_diff(fd, None)
    assert source is not None
    path = tmp_path_factory.mktemp("tree") / "dsv4h_witness.py"
    path.write_bytes(source)
    assert sha256_bytes(source) == patch.spec.files[fd.path].patched
    spec = importlib.util.spec_from_file_location("dsv4h_witness_isolated", path)
    assert spec is not None and spec.loader is not None
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


class TritonAttnBackend:
    pass


class FlashInferAttnBackend:
    pass


class HybridAttnBackend:
    def __init__(self) -> None:
        self.prefill_backend = TritonAttnBackend()
        self.decode_backend = FlashInferAttnBackend()


class MoeRunnerBackend(enum.Enum):
    TRITON = "triton"
    AITER = "aiter"


class DecodeCudaGraphRunner:
    capture_bs = (64, 1, 2, 4, 8, 16, 32)


def stub_runner(attn: object | None = None, *, draft: bool = False) -> SimpleNamespace:
    def layer(backend: MoeRunnerBackend) -> SimpleNamespace:
        return SimpleNamespace(quant_method=SimpleNamespace(runner=SimpleNamespace(runner_backend=backend)))

    modules = [SimpleNamespace(), layer(MoeRunnerBackend.TRITON), layer(MoeRunnerBackend.TRITON),
               layer(MoeRunnerBackend.AITER)]
    return SimpleNamespace(
        attn_backend=attn if attn is not None else TritonAttnBackend(), decode_attn_backend=None,
        prefill_attention_backend_str="triton", decode_attention_backend_str="triton",
        server_args=SimpleNamespace(attention_backend="triton", moe_runner_backend="auto"),
        model=SimpleNamespace(modules=lambda: iter(modules)), gpu_id=3, is_draft_worker=draft,
        decode_cuda_graph_runner=DecodeCudaGraphRunner(), prefill_cuda_graph_runner=None,
    )


def _ctx(rank: int = 3) -> dict[str, Any]:
    return {"parallel": SimpleNamespace(tp_rank=rank, tp_size=8, pp_rank=0, pp_size=1),
            "moe_runner_backend": MoeRunnerBackend.TRITON, "sglang_version": "0.5.23"}


def test_helper_writes_nothing_when_unset(witness_module: ModuleType, tmp_path: Path,
                                          monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("DSV4H_WITNESS_DIR", raising=False)
    assert witness_module.record(stub_runner(), "startup", **_ctx()) is None
    monkeypatch.setenv("DSV4H_WITNESS_DIR", "")
    assert witness_module.record(stub_runner(), "graphs", **_ctx()) is None

    class Exploding:
        def __getattr__(self, name: str) -> Any:
            raise AssertionError(f"read {name} while the witness is off")

    monkeypatch.delenv("DSV4H_WITNESS_DIR")
    assert witness_module.record(Exploding(), "startup") is None  # reads nothing at all
    assert list(tmp_path.iterdir()) == []


def test_helper_writes_the_witness(witness_module: ModuleType, tmp_path: Path,
                                   monkeypatch: pytest.MonkeyPatch) -> None:
    out = tmp_path / "witness"
    monkeypatch.setenv("DSV4H_WITNESS_DIR", str(out))
    path = Path(witness_module.record(stub_runner(), "startup", **_ctx()))
    assert path == out / f"rank3-{os.getpid()}-startup.json"
    w = json.loads(path.read_text())
    assert w["format"] == "dsv4h-backend-witness" and w["format_version"] == 1
    assert (w["event"], w["role"], w["tp_rank"], w["tp_size"], w["pid"], w["gpu_id"]) == (
        "startup", "target", 3, 8, os.getpid(), 3)
    assert w["attention_backend_class"] == "TritonAttnBackend"
    assert (w["prefill_attention_backend"], w["decode_attention_backend"]) == ("triton", "triton")
    assert (w["moe_runner_backend"], w["requested_moe_runner_backend"]) == ("triton", "auto")
    assert w["moe_layer_runner_backends"] == {"triton": 2, "aiter": 1}
    assert w["sglang_version"] == "0.5.23" and w["errors"] == []
    assert "cuda_graph_bs_decode" not in w
    assert isinstance(w["time_unix"], float) and w["time_utc"].endswith("Z")

    g = json.loads(Path(witness_module.record(stub_runner(), "graphs", **_ctx())).read_text())
    assert g["cuda_graph_bs_decode"] == [1, 2, 4, 8, 16, 32, 64]
    assert g["cuda_graph_decode_runner_class"] == "DecodeCudaGraphRunner"
    assert g["cuda_graph_prefill_num_tokens"] == [] and g["cuda_graph_prefill_runner_class"] is None

    h = json.loads(Path(witness_module.record(stub_runner(HybridAttnBackend(), draft=True), "startup",
                                              **_ctx())).read_text())
    assert h["role"] == "draft"
    assert h["attention_backend_components"] == {"prefill_backend": "TritonAttnBackend",
                                                 "decode_backend": "FlashInferAttnBackend"}
    assert sorted(p.name for p in out.iterdir()) == [f"rank3-{os.getpid()}-{e}.json"
                                                     for e in ("draft-startup", "graphs", "startup")]


def test_helper_output_feeds_compare(witness_module: ModuleType, tmp_path: Path,
                                     monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("DSV4H_WITNESS_DIR", str(tmp_path))
    for rank in range(8):
        for event in ("startup", "graphs"):
            witness_module.record(stub_runner(), event, **_ctx(rank))
    ws = read_witnesses(tmp_path)
    assert len(ws) == 16
    assert compare_witnesses(ws, profile(moe_backend="auto")) == []
    diffs = compare_witnesses(ws, profile())  # one MoE layer of each rank runs aiter, not triton
    assert len(diffs) == 16
    assert all(d.endswith("MoE layers run 1 layer(s) 'aiter', the profile asks moe_backend 'triton'") for d in diffs)


def test_helper_records_what_it_cannot_read(witness_module: ModuleType, tmp_path: Path,
                                            monkeypatch: pytest.MonkeyPatch) -> None:
    # Without overrides it imports SGLang lazily; that fails here and is recorded, not raised.
    monkeypatch.setitem(sys.modules, "sglang", None)  # not importable, even where SGLang is installed
    monkeypatch.setenv("DSV4H_WITNESS_DIR", str(tmp_path))
    w = json.loads(Path(witness_module.record(SimpleNamespace(), "graphs")).read_text())
    assert w["tp_rank"] is None and w["attention_backend_class"] is None
    assert any(e.startswith("parallel: ModuleNotFoundError") for e in w["errors"])
    assert (tmp_path / f"rankx-{os.getpid()}-graphs.json").exists()
    diffs = compare_witnesses([w], profile())
    assert any("the witness could not read parallel" in d for d in diffs)
    with pytest.raises(ValueError, match="unknown witness event"):
        witness_module.collect(SimpleNamespace(), "later")
    # a write failure is logged and swallowed: the server keeps running, the harness sees no file
    (tmp_path / "file").write_text("")
    monkeypatch.setenv("DSV4H_WITNESS_DIR", str(tmp_path / "file"))
    assert witness_module.record(stub_runner(), "startup", **_ctx()) is None
