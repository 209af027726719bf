"""``dsv4h service command``: the exact launch command(s) of a service profile (thin over the library)."""

from __future__ import annotations

import json
import shlex
import sys
from pathlib import Path
from typing import Annotated, Any

import typer

from harness.cli.listing import Col, CsvOpt, JsonOpt, emit
from harness.errors import SpecError
from harness.inputs.spec import ServiceProfile, load_profile
from harness.service.launch.command import LaunchCommand, multinode_commands, sglang_command

app = typer.Typer(
    help="Service profiles: print launch commands; start, check and stop owned services by hand.\n\n"
    "Example: dsv4h service command campaigns/profiles/sglang-tp8-native.yaml",
    no_args_is_help=True,
)


@app.callback()
def _service() -> None:
    """Service profiles: print launch commands; start, check and stop owned services by hand."""


def _render(profile: ServiceProfile, cmd: LaunchCommand) -> str:
    lines = []
    where = f"node {cmd.node_rank} of {cmd.nnodes}" if cmd.nnodes > 1 else "single node"
    lines.append(f"# {profile.name}: {where}, port {cmd.port}")
    if cmd.needs_numactl:
        lines.append("# requires: numactl on PATH (numa: interleave)")
    if cmd.env_diff:
        lines.append("# environment diff:")
        lines += [f"export {k}={shlex.quote(v)}" for k, v in cmd.env_diff.items()]
    else:
        lines.append("# environment diff: none")
    lines.append(shlex.join(cmd.argv))
    return "\n".join(lines)


@app.command("command")
def command_cmd(
    profile_path: Annotated[Path, typer.Argument(metavar="PROFILE", help="service profile YAML (backend: sglang)")],
    node_rank: Annotated[int | None, typer.Option(
        "--node-rank", help="print only this node's command (multi-node profiles)")] = None,
    nnodes: Annotated[int | None, typer.Option(
        "--nnodes", help="override the profile's number of nodes", min=1)] = None,
    port: Annotated[int | None, typer.Option(
        "--port", help="HTTP port (default: the profile's, else 30000)")] = None,
    python: Annotated[str | None, typer.Option(
        "--python", help="interpreter that runs SGLang on the serving host (default: the profile's, "
        "else this one)")] = None,
    witness_dir: Annotated[str | None, typer.Option(
        "--witness-dir", help="add DSV4H_WITNESS_DIR=DIR (backend-witness model patch)")] = None,
    as_json: Annotated[bool, typer.Option("--json", help="print JSON: one object per node")] = False,
    check_flags: Annotated[bool, typer.Option(
        "--check-flags", help="check every flag against 'PYTHON -m sglang.launch_server --help'")] = False,
    flags_source: Annotated[Path | None, typer.Option(
        "--flags-source", help="check flags statically against an SGLang tree (site-packages or checkout); "
        "also the fallback of --check-flags")] = None,
) -> None:
    """Print the launch command of PROFILE: the argv (shell-quoted, one line) and the environment diff
    as export lines; a multi-node profile prints one block per node, ready for a Slurm or launcher
    script (node 0 serves HTTP; every node meets at dist_init_addr).

    Example: dsv4h service command campaigns/profiles/sglang-tp8-multinode.yaml --node-rank 1

    Example: dsv4h service command campaigns/profiles/sglang-tp8-native.yaml --check-flags
    --python /opt/sglang/bin/python
    """
    profile = load_profile(profile_path)
    if profile.backend != "sglang":
        raise SpecError(f"{profile_path}: backend is '{profile.backend}'; this command builds SGLang commands",
                        hint="use a profile with 'backend: sglang'")
    update: dict[str, object] = {}
    if nnodes is not None:
        update["nnodes"] = nnodes
    if python is not None:
        update["python"] = python
    if update:
        profile = profile.model_copy(update={"launch": profile.launch.model_copy(update=update)})
    p = port if port is not None else (profile.launch.port or 30000)
    if node_rank is not None:
        cmds = [sglang_command(profile, p, node_rank=node_rank, witness_dir=witness_dir)]
    else:
        cmds = multinode_commands(profile, p, witness_dir=witness_dir)
    if check_flags or flags_source is not None:
        from harness.service.launch.sglang_flags import load_flagset, validate_argv

        interpreter = profile.launch.python or sys.executable  # the one the argv runs
        flagset = load_flagset(python=interpreter if check_flags else None, source=flags_source)
        for c in cmds:
            validate_argv(c.argv, flagset)
        typer.echo(f"# flags checked against SGLang {flagset.version} ({flagset.source})", err=True)
    if as_json:
        typer.echo(json.dumps([
            {"node_rank": c.node_rank, "nnodes": c.nnodes, "port": c.port, "needs_numactl": c.needs_numactl,
             "env_diff": c.env_diff, "argv": list(c.argv), "shell": shlex.join(c.argv)} for c in cmds
        ], indent=1))
        return
    typer.echo("\n\n".join(_render(profile, c) for c in cmds))


