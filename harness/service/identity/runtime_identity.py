"""The runtime identity of one served stack (pure; docs/identity.md).

:func:`runtime_identity` hashes eight components of a service record (``service.json`` ->
``services[i]``, with its ``stack``) separately, each over its canonical JSON, and the whole identity
over the sorted component hashes:

- ``model``: ``stack.model`` without its ``path`` and ``statement``, and only the names of its
  ``errors`` and ``outside_links`` (where the directory is does not change what was hashed);
- ``source_trees``: per tree (by name) the git commit, tracked-diff and untracked hashes, dirty flag,
  truncation flags and the distribution's name, version and editable flags (not paths, branch or
  error text);
- ``launch``: the argv without ``--host``/``--port`` and their values, plus ``env_diff``;
- ``packages``: the archive environment's package versions when given, else None;
- ``served_config``: ``server_info`` without the volatile keys (:data:`VOLATILE_INFO_KEYS`, any key
  ending in ``_port``, and ``created`` at any depth);
- ``mapped``: the set of (basename, sha256) of the libraries mapped at start;
- ``patches``: the patch-series state recorded for the engine tree;
- ``speculation``: the served speculative configuration (None for native decoding).

:func:`identity_entries` breaks each component into named entries (a tree, a library basename, a
model file, a package, a server argument) so two records can be compared entry by entry; an entry is
named ``component.entry`` (split at the first dot: ``mapped.libccl.so``, ``model.config.json``).
"""

from __future__ import annotations

import fnmatch
from collections.abc import Mapping, Sequence
from typing import Any

from harness.hashing import sha256_json
from harness.service.identity.identity import argv_without_port
from harness.service.identity.speculative_identity import served_speculation

__all__ = ["COMPONENTS", "VOLATILE_INFO_KEYS", "component_differences", "components", "entry_differences",
           "identity_diff", "identity_entries", "runtime_identity", "served_config"]

COMPONENTS = ("model", "source_trees", "launch", "packages", "served_config", "mapped", "patches", "speculation")

# server_info keys that differ between two starts of the same stack: where it listens, its rendezvous
# addresses, per-start paths and seeds SGLang draws when none is given, the endpoint the record came
# from, and live state (SGLang's ``internal_states``: throughput, queue lengths, token usage, the
# simulator's step counters; ``status``: SGLang's up/starting flag).
VOLATILE_INFO_KEYS = frozenset({"host", "port", "url", "_source", "internal_states", "status", "dist_init_addr",
                                "random_seed", "file_storage_path", "log_dir", "crash_dump_folder",
                                "debug_tensor_dump_output_folder"})
_VOLATILE_ANYWHERE = frozenset({"created"})  # /v1/models ``created``: a Unix time of the start


def _drop_anywhere(value: Any) -> Any:
    if isinstance(value, Mapping):
        return {str(k): _drop_anywhere(v) for k, v in value.items() if k not in _VOLATILE_ANYWHERE}
    if isinstance(value, list | tuple):
        return [_drop_anywhere(v) for v in value]
    return value


def served_config(server_info: Mapping[str, Any] | None) -> dict[str, Any] | None:
    """``server_info`` without its volatile keys (None when the record has none)."""
    if not server_info:
        return None
    kept = {k: v for k, v in server_info.items()
            if k not in VOLATILE_INFO_KEYS and not str(k).endswith("_port")}
    out = _drop_anywhere(kept)
    assert isinstance(out, dict)
    return out


def _argv(argv: Sequence[str] | None) -> list[str]:
    """The fingerprint's argv (``identity.argv_without_port``), also without ``--port=N`` / ``--host=H``."""
    return [str(a) for a in argv_without_port(argv) if not str(a).startswith(("--port=", "--host="))]


def _stack(record: Mapping[str, Any]) -> Mapping[str, Any]:
    stack = record.get("stack")
    return stack if isinstance(stack, Mapping) else {}


