"""Pure Intel GPU parsers: xpu-smi ps / discovery / stats, DRM fdinfo, ZE_AFFINITY_MASK, runtime env."""

from __future__ import annotations

from pathlib import Path

import pytest

from harness.errors import ServiceError
from harness.service.devices.gpu import MIB, GpuDevice, GpuProcess
from harness.service.devices.ownership import visible_devices
from harness.service.devices.xpu import (
    DrmClient,
    drop_prober_rows,
    fdinfo_owners,
    fdinfo_size,
    parse_drm_fdinfo,
    parse_xpu_discovery_json,
    parse_xpu_ps_json,
    parse_xpu_stats_json,
    parse_ze_affinity_mask,
    runtime_env,
)

FIX = Path(__file__).resolve().parent.parent / "fixtures" / "xpu"


def read(name: str) -> str:
    return (FIX / name).read_text(encoding="utf-8")


# ------------------------------------------------------------------------------------------- xpu-smi


def test_ps_published_capture_pids_devices_bytes() -> None:
    procs = parse_xpu_ps_json(read("ps_pvc_three_owners.json"))
    assert procs == [GpuProcess(0, 768707, "python", 5726404000, "xpu-smi"),
                     GpuProcess(0, 5225, "slurmd", 1507000, "xpu-smi"),
                     GpuProcess(0, 4615, "xpumd", 17238523000, "xpu-smi")]


def test_ps_tp4_with_engines_field_and_idle() -> None:
    procs = parse_xpu_ps_json(read("ps_tp4_decoy.json"))
    assert [(p.gpu, p.pid) for p in procs] == [(0, 41001), (1, 41002), (2, 41003), (3, 41004), (2, 39999),
                                              (3, 13377)]
    assert procs[0].vram_bytes == 52428800 * 1000
    assert parse_xpu_ps_json(read("ps_idle.json")) == []


@pytest.mark.parametrize(("text", "match"), [
    ("", "not JSON"),
    ('{"process_list": []}', "no 'device_util_by_proc_list'"),
    ('{"device_util_by_proc_list": [{"device_id": 0, "mem_size": 1}]}', "'process_id'"),
    ('{"device_util_by_proc_list": [{"device_id": 0, "process_id": "x"}]}', "'process_id' is 'x'"),
    ('{"device_util_by_proc_list": [{"device_id": 0, "process_id": 5, "mem_size": -1}]}', "mem_size"),
    ("[]", "expected an object"),
])
def test_ps_fails_closed(text: str, match: str) -> None:
    with pytest.raises(ServiceError, match=match):
        parse_xpu_ps_json(text)


def test_tool_error_object_is_service_error() -> None:
    with pytest.raises(ServiceError, match=r"reported an error: Level Zero Initialization Error \(errno 3\)"):
        parse_xpu_ps_json(read("ps_error.json"))


def test_prober_rows_dropped_only_when_dead_and_named_xpu_smi() -> None:
    procs = parse_xpu_ps_json(read("ps_self_rows.json"))
    assert [(p.gpu, p.pid, p.vram_bytes) for p in procs] == [(0, 12961, 1966000), (1, 12961, 1966000)]
    assert drop_prober_rows(procs, alive=lambda pid: False) == []
    assert drop_prober_rows(procs, alive=lambda pid: True) == procs  # a live xpu-smi is kept
    decoy = GpuProcess(2, 39999, "python3", 1, "xpu-smi")
    assert drop_prober_rows([decoy], alive=lambda pid: False) == [decoy]  # dead but not the tool: kept


def test_discovery_published_capture_and_sizes() -> None:
    assert parse_xpu_discovery_json(read("discovery_flex170.json")) == [
        GpuDevice(0, "00000000-0000-0000-0000-020a00008086", "0000:4d:00.0")]
    devs = parse_xpu_discovery_json(read("discovery_tp4.json"))
    assert [(d.index, d.bdf) for d in devs] == [(0, "0000:29:00.0"), (1, "0000:3a:00.0"), (2, "0000:9a:00.0"),
                                               (3, "0000:ca:00.0")]
    assert [d.memory_total_bytes for d in devs] == [137438953472, 137438953472, None, None]
    with pytest.raises(ServiceError, match="no 'device_list'"):
        parse_xpu_discovery_json('{"devices": []}')


def test_stats_memory_used_mib_device_level_then_tiles() -> None:
    assert parse_xpu_stats_json(read("stats_device_level.json")) == GpuDevice(0, memory_used_bytes=24 * MIB)
    assert parse_xpu_stats_json(read("stats_tiles_only.json")).memory_used_bytes == 102400 * MIB
    none = parse_xpu_stats_json('{"device_level": [{"metrics_type": "XPUM_STATS_POWER", "value": 3}]}', 5)
    assert none == GpuDevice(5)
    with pytest.raises(ServiceError, match="expected MiB"):
        parse_xpu_stats_json('{"device_id": 0, "device_level": [{"metrics_type": "XPUM_STATS_MEMORY_USED", '
                             '"value": "24"}]}')
    with pytest.raises(ServiceError, match="neither 'device_level' nor 'tile_level'"):
        parse_xpu_stats_json('{"device_id": 0}')


# -------------------------------------------------------------------------------------------- fdinfo


