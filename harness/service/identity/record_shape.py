"""The shape of a ``service.json`` read back (pure): an archive that another host made (``ledger
merge``) passed its hash checks, but its values can still be of any JSON type. Every reader takes the
document through :func:`clean_service_doc`, so a field that should hold an object holds one (or is
empty) and a list holds only objects; the values themselves are kept as recorded. What was dropped is
listed under ``shape_errors`` (docs/trust.md)."""

from __future__ import annotations

import math
from collections.abc import Mapping
from typing import Any

SERVICE_OBJECTS = ("process", "env_diff", "server_info", "server_info_at_stop", "profile", "speculation",
                   "patches_summary")
"""Fields of a service record that hold an object (or null) when dsv4h wrote them."""


def _obj(x: Any) -> dict[str, Any]:
    return {str(k): v for k, v in x.items()} if isinstance(x, Mapping) else {}


def _objs(x: Any) -> list[dict[str, Any]]:
    return [_obj(e) for e in x if isinstance(e, Mapping)] if isinstance(x, list) else []


def _str(x: Any) -> str | None:
    return x if isinstance(x, str) else None


def _entry(entry: Mapping[str, Any]) -> dict[str, Any]:
    e = _obj(entry)
    if "libraries" in e:
        e["libraries"] = [lib | {"path": str(lib.get("path") or "")} if "path" in lib and not isinstance(
            lib.get("path"), str) else lib for lib in _objs(e["libraries"])]
    for key in ("role", "error"):
        if key in e:
            e[key] = _str(e[key])
    return e


def _snapshot(x: Any) -> dict[str, Any] | None:
    """A mapped-libraries snapshot (``harness.service.identity.mapped``): ``pids`` an object of objects whose
    ``libraries`` are objects with a string ``path``; ``files`` an object."""
    if not isinstance(x, Mapping):
        return None
    out = _obj(x)
    if "pids" in out:
        out["pids"] = {pid: _entry(e) for pid, e in _obj(out["pids"]).items() if isinstance(e, Mapping)}
    if "files" in out:
        out["files"] = _obj(out["files"])
    return out


def _tree(t: dict[str, Any]) -> dict[str, Any]:
    out = dict(t)
    for key in ("name", "error"):
        if key in out and out[key] is not None:
            out[key] = _str(out[key])
    if "git" in out and out["git"] is not None:
        git = _obj(out["git"])
        if "dirty_paths" in git:
            paths = git["dirty_paths"]
            git["dirty_paths"] = [p for p in paths if isinstance(p, str)] if isinstance(paths, list) else []
        if "commit" in git:
            git["commit"] = _str(git["commit"])
        if "untracked_count" in git:
            n = git["untracked_count"]
            git["untracked_count"] = n if isinstance(n, int) and not isinstance(n, bool) else None
        out["git"] = git
    return out


def _model(x: Any) -> dict[str, Any] | None:
    """A model identity (``harness.service.identity.model_identity``): its per-file, per-shard tables objects."""
    if not isinstance(x, Mapping):
        return None
    out = _obj(x)
    for key in ("files", "shard_headers", "weights", "errors", "outside_links"):
        if key in out and out[key] is not None:
            out[key] = _obj(out[key])
    return out


def clean_stack(stack: Any) -> dict[str, Any] | None:
    """A service's ``stack`` (docs/identity.md) with every nested object an object; None when it is
    not an object. A well-formed stack comes back equal to itself (no key is added), so identities
    computed from it do not change."""
    if not isinstance(stack, Mapping):
        return None
    out = _obj(stack)
    if "model" in out:
        out["model"] = _model(out["model"])
    if "source_trees" in out:
        out["source_trees"] = [_tree(t) for t in _objs(out["source_trees"])]
    if "mapped" in out:
        mapped = _obj(out["mapped"])
        out["mapped"] = {k: _snapshot(v) if k in ("at_start", "at_end") else v for k, v in mapped.items()}
    if "runtime_identity" in out:
        if isinstance(out["runtime_identity"], Mapping):
            ident = _obj(out["runtime_identity"])
            if "components" in ident:
                ident["components"] = _obj(ident["components"])
            if "hash" in ident:
                ident["hash"] = _str(ident["hash"])
            out["runtime_identity"] = ident
        else:
            del out["runtime_identity"]
    return out


def clean_service(s: Mapping[str, Any]) -> dict[str, Any]:
    """One service record with its object fields objects (or None) and its stack cleaned."""
    out = _obj(s)
    for key in SERVICE_OBJECTS:
        if key in out and not isinstance(out[key], Mapping):
            out[key] = None
    cmd = out.get("command")
    if cmd is not None and not (isinstance(cmd, list) and all(isinstance(a, str) for a in cmd)):
        out["command"] = None  # an argv is a list of strings; anything else names no command
    if "stack" in out:
        out["stack"] = clean_stack(out["stack"])
    return out


def _finite(x: Any, found: list[int]) -> Any:
    """``x`` with every NaN or infinity replaced by None (counted in ``found``): identities are hashed
    as canonical JSON, which has none, and no value dsv4h records in ``service.json`` is one."""
    if isinstance(x, float) and not math.isfinite(x):
        found.append(1)
        return None
    if isinstance(x, Mapping):
        return {k: _finite(v, found) for k, v in x.items()}
    if isinstance(x, list):
        return [_finite(v, found) for v in x]
    return x


def clean_service_doc(doc: Any) -> dict[str, Any]:
    """``service.json`` as readers expect it: an object whose ``services`` is a list of cleaned service
    objects and whose ``legs`` (when present) is an object of objects; anything else dropped, and named
    in ``shape_errors``."""
    errors: list[str] = []
    if not isinstance(doc, Mapping):
        return {"services": [], "legs": {}, "shape_errors": [f"service.json is a {type(doc).__name__}, not an object"]}
    found: list[int] = []
    doc = _finite(doc, found)
    if found:
        errors.append(f"{len(found)} non-finite numbers read as null")
    out = _obj(doc)
    raw = doc.get("services")
    if raw is not None and not isinstance(raw, list):
        errors.append(f"services is a {type(raw).__name__}, not a list")
    services = raw if isinstance(raw, list) else []
    kept = [clean_service(s) for s in services if isinstance(s, Mapping)]
    if len(kept) != len(services):
        errors.append(f"{len(services) - len(kept)} service entries are not objects")
    if "services" in doc:
        out["services"] = kept
    legs = doc.get("legs")
    if "legs" in doc:
        out["legs"] = {str(k): _obj(v) for k, v in legs.items() if isinstance(v, Mapping)} \
            if isinstance(legs, Mapping) else {}
    if errors:
        out["shape_errors"] = errors
    return out