def _model(record: Mapping[str, Any]) -> dict[str, Any] | None:
    model = _stack(record).get("model")
    if not isinstance(model, Mapping):
        return None
    out = {k: v for k, v in model.items() if k not in ("path", "statement")}
    for key in ("errors", "outside_links"):  # their texts and targets carry this machine's paths
        if isinstance(out.get(key), Mapping):
            out[key] = sorted(out[key])
    return out


def _tree(tree: Mapping[str, Any]) -> dict[str, Any]:
    git = tree.get("git") if isinstance(tree.get("git"), Mapping) else None
    dist = tree.get("distribution") if isinstance(tree.get("distribution"), Mapping) else None
    return {
        "git": None if git is None else {k: git.get(k) for k in ("commit", "dirty", "diff_sha256", "untracked_sha256",
                                                                "untracked_count", "untracked_truncated")},
        "distribution": None if dist is None else {k: dist.get(k) for k in ("name", "version", "editable",
                                                                             "editable_points_here")},
    }


def _trees(record: Mapping[str, Any]) -> dict[str, Any]:
    trees = _stack(record).get("source_trees") or []
    return {str(t.get("name")): _tree(t) for t in trees if isinstance(t, Mapping)}


def _mapped(record: Mapping[str, Any]) -> dict[str, list[str | None]] | None:
    """basename -> sorted distinct sha256 of the libraries mapped at start, null for one that could
    not be hashed (None: not recorded)."""
    mapped = _stack(record).get("mapped")
    start = mapped.get("at_start") if isinstance(mapped, Mapping) else None
    if not isinstance(start, Mapping):
        return None
    out: dict[str, set[str | None]] = {}
    for path, digest in (start.get("files") or {}).items():  # None: a file that could not be hashed
        out.setdefault(str(path).rsplit("/", 1)[-1], set()).add(digest if isinstance(digest, str) else None)
    return {k: sorted(v, key=lambda d: (d is None, d or "")) for k, v in sorted(out.items())}


def _speculation(record: Mapping[str, Any]) -> dict[str, Any] | None:
    spec = served_speculation(record.get("server_info") or {}, record.get("command"))
    return None if spec is None else {k: v for k, v in spec.items() if k != "source"}


def components(record: Mapping[str, Any], *, packages: Mapping[str, Any] | None = None) -> dict[str, Any]:
    """The value of each component (module docstring) before hashing."""
    return {
        "model": _model(record),
        "source_trees": _trees(record) or None,
        "launch": {"argv": _argv(record.get("command")), "env_diff": dict(record.get("env_diff") or {})},
        "packages": dict(packages) if packages is not None else None,
        "served_config": served_config(record.get("server_info")),
        "mapped": _mapped(record),
        "patches": record.get("patches") or None,
        "speculation": _speculation(record),
    }


def runtime_identity(service_record: Mapping[str, Any], *,
                     packages: Mapping[str, Any] | None = None) -> dict[str, Any]:
    """``{"hash", "components": {name: sha256}}``: each component's canonical-JSON SHA-256 and the
    SHA-256 of the sorted list of those hashes. ``packages``: the archive environment's package
    versions (``environment.json`` -> ``packages``), when known."""
    comps = {name: sha256_json(value) for name, value in components(service_record, packages=packages).items()}
    return {"hash": sha256_json(sorted(comps.values())), "components": dict(sorted(comps.items()))}


def identity_diff(a: Mapping[str, Any], b: Mapping[str, Any]) -> list[tuple[str, str | None, str | None]]:
    """(component, hash in a, hash in b) for each component whose hash differs between two runtime
    identities (a component one of them lacks has None there), in component name order."""
    ca, cb = a.get("components") or {}, b.get("components") or {}
    return [(n, ca.get(n), cb.get(n)) for n in sorted(set(ca) | set(cb)) if ca.get(n) != cb.get(n)]


