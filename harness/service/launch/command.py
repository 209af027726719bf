"""Pure command builders: a service profile -> argv and environment diff.

No processes are started here; ``harness.service.launch.manager`` does that. Nothing here reads files,
the environment or the network, except ``missing_executables``, whose ``which`` is injectable.

SGLang flag names follow the pinned release (``SGLANG_PINNED_VERSION``, read from its
``sglang/srt/server_args.py`` and ``sglang/srt/arg_groups/fields/*.py``). Flags drift between
releases; ``harness.service.launch.sglang_flags`` checks a built argv against the ``--help`` of the
interpreter that will run it. Profile field -> SGLang 0.5.23 flag:

==========================  ====================================================================
``model_path``              ``--model-path``
``served_model_name``       ``--served-model-name``
``tp_size`` / ``ep_size``   ``--tp-size`` / ``--ep-size``
``dp_size``                 ``--dp-size``
``mem_fraction_static``     ``--mem-fraction-static``
``max_total_tokens``        ``--max-total-tokens`` (KV pool, tokens)
``chunked_prefill_size``    ``--chunked-prefill-size`` (chunk budget per prefill step, tokens)
``max_running_requests``    ``--max-running-requests`` (resident requests; decode admission)
``max_prefill_tokens``      ``--max-prefill-tokens``
``cuda_graph_bs``           ``--cuda-graph-bs-decode`` (0.5.23 has no ``--cuda-graph-bs``; graph
                            settings are per phase: ``--cuda-graph-{bs,max-bs,backend}-{decode,prefill}``)
``attention_backend``       ``--attention-backend``
``moe_backend``             ``--moe-runner-backend``
``page_size``               ``--page-size``
``disable_radix_cache``     ``--disable-radix-cache``
``trust_remote_code``       ``--trust-remote-code``
``nnodes`` / ``node_rank``  ``--nnodes`` / ``--node-rank`` / ``--dist-init-addr`` (when nnodes > 1)
``numa: interleave``        ``numactl --interleave=all`` before the interpreter
==========================  ====================================================================

The report's prefill "admission 16" is SGLang's ``--prefill-max-requests`` (the maximum number of
requests in one prefill batch, ``schedule_policy.PrefillAdder.add_one_req``), not
``--max-running-requests``: one service runs all cells, so decode needs 64 resident requests while
prefill admits 16 at a time. The profile model has no field for it yet, so profiles pass it in
``extra_args``.
"""

from __future__ import annotations

import json
import shutil
import sys
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

from harness.errors import ServiceError, SpecError
from harness.inputs.spec import ServiceProfile

SGLANG_PINNED_VERSION = "0.5.23"
NUMACTL_PREFIX: tuple[str, ...] = ("numactl", "--interleave=all")
WITNESS_ENV = "DSV4H_WITNESS_DIR"


@dataclass(frozen=True)
class LaunchCommand:
    """The argv, the environment variables added to the caller's, and the port it will listen on.

    ``needs_numactl``: the argv starts with ``numactl``; the launcher must check it is on PATH
    (``missing_executables``) and refuse with a clear error otherwise. ``node_rank``/``nnodes``:
    which node of a multi-node service this command is for (``None``/1 for a single node).
    """

    argv: tuple[str, ...]
    env_diff: dict[str, str]
    port: int
    needs_numactl: bool = False
    node_rank: int | None = None
    nnodes: int = 1


def checked_speculative(block: Mapping[str, Any]) -> dict[str, Any]:
    """A service profile's ``sim.speculative`` block validated as the simulator will read it
    (``harness.sim.speculation.SpeculativeSpec``); ``SpecError`` naming the field otherwise."""
    from pydantic import ValidationError

    from harness.sim.speculation import SpeculativeSpec

    try:
        return SpeculativeSpec.model_validate(dict(block)).model_dump(mode="json")
    except ValidationError as exc:
        first = exc.errors()[0]
        where = ".".join(str(x) for x in first.get("loc", ()))
        raise SpecError(f"sim.speculative{'.' + where if where else ''}: {first.get('msg')}",
                        hint="see the 'Speculative decoding' section of docs/simulator.md") from None