# --- manual lifecycle: start / status / stop / sweep -----------------------------------------------

def _state_dir(workspace: Path) -> Path:
    return workspace / "services"


def _state_path(name: str, workspace: Path) -> Path:
    """``WORKSPACE/services/NAME.json`` for a valid name; nothing built from a name leaves the workspace."""
    from harness.inputs.spec import check_name

    check_name(name)
    root = _state_dir(workspace).resolve()
    path = (root / f"{name}.json").resolve()
    if path.parent != root:
        raise SpecError(f"service name {name!r} does not name a file in {root}", hint="use a plain name")
    return path


@app.command("start")
def start_cmd(
    profile_path: Annotated[Path, typer.Argument(metavar="PROFILE", help="service profile YAML")],
    workspace: Annotated[Path, typer.Option("--workspace", "-w", help="where state and logs go")] = Path(),
    claim: Annotated[str, typer.Option("--claim", help="claim class the identity check applies")] = "native-ar",
) -> None:
    """Start a profile's service as an owned process tree (after the GPU-ownership check), wait for
    /health, verify its identity, and leave it running; state goes to WORKSPACE/services/NAME.json.

    Example: dsv4h service start campaigns/profiles/sim-control.yaml -w ws
    """
    from harness.cli.common import console, esc, resolve_workspace
    from harness.formats import atomic_write, dump_json
    from harness.service.launch.manager import start_service, verify_identity
    from harness.service.launch.registry import forget
    from harness.service.process import release

    workspace = resolve_workspace(workspace)
    profile = load_profile(profile_path)
    state = _state_path(profile.name, workspace)
    if state.exists():
        raise SpecError(f"service '{profile.name}' already has state in {state}",
                        hint=f"stop it first: dsv4h service stop {profile.name} -w {workspace}")
    svc = start_service(profile, workspace, label=profile.name)
    try:
        verify_identity(svc, claim)  # type: ignore[arg-type]
        state.parent.mkdir(parents=True, exist_ok=True)
        atomic_write(state, dump_json(svc.identity()))
    except BaseException:
        svc.stop()
        raise
    if svc.process is not None:  # handed over to the state file: it outlives this command on purpose
        release(svc.process)
        forget(svc.launch_record)
    pid = svc.process.pid if svc.process else None
    console.print(f"service '{esc(profile.name)}' ready at {esc(svc.url)} (pid {pid}); state in {esc(state)}")


def _load_state(name: str, workspace: Path) -> tuple[Path, dict[str, object]]:
    state = _state_path(name, workspace)
    if not state.is_file():
        known = sorted(p.stem for p in _state_dir(workspace).glob("*.json"))
        raise SpecError(f"no started service '{name}' in {_state_dir(workspace)}",
                        hint=f"started services: {', '.join(known) or 'none'}; campaign servers: "
                        "'dsv4h service status -w WORKSPACE'")
    try:
        data = json.loads(state.read_text())
        if not isinstance(data, dict):
            raise ValueError("not a JSON object")
    except (OSError, ValueError) as exc:
        raise SpecError(f"{state} is not a service state file ({exc}); refusing to act on it",
                        hint="it was not written by 'dsv4h service start'; remove it by hand if it is yours") from None
    return state, data


def _owned(data: dict[str, object]) -> object:
    from harness.service.process import OwnedProcess

    proc = data.get("process")
    if not isinstance(proc, dict):
        return None
    try:
        return OwnedProcess(pid=int(proc["pid"]), create_time=float(proc["create_time"]),
                            argv=list(proc["argv"]), env_diff=dict(proc["env_diff"]),
                            log_path=Path(str(proc["log_path"])), cwd=str(proc["cwd"]))
    except (KeyError, TypeError, ValueError) as exc:
        raise SpecError(f"the service state's process record is malformed ({exc}); refusing to signal anything",
                        hint="it was not written by 'dsv4h service start'") from None


