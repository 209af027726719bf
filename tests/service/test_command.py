"""SGLang command builder (exact argv of the shipped profiles, multi-node, env diff) and flag validation
against the captured ``--help`` of the pinned SGLang (tests/fixtures/sglang-0.5.23/)."""

from __future__ import annotations

import json
import os
import sys
import zipfile
from collections.abc import Sequence
from pathlib import Path

import pytest
from typer.testing import CliRunner

from harness.cli.service_cmd import app
from harness.errors import ServiceError, SpecError
from harness.inputs.spec import ServiceProfile, load_profile
from harness.service.launch.command import (
    SGLANG_PINNED_VERSION,
    LaunchCommand,
    check_executables,
    missing_executables,
    multinode_commands,
    sglang_command,
)
from harness.service.launch.sglang_flags import (
    FlagSet,
    RunResult,
    argv_flags,
    flags_from_help,
    flags_from_source,
    load_flagset,
    parse_help_flags,
    parse_source_flags,
    source_files,
    validate_argv,
)

ROOT = Path(__file__).resolve().parents[2]
PROFILES = ROOT / "campaigns" / "profiles"
FIX = ROOT / "tests" / "fixtures" / f"sglang-{SGLANG_PINNED_VERSION}"
PY = sys.executable

SERVE = ["--mem-fraction-static", "0.96", "--max-total-tokens", "1048576", "--chunked-prefill-size", "32768",
         "--max-running-requests", "64", "--cuda-graph-bs-decode", "1", "2", "4", "8", "16", "32", "64",
         "--trust-remote-code"]


def sglang_profile(**kw: object) -> ServiceProfile:
    base: dict[str, object] = {"name": "t", "backend": "sglang", "model_path": "/m", "python": "/py"}
    base.update(kw)
    return ServiceProfile.model_validate(base)


# --- the shipped profiles: exact argv -----------------------------------------------------------


def test_native_profile_exact_argv() -> None:
    profile = load_profile(PROFILES / "sglang-tp8-native.yaml")
    cmd = sglang_command(profile, 30021)
    assert cmd.argv == (
        "numactl", "--interleave=all", PY, "-m", "sglang.launch_server",
        "--model-path", "/models/DeepSeek-V4-Flash", "--tp-size", "8", "--ep-size", "1", *SERVE,
        "--host", "127.0.0.1", "--port", "30021", "--prefill-max-requests", "16",
    )
    assert cmd.needs_numactl is True
    assert cmd.env_diff == {}
    assert (cmd.port, cmd.node_rank, cmd.nnodes) == (30021, None, 1)
    assert multinode_commands(profile, 30021) == [cmd]


def test_multinode_profile_one_command_per_node() -> None:
    loaded = load_profile(PROFILES / "sglang-tp8-multinode.yaml")
    profile = loaded.model_copy(update={"launch": loaded.launch.model_copy(update={"python": "/opt/sgl/bin/python"})})
    cmds = multinode_commands(profile, 30021, witness_dir="/run/w")
    assert [c.node_rank for c in cmds] == [0, 1]
    for rank, cmd in enumerate(cmds):
        assert cmd.argv == (
            "numactl", "--interleave=all", "/opt/sgl/bin/python", "-m", "sglang.launch_server",
            "--model-path", "/models/DeepSeek-V4-Flash", "--tp-size", "8", "--ep-size", "1", *SERVE,
            "--nnodes", "2", "--node-rank", str(rank), "--dist-init-addr", "10.0.0.1:25000",
            "--host", "127.0.0.1", "--port", "30021", "--prefill-max-requests", "16",
        )
        assert cmd.env_diff == {"DSV4H_WITNESS_DIR": "/run/w"}
        assert cmd.nnodes == 2
    assert sglang_command(profile, 30021, node_rank=1) == LaunchCommand(
        cmds[1].argv, {}, 30021, needs_numactl=True, node_rank=1, nnodes=2)


