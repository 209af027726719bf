"""What stack one service served (edge module: reads the model directory, /proc, runs git;
docs/identity.md).

:func:`stack_at_start` is taken once the service is healthy and its identity verified, before any
measurement: the model identity (configs, tokenizer files, the shard index and every shard's
safetensors header; every weight byte only with ``hash_weights``), the profile's declared source
trees (commit, dirty paths, diff hashes, the installed distribution), the shared objects every
process of the owned tree has mapped (each distinct file hashed once), and the runtime identity
over all of it. :func:`mapped_at_end` takes the mapped libraries again before the service is
stopped. :func:`violations` checks the profile's ``require_libraries`` and ``library_dirs``
against a snapshot: a violation at the start refuses the run before measurement.
"""

from __future__ import annotations

import re
import sys
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import psutil

from harness.inputs.spec import ServiceProfile
from harness.service.identity.environment import package_versions
from harness.service.identity.mapped import HashCache, check_requirements, mapped_libraries, tree_pids
from harness.service.identity.model_identity import model_identity
from harness.service.identity.runtime_identity import runtime_identity
from harness.service.identity.source_trees import source_tree_state


def _model(profile: ServiceProfile, workspace: Path) -> dict[str, Any] | None:
    if not profile.identity.model_path or not Path(profile.identity.model_path).is_dir():
        return None
    return model_identity(Path(profile.identity.model_path), hash_weights=profile.identity.hash_weights,
                          cache_file=workspace / ".cache" / "weight-hashes.json")


_RANK = re.compile(r"(?:TP|DP|EP|PP)\d+")


def rank_roles(pids: list[int]) -> dict[int, str]:
    """The processes that name themselves as a rank (SGLang sets each scheduler's title to e.g.
    ``sglang::scheduler_TP0``): pid -> that title. Only these are workers for ``every_worker``
    requirements when any exists (harness.service.identity.mapped_rules)."""
    out: dict[int, str] = {}
    for pid in pids:
        try:
            title = (psutil.Process(pid).cmdline() or [""])[0]
        except (psutil.Error, OSError):
            continue
        if _RANK.search(title):
            out[pid] = title[:128]
    return out


def _mapped(root_pid: int | None, cache: HashCache) -> dict[str, Any] | None:
    """The tree's mapped libraries, with each rank's role where the server names it (None for a service
    this run did not start: nothing to read)."""
    if root_pid is None:
        return None
    pids = tree_pids(root_pid)
    return mapped_libraries(pids, roles=rank_roles(pids) or None, cache=cache)


def stack_at_start(profile: ServiceProfile, root_pid: int | None, workspace: Path, record: Mapping[str, Any],
                   cache: HashCache) -> dict[str, Any]:
    """The service's stack (module docstring); ``record`` is its service record so far (argv, env,
    server info, patches) for the runtime identity."""
    stack: dict[str, Any] = {
        "model": _model(profile, workspace),
        "source_trees": [source_tree_state(t.name, Path(t.path), t.distribution)
                         for t in profile.identity.source_trees],
        "mapped": {"at_start": _mapped(root_pid, cache), "at_end": None},
    }
    stack["runtime_identity"] = runtime_identity(dict(record) | {"stack": stack}, packages=package_versions())
    return stack


def mapped_at_end(root_pid: int | None, cache: HashCache) -> dict[str, Any] | None:
    """The tree's mapped libraries once more, before it is stopped."""
    return _mapped(root_pid, cache)


def violations(profile: ServiceProfile, mapped: Mapping[str, Any] | None) -> list[str]:
    """What the snapshot ``mapped`` breaks of the profile's library requirements (empty: none, or
    nothing required); a required library with nothing observable (an attached service) is one."""
    if not profile.identity.require_libraries and profile.identity.library_dirs is None:
        return []
    if mapped is None:
        return ["the service's processes cannot be read (an attached service): its libraries are unknown"]
    prefixes = sorted({sys.base_prefix, sys.prefix, "/usr/lib", "/lib", "/usr/lib64", "/lib64"})
    return check_requirements(mapped, profile.identity.require_libraries, profile.identity.library_dirs, prefixes)
