"""Start, verify and stop one service for a campaign (edge module: processes and HTTP).

``start_service`` launches the profile's backend as an owned process tree (or attaches to a URL),
waits for ``/health`` while watching the process, and reads the server's own configuration
(``/server_info``, fallback ``/get_server_info``; vLLM ``/v1/models``). ``check_identity``
compares that configuration with the profile (pure) so a mismatch refuses the run.
"""

from __future__ import annotations

import contextlib
import errno
import json
import os
import re
import socket
import subprocess
import sys
import time
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from harness.errors import IdentityMismatch, ServerUnreachable, ServiceDied, ServiceError
from harness.formats import read_yaml, resolve_path
from harness.inputs.spec import ClaimClass, ServiceProfile, spelled_key
from harness.service.devices.ownership import service_gpus
from harness.service.http import request
from harness.service.identity.origin import server_is_simulator
from harness.service.identity.speculative_identity import claim_conflicts, served_speculation
from harness.service.identity.witness import compare_witnesses, read_witnesses
from harness.service.launch.command import (
    WITNESS_ENV,
    LaunchCommand,
    check_executables,
    generic_command,
    sglang_command,
    sim_command,
    vllm_command,
)
from harness.service.launch.multinode import MultiNodeService, is_local
from harness.service.launch.registry import forget, note_url, record_launch
from harness.service.process import OwnedProcess, start_owned, stop_owned, wait_for_line

_URL_RE = re.compile(r"(http://[0-9.]+:\d+)")
RANK_LOSS_SETTLE_S = 5.0  # how long a lost rank's service gets to end its srun step before its log is read