def test_every_optional_field_maps_to_its_flag() -> None:
    p = sglang_profile(served_model_name="dsv4", tp_size=4, ep_size=2, dp_size=2, max_prefill_tokens=16384,
                       cuda_graph_bs=[1, 8], page_size=64, disable_radix_cache=True, attention_backend="triton",
                       moe_backend="triton", extra_args=["--enable-metrics"], host="0.0.0.0")
    assert sglang_command(p, 1234).argv == (
        "/py", "-m", "sglang.launch_server", "--model-path", "/m", "--served-model-name", "dsv4",
        "--tp-size", "4", "--ep-size", "2", "--dp-size", "2", "--max-prefill-tokens", "16384",
        "--cuda-graph-bs-decode", "1", "8", "--page-size", "64", "--disable-radix-cache",
        "--attention-backend", "triton", "--moe-runner-backend", "triton",
        "--host", "0.0.0.0", "--port", "1234", "--enable-metrics",
    )


def test_minimal_profile_leaves_engine_defaults() -> None:
    cmd = sglang_command(sglang_profile(), 30000)
    assert cmd.argv == ("/py", "-m", "sglang.launch_server", "--model-path", "/m",
                        "--host", "127.0.0.1", "--port", "30000")
    assert not cmd.needs_numactl


# --- environment diff ---------------------------------------------------------------------------


def test_env_diff_keeps_explicit_disables_sorted_and_adds_witness() -> None:
    p = sglang_profile(env={"SGLANG_Z_PILOT": "0", "SGLANG_A_SELECTOR": "1"})
    cmd = sglang_command(p, 1, witness_dir="/w")
    assert list(cmd.env_diff.items()) == [("SGLANG_A_SELECTOR", "1"), ("SGLANG_Z_PILOT", "0"),
                                          ("DSV4H_WITNESS_DIR", "/w")]
    assert sglang_command(p, 1).env_diff == {"SGLANG_A_SELECTOR": "1", "SGLANG_Z_PILOT": "0"}


def test_profile_may_not_choose_the_witness_dir() -> None:
    p = sglang_profile(env={"DSV4H_WITNESS_DIR": "/elsewhere"})
    with pytest.raises(SpecError, match="DSV4H_WITNESS_DIR"):
        sglang_command(p, 1, witness_dir="/w")


# --- refusals -----------------------------------------------------------------------------------


@pytest.mark.parametrize(("kw", "node_rank", "match"), [
    ({"nnodes": 2, "tp_size": 8}, 0, "dist_init_addr is not set"),
    ({"nnodes": 2, "tp_size": 8, "dist_init_addr": "10.0.0.1"}, 0, "is not HOST:PORT"),
    ({"nnodes": 2, "tp_size": 8, "dist_init_addr": "10.0.0.1:99999"}, 0, "is not HOST:PORT"),
    ({"nnodes": 3, "tp_size": 8, "dist_init_addr": "h:1"}, 0, "not a multiple of nnodes"),
    ({"nnodes": 2, "tp_size": 8, "dist_init_addr": "h:1"}, None, "say which node"),
    ({"nnodes": 2, "tp_size": 8, "dist_init_addr": "h:1"}, 2, r"outside 0\.\.1"),
    ({}, 1, "single-node"),
    ({"node_rank": 1}, None, "single-node; node_rank 1"),
    ({"extra_args": ["--tp-size", "4"]}, None, r"--tp-size \(set profile field 'identity\.tp_size'\)"),
    ({"extra_args": ["--cuda-graph-bs=4"]}, None, "cuda_graph_bs"),
    ({"extra_args": ["--port", "1"]}, None, r"'launch\.port'"),
])
def test_unlaunchable_profiles_are_refused(kw: dict[str, object], node_rank: int | None, match: str) -> None:
    with pytest.raises(SpecError, match=match):
        sglang_command(sglang_profile(**kw), 30000, node_rank=node_rank)


