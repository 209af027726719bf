"""Backend witnesses: what each SGLang rank says it actually selected, compared with the profile.

The ``backend-witness`` model patch (``model_patches/``) makes every model runner write
``<DSV4H_WITNESS_DIR>/rank<R>-<pid>-<event>.json`` at ``startup`` (attention backends built) and
``graphs`` (CUDA graphs captured). ``read_witnesses`` reads them (I/O); ``compare_witnesses`` is
pure and returns every difference from the profile as a sentence; the launcher refuses a run on
any difference (docs/evidence-rules.md, rule 5: logged flags are not proof that a code path ran).

Witness format history (``WITNESS_FORMAT_VERSION``, written by ``sglang/srt/dsv4h_witness.py``):
  1 - first version (2026-11-29).
"""

from __future__ import annotations

import json
from collections import Counter, defaultdict
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from harness.errors import ServiceError
from harness.inputs.spec import ServiceProfile

WITNESS_ENV = "DSV4H_WITNESS_DIR"
WITNESS_FORMAT = "dsv4h-backend-witness"
WITNESS_FORMAT_VERSION = 1
EVENTS = ("startup", "graphs")

# Attention backend name (``--attention-backend``) -> classes SGLang 0.5.23 builds for it
# (``sglang/srt/layers/attention/attention_registry.py``). A class outside the set of the
# profile's backend is a difference; extend the table when a new release adds classes.
ATTENTION_BACKEND_CLASSES: dict[str, frozenset[str]] = {
    "flashinfer": frozenset({"FlashInferAttnBackend", "FlashInferMLAAttnBackend"}),
    "llada2_cfg_flashinfer": frozenset({"LLaDA2CFGFlashInferAttnBackend"}),
    "trtllm_mla": frozenset({"TRTLLMMLABackend", "CuteDslMLAPrefillBackend"}),
    "cutedsl_mla": frozenset({"CuteDslMLABackend"}),
    "aiter": frozenset({"AiterAttnBackend"}),
    "wave": frozenset({"WaveAttnBackend"}),
    "ascend": frozenset({"AscendAttnBackend"}),
    "dsa": frozenset({"DeepseekSparseAttnBackend"}),
    "nsa": frozenset({"DeepseekSparseAttnBackend"}),
    "qsa": frozenset({"QwenSparseAttnBackend"}),
    "dsv4": frozenset({"DeepseekV4AttnBackend", "DeepseekV4TrtllmAttnBackend", "DeepseekV4MegaAttnBackend",
                       "DeepseekV4HipRadixBackend", "DeepseekV4AscendAttnBackend"}),
    "triton": frozenset({"TritonAttnBackend"}),
    "torch_native": frozenset({"TorchNativeAttnBackend"}),
    "flex_attention": frozenset({"TorchFlexAttnBackend"}),
    "flashmla": frozenset({"FlashMLABackend"}),
    "fa3": frozenset({"FlashAttentionBackend", "MusaFlashAttentionBackend"}),
    "fa4": frozenset({"FlashAttentionBackend"}),
    "trtllm_mha": frozenset({"TRTLLMHAAttnBackend"}),
    "hpc_ops": frozenset({"HPCOpsAttnBackend"}),
    "intel_amx": frozenset({"IntelAMXAttnBackend"}),
    "minicpm_flashattn": frozenset({"MiniCPMSparseBackend"}),
    "minicpm_flashinfer": frozenset({"MiniCPMSparseBackend"}),
    "intel_xpu": frozenset({"XPUAttentionBackend"}),
}

# Wrappers whose own class says nothing about the kernels: their components are checked instead.
WRAPPER_COMPONENTS: dict[str, tuple[str, ...]] = {
    "HybridAttnBackend": ("prefill_backend", "decode_backend"),
    "TboAttnBackend": ("primary",),
    "HybridLinearAttnBackend": ("full_attn_backend",),
}


def read_witnesses(directory: Path) -> list[dict[str, Any]]:
    """Every ``rank*.json`` witness in ``directory``, sorted by file name, each with ``_file`` added.

    Raises ``ServiceError`` naming the file when one is not a JSON object of the witness format
    (a truncated file means a rank died while writing). A missing directory reads as no witnesses.
    """
    if not directory.is_dir():
        return []
    out: list[dict[str, Any]] = []
    for path in sorted(directory.glob("rank*.json")):
        try:
            data = json.loads(path.read_text(encoding="utf-8"))
        except (OSError, ValueError) as exc:
            raise ServiceError(f"witness {path} is unreadable: {exc}",
                               hint="a rank may have died while writing it; restart the service") from exc
        if not isinstance(data, dict) or data.get("format") != WITNESS_FORMAT:
            raise ServiceError(f"{path} is not a {WITNESS_FORMAT} file",
                               hint=f"keep only witness files in {directory}")
        data["_file"] = path.name
        out.append(data)
    return out