def test_fdinfo_xe_kernel_example() -> None:
    c = parse_drm_fdinfo(read("fdinfo_xe_doc.txt"), pid=700, fd=9)
    assert c is not None
    assert (c.driver, c.pdev, c.client_id) == ("xe", "0000:03:00.0", "3")
    assert c.regions["vram0"] == {"total": 23992 * 1024, "shared": 16 * MIB, "active": 0, "resident": 23992 * 1024}
    assert c.regions["gtt"]["total"] == 192 * 1024
    assert not any(r.startswith("cycles") for r in c.regions)  # drm-total-cycles-rcs is not memory
    assert c.device_bytes == 23992 * 1024  # vram0 total; gtt and system are not device memory


def test_fdinfo_i915_and_legacy_amdgpu_regions() -> None:
    i915 = parse_drm_fdinfo(read("fdinfo_i915_shape.txt"), pid=1, fd=3)
    assert i915 is not None and i915.driver == "i915" and i915.device_bytes == 2 * MIB  # local0 only
    amd = parse_drm_fdinfo(read("fdinfo_amdgpu_legacy.txt"), pid=1, fd=4)
    assert amd is not None and amd.device_bytes == 1024 * 1024  # drm-memory-vram (legacy alias)
    assert parse_drm_fdinfo("pos:\t0\nflags:\t02\nmnt_id:\t3\n", pid=1, fd=5) is None  # not a DRM file


def test_fdinfo_sizes() -> None:
    assert [fdinfo_size(v, "x") for v in ("0", "512", "3 KiB", "2 MiB", "1 GiB")] == [0, 512, 3072, 2 * MIB,
                                                                                    1024**3]
    with pytest.raises(ServiceError, match="expected '<uint> \\[KiB\\|MiB\\]'"):
        fdinfo_size("12 KB", "drm-total-vram0")
    with pytest.raises(ServiceError, match="drm-total-vram0"):
        parse_drm_fdinfo("drm-driver:\txe\ndrm-total-vram0:\tlots\n", pid=1, fd=1)


def _client(pid: int, fd: int, pdev: str | None, cid: str | None, vram: int) -> DrmClient:
    return DrmClient(pid, fd, "xe", pdev, cid, {"vram0": {"total": vram}})


def test_fdinfo_owners_dedupe_clients_and_pci_order() -> None:
    clients = [
        _client(100, 5, "0000:3a:00.0", "7", 4 * MIB),
        _client(100, 6, "0000:3a:00.0", "7", 4 * MIB),  # dup'ed fd: same client, counted once
        _client(101, 5, "0000:3a:00.0", "7", 4 * MIB),  # inherited by a child: an owner too
        _client(200, 3, "0000:29:00.0", "1", 0),         # holds the GPU with no device memory
    ]
    procs, devs = fdinfo_owners(clients, ["0000:29:00.0", "0000:3A:00.0", "0000:ca:00.0"], {100: "python3"})
    assert [(d.index, d.bdf, d.memory_used_bytes) for d in devs] == [
        (0, "0000:29:00.0", 0), (1, "0000:3a:00.0", 4 * MIB), (2, "0000:ca:00.0", 0)]
    assert procs == [GpuProcess(1, 100, "python3", 4 * MIB, "drm-fdinfo"),
                     GpuProcess(1, 101, None, 4 * MIB, "drm-fdinfo"),
                     GpuProcess(0, 200, None, 0, "drm-fdinfo")]
    # a client without drm-pdev cannot be placed: it counts on every device
    procs, _ = fdinfo_owners([_client(300, 1, None, None, 1)], ["0000:29:00.0", "0000:3a:00.0"])
    assert [(p.gpu, p.pid) for p in procs] == [(0, 300), (1, 300)]


# ------------------------------------------------------------------------------- device selection, env


@pytest.mark.parametrize(("mask", "expected"), [
    ("0,1,2,3", [0, 1, 2, 3]),
    ("0.0,1.0", [0, 1]),
    ("0.0,0.1, 2", [0, 2]),
    ("", []),
    ("3,1", [3, 1]),
    ("a.b", ["a.b"]),
])
def test_ze_affinity_mask(mask: str, expected: list[int | str]) -> None:
    assert parse_ze_affinity_mask(mask) == expected


def test_visible_devices_reads_ze_affinity_mask() -> None:
    assert visible_devices({"ZE_AFFINITY_MASK": "0.0,1.0"}) == [0, 1]
    assert visible_devices({"ZE_AFFINITY_MASK": "2,3"}) == [2, 3]
    assert visible_devices({"ZE_AFFINITY_MASK": "2", "CUDA_VISIBLE_DEVICES": "0"}) is None  # disagree: check all


def test_runtime_env_keeps_ccl_and_ze_prefixes() -> None:
    env = {"ZE_AFFINITY_MASK": "0,1", "CCL_ATL_TRANSPORT": "ofi", "PATH": "/bin", "HOME": "/root",
           "XZE_NOT": "1", "SYCL_CACHE_PERSISTENT": "1"}
    assert runtime_env(env) == {"CCL_ATL_TRANSPORT": "ofi", "SYCL_CACHE_PERSISTENT": "1", "ZE_AFFINITY_MASK": "0,1"}
    assert list(runtime_env(env)) == sorted(runtime_env(env))
