"""The probe edge: source selection, injected runner / NVML / owners file, owned trees, refusal."""

from __future__ import annotations

import json
import os
import sys
import time
from collections.abc import Callable, Iterator, Mapping, Sequence
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import psutil
import pytest

from harness.errors import OwnershipError, ServiceError
from harness.service.devices import gpu_probe
from harness.service.devices.gpu import MIB, GpuDevice, GpuProcess
from harness.service.devices.gpu_probe import (
    AMD_LIST,
    AMD_MEMORY,
    AMD_PROCESS,
    NVIDIA_APPS,
    NVIDIA_GPUS,
    OWNERS_FILE_ENV,
    current_create_times,
    ensure_gpus_free,
    owned_tree,
    process_tree,
    read_gpu_memory,
    read_gpu_owners,
    read_nvml_records,
    resolve_source,
    subprocess_runner,
)
from harness.service.process import OwnedProcess, start_owned, stop_owned

FIX = Path(__file__).resolve().parent.parent / "fixtures" / "gpu"
H200_UUID = "GPU-8731a51e-f4a8-1ed8-dbb3-ea2c72f10b5f"


class FakeRunner:
    """Canned outputs by argv; a value that is an exception is raised."""

    def __init__(self, outputs: Mapping[Sequence[str], str | Exception]) -> None:
        self.outputs = {tuple(k): v for k, v in outputs.items()}
        self.calls: list[tuple[str, ...]] = []

    def __call__(self, argv: Sequence[str]) -> str:
        self.calls.append(tuple(argv))
        out = self.outputs.get(tuple(argv))
        if out is None:
            raise ServiceError(f"'{argv[0]}' is not installed or not on PATH")
        if isinstance(out, Exception):
            raise out
        return out


def only(*names: str) -> Callable[[str], str | None]:
    return lambda n: f"/usr/bin/{n}" if n in names else None


def nvidia_runner(apps: str = "apps_busy.csv") -> FakeRunner:
    return FakeRunner({NVIDIA_APPS: (FIX / "nvidia-h200" / apps).read_text(),
                       NVIDIA_GPUS: (FIX / "nvidia-h200" / "gpus_busy.csv").read_text()})


def amd_runner(**override: str | Exception) -> FakeRunner:
    d = FIX / "amd-smi"
    outputs: dict[Sequence[str], str | Exception] = {
        AMD_PROCESS: (d / "process_busy_rocm61.json").read_text(), AMD_LIST: (d / "list.json").read_text(),
        AMD_MEMORY: (d / "metric_mem_rocm61.json").read_text()}
    for key, val in override.items():
        outputs[{"process": AMD_PROCESS, "list": AMD_LIST, "memory": AMD_MEMORY}[key]] = val
    return FakeRunner(outputs)


def fake_nvml(*, init_error: bool = False) -> Any:
    rec = json.loads((FIX / "nvidia-h200" / "nvml_busy.json").read_text())[0]
    calls: list[str] = []

    def init() -> None:
        calls.append("init")
        if init_error:
            raise RuntimeError("NVML Shared Library Not Found")

    def name(pid: int) -> bytes:
        return b"/usr/bin/python3"

    return SimpleNamespace(
        calls=calls, nvmlInit=init, nvmlShutdown=lambda: calls.append("shutdown"),
        nvmlDeviceGetCount=lambda: 1, nvmlDeviceGetHandleByIndex=lambda i: ("h", i),
        nvmlDeviceGetUUID=lambda h: rec["uuid"].encode(),
        nvmlDeviceGetPciInfo=lambda h: SimpleNamespace(busId=b"00000000:00:06.0"),
        nvmlDeviceGetMemoryInfo=lambda h: SimpleNamespace(total=rec["total"], used=rec["used"],
                                                          free=rec["total"] - rec["used"]),
        nvmlDeviceGetComputeRunningProcesses=lambda h: [SimpleNamespace(**p) for p in rec["procs"]],
        nvmlSystemGetProcessName=name,
    )


