"""The speculative configuration a service serves, and the claim classes it allows (pure).

``served_speculation`` reads what the server itself reports (SGLang ``/server_info``; vLLM's dev
``/server_info?config_format=json`` when it was read) and, only where the server reports nothing about
speculation (vLLM's ``/v1/models``, an attached server without ``/server_info``), the launch argv
(``--speculative-config`` JSON, SGLang's ``--speculative-*`` flags). The result is part of the service
identity (``harness.service.identity.identity``) and is checked against the run's claim class at service start
(``harness.service.launch.manager.verify_identity``) and in archives (rule ids ``speculative-native``,
``claim-vs-server``). Where each server reports it: docs/serving-facts.md#speculative-configuration.

Approximate verification is witnessed where the server says so: SGLang's
``speculative_accept_threshold_single`` / ``speculative_accept_threshold_acc`` below their default 1.0
(relaxed acceptance, ``sglang/srt/arg_groups/fields/spec.py`` of 0.5.23) and vLLM's
``rejection_sample_method: synthetic`` (``vllm/config/speculative.py`` of 0.32.0). Anything else is
taken as full-target verification; a ``speculative-approximate`` claim is its own declaration.
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from typing import Any

NATIVE_VALUES: tuple[Any, ...] = (None, "", "null", "NONE", "none", "None")
SPECULATIVE_CLAIMS = ("speculative-full-target", "speculative-approximate")

_SGLANG_KEYS = {"speculative_draft_model_path": "draft_model", "speculative_num_steps": "num_steps",
                "speculative_eagle_topk": "eagle_topk", "speculative_num_draft_tokens": "num_draft_tokens"}
_SGLANG_FLAGS = {"--speculative-algorithm": "speculative_algorithm",
                 "--speculative-draft-model-path": "speculative_draft_model_path",
                 "--speculative-num-steps": "speculative_num_steps",
                 "--speculative-eagle-topk": "speculative_eagle_topk",
                 "--speculative-num-draft-tokens": "speculative_num_draft_tokens",
                 "--speculative-accept-threshold-single": "speculative_accept_threshold_single",
                 "--speculative-accept-threshold-acc": "speculative_accept_threshold_acc"}
_INT_KEYS = {"speculative_num_steps", "speculative_eagle_topk", "speculative_num_draft_tokens"}


def _int(v: Any) -> int | None:
    try:
        return int(v) if v is not None and not isinstance(v, bool) else None
    except (TypeError, ValueError):
        return None


def _float(v: Any, default: float) -> float:
    try:
        return float(v) if v is not None else default
    except (TypeError, ValueError):
        return default


def _from_sglang(info: Mapping[str, Any], source: str) -> dict[str, Any] | None:
    alg = info.get("speculative_algorithm")
    if alg in NATIVE_VALUES:
        return None
    out: dict[str, Any] = {"algorithm": str(alg).upper()}
    for key, name in _SGLANG_KEYS.items():
        out[name] = _int(info.get(key)) if key in _INT_KEYS else info.get(key)
    # k = drafts verified per step: num_draft_tokens - 1 for a chain (topk 1), as SGLang reports EAGLE
    topk, ndt = out["eagle_topk"], out["num_draft_tokens"]
    out["draft_tokens"] = ndt - 1 if ndt is not None and topk in (None, 1) and ndt > 1 else out["num_steps"]
    relaxed = (_float(info.get("speculative_accept_threshold_single"), 1.0) < 1.0
               or _float(info.get("speculative_accept_threshold_acc"), 1.0) < 1.0)
    out["approximate"] = relaxed
    out["source"] = source
    return out


def _from_vllm(cfg: Any, source: str) -> dict[str, Any] | None:
    if not isinstance(cfg, Mapping):
        return None
    method = cfg.get("method")
    k = _int(cfg.get("num_speculative_tokens"))
    if method in NATIVE_VALUES and cfg.get("model") in NATIVE_VALUES and k is None:
        return None
    return {"algorithm": str(method or "draft_model"), "draft_model": cfg.get("model"), "num_steps": None,
            "eagle_topk": None, "num_draft_tokens": None, "draft_tokens": k,
            "approximate": cfg.get("rejection_sample_method") == "synthetic", "source": source}


def _flag_value(argv: Sequence[str], flag: str) -> str | None:
    for i, a in enumerate(argv):
        if a == flag and i + 1 < len(argv):
            return argv[i + 1]
        if a.startswith(flag + "="):
            return a.split("=", 1)[1]
    return None


def _dotted_config(args: Sequence[str]) -> dict[str, Any]:
    """vLLM's dotted form ``--speculative-config.method ngram`` (``vllm/utils/argparse_utils.py``:
    values JSON-decoded where they parse, else kept as strings); top-level keys only."""
    out: dict[str, Any] = {}
    for i, a in enumerate(args):
        for prefix in ("--speculative-config.", "-sc."):
            if not a.startswith(prefix):
                continue
            key, sep, value = a[len(prefix):].partition("=")
            if not sep and i + 1 < len(args):
                value = args[i + 1]
            try:
                out[key] = json.loads(value)
            except ValueError:
                out[key] = value
    return out


def launch_speculation(argv: Sequence[str] | None) -> dict[str, Any] | None:
    """What the launch argv asks for (vLLM ``--speculative-config`` / ``-sc`` JSON or its dotted keys,
    SGLang ``--speculative-*`` flags); None when it asks for no speculation. A flag is not proof that it
    ran (rule 5)."""
    args = [str(a) for a in argv or []]
    raw = _flag_value(args, "--speculative-config") or _flag_value(args, "-sc")
    dotted = _dotted_config(args)
    if raw is not None or dotted:
        try:
            cfg = json.loads(raw) if raw is not None else {}
        except ValueError:
            cfg = {"method": "unparsed", "model": raw}
        return _from_vllm(cfg | dotted if isinstance(cfg, dict) else cfg, "launch-argv")
    flags = {key: _flag_value(args, flag) for flag, key in _SGLANG_FLAGS.items()}
    return _from_sglang(flags, "launch-argv")


def served_speculation(server_info: Mapping[str, Any] | None,
                       launch: Sequence[str] | None = None) -> dict[str, Any] | None:
    """The speculative configuration a service serves, or None for native autoregressive decoding.

    Keys: ``algorithm`` (upper case for SGLang, vLLM's ``method`` as given), ``draft_model``,
    ``num_steps`` / ``eagle_topk`` / ``num_draft_tokens`` (SGLang's, else None), ``draft_tokens``
    (k, drafts per verify step, when derivable), ``approximate`` (relaxed verification witnessed) and
    ``source`` (``server_info``, ``vllm-server-info`` or ``launch-argv``). The server's own report
    wins; the launch argv (``launch``) is read only when the server reports nothing about speculation.
    """
    info = server_info or {}
    if "speculative_algorithm" in info:
        return _from_sglang(info, "server_info")
    vcfg = info.get("vllm_config")
    if isinstance(vcfg, Mapping) and "speculative_config" in vcfg:
        return _from_vllm(vcfg.get("speculative_config"), "vllm-server-info")
    return launch_speculation(launch)


def claim_conflicts(claim: str, served: Mapping[str, Any] | None, where: str = "claim_class") -> list[str]:
    """Why ``claim`` cannot be carried by a service serving ``served`` (empty when it can).

    ``where`` names the field that declares the claim (the spec's ``claim_class``, or ``--claim-class``).
    native-ar needs no speculation; a speculative claim needs a server that reports speculation; a
    full-target claim refuses a server that witnesses relaxed (approximate) verification. Other claim
    classes (``external``) are not checked.
    """
    if claim == "native-ar" and served is not None:
        return [f"speculative_algorithm: {where} is native-ar but the server runs {served.get('algorithm')!r} "
                f"(draft {served.get('draft_model')!r}, from {served.get('source')}); relaunch without "
                f"speculative decoding, or set {where} to speculative-full-target (rule 1: different claims)"]
    if claim in SPECULATIVE_CLAIMS and served is None:
        return [f"speculative_algorithm: {where} is {claim} but the server reports no speculative algorithm "
                f"(native autoregressive decoding); set {where} to native-ar, or launch with speculative "
                "decoding (SGLang --speculative-algorithm, vLLM --speculative-config) so /server_info reports it"]
    if claim == "speculative-full-target" and served is not None and served.get("approximate"):
        return [f"speculative verification: {where} is speculative-full-target but the server relaxes "
                f"acceptance ({served.get('algorithm')!r}, from {served.get('source')}: accept thresholds "
                f"below 1 or synthetic rejection sampling); set {where} to speculative-approximate, or "
                "relaunch with exact verification"]
    return []
