"""Starting, owning and stopping services.

- :mod:`.manager`: start (GPU ownership checked first) or attach, health, identity verification from
  the running server, stop only the owned tree (``start_service``, ``RunningService``,
  ``verify_identity``, ``read_server_info``, ``http_get`` / ``http_post``, ``check_port_free``).
- :mod:`.registry`: launched servers recorded in the workspace, so one a killed dsv4h left behind is
  found and stopped.
- :mod:`.command` / :mod:`.sglang_flags`: launch commands (pure) and their check against the
  installed SGLang.
- :mod:`.slurm` (pure srun/scancel argv, rank records), :mod:`.multinode` (the multi-node launcher)
  and :mod:`.slurm_rank` (the rank wrapper each task runs as ``python -m``).

Imports :mod:`harness.service.identity`, :mod:`harness.service.devices`, ``service.process`` and
``service.http``; neither imports it.

Public surface (``__all__``): the names other packages import from these modules, re-exported here
lazily (importing the package imports none of its modules); they may equally be imported from their
defining modules.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from harness.service._lazy import lazy_getattr

if TYPE_CHECKING:
    from harness.service.launch.command import LaunchCommand, multinode_commands, sglang_command
    from harness.service.launch.manager import (
        RunningService,
        check_port_free,
        http_get,
        http_post,
        port_field,
        read_server_info,
        start_service,
        verify_identity,
    )
    from harness.service.launch.registry import forget, left_behind, scan, stop_launched
    from harness.service.launch.sglang_flags import load_flagset, validate_argv

_HOME: dict[str, str] = {
    "LaunchCommand": "command",
    "RunningService": "manager",
    "check_port_free": "manager",
    "forget": "registry",
    "http_get": "manager",
    "http_post": "manager",
    "left_behind": "registry",
    "load_flagset": "sglang_flags",
    "multinode_commands": "command",
    "port_field": "manager",
    "read_server_info": "manager",
    "scan": "registry",
    "sglang_command": "command",
    "start_service": "manager",
    "stop_launched": "registry",
    "validate_argv": "sglang_flags",
    "verify_identity": "manager",
}
"""Each public name and the module that defines it."""

__all__ = [
    "LaunchCommand",
    "RunningService",
    "check_port_free",
    "forget",
    "http_get",
    "http_post",
    "left_behind",
    "load_flagset",
    "multinode_commands",
    "port_field",
    "read_server_info",
    "scan",
    "sglang_command",
    "start_service",
    "stop_launched",
    "validate_argv",
    "verify_identity",
]


__getattr__ = lazy_getattr(__name__, _HOME)  # a public name imported from its module on first use