@dataclass
class RunningService:
    """A service ready for load: base URL, the owned process (None when attached), what the server
    reported about itself, and wall/monotonic times of readiness."""

    profile: ServiceProfile
    url: str
    process: OwnedProcess | None
    server_info: dict[str, Any] = field(default_factory=dict)
    ready_wall: str = ""
    ready_ns: int = 0
    command: LaunchCommand | None = None
    owners_before_launch: dict[str, Any] | None = None
    owner_checks: list[dict[str, Any]] = field(default_factory=list)
    witness_dir: Path | None = None
    witnesses: list[dict[str, Any]] = field(default_factory=list)
    patches: dict[str, Any] | None = None
    server_info_at_stop: dict[str, Any] | None = None
    launch_record: Path | None = None
    stack: dict[str, Any] | None = None  # what was served: harness.service.identity.stack (docs/identity.md)
    nodes: MultiNodeService | None = None  # the ranks of a multi-node service (harness.service.launch.multinode)

    def read_final_info(self) -> None:
        """Read the server's configuration and internal state once more before it is stopped
        (e.g. SGLang's internal_states, the simulator's late-step counters); best effort."""
        try:
            self.server_info_at_stop = read_server_info(self.url, self.profile.wire_protocol)
        except ServiceError:
            self.server_info_at_stop = None

    def check_owners(self, where: str) -> None:
        """Refuse to go on while an unrelated process owns one of this service's GPUs (before every
        cell or leg); the snapshot is kept for the archive."""
        if self.nodes is not None:
            per_node = self.nodes.check_owners(self.profile)
            if per_node is not None:
                self.owner_checks.append({"where": where, "nodes": per_node})
            return
        snap = check_gpu_owners(self.profile, self.process)
        if snap is not None:
            self.owner_checks.append({"where": where, "snapshot": snap})

    @property
    def worker_pid(self) -> int | None:
        """The PID whose tree runs the engine (mapped libraries, runtime identity): rank 0's when a
        multi-node service runs it on this host, else the owned process's (None when attached)."""
        if self.nodes is not None:
            rank0 = next(r for r in self.nodes.ranks if r.rank == 0)
            if is_local(rank0.node):
                return rank0.pid
        return self.process.pid if self.process is not None else None

    @property
    def owned(self) -> bool:
        """True when dsv4h started this service (and so may stop it)."""
        return self.process is not None

    def check_alive(self) -> None:
        """Raise ServiceDied (with exit code and log tail) if the owned process has exited."""
        if self.process is None:
            return
        code = self.process.exit_code()
        if code is not None:
            raise ServiceDied(
                f"service '{self.profile.name}' (pid {self.process.pid}) exited with code {code}\n"
                f"--- log tail ({self.process.log_path}) ---\n{self.process.log_tail()}",
                hint="completed rounds are kept; fix the cause, then resume the run (a formal campaign prints "
                "its resume command with its archive)",
            )
        gone = self.nodes.gone_here() if self.nodes is not None else []
        if gone:
            assert self.nodes is not None
            ranks = ", ".join(f"node rank {r.rank} (pid {r.pid} on {r.node})" for r in gone)
            self.process.settle(RANK_LOSS_SETTLE_S)  # rank 0 logs the loss and exits: keep its line in the tail
            raise ServiceDied(
                f"service '{self.profile.name}': {ranks} of {self.profile.launch.nnodes} is gone; the multi-node "
                f"service is down (srun pid {self.process.pid}, step {self.nodes.job_id}.{self.nodes.step_id})\n"
                f"--- log tail ({self.process.log_path}) ---\n{self.process.log_tail()}",
                hint="read that rank's lines (prefixed 'R:') in the log; completed rounds are kept; resume the "
                "run once the service can run (a formal campaign prints its resume command with its archive)",
            )

    def identity(self) -> dict[str, Any]:
        """Everything recorded in the archive about this service."""
        return {
            "name": self.profile.name,
            "backend": self.profile.backend,
            "url": self.url,
            "owned": self.owned,
            "process": self.process.identity() if self.process else None,
            "command": list(self.command.argv) if self.command else None,
            "env_diff": dict(self.command.env_diff) if self.command else {},
            "ready_wall": self.ready_wall,
            "server_info": self.server_info,
            "server_info_at_stop": self.server_info_at_stop,
            "profile": self.profile.model_dump(mode="json"),
            "gpu_owners_before_launch": self.owners_before_launch,
            "gpu_owner_checks": self.owner_checks,
            "witness_dir": str(self.witness_dir) if self.witness_dir else None,
            "witnesses": self.witnesses,
            "patches": self.patches,
            "speculation": served_speculation(self.server_info, self.command.argv if self.command else None),
            "stack": self.stack,
            **({"multinode": self.nodes.identity()} if self.nodes is not None else {}),
        }

    def stop(self) -> None:
        """Stop the owned tree (no-op for attached services) and drop its workspace launch record."""
        if self.process is not None:
            try:
                if self.nodes is not None and self.nodes.stopped is None:
                    self.nodes.stop()  # scancel the step, then no rank left on any node
            finally:
                stop_owned(self.process)
                forget(self.launch_record)
            self.launch_record = None