def test_profile_node_rank_is_the_default() -> None:
    p = sglang_profile(nnodes=2, tp_size=8, dist_init_addr="[fd00::1]:25000", node_rank=1)
    cmd = sglang_command(p, 30000)
    assert cmd.node_rank == 1
    assert cmd.argv[-10:] == ("--nnodes", "2", "--node-rank", "1", "--dist-init-addr", "[fd00::1]:25000",
                              "--host", "127.0.0.1", "--port", "30000")


def test_wrong_backend_is_refused() -> None:
    with pytest.raises(SpecError, match="not 'sglang'"):
        sglang_command(ServiceProfile(), 1)


def test_numactl_must_be_on_path() -> None:
    cmd = sglang_command(sglang_profile(numa="interleave"), 1)
    assert missing_executables(cmd, which=lambda name: None) == ["numactl"]
    assert missing_executables(cmd, which=lambda name: f"/usr/bin/{name}") == []
    with pytest.raises(ServiceError, match="numactl not found on PATH") as exc:
        check_executables(cmd, which=lambda name: None)
    assert exc.value.hint and "numa: none" in exc.value.hint
    check_executables(sglang_command(sglang_profile(), 1), which=lambda name: None)


# --- flags of the pinned version ------------------------------------------------------------------


@pytest.fixture(scope="module")
def fixture_flags() -> dict[str, object]:
    data: dict[str, object] = json.loads((FIX / "flags.json").read_text())
    return data


@pytest.fixture(scope="module")
def help_flagset() -> FlagSet:
    return FlagSet(SGLANG_PINNED_VERSION, parse_help_flags((FIX / "launch_server-help.txt").read_text()),
                   "fixture")


def test_help_fixture_parses_to_the_static_list(fixture_flags: dict[str, object],
                                                help_flagset: FlagSet) -> None:
    static = fixture_flags["static"]
    assert isinstance(static, dict)
    hidden = fixture_flags["help"]
    assert isinstance(hidden, dict)
    assert help_flagset.flags == frozenset(static["flags"]) - frozenset(hidden["hidden_flags"])
    for flag in ("--model-path", "--model", "--tp-size", "--tensor-parallel-size", "--ep", "--cuda-graph-bs-decode",
                 "--moe-runner-backend", "--prefill-max-requests", "--enable-tf32-matmul",
                 "--no-enable-tf32-matmul", "--dist-init-addr", "--nccl-init-addr", "-h", "--help"):
        assert flag in help_flagset.flags
    # prose mentions are not flags: the help text names these only inside descriptions
    assert "--cuda-graph-bs" not in help_flagset.flags
    assert "--cuda-graph-backend-{decode,prefill}=disabled" not in help_flagset.flags


@pytest.mark.parametrize("name", ["sglang-tp8-native.yaml", "sglang-tp8-multinode.yaml"])
def test_shipped_profiles_use_only_known_flags(name: str, help_flagset: FlagSet) -> None:
    for cmd in multinode_commands(load_profile(PROFILES / name), 30021):
        validate_argv(cmd.argv, help_flagset)


def test_unknown_flags_are_named_with_the_version(help_flagset: FlagSet) -> None:
    argv = [*sglang_command(sglang_profile(extra_args=["--enable-magic", "--enable-metrics"]), 1).argv,
            "--cuda-graph-bs", "1", "2"]
    with pytest.raises(SpecError) as exc:
        validate_argv(argv, help_flagset)
    msg = str(exc.value)
    assert "SGLang 0.5.23 does not accept 2 flag(s)" in msg
    assert "--cuda-graph-bs (did you mean --cuda-graph-bs-decode?)" in msg
    assert "--enable-magic" in msg
    assert "--enable-metrics" not in msg


