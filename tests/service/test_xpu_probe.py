"""Intel GPU probe edge: xpu-smi runner, fdinfo from a fake /proc and /sys, source choice, refusal of an
unrelated owner, and the vLLM XPU TP4 profile example."""

from __future__ import annotations

import json
import os
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path

import psutil
import pytest

from harness.errors import OwnershipError, ServiceError
from harness.inputs.spec import load_profile
from harness.service.devices import gpu_probe, xpu_probe
from harness.service.devices.gpu import MIB, OwnersSnapshot, merge_devices
from harness.service.devices.gpu_probe import ensure_gpus_free, read_gpu_memory, read_gpu_owners, resolve_source
from harness.service.devices.ownership import check_gpus_free, classify_owners, service_gpus
from harness.service.devices.xpu import fdinfo_owners, parse_xpu_discovery_json, parse_xpu_ps_json
from harness.service.devices.xpu_probe import XPU_DISCOVERY, XPU_PS, read_drm_clients, render_nodes, xpu_stats_argv
from harness.service.launch.command import vllm_command

ROOT = Path(__file__).resolve().parent.parent.parent
FIX = ROOT / "tests" / "fixtures" / "xpu"
NO_SUCH_PID = 2**22 + 12345  # above Linux's largest pid_max: never a live process
TP4_BDFS = ("0000:29:00.0", "0000:3a:00.0", "0000:9a:00.0", "0000:ca:00.0")


def read(name: str) -> str:
    return (FIX / name).read_text(encoding="utf-8")


class FakeRunner:
    """Canned outputs by argv; an unknown argv fails as a missing tool would."""

    def __init__(self, outputs: Mapping[Sequence[str], str]) -> None:
        self.outputs = {tuple(k): v for k, v in outputs.items()}
        self.calls: list[tuple[str, ...]] = []

    def __call__(self, argv: Sequence[str]) -> str:
        self.calls.append(tuple(argv))
        if tuple(argv) not in self.outputs:
            raise ServiceError(f"'{argv[0]}' is not installed or not on PATH")
        return self.outputs[tuple(argv)]


def only(*names: str) -> Callable[[str], str | None]:
    return lambda n: f"/usr/bin/{n}" if n in names else None


def xe_fdinfo(pdev: str, client_id: int, vram_kib: int) -> str:
    return (f"pos:\t0\nflags:\t0100002\nmnt_id:\t26\nino:\t685\ndrm-driver:\txe\ndrm-client-id:\t{client_id}\n"
            f"drm-pdev:\t{pdev}\ndrm-total-gtt:\t192 KiB\ndrm-total-vram0:\t{vram_kib} KiB\n"
            f"drm-resident-vram0:\t{vram_kib} KiB\ndrm-cycles-rcs:\t28257900\n")


def fake_proc(root: Path, procs: Mapping[int, tuple[str, Sequence[tuple[int, str, str]]]]) -> Path:
    """A /proc tree: pid -> (comm, [(fd, link target, fdinfo text)])."""
    for pid, (comm, fds) in procs.items():
        (root / str(pid) / "fd").mkdir(parents=True)
        (root / str(pid) / "fdinfo").mkdir()
        (root / str(pid) / "comm").write_text(comm + "\n")
        for fd, target, text in fds:
            os.symlink(target, root / str(pid) / "fd" / str(fd))
            (root / str(pid) / "fdinfo" / str(fd)).write_text(text)
    (root / "self").mkdir()  # not a PID: ignored
    return root


def fake_sys(root: Path, nodes: Mapping[str, tuple[str, str]]) -> Path:
    """A /sys tree with class/drm/<node>/device -> devices/<bdf> and device/driver -> drivers/<driver>."""
    (root / "class" / "drm").mkdir(parents=True)
    for node, (bdf, driver) in nodes.items():
        dev = root / "devices" / "pci0000:00" / bdf
        dev.mkdir(parents=True, exist_ok=True)
        if not (dev / "driver").is_symlink():
            os.symlink(f"../../../bus/pci/drivers/{driver}", dev / "driver")
        (root / "class" / "drm" / node).mkdir()
        os.symlink(f"../../../devices/pci0000:00/{bdf}", root / "class" / "drm" / node / "device")
    (root / "class" / "drm" / "card0").mkdir()  # a primary node: not a render node
    return root