def _who(w: Mapping[str, Any]) -> str:
    return f"rank {w.get('tp_rank')} (pid {w.get('pid')}, {w.get('event')})"


def _effective_classes(w: Mapping[str, Any]) -> list[str]:
    top = w.get("attention_backend_class")
    if top is None:
        return []
    comps = w.get("attention_backend_components") or {}
    if top in WRAPPER_COMPONENTS:
        return [str(comps[a]) for a in WRAPPER_COMPONENTS[top] if comps.get(a)] or [str(top)]
    return [str(top)]


def _compare_attention(w: Mapping[str, Any], expected: str) -> list[str]:
    diffs: list[str] = []
    who = _who(w)
    for key in ("prefill_attention_backend", "decode_attention_backend"):
        got = w.get(key)
        if got != expected:
            diffs.append(f"{who}: {key.replace('_', ' ')} is {got!r}, the profile asks attention_backend "
                         f"{expected!r}")
    allowed = ATTENTION_BACKEND_CLASSES.get(expected)
    classes = _effective_classes(w)
    if w.get("decode_attention_backend_class"):
        classes.append(str(w["decode_attention_backend_class"]))
    if not classes:
        diffs.append(f"{who}: reports no attention backend class")
    for cls in dict.fromkeys(classes):
        if cls in WRAPPER_COMPONENTS:
            diffs.append(f"{who}: attention backend {cls} without the components that name its kernels")
        elif allowed is None:
            diffs.append(f"{who}: attention backend class {cls}; dsv4h has no class table for "
                         f"attention_backend {expected!r} (add it to "
                         "harness.service.identity.witness.ATTENTION_BACKEND_CLASSES)")
        elif cls not in allowed:
            diffs.append(f"{who}: attention backend class {cls}, but the profile asks {expected!r} "
                         f"({', '.join(sorted(allowed))})")
    return diffs


def _compare_moe(w: Mapping[str, Any], expected: str) -> list[str]:
    if expected == "auto":
        return []
    who = _who(w)
    diffs = []
    got = w.get("moe_runner_backend")
    if got != expected:
        diffs.append(f"{who}: MoE runner backend is {got!r}, the profile asks moe_backend {expected!r}")
    layers = w.get("moe_layer_runner_backends") or {}
    others = {k: v for k, v in layers.items() if k != expected}
    if others:
        desc = ", ".join(f"{v} layer(s) {k!r}" for k, v in sorted(others.items()))
        diffs.append(f"{who}: MoE layers run {desc}, the profile asks moe_backend {expected!r}")
    return diffs


