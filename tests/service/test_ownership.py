"""Pure ownership classification: owned vs unrelated, GPU matching, PID reuse, refusal text."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from harness.errors import OwnershipError, ServiceError
from harness.service.devices.gpu import (
    GpuDevice,
    GpuProcess,
    OwnersSnapshot,
    merge_devices,
    parse_nvidia_apps_csv,
    parse_nvidia_gpus_csv,
    parse_nvml_json,
)
from harness.service.devices.ownership import (
    check_gpus_free,
    classify_owners,
    gpu_label,
    is_owned,
    on_gpus,
    refusal,
    visible_devices,
)

DEVS = (GpuDevice(0, "GPU-aaa"), GpuDevice(1, "GPU-bbb"))


def snap(*procs: GpuProcess, devices: tuple[GpuDevice, ...] = DEVS) -> OwnersSnapshot:
    return OwnersSnapshot(source="nvidia-smi", processes=procs, devices=devices)


SERVER = GpuProcess("GPU-aaa", 100, "python3", 60 << 30, "nvidia-smi")
WORKER = GpuProcess("GPU-bbb", 101, "python3", 60 << 30, "nvidia-smi")
DECOY = GpuProcess("GPU-bbb", 555, "python3", 8 << 30, "nvidia-smi")
TREE = [(100, 1000.0), (101, 1000.5)]


def test_classify_owned_and_unrelated() -> None:
    out = classify_owners(snap(SERVER, WORKER, DECOY), None, TREE)
    assert [(c.process.pid, c.verdict, c.on_service_gpu) for c in out] == [
        (100, "owned", True), (101, "owned", True), (555, "unrelated", True)]
    assert out[2].to_dict()["verdict"] == "unrelated"


def test_check_gpus_free_by_index_or_uuid() -> None:
    s = snap(SERVER, WORKER, DECOY)
    assert check_gpus_free(s, None, TREE) == [DECOY]
    assert check_gpus_free(s, [1], TREE) == [DECOY]
    assert check_gpus_free(s, ["gpu-BBB"], TREE) == [DECOY]
    assert check_gpus_free(s, [0], TREE) == []  # the decoy sits on GPU 1 only
    assert check_gpus_free(s, [0]) == [SERVER]  # before launch nothing is owned


def test_unplaceable_owner_counts_as_on_service_gpus() -> None:
    # UUID owner, index-only GPUs and no device list: cannot be placed, so it is not ignored
    assert on_gpus(DECOY, [0], ())
    # comparable keys that differ are a real "elsewhere"
    assert not on_gpus(GpuProcess(3, 1, None, None, "amd-smi"), [0, 1], ())
    assert not on_gpus(DECOY, ["GPU-ccc"], ())
    assert on_gpus(GpuProcess("1", 1, None, None, "injected"), [1], ())


def test_reused_pid_is_not_owned() -> None:
    s = snap(SERVER)
    assert classify_owners(s, None, TREE, current={100: 1000.01})[0].verdict == "owned"
    assert classify_owners(s, None, TREE, current={100: 2000.0})[0].verdict == "unrelated"
    assert is_owned(100, {100: 1000.0}, {})  # no current birth known: the tree alone decides
    assert not is_owned(7, {100: 1000.0})


def test_refusal_names_pid_name_gpu_memory_and_hint() -> None:
    err = refusal([DECOY, GpuProcess("GPU-aaa", 555, "python3", 1 << 30, "nvidia-smi"),
                   GpuProcess(0, 777, None, None, "amd-smi")], gpus=[0, 1])
    assert isinstance(err, OwnershipError) and isinstance(err, ServiceError)
    assert err.exit_code == 4
    assert "2 unrelated process(es) hold memory on GPU(s) 0, 1" in err.message
    assert "PID 555 (python3) holds GPU-bbb (8.00 GiB), GPU-aaa (1.00 GiB) [via nvidia-smi]" in err.message
    assert "PID 777 (name hidden (N/A)) holds GPU 0 (?)" in err.message
    assert err.hint is not None
    assert "kill 555 777" in err.hint
    assert "CUDA_VISIBLE_DEVICES" in err.hint and "HIP_VISIBLE_DEVICES" in err.hint
    assert "every GPU" in refusal([DECOY]).message
    assert "holds GPU 1 (GPU-bbb) (8.00 GiB)" in refusal([DECOY], devices=DEVS).message
    assert gpu_label(0, DEVS) == "GPU 0 (GPU-aaa)" and gpu_label(5, DEVS) == "GPU 5"


@pytest.mark.parametrize(("env", "expected"), [
    ({}, None),
    ({"CUDA_VISIBLE_DEVICES": "0,1"}, [0, 1]),
    ({"HIP_VISIBLE_DEVICES": " 2 , GPU-x "}, [2, "GPU-x"]),
    ({"CUDA_VISIBLE_DEVICES": "3", "HIP_VISIBLE_DEVICES": "3"}, [3]),
    ({"CUDA_VISIBLE_DEVICES": "3", "ROCR_VISIBLE_DEVICES": "0,1"}, None),  # nested masks: check all
    ({"CUDA_VISIBLE_DEVICES": ""}, []),
])
def test_visible_devices(env: dict[str, str], expected: list[int | str] | None) -> None:
    assert visible_devices(env) == expected


REAL = Path(__file__).resolve().parent.parent / "fixtures" / "gpu" / "nvidia-h200-owners"


@pytest.mark.parametrize("tool", ["nvidia-smi", "nvml"])
def test_real_h200_run_decoy_unrelated_owned_child_owned(tool: str) -> None:
    if tool == "nvidia-smi":
        procs = parse_nvidia_apps_csv((REAL / "apps_two_owners.csv").read_text())
        devs = parse_nvidia_gpus_csv((REAL / "gpus_two_owners.csv").read_text())
        meta = json.loads((REAL / "apps_two_owners.tree.json").read_text())
    else:
        procs, devs = parse_nvml_json((REAL / "nvml_two_owners.json").read_text())
        meta = json.loads((REAL / "nvml_two_owners.tree.json").read_text())
    s = OwnersSnapshot(source=tool, processes=tuple(procs), devices=merge_devices(devs))
    tree = [(int(p), float(ct)) for p, ct in meta["owned_tree"]]
    verdicts = {c.process.pid: c.verdict for c in classify_owners(s, [0], tree)}
    assert verdicts == {meta["decoy_pid"]: "unrelated", tree[1][0]: "owned"}
    assert [p.pid for p in check_gpus_free(s, [0], tree)] == [meta["decoy_pid"]]
    assert [p.pid for p in check_gpus_free(s, ["GPU-A786610E-1073-54e3-9714-716062e9f8ae"], tree)] == [
        meta["decoy_pid"]]
    assert check_gpus_free(s, [1], tree) == []