def sim_command(profile: ServiceProfile, port: int = 0, python: str | None = None, *,
                node_rank: int | None = None) -> LaunchCommand:
    """``dsv4h sim serve`` for ``backend: sim`` (port 0 = let the OS choose; the URL is printed). With
    ``sim.processes > 1`` the profile must have one decode step at every batch (else ``SpecError``).
    With ``nnodes > 1`` it is node ``node_rank``'s command (``--nnodes --node-rank --dist-init-addr``,
    as SGLang's; ``harness.sim.rendezvous``)."""
    s = profile.sim
    argv = [
        python or sys.executable, "-c", "from harness.cli import main; main()", "sim", "serve",
        "--host", profile.launch.host, "--port", str(port), "--profile", s.profile,
        "--stream-mode", s.stream_mode, "--stream-interval", str(s.stream_interval),
        "--time-scale", repr(s.time_scale), "--step-factor", repr(s.step_factor),
    ]
    if s.profile_file is not None:
        argv += ["--profile-file", s.profile_file]
    if profile.identity.model_path is not None:  # a local model directory standing in: reported as the server's
        argv += ["--model-path", profile.identity.model_path]
    if s.speculative is not None:
        argv += ["--speculative", json.dumps(checked_speculative(s.speculative), sort_keys=True)]
    if s.die_after_requests is not None:
        argv += ["--die-after-requests", str(s.die_after_requests)]
    if s.fault is not None:
        argv += ["--fault", s.fault, "--fault-every", str(s.fault_every)]
        if s.fault_first is not None:
            argv += ["--fault-first", str(s.fault_first)]
    if s.openai_usage != "honor":
        argv += ["--openai-usage", s.openai_usage]
    if s.processes > 1:
        from harness.sim import profile_for
        from harness.sim.batching import grid_step_s

        grid_step_s(profile_for(s.profile, s.profile_file), step_factor=s.step_factor, time_scale=s.time_scale)
        argv += ["--processes", str(s.processes)]
    rank = None
    nnodes = profile.launch.nnodes
    if nnodes > 1:
        rank = node_rank if node_rank is not None else profile.launch.node_rank
        if rank is None or not 0 <= rank < nnodes:
            raise SpecError(f"profile '{profile.name}' spans {nnodes} nodes; node rank {rank} is not one "
                            f"of 0..{nnodes - 1}", hint="pass the node rank of this command")
        argv += ["--nnodes", str(nnodes), "--node-rank", str(rank),
                 "--dist-init-addr", _check_dist_init_addr(profile)]
    return LaunchCommand(tuple(argv), dict(profile.launch.env), port, node_rank=rank, nnodes=profile.launch.nnodes)


# Flags the builder emits from profile fields; ``extra_args`` may not repeat them (argparse keeps
# the last value silently, so a repeat would make the profile lie about the served configuration).
MANAGED_SGLANG_FLAGS: dict[str, str] = {
    "--model-path": "model_path", "--model": "model_path",
    "--served-model-name": "served_model_name",
    "--tp-size": "tp_size", "--tensor-parallel-size": "tp_size",
    "--ep-size": "ep_size", "--expert-parallel-size": "ep_size", "--ep": "ep_size",
    "--dp-size": "dp_size", "--data-parallel-size": "dp_size",
    "--mem-fraction-static": "mem_fraction_static",
    "--max-total-tokens": "max_total_tokens",
    "--chunked-prefill-size": "chunked_prefill_size",
    "--max-running-requests": "max_running_requests",
    "--max-prefill-tokens": "max_prefill_tokens",
    "--cuda-graph-bs-decode": "cuda_graph_bs", "--cuda-graph-bs": "cuda_graph_bs",
    "--attention-backend": "attention_backend",
    "--moe-runner-backend": "moe_backend",
    "--page-size": "page_size",
    "--disable-radix-cache": "disable_radix_cache",
    "--trust-remote-code": "trust_remote_code",
    "--nnodes": "nnodes", "--node-rank": "node_rank",
    "--dist-init-addr": "dist_init_addr", "--nccl-init-addr": "dist_init_addr",
    "--host": "host", "--port": "port",
}


def _check_extra_args(profile: ServiceProfile) -> None:
    clashes: list[str] = []
    for arg in profile.launch.extra_args:
        flag = arg.split("=", 1)[0]
        if flag in MANAGED_SGLANG_FLAGS:
            clashes.append(f"{flag} (set profile field '{ServiceProfile.FLAT_KEYS[MANAGED_SGLANG_FLAGS[flag]]}')")
    if clashes:
        raise SpecError(
            f"profile '{profile.name}': launch.extra_args repeat flags the profile manages: {', '.join(clashes)}",
            hint="remove them from launch.extra_args and set the named profile fields instead",
        )