def compare_witnesses(witnesses: Sequence[Mapping[str, Any]], profile: ServiceProfile) -> list[str]:
    """Every difference between the witnesses of one service start and ``profile`` (pure).

    Checked: format version; for each event, exactly ``dp_size`` witnesses (distinct processes) for
    every tp rank ``0..tp_size-1`` and none outside; ``tp_size`` as profiled; no pipeline parallelism;
    the same process at startup and after capture; nothing the witness could not read (``errors``);
    every rank selecting the same backends; when the profile names them, the attention backend
    (resolved names and the classes actually built), the MoE runner backend (process flag and every
    MoE layer's runner) and the captured decode graph batch sizes (``sorted(set(cuda_graph_bs))``).
    Draft-model witnesses (speculative decoding) are only checked for errors. An empty list means
    the witnesses agree with the profile.
    """
    if not witnesses:
        return [f"no backend witness files: the service was not started with {WITNESS_ENV}, or the "
                "backend-witness model patch is not applied (dsv4h patches status)"]
    diffs: list[str] = []
    tp_size = profile.identity.tp_size or 1
    copies = profile.identity.dp_size or 1
    target = [w for w in witnesses if w.get("role", "target") == "target"]
    for w in witnesses:
        if w.get("format_version") != WITNESS_FORMAT_VERSION:
            diffs.append(f"{w.get('_file', _who(w))}: witness format_version {w.get('format_version')!r}, "
                         f"dsv4h reads {WITNESS_FORMAT_VERSION}")
        for err in w.get("errors") or []:
            diffs.append(f"{_who(w)}: the witness could not read {err}")
    for w in target:
        if w.get("tp_size") != tp_size:
            diffs.append(f"{_who(w)}: tp_size {w.get('tp_size')!r}, the profile has {tp_size}")
        if (w.get("pp_size") or 1) != 1:
            diffs.append(f"{_who(w)}: pp_size {w.get('pp_size')}, the profile has no pipeline parallelism")
    pids: dict[str, dict[Any, set[Any]]] = {}
    for event in EVENTS:
        per_rank: dict[Any, set[Any]] = defaultdict(set)
        for w in target:
            if w.get("event") == event:
                per_rank[w.get("tp_rank")].add(w.get("pid"))
        pids[event] = per_rank
        missing = [r for r in range(tp_size) if len(per_rank.get(r, ())) < copies]
        extra = sorted((r for r in per_rank if r not in range(tp_size)), key=str)
        dup = [r for r in range(tp_size) if len(per_rank.get(r, ())) > copies]
        if missing:
            diffs.append(f"{event}: {len(missing)} of {tp_size} tp ranks wrote no witness "
                         f"(ranks {', '.join(map(str, missing))})" + (f", {copies} copies each expected"
                                                                      if copies > 1 else ""))
        if extra:
            diffs.append(f"{event}: witnesses from tp ranks outside 0..{tp_size - 1}: {', '.join(map(str, extra))}")
        for r in dup:
            diffs.append(f"{event}: tp rank {r} reported by {len(per_rank[r])} processes "
                         f"(pids {', '.join(map(str, sorted(per_rank[r], key=str)))}); clear the witness "
                         "directory before each start")
    for r in range(tp_size):
        a, b = pids["startup"].get(r, set()), pids["graphs"].get(r, set())
        if a and b and a != b:
            diffs.append(f"tp rank {r}: startup by pid(s) {sorted(a, key=str)} but graphs by "
                         f"{sorted(b, key=str)} (a rank restarted?)")
    diffs += _consistency(target)
    for w in target:
        if profile.launch.attention_backend:
            diffs += _compare_attention(w, profile.launch.attention_backend)
        if profile.launch.moe_backend:
            diffs += _compare_moe(w, profile.launch.moe_backend)
        if profile.launch.cuda_graph_bs and w.get("event") == "graphs":
            want = sorted(set(profile.launch.cuda_graph_bs))
            got = w.get("cuda_graph_bs_decode")
            if got != want:
                diffs.append(f"{_who(w)}: captured decode CUDA graph batch sizes {got}, the profile asks "
                             f"cuda_graph_bs {want}")
    return diffs


_AGREE = ("attention_backend_class", "decode_attention_backend_class", "prefill_attention_backend",
          "decode_attention_backend", "moe_runner_backend")


def _consistency(target: Sequence[Mapping[str, Any]]) -> list[str]:
    """Every rank must have selected the same backends (and graphs), whatever the profile says."""
    diffs = []
    for event in EVENTS:
        ws = [w for w in target if w.get("event") == event]
        keys = _AGREE + (("cuda_graph_bs_decode",) if event == "graphs" else ())
        for key in keys:
            values = Counter(json.dumps(w.get(key), sort_keys=True) for w in ws)
            if len(values) > 1:
                by = "; ".join(f"{v} on {n} rank(s)" for v, n in values.most_common())
                diffs.append(f"{event}: ranks disagree on {key}: {by}")
    return diffs


def summarize_witnesses(witnesses: Sequence[Mapping[str, Any]]) -> dict[str, Any]:
    """A compact, deterministic summary for the archive: ranks and pids per event and the distinct
    selected values (no timestamps)."""
    out: dict[str, Any] = {"n_files": len(witnesses), "events": {}}
    for event in EVENTS:
        ws = [w for w in witnesses if w.get("event") == event and w.get("role", "target") == "target"]
        entry: dict[str, Any] = {"ranks": sorted({w.get("tp_rank") for w in ws}, key=str),
                                 "pids": sorted({w.get("pid") for w in ws}, key=str)}
        for key in (*_AGREE, "attention_backend_components", "moe_layer_runner_backends",
                    "cuda_graph_bs_decode", "sglang_version"):
            vals = {json.dumps(w.get(key), sort_keys=True) for w in ws if key in w}
            if vals:
                entry[key] = [json.loads(v) for v in sorted(vals)]
        out["events"][event] = entry
    return out
