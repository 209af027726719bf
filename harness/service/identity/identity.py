"""Service identity fingerprints (pure): what makes two runs comparable.

The fingerprint hashes what a service *is* — the server's own configuration, the engine patch
series state, the backend witnesses' selections and the launch argv/env — and drops what differs
between two starts of the same thing (ports, hosts, PIDs, paths of logs and witness files, times).
Two ledger rows with different ``identity_hash`` come from differently configured services. The
served speculative configuration (``harness.service.identity.speculative_identity``) is part of it, and so are
the model, source trees and mapped libraries where the service's stack was recorded
(``harness.service.identity.stack``; docs/identity.md).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from harness.hashing import sha256_json
from harness.service.identity.speculative_identity import served_speculation

_VOLATILE_INFO = {"port", "host", "_source", "internal_states", "dist_init_addr", "nccl_port", "random_seed",
                  "file_storage_path", "log_dir", "metrics_port", "url"}
STACK_COMPONENTS = ("model", "source_trees", "mapped")
"""The runtime identity's components (``harness.service.identity.runtime_identity``) the fingerprint adds; the
others (launch, served configuration, patches, speculation) it already holds in its own terms."""
_VOLATILE_WITNESS = {"pid", "timestamp", "time", "wall", "wall_iso", "t_ns", "path", "hostname"}


def _strip(d: Mapping[str, Any], drop: set[str]) -> dict[str, Any]:
    return {k: v for k, v in d.items() if k not in drop}


def argv_without_port(argv: Sequence[str] | None) -> list[str]:
    """``argv`` without ``--port``/``--host`` and the value after each (they differ between starts)."""
    out: list[str] = []
    skip = False
    for a in argv or []:
        if skip:
            skip = False
            continue
        if a in ("--port", "--host"):
            skip = True
            continue
        out.append(a)
    return out


def service_fingerprint(service: Mapping[str, Any]) -> dict[str, Any]:
    """The comparable part of one ``service.json`` entry."""
    info = service.get("server_info") or {}
    models = info.get("models") if isinstance(info.get("models"), dict) else None
    witnesses = [_strip(w, _VOLATILE_WITNESS) for w in service.get("witnesses") or []]
    patches = service.get("patches") or None
    out: dict[str, Any] = {
        "backend": service.get("backend"),
        "server_info": _strip(info, _VOLATILE_INFO) if models is None else {"models": models},
        "patches": patches,
        "witnesses": sorted(witnesses, key=sha256_json),
        "argv": argv_without_port(service.get("command")),
        "env_diff": service.get("env_diff") or {},
    }
    # only when speculating: native services keep the fingerprints (and hashes) recorded before it existed
    spec = served_speculation(info, service.get("command"))
    if spec is not None:
        out["speculation"] = {k: v for k, v in spec.items() if k != "source"}
    # only when recorded (harness.service.identity.stack): the model, source trees and mapped libraries, as the
    # runtime identity's component hashes; services recorded before it keep their hashes
    stack = service.get("stack") if isinstance(service.get("stack"), Mapping) else None
    ident = stack.get("runtime_identity") if stack else None
    components = ident.get("components") if isinstance(ident, Mapping) else None
    if isinstance(components, Mapping):
        out["stack"] = {k: components[k] for k in STACK_COMPONENTS if k in components}
    return out


def identity_hash(services: Sequence[Mapping[str, Any]]) -> str:
    """16 hex digits over the fingerprints of every distinct service configuration of a run."""
    prints = sorted({sha256_json(service_fingerprint(s)) for s in services})
    return sha256_json(prints)[:16] if prints else ""