def _check_dist_init_addr(profile: ServiceProfile) -> str:
    addr = profile.launch.dist_init_addr
    if not addr:
        raise SpecError(
            f"profile '{profile.name}': launch.nnodes is {profile.launch.nnodes} but launch.dist_init_addr is not set",
            hint="set launch.dist_init_addr to HOST:PORT of node 0, e.g. launch: {dist_init_addr: 10.0.0.1:25000}",
        )
    host, sep, port = addr.rpartition(":")
    if not sep or not host or not port.isdigit() or not 0 < int(port) < 65536:
        raise SpecError(
            f"profile '{profile.name}': launch.dist_init_addr {addr!r} is not HOST:PORT",
            hint="use the address node 0 is reachable at, e.g. 10.0.0.1:25000 or [fd00::1]:25000",
        )
    return addr


def _check_multinode(profile: ServiceProfile, node_rank: int | None) -> int | None:
    """The node rank this command is for (None for a single-node profile); SpecError if invalid."""
    if profile.launch.nnodes == 1:
        for rank in (node_rank, profile.launch.node_rank):
            if rank not in (None, 0):
                raise SpecError(f"profile '{profile.name}' is single-node; node_rank {rank} is invalid",
                                hint="drop node_rank (--node-rank), or set launch.nnodes in the profile")
        return None
    _check_dist_init_addr(profile)
    if profile.identity.tp_size is None or profile.identity.tp_size % profile.launch.nnodes:
        raise SpecError(
            f"profile '{profile.name}': tp_size {profile.identity.tp_size} is not a multiple of nnodes "
            f"{profile.launch.nnodes}",
            hint="SGLang spreads the TP group evenly over the nodes; e.g. tp_size 8 with nnodes 2",
        )
    rank = node_rank if node_rank is not None else profile.launch.node_rank
    if rank is None:
        raise SpecError(
            f"profile '{profile.name}' spans {profile.launch.nnodes} nodes; say which node this command is for",
            hint="pass node_rank (CLI: --node-rank N), or use multinode_commands() for every node",
        )
    if not 0 <= rank < profile.launch.nnodes:
        raise SpecError(f"profile '{profile.name}': node_rank {rank} is outside 0..{profile.launch.nnodes - 1}",
                        hint=f"use a node rank from 0 to {profile.launch.nnodes - 1}")
    return rank


def sglang_argv_rank(profile: ServiceProfile, port: int, node_rank: int | None) -> tuple[list[str], int | None]:
    if profile.backend != "sglang":
        raise SpecError(f"profile '{profile.name}' has backend '{profile.backend}', not 'sglang'",
                        hint="use the builder of that backend")
    _check_extra_args(profile)
    rank = _check_multinode(profile, node_rank)
    ln, ident = profile.launch, profile.identity
    argv = [ln.python or sys.executable, "-m", "sglang.launch_server", "--model-path", str(ident.model_path)]
    if ident.served_model_name:
        argv += ["--served-model-name", ident.served_model_name]
    if ident.tp_size is not None:
        argv += ["--tp-size", str(ident.tp_size)]
    if ident.ep_size is not None:
        argv += ["--ep-size", str(ident.ep_size)]
    if ident.dp_size is not None:
        argv += ["--dp-size", str(ident.dp_size)]
    if ln.mem_fraction_static is not None:
        argv += ["--mem-fraction-static", repr(ln.mem_fraction_static)]
    if ln.max_total_tokens is not None:
        argv += ["--max-total-tokens", str(ln.max_total_tokens)]
    if ln.chunked_prefill_size is not None:
        argv += ["--chunked-prefill-size", str(ln.chunked_prefill_size)]
    if ln.max_running_requests is not None:
        argv += ["--max-running-requests", str(ln.max_running_requests)]
    if ln.max_prefill_tokens is not None:
        argv += ["--max-prefill-tokens", str(ln.max_prefill_tokens)]
    if ln.cuda_graph_bs:
        argv += ["--cuda-graph-bs-decode", *(str(b) for b in ln.cuda_graph_bs)]
    if ln.page_size is not None:
        argv += ["--page-size", str(ln.page_size)]
    if ln.disable_radix_cache:
        argv.append("--disable-radix-cache")
    if ln.attention_backend:
        argv += ["--attention-backend", ln.attention_backend]
    if ln.moe_backend:
        argv += ["--moe-runner-backend", ln.moe_backend]
    if ln.trust_remote_code:
        argv.append("--trust-remote-code")
    if rank is not None:
        assert ln.dist_init_addr is not None
        argv += ["--nnodes", str(ln.nnodes), "--node-rank", str(rank), "--dist-init-addr", ln.dist_init_addr]
    argv += ["--host", ln.host, "--port", str(port), *ln.extra_args]
    return argv, rank


