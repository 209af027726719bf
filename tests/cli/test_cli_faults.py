"""Bad input never crashes the command line: one ``error:`` line and a ``hint:`` with a non-zero exit,
for missing workspaces, bad references, hostile specs and any OSError (issue 14, points 8 and 10)."""

from __future__ import annotations

import errno
import subprocess
import sys
import time
from pathlib import Path

import pytest
from testkit import run_cli

from harness.cli import error_lines

REPO = Path(__file__).resolve().parents[2]
D512 = REPO / "corpora" / "sim-code-512"


@pytest.mark.parametrize("cmd", [["archive", "list"], ["ledger", "show"], ["evidence", "check"],
                                 ["archive", "recover"], ["service", "status"]])
def test_missing_workspace_is_an_error(tmp_path: Path, cmd: list[str]) -> None:
    code, _, err = run_cli(*cmd, "-w", str(tmp_path / "nope"))
    assert code == 6 and "does not exist" in err and "hint:" in err


def test_workspace_that_is_a_file(tmp_path: Path) -> None:
    f = tmp_path / "file"
    f.write_text("x")
    code, _, err = run_cli("archive", "list", "-w", str(f))
    assert code == 6 and "is a file, not a directory" in err


@pytest.mark.parametrize(("ref", "want"), [("", "empty archive reference"), ("*", "16 hex digits"),
                                           ("fd*", "16 hex digits"), ("/etc", "not an archive")])
@pytest.mark.parametrize("cmd", ["verify", "show"])
def test_archive_references(tmp_path: Path, ref: str, want: str, cmd: str) -> None:
    (tmp_path / "archives").mkdir()
    code, _, err = run_cli("archive", cmd, ref, "-w", str(tmp_path))
    assert code == 6 and want in err


def spec(tmp_path: Path, body: str) -> Path:
    p = tmp_path / "s.yaml"
    p.write_text(f"name: s\nclaim_class: native-ar\nservice: {{backend: sim}}\ncorpora: {{decode: {D512}}}\n" + body)
    return p


@pytest.mark.parametrize(("body", "want"), [
    ("decode: {tiers: [1], min_resident_seconds: .inf}\n", "min_resident_seconds"),
    ("decode: {tiers: [30000000]}\n", "concurrency from 1 to 4096"),
    ("decode: {tiers: [1], max_new_tokens: 1e20}\n", "max_new_tokens"),
    ("decode: {tiers: " + str(list(range(1, 100))) + "}\n", "at most 64"),
    ("decode: {tiers: [1]}\nrequest_timeout_s: .nan\n", "request_timeout_s"),
    ("decode: {tiers: [1]}\norder: [prefill]\n", "'decode' is set but 'order'"),
    ("decode: {tiers: [1]}\norder: [decode, decode]\n", "lists a workload twice"),
])
def test_specs_that_size_work_have_limits(tmp_path: Path, body: str, want: str) -> None:
    t = time.monotonic()
    code, _, err = run_cli("campaign", "plan", str(spec(tmp_path, body)))
    assert code == 2 and want in err, err
    assert time.monotonic() - t < 5


def test_deep_yaml_and_bad_names(tmp_path: Path) -> None:
    deep = tmp_path / "deep.yaml"
    deep.write_text("a: " + "[" * 5000 + "]" * 5000 + "\n")
    code, _, err = run_cli("campaign", "plan", str(deep))
    assert code == 2 and "nested too deeply" in err
    bomb = tmp_path / "bomb.yaml"  # "billion laughs": 9^10 values once the aliases are expanded
    bomb.write_text("a0: &a0 [x, x, x, x, x, x, x, x, x]\n" + "".join(
        f"a{i}: &a{i} [" + ", ".join([f"*a{i - 1}"] * 9) + "]\n" for i in range(1, 11)))
    t = time.monotonic()
    code, _, err = run_cli("campaign", "plan", str(bomb))
    assert code == 2 and "expand it past" in err and time.monotonic() - t < 5
    for name in ("../../../x", "a" * 300, "x y"):
        p = spec(tmp_path, "decode: {tiers: [1]}\n").read_text().replace(
            "{backend: sim}", f"{{backend: sim, name: '{name}'}}")
        (tmp_path / "n.yaml").write_text(p)
        code, _, err = run_cli("campaign", "plan", str(tmp_path / "n.yaml"))
        assert code == 2 and "service.name" in err, (name, err)