def tp4_proc(tmp_path: Path, decoy_pid: int = 39999) -> Path:
    # workers 41001-41004, one per device, each with a non-DRM fd 0 too
    procs: dict[int, tuple[str, Sequence[tuple[int, str, str]]]] = {
        41001 + i: ("python3", [(0, "/dev/null", "pos:\t0\nflags:\t02\n"),
                                (5 + i, f"/dev/dri/renderD{128 + i}", xe_fdinfo(bdf, 10 + i, 50 * 1024 * 1024))])
        for i, bdf in enumerate(TP4_BDFS)}
    procs[decoy_pid] = ("python3", [(7, "/dev/dri/renderD130", xe_fdinfo(TP4_BDFS[2], 99, 1024 * 1024))])
    procs[500] = ("bash", [(1, "/dev/pts/0", "pos:\t0\n")])
    return fake_proc(tmp_path / "proc", procs)


def tp4_sys(tmp_path: Path) -> Path:
    return fake_sys(tmp_path / "sys", {f"renderD{128 + i}": (bdf, "xe") for i, bdf in enumerate(TP4_BDFS)})


# --------------------------------------------------------------------------------------- source choice


def test_auto_prefers_vendor_tools_then_xpu_smi_then_intel_render_nodes() -> None:
    def pick(*tools: str, intel: bool) -> str:
        return resolve_source("auto", which=only(*tools), nvml_available=lambda: False,
                              intel_render_nodes=lambda: intel)
    assert pick("amd-smi", "xpu-smi", intel=True) == "amd-smi"
    assert pick("nvidia-smi", "xpu-smi", intel=True) == "nvidia-smi"
    assert pick("xpu-smi", intel=True) == "xpu-smi"
    assert pick(intel=True) == "drm-fdinfo"
    assert pick(intel=False) == "none"
    assert resolve_source("drm-fdinfo", which=only()) == "drm-fdinfo"


def test_render_nodes_from_fake_sys(tmp_path: Path) -> None:
    sys_root = fake_sys(tmp_path / "sys", {"renderD129": ("0000:3A:00.0", "i915"),
                                           "renderD128": ("0000:c1:00.0", "amdgpu")})
    assert render_nodes(sys_root) == [("renderD128", "0000:c1:00.0", "amdgpu"),
                                      ("renderD129", "0000:3a:00.0", "i915")]
    assert xpu_probe.has_intel_render_nodes(sys_root)
    amd_only = fake_sys(tmp_path / "sys2", {"renderD128": ("0000:c1:00.0", "amdgpu")})
    assert not xpu_probe.has_intel_render_nodes(amd_only)
    assert render_nodes(tmp_path / "absent") == []


# ------------------------------------------------------------------------------------------- xpu-smi