def test_argv_flags_reads_only_server_options() -> None:
    argv = ["numactl", "--interleave=all", "/py", "-X", "dev", "-m", "sglang.launch_server", "--model-path", "/m",
            "--chunked-prefill-size", "-1", "--json-model-override-args={\"a\": 1}", "--trust-remote-code", "7"]
    assert argv_flags(argv) == ["--model-path", "--chunked-prefill-size", "--json-model-override-args",
                                "--trust-remote-code"]
    assert argv_flags(["sglang", "serve", "--port", "1"]) == ["--port"]


def _fake_runner(help_text: str, version: str = "0.5.23", rc: int = 0):  # type: ignore[no-untyped-def]
    calls: list[list[str]] = []

    def run(argv: Sequence[str], timeout_s: float) -> RunResult:
        calls.append(list(argv))
        assert timeout_s > 0
        if argv[1] == "-c":
            return RunResult(0, version + "\n", "")
        return RunResult(rc, help_text, "UserWarning: 'python -m sglang.launch_server' is still supported")

    return run, calls


def test_live_path_runs_help_with_the_interpreter() -> None:
    run, calls = _fake_runner((FIX / "launch_server-help.txt").read_text())
    fs = flags_from_help("/opt/sgl/bin/python", runner=run)
    assert fs.version == "0.5.23"
    assert "--prefill-max-requests" in fs.flags
    assert calls[1] == ["/opt/sgl/bin/python", "-m", "sglang.launch_server", "--help"]
    assert "live" in fs.source


def test_live_path_failure_is_a_service_error_and_falls_back_to_source(tmp_path: Path) -> None:
    run, _ = _fake_runner("Traceback ...\nModuleNotFoundError: No module named 'torch'", rc=1)
    with pytest.raises(ServiceError, match="failed"):
        flags_from_help("/py", runner=run)
    tree = _tiny_source_tree(tmp_path)
    fs = load_flagset(python="/py", source=tree, runner=run)
    assert "static" in fs.source
    assert fs.version == "9.9.9"
    with pytest.raises(ServiceError):
        load_flagset(python="/py", runner=run)


def _tiny_source_tree(tmp_path: Path) -> Path:
    pkg = tmp_path / "sglang"
    (pkg / "srt" / "arg_groups" / "fields").mkdir(parents=True)
    (pkg / "__init__.py").write_text("")
    (pkg / "_version.py").write_text("__version__ = version = '9.9.9'\n")
    (pkg / "srt" / "server_args.py").write_text(
        "import argparse\n"
        "class ServerArgs:\n"
        "    host: A[str, 'The host.'] = '127.0.0.1'\n"
        "    @staticmethod\n"
        "    def add_cli_args(parser):\n"
        "        parser.add_argument('--config', type=str)\n"
        "        parser.add_argument('--x-flag', action=argparse.BooleanOptionalAction)\n")
    (pkg / "srt" / "arg_groups" / "fields" / "parallel.py").write_text(
        "class Parallel(msgspec.Struct):\n"
        "    _NS_PATH = 'parallel'\n"
        "    tp_size: A[int, Arg(help='tp', aliases=['--tensor-parallel-size'])] = 1\n"
        "    hidden: A[str, Arg(help=argparse.SUPPRESS)] = ''\n"
        "    internal: A[int, Arg(help='x', no_cli=True)] = 0\n"
        "    renamed: A[int, Arg(help='x', cli_name='--other-name')] = 0\n"
        "    toggle: A[bool, Arg(help='t', action=argparse.BooleanOptionalAction)] = False\n"
        "    plain: int = 3\n"
        "    help_concat: A[int, 'a' 'b' + f'{1}'] = 0\n")
    return tmp_path


def test_static_parse_follows_add_cli_args_from_dataclass(tmp_path: Path) -> None:
    tree = _tiny_source_tree(tmp_path)
    fs = flags_from_source(tree / "sglang")
    assert fs.flags == {"-h", "--help", "--host", "--config", "--x-flag", "--no-x-flag", "--tp-size",
                        "--tensor-parallel-size", "--hidden", "--other-name", "--toggle", "--no-toggle",
                        "--help-concat"}
    assert parse_source_flags(["x = 1\n"]) == {"-h", "--help"}