@pytest.mark.parametrize(("name", "code", "want"), [
    ("../../dir/victim", 2, "is not a name"),
    ("a" * 300, 2, "is not a name"),
    ("nobody", 2, "no started service"),
])
def test_service_stop_refuses_what_is_not_a_workspace_service(tmp_path: Path, name: str, code: int,
                                                               want: str) -> None:
    victim = tmp_path / "dir" / "victim.json"
    victim.parent.mkdir()
    victim.write_text('{"process": {"pid": 1, "create_time": 0}}')
    (tmp_path / "ws" / "services").mkdir(parents=True)
    got, _, err = run_cli("service", "stop", name, "-w", str(tmp_path / "ws"))
    assert got == code and want in err
    assert victim.exists()  # nothing outside the workspace is deleted


def test_service_stop_says_when_it_stopped_nothing(tmp_path: Path) -> None:
    import json

    dead = subprocess.Popen([sys.executable, "-c", "pass"])
    dead.wait()
    state = tmp_path / "services" / "gone.json"
    state.parent.mkdir(parents=True)
    state.write_text(json.dumps({"url": "http://127.0.0.1:9", "process": {
        "pid": dead.pid, "create_time": 1.0, "argv": ["x"], "env_diff": {}, "log_path": "l", "cwd": "."}}))
    code, _, err = run_cli("service", "stop", "gone", "-w", str(tmp_path))
    assert code == 4 and "stopped nothing" in err and not state.exists()


def test_service_stop_never_signals_a_process_its_record_does_not_describe(tmp_path: Path) -> None:
    import json

    import psutil

    decoy = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(60)"])
    try:
        birth = psutil.Process(decoy.pid).create_time()
        state = tmp_path / "services" / "forged.json"
        state.parent.mkdir(parents=True)
        state.write_text(json.dumps({"url": "http://127.0.0.1:9", "process": {
            "pid": decoy.pid, "create_time": birth, "argv": ["not", "this"], "env_diff": {}, "log_path": "l",
            "cwd": "."}}))
        code, _, err = run_cli("service", "stop", "forged", "-w", str(tmp_path))
        assert code == 4 and "does not run the command recorded" in err
        time.sleep(0.2)
        assert decoy.poll() is None  # the decoy survives
    finally:
        decoy.kill()
        decoy.wait()


def test_every_oserror_maps_to_one_line_with_a_hint() -> None:
    for code_, want in [(errno.ENOSPC, "disk is full"), (errno.EACCES, "permissions"),
                        (errno.ENAMETOOLONG, "too long"), (errno.EIO, "check the path")]:
        lines = error_lines(OSError(code_, "boom", "/some/file"))
        assert lines is not None
        message, hint, status = lines
        assert message == "boom: /some/file" and hint is not None and want in hint and status == 1
    assert error_lines(MemoryError()) is not None and error_lines(RecursionError()) is not None
    assert error_lines(ValueError("a bug")) is None  # bugs keep their traceback


def test_main_prints_markup_literally(tmp_path: Path) -> None:
    # the real entry point: an error message with rich markup in it is printed as text, no traceback
    bad = tmp_path / "[bold]x[/]"
    r = subprocess.run([sys.executable, "-m", "harness.cli", "archive", "list", "-w", str(bad)],
                       capture_output=True, text=True, cwd=REPO, timeout=60, check=False)
    assert r.returncode == 6
    assert "[bold]x[/]" in r.stderr and "Traceback" not in r.stderr
    assert r.stderr.count("error:") == 1 and r.stderr.count("hint:") == 1