@app.command("status")
def status_cmd(
    name: Annotated[str | None, typer.Argument(help="service name (the profile's name); default: every "
                                               "service of the workspace, campaign servers included")] = None,
    workspace: Annotated[Path, typer.Option("--workspace", "-w")] = Path(),
    json_out: JsonOpt = False,
    csv_out: CsvOpt = False,
) -> None:
    """Show whether a started service is alive (PID and birth time match) and healthy. Without a
    name: every service started by hand and every server a campaign or screen launched in this
    workspace ('running' while its dsv4h lives, 'left-behind' when that dsv4h is gone). --json and
    --csv print the same rows.

    Example: dsv4h service status sim-control -w ws

    Example: dsv4h service status -w ws --json
    """
    from harness.cli.common import console, existing_workspace
    from harness.errors import ServerUnreachable
    from harness.service.launch.manager import http_get
    from harness.service.launch.registry import scan
    from harness.service.process import OwnedProcess

    workspace = existing_workspace(workspace)
    names = [name] if name is not None else sorted(p.stem for p in _state_dir(workspace).glob("*.json"))
    rows: list[dict[str, Any]] = []
    for n in names:
        _, data = _load_state(n, workspace)
        proc = _owned(data)
        alive = isinstance(proc, OwnedProcess) and proc.alive()
        tree = [p.pid for p in proc.tree()] if isinstance(proc, OwnedProcess) else []
        try:
            health = http_get(f"{data['url']}/health", timeout_s=3)[0] if alive else None
        except ServerUnreachable:
            health = None
        rows.append({"name": n, "started_by": "dsv4h service start", "url": data.get("url"),
                     "pid": proc.pid if isinstance(proc, OwnedProcess) else None,
                     "state": "alive" if alive else "gone", "process_tree": tree, "health_status": health})
    if name is None:
        rows += [{"name": e.name, "started_by": f"campaign (dsv4h pid {e.owner_pid})", "url": e.url,
                  "pid": e.process.pid, "state": e.state, "process_tree": None, "health_status": None,
                  "record": str(e.path)} for e in scan(workspace)]
    if not rows and not (json_out or csv_out):
        console.print(f"no service started in {workspace}")
        return
    cols = (Col("name", "service"), Col("started_by", "started by"), Col("url", "url", ident=True),
            Col("pid", "pid", "right"), Col("state", "state"), Col("health_status", "/health", "right"))
    emit(console, rows, cols, json_out=json_out, csv_out=csv_out, title=f"services of {workspace}")


@app.command("stop")
def stop_cmd(
    name: Annotated[str, typer.Argument(help="service name (the profile's name)")],
    workspace: Annotated[Path, typer.Option("--workspace", "-w")] = Path(),
) -> None:
    """Stop a started service: SIGTERM then SIGKILL to its owned tree only (PID and birth time
    checked, so a reused PID is never signalled), then remove its state. Only names of services
    started in this workspace are accepted; when the recorded process is already gone nothing is
    signalled, the stale state is removed and the command says so (exit 4).

    Example: dsv4h service stop sim-control -w ws
    """
    from harness.cli.common import console, esc, existing_workspace
    from harness.errors import ServiceError
    from harness.service.process import OwnedProcess, stop_owned

    workspace = existing_workspace(workspace)
    state, data = _load_state(name, workspace)
    proc = _owned(data)
    if not isinstance(proc, OwnedProcess):
        console.print(f"'{esc(name)}' was attached, not owned: nothing to stop")
        state.unlink()
        return
    if not proc.tree():
        state.unlink()
        raise ServiceError(f"stopped nothing: service '{name}' (pid {proc.pid}) is no longer running; its stale "
                           f"state {state} was removed", hint="start it again with 'dsv4h service start PROFILE'")
    if not proc.runs_recorded_command():
        raise ServiceError(f"refusing to stop pid {proc.pid}: it does not run the command recorded in {state}",
                           hint="the state file does not describe that process; nothing was signalled")
    report = stop_owned(proc)
    state.unlink()
    console.print(f"stopped '{esc(name)}': SIGTERM to {list(report.terminated)}, SIGKILL to {list(report.killed)}")


@app.command("reap")
def reap_cmd(
    workspace: Annotated[Path, typer.Option("--workspace", "-w")] = Path(),
    stop: Annotated[bool, typer.Option("--stop", help="stop the servers left behind")] = False,
) -> None:
    """Find servers that a campaign or screen launched and that outlived the dsv4h which started it
    (killed with SIGKILL, a crash): listed, and with --stop stopped (their recorded tree only, PID
    and birth time checked). Records of servers that are gone are removed.

    Example: dsv4h service reap -w ws --stop
    """
    from harness.cli.common import console, esc, existing_workspace
    from harness.service.launch.registry import left_behind, stop_launched

    workspace = existing_workspace(workspace)
    found = left_behind(workspace)
    if not found:
        console.print(f"no server left behind in {esc(workspace)}")
        return
    for e in found:
        if stop:
            rep = stop_launched(e)
            console.print(f"stopped {esc(e.describe())}: SIGTERM to {list(rep.terminated)}, "
                          f"SIGKILL to {list(rep.killed)}")
        else:
            console.print(f"left behind: {esc(e.describe())}")
    if not stop:
        console.print(f"stop them with: dsv4h service reap --stop -w {esc(workspace)}")