# --- the real wheel: static parse == the committed list ---------------------------------------------


def _sglang_wheel() -> Path:
    cache = Path(os.environ.get("DSV4H_CACHE") or Path.home() / ".cache" / "dsv4h") / "wheels"
    found = sorted(cache.glob(f"sglang-{SGLANG_PINNED_VERSION}-*.whl"))
    if found:
        return found[0]
    msg = (f"the pinned SGLang wheel sglang-{SGLANG_PINNED_VERSION}-*.whl is not in {cache}; "
           "run .ci/fetch_sglang_wheel.sh")
    if os.environ.get("CI"):
        pytest.fail(msg)
    pytest.skip(msg)


def test_static_parse_of_the_pinned_wheel_matches_the_fixture(tmp_path: Path,
                                                                fixture_flags: dict[str, object]) -> None:
    wheel = _sglang_wheel()
    with zipfile.ZipFile(wheel) as z:
        wanted = {str(p.relative_to(tmp_path)) for p in source_files(tmp_path / "sglang")}
        members = [n for n in z.namelist() if n in wanted or n.startswith("sglang/srt/arg_groups/fields/")
                   or n in ("sglang/__init__.py", "sglang/_version.py")]
        z.extractall(tmp_path, members)
    fs = flags_from_source(tmp_path)
    static = fixture_flags["static"]
    assert isinstance(static, dict)
    assert fs.version == SGLANG_PINNED_VERSION
    assert sorted(fs.flags) == static["flags"]


# --- CLI ---------------------------------------------------------------------------------------


def _cli(args: list[str]) -> tuple[int, str, BaseException | None]:
    res = CliRunner().invoke(app, args)
    return res.exit_code, res.stdout, res.exception


def test_cli_prints_quoted_argv_and_env(tmp_path: Path) -> None:
    code, out, _ = _cli(["command", str(PROFILES / "sglang-tp8-native.yaml"), "--python", "/opt/sgl py"])
    assert code == 0, out
    assert "# requires: numactl on PATH" in out
    assert ("numactl --interleave=all '/opt/sgl py' -m sglang.launch_server "
            "--model-path /models/DeepSeek-V4-Flash") in out
    assert out.rstrip().endswith("--port 30021 --prefill-max-requests 16")


def test_cli_multinode_blocks_and_json() -> None:
    prof = str(PROFILES / "sglang-tp8-multinode.yaml")
    code, out, _ = _cli(["command", prof, "--witness-dir", "/w"])
    assert code == 0
    assert out.count("sglang.launch_server") == 2
    assert "# sglang-tp8-multinode: node 1 of 2" in out
    assert "export DSV4H_WITNESS_DIR=/w" in out
    code, out, _ = _cli(["command", prof, "--node-rank", "1", "--json"])
    data = json.loads(out)
    assert code == 0
    assert len(data) == 1
    assert data[0]["node_rank"] == 1
    assert data[0]["argv"][data[0]["argv"].index("--node-rank") + 1] == "1"
    code, out, exc = _cli(["command", str(PROFILES / "sglang-tp8-native.yaml"), "--nnodes", "2"])
    assert isinstance(exc, SpecError)  # a single-node profile has no dist_init_addr
    assert "dist_init_addr" in str(exc)


def test_cli_checks_flags_statically(tmp_path: Path) -> None:
    tree = _tiny_source_tree(tmp_path)
    prof = tmp_path / "p.yaml"
    prof.write_text("backend: sglang\nmodel_path: /m\ntp_size: 2\n")
    _, _, exc = _cli(["command", str(prof), "--flags-source", str(tree)])
    assert isinstance(exc, SpecError)
    assert "SGLang 9.9.9 does not accept" in str(exc) and "--model-path" in str(exc)
    assert exc.exit_code == 2