def test_xpu_smi_snapshot_drops_its_own_rows(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(gpu_probe, "nvml_importable", lambda: False)
    monkeypatch.setattr(xpu_probe, "pid_alive", lambda pid: pid != 13377)
    runner = FakeRunner({XPU_PS: read("ps_tp4_decoy.json"), XPU_DISCOVERY: read("discovery_tp4.json")})
    snap = read_gpu_owners("auto", runner, which=only("xpu-smi"), nvml=None, env={})
    assert snap.source == "xpu-smi"
    assert [(p.gpu, p.pid) for p in snap.processes] == [(0, 41001), (1, 41002), (2, 41003), (3, 41004), (2, 39999)]
    assert snap.processes[4].vram_bytes == 1048576 * 1000
    assert [d.uuid for d in snap.devices][:1] == ["00000000-0000-0029-0000-002f0bd58086"]
    assert set(snap.raw) == {"xpu-smi ps -j", "xpu-smi discovery -j"}


def test_xpu_smi_discovery_may_fail_ps_may_not() -> None:
    snap = read_gpu_owners("xpu-smi", FakeRunner({XPU_PS: read("ps_idle.json")}), env={})
    assert snap.processes == () and snap.devices == ()
    assert "xpu-smi discovery -j (failed)" in snap.raw
    with pytest.raises(ServiceError, match="not installed"):
        read_gpu_owners("xpu-smi", FakeRunner({XPU_DISCOVERY: read("discovery_tp4.json")}), env={})
    with pytest.raises(ServiceError, match="Level Zero Initialization Error"):
        read_gpu_owners("xpu-smi", FakeRunner({XPU_PS: read("ps_error.json")}), env={})


def test_xpu_smi_memory_reads_stats_per_device() -> None:
    runner = FakeRunner({XPU_DISCOVERY: read("discovery_tp4.json"),
                         xpu_stats_argv(0): read("stats_device_level.json"),
                         xpu_stats_argv(1): read("stats_tiles_only.json"),
                         xpu_stats_argv(2): '{"device_id": 2, "device_level": []}',
                         xpu_stats_argv(3): '{"device_id": 3, "device_level": [{"metrics_type": '
                                            '"XPUM_STATS_MEMORY_USED", "value": 0}]}'})
    snap = read_gpu_memory("xpu-smi", runner)
    assert runner.calls == [XPU_DISCOVERY, *(xpu_stats_argv(i) for i in range(4))]
    assert [(d.index, d.memory_used_bytes, d.memory_total_bytes) for d in snap.devices] == [
        (0, 24 * MIB, 137438953472), (1, 102400 * MIB, 137438953472), (2, None, None), (3, 0, None)]
    assert snap.processes == ()


# -------------------------------------------------------------------------------------------- fdinfo


def test_read_drm_clients_from_fake_proc(tmp_path: Path) -> None:
    proc = tp4_proc(tmp_path)
    clients, unreadable = read_drm_clients(proc)
    assert [(c.pid, c.fd, c.pdev, c.client_id) for c in clients] == [
        (39999, 7, "0000:9a:00.0", "99"), (41001, 5, "0000:29:00.0", "10"), (41002, 6, "0000:3a:00.0", "11"),
        (41003, 7, "0000:9a:00.0", "12"), (41004, 8, "0000:ca:00.0", "13")]
    assert clients[1].device_bytes == 50 * 1024**3
    assert unreadable == []


def test_fdinfo_snapshot_through_read_gpu_owners(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(gpu_probe, "nvml_importable", lambda: False)
    monkeypatch.setattr(xpu_probe, "PROC_ROOT", tp4_proc(tmp_path))
    monkeypatch.setattr(xpu_probe, "SYS_ROOT", tp4_sys(tmp_path))
    snap = read_gpu_owners("auto", FakeRunner({}), which=only(), nvml=None, env={})
    assert snap.source == "drm-fdinfo"
    assert [(p.gpu, p.pid, p.name) for p in snap.processes] == [
        (2, 39999, "python3"), (0, 41001, "python3"), (1, 41002, "python3"), (2, 41003, "python3"),
        (3, 41004, "python3")]
    assert [(d.index, d.bdf) for d in snap.devices] == list(enumerate(TP4_BDFS))
    assert snap.devices[2].memory_used_bytes == 50 * 1024**3 + 1024**3  # worker + decoy on device 2
    assert json.loads(snap.raw["drm-fdinfo clients"])[0]["regions"]["vram0"]["total"] == 1024**3
    mem = read_gpu_memory("drm-fdinfo")
    assert [d.memory_used_bytes for d in mem.devices] == [50 * 1024**3, 50 * 1024**3, 51 * 1024**3, 50 * 1024**3]


# ------------------------------------------------------------------------ refusing an unrelated owner


def _snapshot(tool: str, tmp_path: Path) -> OwnersSnapshot:
    if tool == "xpu-smi":
        procs = parse_xpu_ps_json(read("ps_tp4_decoy.json"))
        procs = [p for p in procs if p.pid != 13377]  # the prober's row, dropped by the probe
        devs = merge_devices(parse_xpu_discovery_json(read("discovery_tp4.json")))
    else:
        clients, _ = read_drm_clients(tp4_proc(tmp_path))
        procs, dev_list = fdinfo_owners(clients, TP4_BDFS)
        devs = merge_devices(dev_list)
    return OwnersSnapshot(source=tool, processes=tuple(procs), devices=devs)


@pytest.mark.parametrize("tool", ["xpu-smi", "drm-fdinfo"])
def test_tp4_decoy_unrelated_owned_workers_owned(tool: str, tmp_path: Path) -> None:
    meta = json.loads(read("ps_tp4_decoy.tree.json"))
    tree = [(int(p), float(ct)) for p, ct in meta["owned_tree"]]
    s = _snapshot(tool, tmp_path)
    verdicts = {c.process.pid: c.verdict for c in classify_owners(s, [0, 1, 2, 3], tree)}
    assert verdicts == {meta["decoy_pid"]: "unrelated", 41001: "owned", 41002: "owned", 41003: "owned",
                        41004: "owned"}
    assert [p.pid for p in check_gpus_free(s, [0, 1, 2, 3], tree)] == [meta["decoy_pid"]]
    assert [p.pid for p in check_gpus_free(s, [2], tree)] == [meta["decoy_pid"]]
    assert check_gpus_free(s, [0, 1, 3], tree) == []  # the decoy sits on device 2 only
    assert len(check_gpus_free(s, [0, 1, 2, 3])) == 5  # before launch nothing is owned


def test_nvml_failure_under_auto_falls_back_to_xpu_smi() -> None:
    class BrokenNvml:
        def nvmlInit(self) -> None:
            raise RuntimeError("NVML Shared Library Not Found")

    runner = FakeRunner({XPU_PS: read("ps_idle.json"), XPU_DISCOVERY: read("discovery_flex170.json")})
    snap = read_gpu_owners("auto", runner, which=only("xpu-smi"), nvml=BrokenNvml(), env={})
    assert snap.source == "xpu-smi" and snap.devices[0].bdf == "0000:4d:00.0"


@pytest.mark.parametrize("tool", ["xpu-smi", "drm-fdinfo"])
def test_ensure_gpus_free_refuses_decoy(tool: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    me = os.getpid()  # stands in for the service's worker: alive, with a real birth time
    owned = [(me, psutil.Process(me).create_time())]
    env = {"ZE_AFFINITY_MASK": "0.0,2.0"}
    gpus = service_gpus(None, env)
    assert gpus == [0, 2]
    runner = FakeRunner({})
    if tool == "xpu-smi":
        rows = [{"device_id": 0, "process_id": me, "process_name": "python3", "mem_size": 1000},
                {"device_id": 2, "process_id": NO_SUCH_PID, "process_name": "python3", "mem_size": 1048576},
                {"device_id": 1, "process_id": NO_SUCH_PID + 1, "process_name": "python3", "mem_size": 5}]
        runner = FakeRunner({XPU_PS: json.dumps({"device_util_by_proc_list": rows}),
                             XPU_DISCOVERY: read("discovery_tp4.json")})
    else:
        procs: dict[int, tuple[str, Sequence[tuple[int, str, str]]]] = {
            me: ("python3", [(5, "/dev/dri/renderD128", xe_fdinfo(TP4_BDFS[0], 1, 1024))]),
            NO_SUCH_PID: ("python3", [(3, "/dev/dri/renderD130", xe_fdinfo(TP4_BDFS[2], 2, 1024 * 1024))]),
            NO_SUCH_PID + 1: ("python3", [(3, "/dev/dri/renderD129", xe_fdinfo(TP4_BDFS[1], 3, 5))])}
        monkeypatch.setattr(xpu_probe, "PROC_ROOT", fake_proc(tmp_path / "proc", procs))
        monkeypatch.setattr(xpu_probe, "SYS_ROOT", tp4_sys(tmp_path))
    with pytest.raises(OwnershipError) as ei:
        ensure_gpus_free(gpus, owned, source=tool, runner=runner, env={})
    assert f"PID {NO_SUCH_PID} (python3) holds GPU 2" in ei.value.message
    assert f"PID {me} " not in ei.value.message and str(NO_SUCH_PID + 1) not in ei.value.message  # GPU 1 unused
    assert ei.value.hint is not None and "ZE_AFFINITY_MASK" in ei.value.hint
    assert ensure_gpus_free([0, 3], owned, source=tool, runner=runner, env={}).source == tool


# ------------------------------------------------------------------------------------- profile example


def test_vllm_xpu_tp4_profile_loads_and_builds() -> None:
    p = load_profile(ROOT / "campaigns" / "profiles" / "vllm-xpu-tp4.yaml")
    assert (p.backend, p.identity.tp_size, p.devices.gpu_owners_source) == ("vllm", 4, "xpu-smi")
    assert p.launch.env["ZE_AFFINITY_MASK"] == "0,1,2,3"
    assert {k for k in p.launch.env if k.startswith("CCL_")} >= {"CCL_ATL_TRANSPORT", "CCL_ZE_IPC_EXCHANGE"}
    assert service_gpus(p.devices.gpus, p.launch.env) == [0, 1, 2, 3]
    cmd = vllm_command(p, 30041)
    argv = list(cmd.argv)
    assert argv[argv.index("--tensor-parallel-size") + 1] == "4"
    assert "--enable-expert-parallel" in argv
    assert cmd.env_diff == p.launch.env  # recorded as the service's env_diff, CCL_*/ZE_* included