# ------------------------------------------------------------------------------------ source choice


def test_resolve_source_order() -> None:
    assert resolve_source("auto", which=only("amd-smi", "nvidia-smi"), nvml_available=lambda: True) == "amd-smi"
    assert resolve_source("auto", which=only("nvidia-smi"), nvml_available=lambda: True) == "nvml"
    assert resolve_source("auto", which=only("nvidia-smi"), nvml_available=lambda: False) == "nvidia-smi"
    assert resolve_source("auto", which=only(), nvml_available=lambda: False) == "none"
    assert resolve_source("nvidia-smi", which=only(), nvml_available=lambda: False) == "nvidia-smi"
    with pytest.raises(ServiceError, match="unknown GPU owners source"):
        resolve_source("rocm-smi")


def test_no_tools_gives_empty_none_snapshot(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(gpu_probe, "nvml_importable", lambda: False)
    runner = FakeRunner({})
    snap = read_gpu_owners("auto", runner, which=only(), env={})
    assert (snap.source, snap.processes, snap.devices, dict(snap.raw)) == ("none", (), (), {})
    assert not snap.available
    assert runner.calls == []
    assert snap.wall_iso.endswith("+00:00")
    assert read_gpu_memory("auto", runner, which=only()).source == "none"


# ---------------------------------------------------------------------------------------- sources


def test_nvidia_smi_snapshot_from_real_captures() -> None:
    snap = read_gpu_owners("auto", nvidia_runner(), which=only("nvidia-smi"), env={})
    assert snap.source == "nvidia-smi"
    assert snap.processes == (GpuProcess(H200_UUID, 525, "python3", 3472 * MIB, "nvidia-smi"),)
    assert snap.devices == (GpuDevice(0, H200_UUID, None, 3481 * MIB, 143771 * MIB),)
    assert set(snap.raw) == {" ".join(NVIDIA_APPS), " ".join(NVIDIA_GPUS)}
    idle = read_gpu_owners("nvidia-smi", nvidia_runner("apps_idle.csv"), env={})
    assert idle.processes == ()
    assert idle.available


def test_amd_snapshot_merges_list_and_memory() -> None:
    snap = read_gpu_owners("auto", amd_runner(), which=only("amd-smi", "nvidia-smi"), env={})
    assert snap.source == "amd-smi"
    assert [(p.gpu, p.pid) for p in snap.processes] == [(0, 41327), (0, 40012), (1, 41327)]
    assert snap.devices[0].uuid == "3dff740f-0000-1000-8024-b4a2e6f1d0c9"
    assert snap.devices[0].memory_used_bytes == 58891 * MIB


def test_amd_optional_commands_may_fail_process_may_not() -> None:
    snap = read_gpu_owners("amd-smi", amd_runner(list=ServiceError("boom")), env={})
    assert snap.devices[0].uuid is None and snap.devices[0].memory_total_bytes == 65520 * MIB
    assert "amd-smi list --json (failed)" in snap.raw
    with pytest.raises(ServiceError, match="denied"):
        read_gpu_owners("amd-smi", amd_runner(process=ServiceError("permission denied")), env={})
    with pytest.raises(ServiceError, match="cannot parse amd-smi process"):
        read_gpu_owners("amd-smi", amd_runner(process="WARNING: something\n"), env={})


def test_amd_memory_reading() -> None:
    runner = amd_runner(memory=(FIX / "amd-smi" / "metric_mem_gpu_data.json").read_text())
    snap = read_gpu_memory("amd-smi", runner)
    assert runner.calls == [AMD_MEMORY]
    assert [d.memory_used_bytes for d in snap.devices] == [62904 * MIB, 10 * MIB, None]
    assert snap.processes == ()


def test_nvml_snapshot_with_fake_module() -> None:
    nvml = fake_nvml()
    snap = read_gpu_owners("auto", FakeRunner({}), which=only("nvidia-smi"), nvml=nvml, env={})
    assert snap.source == "nvml"
    assert snap.processes == (GpuProcess(0, 525, "/usr/bin/python3", 3640655872, "nvml"),)
    assert snap.devices == (GpuDevice(0, H200_UUID, "00000000:00:06.0", 4294836224, 150754820096),)
    assert json.loads(snap.raw["nvml"])[0]["procs"][0]["pid"] == 525
    assert nvml.calls == ["init", "shutdown"]
    mem = read_gpu_memory("nvml", nvml=fake_nvml())
    assert mem.devices[0].memory_total_bytes == 150754820096


def test_nvml_init_failure_auto_falls_back_explicit_raises() -> None:
    snap = read_gpu_owners("auto", nvidia_runner(), which=only("nvidia-smi"), nvml=fake_nvml(init_error=True),
                           env={})
    assert snap.source == "nvidia-smi"
    snap = read_gpu_owners("auto", FakeRunner({}), which=only(), nvml=fake_nvml(init_error=True), env={})
    assert snap.source == "none"
    with pytest.raises(ServiceError, match="NVML cannot initialise"):
        read_gpu_owners("nvml", nvml=fake_nvml(init_error=True), env={})
    with pytest.raises(ServiceError, match="NVML cannot initialise"):
        read_nvml_records(fake_nvml(init_error=True))


def test_nvml_query_failure_is_service_error() -> None:
    nvml = fake_nvml()
    nvml.nvmlDeviceGetCount = lambda: (_ for _ in ()).throw(RuntimeError("GPU is lost"))
    with pytest.raises(ServiceError, match="GPU is lost"):
        read_nvml_records(nvml)
    assert nvml.calls == ["init", "shutdown"]


def test_nvml_requested_without_pynvml(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setitem(sys.modules, "pynvml", None)  # makes "import pynvml" fail
    with pytest.raises(ServiceError, match="pynvml is not installed"):
        read_gpu_owners("nvml", env={})


# ---------------------------------------------------------------------------------- injected owners


def test_injected_owners_file_merged_into_any_snapshot(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    f = tmp_path / "owners.json"
    f.write_text(json.dumps([{"gpu": 0, "pid": 4242, "name": "decoy", "vram_bytes": 1 << 30},
                             {"gpu": 0, "pid": 525, "name": "dup"}]))
    env = {OWNERS_FILE_ENV: str(f)}
    snap = read_gpu_owners("nvidia-smi", nvidia_runner(), env=env)
    # PID 525 on GPU 0 (= the H200 UUID) is already reported: the injected duplicate is dropped
    assert [(p.pid, p.source) for p in snap.processes] == [(525, "nvidia-smi"), (4242, "injected")]
    assert f"injected:{f}" in snap.raw
    monkeypatch.setattr(gpu_probe, "nvml_importable", lambda: False)
    none = read_gpu_owners("auto", FakeRunner({}), which=only(), env=env)
    assert none.source == "none" and none.available and len(none.processes) == 2
    monkeypatch.setenv(OWNERS_FILE_ENV, str(f))
    assert len(read_gpu_owners("none").processes) == 2  # env defaults to os.environ
    with pytest.raises(ServiceError, match=OWNERS_FILE_ENV):
        read_gpu_owners("none", env={OWNERS_FILE_ENV: str(tmp_path / "missing.json")})


# ----------------------------------------------------------------------------------------- runner


def test_subprocess_runner_ok_and_failures() -> None:
    assert subprocess_runner([sys.executable, "-c", "print('hi')"]) == "hi\n"
    with pytest.raises(ServiceError, match="not installed"):
        subprocess_runner(["dsv4h-no-such-tool-xyz"])
    with pytest.raises(ServiceError, match=r"exited with code 3: bad driver"):
        subprocess_runner([sys.executable, "-c", "import sys; sys.stderr.write('bad driver'); sys.exit(3)"])
    with pytest.raises(ServiceError, match="did not finish"):
        subprocess_runner([sys.executable, "-c", "import time; time.sleep(5)"], timeout_s=0.3)


# ---------------------------------------------------------------------------------- owned trees


@pytest.fixture
def owned_pair(tmp_path: Path) -> Iterator[OwnedProcess]:
    """An owned root with one child (the kind of tree a server with a worker makes)."""
    code = ("import signal, subprocess, sys, time\n"
            "c = subprocess.Popen([sys.executable, '-c', 'import time; time.sleep(60)'])\n"
            "def bye(*_):\n    c.terminate(); c.wait(); sys.exit(0)\n"  # reap the child: no orphan zombie
            "signal.signal(signal.SIGTERM, bye)\n"
            "print('child', c.pid, flush=True)\ntime.sleep(60)\n")
    proc = start_owned([sys.executable, "-c", code], log_path=tmp_path / "svc.log")
    deadline = time.monotonic() + 10
    while time.monotonic() < deadline and "child" not in (tmp_path / "svc.log").read_text():
        time.sleep(0.02)
    try:
        yield proc
    finally:
        stop_owned(proc, term_timeout_s=3)


def test_owned_tree_and_process_tree(owned_pair: OwnedProcess) -> None:
    tree = owned_tree(owned_pair)
    assert len(tree) == 2 and tree[0][0] == owned_pair.pid
    assert abs(tree[0][1] - owned_pair.create_time) < 0.05
    assert process_tree(owned_pair.pid) == tree
    assert current_create_times([p for p, _ in tree] + [2**22 + 12345]) == dict(tree)
    stale = OwnedProcess(pid=owned_pair.pid, create_time=owned_pair.create_time - 100, argv=[], env_diff={},
                         log_path=owned_pair.log_path, cwd=".")
    assert owned_tree(stale) == []  # a reused PID is not ours
    with pytest.raises(ServiceError, match="no process with PID"):
        process_tree(2**22 + 12345)


def test_ensure_gpus_free_decoy_refused_owned_child_accepted(owned_pair: OwnedProcess, tmp_path: Path) -> None:
    child = owned_tree(owned_pair)[1][0]
    decoy = psutil.Process(os.getpid())  # this test process: alive, unrelated to the owned tree
    f = tmp_path / "owners.json"
    f.write_text(json.dumps([{"gpu": 0, "pid": child, "name": "python3", "vram_bytes": 2 << 30}]))
    env = {OWNERS_FILE_ENV: str(f)}
    snap = ensure_gpus_free([0], owned_pair, source="none", env=env)
    assert [p.pid for p in snap.processes] == [child]
    with pytest.raises(OwnershipError, match=rf"PID {child} \(python3\) holds GPU 0"):
        ensure_gpus_free([0], None, source="none", env=env)  # before launch every owner is unrelated
    f.write_text(json.dumps([{"gpu": 0, "pid": child}, {"gpu": 1, "pid": decoy.pid, "name": "decoy",
                                                         "vram_bytes": 1 << 30}]))
    with pytest.raises(OwnershipError) as ei:
        ensure_gpus_free(None, owned_pair, source="none", env=env)
    assert f"PID {decoy.pid} (decoy) holds GPU 1 (1.00 GiB)" in ei.value.message
    assert str(child) not in ei.value.message.split("\n", 1)[1]
    assert ei.value.hint is not None and f"kill {decoy.pid}" in ei.value.hint
    assert ensure_gpus_free([0], owned_pair, source="none", env=env) is not None  # decoy is on GPU 1
    # a tree recorded with a different birth time for the child: the PID was reused, so unrelated
    wrong = [(p, ct - 10) for p, ct in owned_tree(owned_pair)]
    with pytest.raises(OwnershipError, match=f"PID {child}"):
        ensure_gpus_free([0], wrong, source="none", env=env)