def free_port(host: str = "127.0.0.1") -> int:
    """An unused TCP port on ``host`` (for engines that cannot bind port 0 themselves)."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind((host, 0))
        return int(s.getsockname()[1])


def port_field(spec_path: Path | None, section: str = "service") -> str:
    """Where the spec at ``spec_path`` sets the port of its ``section`` service (``service``; an ABBA
    screen's ``control`` or ``candidate``), for an error message: ``'service.port' in SPEC``
    (``'service.launch.port'`` when it writes the sections), or the profile file that section names."""
    where = str(spec_path) if spec_path is not None else "the spec"
    key = "launch.port"
    if spec_path is not None:
        with contextlib.suppress(Exception):  # only words for a message: the spec was validated already
            data = read_yaml(spec_path)
            svc = data.get(section) if isinstance(data, dict) else None
            if isinstance(svc, str):
                with contextlib.suppress(Exception):  # the profile file's own spelling
                    key = spelled_key(read_yaml(resolve_path(svc, spec_path.parent)), "port")
                return f"'{key}' in the service profile {svc} (named by '{section}' in {where})"
            key = spelled_key(svc, "port")
    return f"'{section}.{key}' in {where}"


def check_port_free(profile: ServiceProfile, field: str) -> None:
    """Refuse a service whose fixed ``port`` is already taken on its host, before anything is written
    (no archive, no ledger rows for a service that would never start). ``field`` names where the
    spec set the port (e.g. ``'service.port' in spec.yaml``). An attached service, port 0 or none
    (a free one is picked), or a host this machine cannot bind (a remote node) is left to the launch."""
    if profile.backend == "attach" or not profile.launch.port:
        return
    try:
        family, _, _, _, addr = socket.getaddrinfo(profile.launch.host, profile.launch.port, type=socket.SOCK_STREAM)[0]
    except OSError:
        return
    with socket.socket(family, socket.SOCK_STREAM) as probe:
        probe.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)  # as servers bind: TIME_WAIT is no clash
        try:
            probe.bind(addr)
        except OSError as exc:
            if exc.errno != errno.EADDRINUSE:
                return
            raise ServiceError(
                f"port {profile.launch.host}:{profile.launch.port} is already in use (set by {field})",
                hint=f"pick another port there, set it to 0 (or leave it out) to have a free one picked, or "
                     f"stop the process using port {profile.launch.port}") from None


MAX_INFO_BYTES = 16 << 20
"""Most of a GET answer (``/health``, ``/server_info``, ``/v1/models``, ``/metrics``) read (bytes)."""


def http_get(url: str, timeout_s: float = 5.0, max_bytes: int = MAX_INFO_BYTES) -> tuple[int, bytes]:
    """GET ``url``; returns (status, body). A redirect is not followed (its 3xx status is returned).
    Raises ServerUnreachable when nothing answers, when the body passes ``max_bytes``, and when the
    whole exchange takes longer than ``timeout_s`` (``harness.service.http``)."""
    return request(url, timeout_s=timeout_s, max_bytes=max_bytes)


def http_post(url: str, timeout_s: float = 10.0, max_bytes: int = MAX_INFO_BYTES) -> tuple[int, bytes]:
    """POST an empty body to ``url``; returns (status, body), bounded as :func:`http_get`."""
    return request(url, data=b"", timeout_s=timeout_s, max_bytes=max_bytes)


def wait_healthy(url: str, timeout_s: float, process: OwnedProcess | None = None, *,
                 health_path: str = "/health") -> None:
    """Poll ``health_path`` until 200; watch the owned process so an early exit is reported at once."""
    deadline = time.monotonic() + timeout_s
    last = "no answer yet"
    while time.monotonic() < deadline:
        if process is not None and process.exit_code() is not None:
            raise ServiceDied(
                f"service process {process.pid} exited with code {process.exit_code()} during startup\n"
                f"--- log tail ({process.log_path}) ---\n{process.log_tail()}",
                hint="read the log above and fix the profile",
            )
        try:
            status, _ = http_get(url + health_path, timeout_s=2.0)
            if status == 200:
                return
            last = f"HTTP {status}"
        except ServerUnreachable as exc:
            last = str(exc)
        time.sleep(0.2)
    tail = f"\n--- log tail ({process.log_path}) ---\n{process.log_tail()}" if process else ""
    raise ServiceError(f"{url}/health not ready after {timeout_s:.0f} s ({last}){tail}",
                       hint="raise launch.startup_timeout_s in the profile, or read the log")


def read_server_info(url: str, protocol: str) -> dict[str, Any]:
    """The server's own report of its configuration: SGLang ``/server_info`` or fallback
    ``/get_server_info``, tried for every protocol since SGLang and the simulator also serve the OpenAI
    API, else ``/v1/models``. For ``vllm`` the SGLang report is kept only when it is the dsv4h
    simulator's (``harness.service.identity.origin.server_is_simulator``; vLLM's own development ``/server_info``
    is not read as a configuration), so simulated data is known from the server on every protocol.
    Empty dict when the server offers neither."""
    for path in ("/server_info", "/get_server_info"):
        status, body = http_get(url + path)
        if status == 200:
            try:
                data = json.loads(body)
            except ValueError:
                continue
            if isinstance(data, dict) and (protocol != "vllm" or server_is_simulator(data)):
                data["_source"] = path
                return data
    status, body = http_get(url + "/v1/models")
    if status == 200:
        try:
            return {"_source": "/v1/models", "models": json.loads(body)}
        except ValueError:
            pass
    return {}


def check_gpu_owners(profile: ServiceProfile, owned: OwnedProcess | None) -> dict[str, Any] | None:
    """Refuse (OwnershipError naming PID, name, GPU, memory) while an unrelated process owns a GPU
    the service uses; returns the owners snapshot for the archive, or None when not checked."""
    if not profile.checks_gpus:
        return None
    from harness.service.devices.gpu_probe import ensure_gpus_free

    gpus = service_gpus(profile.devices.gpus, {**os.environ, **profile.launch.env})
    snap = ensure_gpus_free(gpus, owned, source=profile.devices.gpu_owners_source)
    return snap.to_dict()


def start_service(profile: ServiceProfile, run_dir: Path, *, label: str = "service") -> RunningService:
    """Check GPU owners, launch (or attach to) the profile's service and wait until it is healthy.
    A profile with ``nnodes > 1`` (sim or sglang) is started on every node of the Slurm allocation
    this process runs in (``harness.service.launch.multinode``, docs/multinode.md)."""
    if profile.launch.nnodes > 1 and profile.backend in ("sim", "sglang"):
        return _start_multinode(profile, run_dir, label)
    proc: OwnedProcess | None = None
    cmd: LaunchCommand | None = None
    record: Path | None = None
    owners_before = check_gpu_owners(profile, None) if profile.backend != "attach" else None
    if profile.backend == "attach":
        assert profile.url is not None
        url = profile.url.rstrip("/")
        http_get(url + "/health")  # unreachable -> clear error now
    else:
        if profile.backend == "sim":
            cmd = sim_command(profile, port=profile.launch.port or 0)
        elif profile.backend == "sglang":
            port = profile.launch.port or free_port(profile.launch.host)
            witness_dir = run_dir / "witness" / f"{label}-{time.strftime('%Y%m%dT%H%M%S')}-{time.perf_counter_ns()}"
            witness_dir.mkdir(parents=True, exist_ok=True)
            cmd = sglang_command(profile, port, witness_dir=str(witness_dir))
            check_executables(cmd)
            # flags drift between SGLang releases: name any flag the installed version does not know
            from harness.service.launch.sglang_flags import load_flagset, validate_argv

            validate_argv(cmd.argv, load_flagset(python=profile.launch.python or sys.executable))
        elif profile.backend == "command":
            port = profile.launch.port or free_port(profile.launch.host)
            cmd = generic_command(profile, port)
            check_executables(cmd)
        else:
            port = profile.launch.port or free_port(profile.launch.host)
            cmd = vllm_command(profile, port)
        log = run_dir / "logs" / f"{label}-{time.strftime('%Y%m%dT%H%M%S')}-{time.perf_counter_ns()}.log"
        proc = start_owned(cmd.argv, log_path=log, env_diff=cmd.env_diff)
        try:
            record = record_launch(run_dir, proc, profile.name)
            if profile.backend == "sim":
                line = wait_for_line(proc, "listening on", profile.launch.startup_timeout_s)
                m = _URL_RE.search(line)
                if not m:
                    raise ServiceError(f"cannot read the simulator URL from: {line!r}")
                url = m.group(1)
            else:
                url = f"http://{profile.launch.host}:{cmd.port}"
            note_url(record, url)
            wait_healthy(url, profile.launch.startup_timeout_s, proc, health_path=profile.launch.health_path)
        except BaseException:
            stop_owned(proc)
            forget(record)
            raise
    svc = RunningService(profile=profile, url=url, process=proc, command=cmd, owners_before_launch=owners_before,
                         launch_record=record)
    try:
        svc.server_info = read_server_info(url, profile.wire_protocol)
        if cmd is not None and WITNESS_ENV in cmd.env_diff:
            svc.witness_dir = Path(cmd.env_diff[WITNESS_ENV])
            svc.witnesses = read_witnesses(svc.witness_dir)
        svc.patches = patch_state(profile)
    except BaseException:
        svc.stop()
        raise
    svc.ready_wall = time.strftime("%Y-%m-%dT%H:%M:%S%z")
    svc.ready_ns = time.perf_counter_ns()
    return svc


def _start_multinode(profile: ServiceProfile, run_dir: Path, label: str) -> RunningService:
    from harness.service.launch.multinode import launch

    stamp = f"{label}-{time.strftime('%Y%m%dT%H%M%S')}-{time.perf_counter_ns()}"
    witness: str | None = None
    if profile.backend == "sglang":
        witness_dir = run_dir / "witness" / stamp
        witness_dir.mkdir(parents=True, exist_ok=True)
        witness = str(witness_dir)
    started = launch(profile, run_dir, run_dir / "logs" / f"{stamp}.log", witness_dir=witness)
    proc, cmd = started.process, started.command
    svc = RunningService(profile=profile, url="", process=proc, command=cmd, nodes=started.service,
                         owners_before_launch={"nodes": started.service.owners_per_node})
    try:
        svc.launch_record = record_launch(run_dir, proc, profile.name)
        if profile.backend == "sim":
            m = _URL_RE.search(wait_for_line(proc, "listening on", profile.launch.startup_timeout_s))
            if not m:
                raise ServiceError(f"cannot read rank 0's URL from {proc.log_path}")
            svc.url = m.group(1)
        else:
            svc.url = f"http://{profile.launch.host}:{cmd.port}"
        note_url(svc.launch_record, svc.url)
        wait_healthy(svc.url, profile.launch.startup_timeout_s, proc, health_path=profile.launch.health_path)
        svc.server_info = read_server_info(svc.url, profile.wire_protocol)
        if witness is not None:
            svc.witness_dir = Path(witness)
            svc.witnesses = read_witnesses(svc.witness_dir)
        svc.patches = patch_state(profile)
    except BaseException as exc:
        died: ServiceDied | None = None
        if isinstance(exc, ServiceError) and not isinstance(exc, ServiceDied):
            try:  # a rank that died during startup is the cause to name, not rank 0's unanswered URL
                svc.check_alive()
            except ServiceDied as found:
                died = found
        svc.stop()
        if died is not None:
            raise died from exc
        raise
    svc.ready_wall = time.strftime("%Y-%m-%dT%H:%M:%S%z")
    svc.ready_ns = time.perf_counter_ns()
    return svc


_IDENTITY_KEYS = ("model_path", "tp_size", "ep_size", "dp_size")


def check_identity(profile: ServiceProfile, server_info: dict[str, Any], claim: ClaimClass,
                   launch: Sequence[str] | None = None) -> list[str]:
    """Differences between what the profile asked for and what the server reports (pure).

    Checks the model path and parallelism the profile names, every ``expect`` key, and the claim
    class against the served speculative configuration (``served_speculation`` of the server's
    report, or of the ``launch`` argv where the server reports nothing about speculation: vLLM).
    Returns human-readable differences.
    """
    diffs = claim_conflicts(claim, served_speculation(server_info, launch))
    if not server_info:
        return diffs
    if server_info.get("_source") == "/v1/models":
        return diffs + _check_openai_models(profile, server_info)
    ident = profile.identity
    wanted: dict[str, Any] = {k: getattr(ident, k) for k in _IDENTITY_KEYS if getattr(ident, k) is not None}
    wanted.update(profile.identity.expect)
    for key, value in wanted.items():
        if key not in server_info:
            diffs.append(f"{key}: profile wants {value!r}, server does not report it")
        elif server_info[key] != value:
            diffs.append(f"{key}: profile wants {value!r}, server reports {server_info[key]!r}")
    return diffs


def _arg_value(args: list[str], flag: str) -> str | None:
    for i, a in enumerate(args):
        if a == flag and i + 1 < len(args):
            return args[i + 1]
        if a.startswith(flag + "="):
            return a.split("=", 1)[1]
    return None


def _check_openai_models(profile: ServiceProfile, info: dict[str, Any]) -> list[str]:
    """vLLM reports only ``/v1/models``: check the served model id and its max_model_len against
    the profile and launch arguments."""
    data = (info.get("models") or {}).get("data") or []
    if not data:
        return ["/v1/models lists no model"]
    model = data[0]
    diffs = []
    want = profile.identity.served_model_name or profile.identity.model_path
    if want is not None and model.get("id") != want:
        diffs.append(f"model: profile wants {want!r}, server serves {model.get('id')!r}")
    mml = _arg_value(profile.launch.extra_args, "--max-model-len")
    if mml is not None and "max_model_len" in model and int(model["max_model_len"]) != int(mml):
        diffs.append(f"max_model_len: launched with {mml}, server reports {model['max_model_len']}")
    for key, value in profile.identity.expect.items():
        if key in model and model[key] != value:
            diffs.append(f"{key}: profile wants {value!r}, server reports {model[key]!r}")
    return diffs


def patch_state(profile: ServiceProfile) -> dict[str, Any] | None:
    """The patch identity of the engine tree the profile runs (None without a ``patches`` series).

    The tree is the installed package of the profile's interpreter, found without importing it."""
    if not profile.launch.patches or profile.backend != "sglang":
        return None
    from harness.patches.series import load_series, patch_identity

    series = load_series(Path(profile.launch.patches))
    python = profile.launch.python or sys.executable
    try:
        out = subprocess.run([python, "-c", "import importlib.util as u, os; s = u.find_spec('sglang'); "
                              "print(os.path.dirname(s.origin) if s and s.origin else '')"],
                             capture_output=True, text=True, timeout=60, check=False).stdout.strip()
    except (OSError, subprocess.SubprocessError) as exc:
        raise ServiceError(f"cannot locate the sglang package of {python}: {exc}") from exc
    if not out:
        raise ServiceError(f"{python} has no sglang package; cannot verify the patch series {profile.launch.patches}",
                           hint="install sglang in that interpreter or fix the profile's launch.python")
    return patch_identity(series, Path(out))


def verify_identity(svc: RunningService, claim: ClaimClass) -> None:
    """Raise IdentityMismatch naming every differing key (server configuration, the claim class against
    the served speculative configuration, backend witnesses, patch series state)."""
    diffs = check_identity(svc.profile, svc.server_info, claim, svc.command.argv if svc.command else None)
    if svc.witness_dir is not None:
        diffs += [f"witness: {d}" for d in compare_witnesses(svc.witnesses, svc.profile)]
    if svc.patches is not None and svc.patches.get("status") != "applied":
        diffs.append(f"patches: series {svc.patches.get('series')} is {svc.patches.get('status')} in the "
                     f"engine tree, not applied (run 'dsv4h patches apply --target ...')")
    if diffs:
        raise IdentityMismatch(
            f"service '{svc.profile.name}' at {svc.url} is not what the profile and the {claim} claim ask for:\n  "
            + "\n  ".join(diffs),
            hint="fix the profile (or its 'expect' keys), the launch flags or the spec's claim_class; logged flags "
                 "prove nothing",
        )