def sglang_env(profile: ServiceProfile, *, witness_dir: str | None = None) -> dict[str, str]:
    """The environment diff: the profile's ``env`` exactly as written (explicit disables such as
    ``SOME_SELECTOR: "0"`` are kept, so the record says the default-off path was off), sorted by name,
    plus ``DSV4H_WITNESS_DIR`` when a witness directory is given."""
    env = dict(sorted(profile.launch.env.items()))
    if witness_dir is not None:
        if WITNESS_ENV in env and env[WITNESS_ENV] != witness_dir:
            raise SpecError(f"profile '{profile.name}' sets {WITNESS_ENV} itself",
                            hint=f"remove {WITNESS_ENV} from env; the launcher chooses the directory per run")
        env[WITNESS_ENV] = witness_dir
    return env


def sglang_command(profile: ServiceProfile, port: int, *, node_rank: int | None = None,
                   witness_dir: str | None = None) -> LaunchCommand:
    """``python -m sglang.launch_server`` for one node of ``profile`` (see the module table for the
    flags), prefixed by ``numactl --interleave=all`` when ``numa: interleave``.

    ``node_rank`` picks the node of a multi-node profile (default: the profile's ``node_rank``);
    it is an error for a single-node profile to pass a rank other than 0. ``witness_dir`` adds
    ``DSV4H_WITNESS_DIR`` (the backend-witness model patch) to the environment. Raises ``SpecError``
    for a profile that cannot be launched as written.
    """
    argv, rank = sglang_argv_rank(profile, port, node_rank)
    numa = profile.launch.numa == "interleave"
    if numa:
        argv = [*NUMACTL_PREFIX, *argv]
    return LaunchCommand(tuple(argv), sglang_env(profile, witness_dir=witness_dir), port,
                         needs_numactl=numa, node_rank=rank, nnodes=profile.launch.nnodes)


def multinode_commands(profile: ServiceProfile, port: int, *,
                       witness_dir: str | None = None) -> list[LaunchCommand]:
    """One command per node, node rank 0 first (node 0 serves HTTP on ``port``; all nodes meet at
    ``dist_init_addr``). A single-node profile gives a list of one command."""
    if profile.launch.nnodes == 1:
        return [sglang_command(profile, port, witness_dir=witness_dir)]
    return [sglang_command(profile, port, node_rank=r, witness_dir=witness_dir) for r in range(profile.launch.nnodes)]


def missing_executables(cmd: LaunchCommand, which: Callable[[str], str | None] = shutil.which) -> list[str]:
    """Executables ``cmd`` needs that ``which`` cannot find (``numactl`` when ``needs_numactl``)."""
    need = ["numactl"] if cmd.needs_numactl else []
    return [name for name in need if which(name) is None]


def check_executables(cmd: LaunchCommand, which: Callable[[str], str | None] = shutil.which) -> None:
    """Raise ``ServiceError`` naming each missing executable (the launcher calls this before starting)."""
    missing = missing_executables(cmd, which)
    if missing:
        raise ServiceError(
            f"cannot launch: {', '.join(missing)} not found on PATH (the profile asks for numa: interleave)",
            hint="install numactl (e.g. apt-get install numactl) or set 'numa: none' in the profile",
        )


def generic_command(profile: ServiceProfile, port: int) -> LaunchCommand:
    """``backend: command``: the profile's argv with ``{host}`` and ``{port}`` filled in (pure)."""
    assert profile.launch.command is not None, "validated by the profile"
    argv = [a.replace("{host}", profile.launch.host).replace("{port}", str(port)) for a in profile.launch.command]
    return LaunchCommand(tuple(argv), dict(profile.launch.env), port)


def vllm_command(profile: ServiceProfile, port: int) -> LaunchCommand:
    """vLLM's OpenAI server module (the ``vllm`` console script is broken in the CPU wheel)."""
    argv = [profile.launch.python or sys.executable, "-m", "vllm.entrypoints.openai.api_server",
            "--model", str(profile.identity.model_path)]
    if profile.identity.served_model_name:
        argv += ["--served-model-name", profile.identity.served_model_name]
    if profile.identity.tp_size is not None:
        argv += ["--tensor-parallel-size", str(profile.identity.tp_size)]
    argv += [*profile.launch.extra_args, "--host", profile.launch.host, "--port", str(port)]
    return LaunchCommand(tuple(argv), dict(profile.launch.env), port)