def _model_entries(model: Mapping[str, Any] | None) -> dict[str, str]:
    if model is None:
        return {}
    out = {str(k): sha256_json(v) for k, v in (model.get("files") or {}).items()}
    if model.get("index") is not None:
        out["index"] = sha256_json(model.get("index"))
    for shard, head in (model.get("shard_headers") or {}).items():
        out[f"{shard}:header"] = sha256_json(head)
    for shard, digest in (model.get("weights") or {}).items():
        out[f"{shard}:weights"] = sha256_json(digest)
    rest = {k: v for k, v in model.items() if k not in ("files", "index", "shard_headers", "weights")}
    if rest:
        out["coverage"] = sha256_json(rest)  # hashed / not_hashed lists
    return out


def identity_entries(service_record: Mapping[str, Any], *,
                     packages: Mapping[str, Any] | None = None) -> dict[str, dict[str, str]]:
    """component -> {entry: sha256}: trees by name, libraries by basename, model files and shards,
    packages by name, server arguments by key, ``argv`` and ``env.VAR`` of the launch, and the whole
    value as the single entry ``""`` for ``patches`` and ``speculation``. A component that is None
    has no entries."""
    comps = components(service_record, packages=packages)
    out: dict[str, dict[str, str]] = {}
    for name, value in comps.items():
        if value is None:
            out[name] = {}
        elif name == "model":
            out[name] = _model_entries(value)
        elif name == "launch":
            out[name] = {"argv": sha256_json(value["argv"])} | {f"env.{k}": sha256_json(v)
                                                                 for k, v in value["env_diff"].items()}
        elif name in ("source_trees", "mapped", "packages", "served_config"):
            out[name] = {str(k): sha256_json(v) for k, v in value.items()}
        else:
            out[name] = {"": sha256_json(value)}
    return out


def entry_differences(a: Mapping[str, Any], b: Mapping[str, Any], *, packages_a: Mapping[str, Any] | None = None,
                      packages_b: Mapping[str, Any] | None = None) -> dict[str, list[str]]:
    """component -> the names of its entries that differ between two service records (present in
    one only, or with different hashes), for each component that differs; sorted."""
    ea = identity_entries(a, packages=packages_a)
    eb = identity_entries(b, packages=packages_b)
    ha = runtime_identity(a, packages=packages_a)["components"]
    hb = runtime_identity(b, packages=packages_b)["components"]
    out: dict[str, list[str]] = {}
    for comp in COMPONENTS:
        if ha[comp] == hb[comp]:
            continue
        xa, xb = ea.get(comp, {}), eb.get(comp, {})
        # "" when only the component as a whole differs (None on one side, say)
        out[comp] = sorted(n for n in set(xa) | set(xb) if xa.get(n) != xb.get(n)) or [""]
    return out


def _covered(comp: str, entry: str, declared: Sequence[str]) -> bool:
    for d in declared:
        dc, _, de = d.partition(".")
        if dc == comp and (not de or fnmatch.fnmatchcase(entry, de)):
            return True
    return False


def component_differences(a: Mapping[str, Any], b: Mapping[str, Any], declared: Sequence[str], *,
                          packages_a: Mapping[str, Any] | None = None,
                          packages_b: Mapping[str, Any] | None = None) -> tuple[list[str], list[str]]:
    """(declared differences, undeclared differences) between two service records.

    Each difference is named ``component`` (for ``patches``/``speculation``) or ``component.entry``
    (``source_trees.aiter``, ``mapped.libccl.so``, ``served_config.tp_size``, ``launch.env.NCCL_ALGO``).
    A declared name is a component (covering all its entries) or ``component.PATTERN``, split at the
    first dot, PATTERN matched against the entry name as a case-sensitive glob: ``source_trees.aiter``
    covers that tree only, ``mapped.libccl.so*`` every ``libccl.so`` version, ``launch.env.NCCL_*``
    those variables; ``mapped.libccl`` covers nothing named ``libccl.so.1``. An ABBA screen that
    declares only what its B side changes shows everything else that changed as undeclared."""
    declared_out: list[str] = []
    undeclared: list[str] = []
    for comp, entries in entry_differences(a, b, packages_a=packages_a, packages_b=packages_b).items():
        for entry in entries:
            name = comp if entry == "" else f"{comp}.{entry}"
            (declared_out if _covered(comp, entry, declared) else undeclared).append(name)
    return declared_out, undeclared
