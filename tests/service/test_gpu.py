"""Pure GPU parsers: amd-smi JSON variants, nvidia-smi CSV (real H200 captures), NVML records."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from harness.errors import ServiceError
from harness.service.devices.gpu import (
    MIB,
    GpuDevice,
    GpuProcess,
    amd_bytes,
    format_bytes,
    gpu_keys,
    merge_devices,
    parse_amd_list_json,
    parse_amd_metric_mem_json,
    parse_amd_process_json,
    parse_injected_owners,
    parse_nvidia_apps_csv,
    parse_nvidia_gpus_csv,
    parse_nvml_json,
    parse_nvml_records,
)

FIX = Path(__file__).resolve().parent.parent / "fixtures" / "gpu"
AMD = FIX / "amd-smi"
H200 = FIX / "nvidia-h200"
H200_UUID = "GPU-8731a51e-f4a8-1ed8-dbb3-ea2c72f10b5f"


def amd(name: str) -> str:
    return (AMD / name).read_text()


# ------------------------------------------------------------------------------------------ amd-smi


def test_amd_process_idle_has_no_owners() -> None:
    assert parse_amd_process_json(amd("process_idle.json")) == []


def test_amd_process_busy_rocm61_one_row_per_gpu_and_pid() -> None:
    procs = parse_amd_process_json(amd("process_busy_rocm61.json"))
    assert procs == [
        GpuProcess(gpu=0, pid=41327, name="python3", vram_bytes=61748936704, source="amd-smi"),
        GpuProcess(gpu=0, pid=40012, name="rocm-bandwidth-test", vram_bytes=1073741824, source="amd-smi"),
        GpuProcess(gpu=1, pid=41327, name="python3", vram_bytes=61748936704, source="amd-smi"),
    ]


def test_amd_process_newer_build_nonroot_name_is_none_and_extra_keys_tolerated() -> None:
    procs = parse_amd_process_json(amd("process_busy_new_nonroot.json"))
    assert procs == [GpuProcess(gpu=0, pid=51880, name=None, vram_bytes=66056044544, source="amd-smi")]


def test_amd_process_general_compact_falls_back_to_mem_usage() -> None:
    procs = parse_amd_process_json(amd("process_general_compact.json"))
    assert procs == [GpuProcess(gpu=3, pid=7741, name="sglang::scheduler", vram_bytes=63350767616,
                                source="amd-smi")]


def test_amd_process_defensive_wrapper_strings_and_units() -> None:
    procs = parse_amd_process_json(amd("process_gpu_data_wrapper.json"))
    assert procs == [GpuProcess(gpu=2, pid=9120, name="llama-server", vram_bytes=round(2.5 * 1024**3),
                                source="amd-smi")]


def test_amd_process_single_gpu_object_and_duplicate_entries_collapse() -> None:
    entry = {"process_info": {"name": "x", "pid": 5, "memory_usage": {"vram_mem": 10}}}
    text = json.dumps({"gpu": 0, "process_list": [entry, entry]})
    assert parse_amd_process_json(text) == [GpuProcess(0, 5, "x", 10, "amd-smi")]


@pytest.mark.parametrize(("text", "needle"), [
    ("", "empty output"),
    ("not json", "not JSON"),
    ('"hello"', "top-level JSON is str"),
    ('{"foo": 1}', "keys ['foo']"),
    ('[{"process_list": []}]', "no 'gpu' key"),
    ('[{"gpu": 0}]', "no 'process_list'"),
    ('[{"gpu": 0, "process_list": "something else"}]', "expected a list"),
    ('[{"gpu": 0, "process_list": [{"process_info": {"name": "x"}}]}]', "no 'pid'"),
    ('[{"gpu": 0, "process_list": [{"process_info": {"pid": "abc"}}]}]', "expected an integer"),
    ('[{"gpu": 0, "process_list": [{"process_info": "Permission denied"}]}]', "'process_info' is"),
    ('[{"gpu": 0, "process_list": [{"process_info": {"pid": 1, "mem_usage": {"value": 5, "unit": "ns"}}}]}]',
     "unit 'ns'"),
    ('[{"gpu": 0, "process_list": [7]}]', "a process entry is 7"),
])
def test_amd_process_unparseable_raises_service_error_naming_tool(text: str, needle: str) -> None:
    with pytest.raises(ServiceError) as ei:
        parse_amd_process_json(text)
    assert "amd-smi process --json" in str(ei.value)
    assert needle in str(ei.value)
    assert ei.value.hint


def test_amd_bytes_variants() -> None:
    kw: dict[str, Any] = {"tool": "t", "what": "w"}
    assert amd_bytes({"value": 3, "unit": "B"}, default_unit="MB", **kw) == 3
    assert amd_bytes({"value": 3, "unit": "MB"}, default_unit="B", **kw) == 3 * MIB
    assert amd_bytes({"value": "4", "unit": "KB"}, default_unit="B", **kw) == 4096
    assert amd_bytes({"value": 2}, default_unit="MB", **kw) == 2 * MIB
    assert amd_bytes(7, default_unit="B", **kw) == 7
    assert amd_bytes(7, default_unit="MB", **kw) == 7 * MIB
    assert amd_bytes("1.5 GiB", default_unit="B", **kw) == 3 * 512 * MIB
    assert amd_bytes("12", default_unit="B", **kw) == 12
    assert amd_bytes("N/A", default_unit="B", **kw) is None
    assert amd_bytes({"value": "N/A", "unit": "MB"}, default_unit="B", **kw) is None
    assert amd_bytes(None, default_unit="B", **kw) is None
    for bad in (True, "lots", {"unit": "B"}, [1], -1, {"value": 1, "unit": "W"}):
        with pytest.raises(ServiceError):
            amd_bytes(bad, default_unit="B", **kw)


def test_amd_metric_mem_bare_list_mb_is_mib() -> None:
    devs = parse_amd_metric_mem_json(amd("metric_mem_rocm61.json"))
    assert devs == [
        GpuDevice(index=0, memory_used_bytes=58891 * MIB, memory_total_bytes=65520 * MIB),
        GpuDevice(index=1, memory_used_bytes=10 * MIB, memory_total_bytes=65520 * MIB),
    ]


def test_amd_metric_mem_gpu_data_wrapper_and_na() -> None:
    devs = parse_amd_metric_mem_json(amd("metric_mem_gpu_data.json"))
    assert devs == [
        GpuDevice(index=0, memory_used_bytes=62904 * MIB, memory_total_bytes=65520 * MIB),
        GpuDevice(index=1, memory_used_bytes=10 * MIB, memory_total_bytes=65520 * MIB),  # total - free
        GpuDevice(index=2),
    ]


def test_amd_metric_mem_bad_shape() -> None:
    with pytest.raises(ServiceError, match="amd-smi metric --mem-usage --json"):
        parse_amd_metric_mem_json('[{"gpu": 0, "mem_usage": 12}]')


def test_amd_list_and_merge() -> None:
    lst = parse_amd_list_json(amd("list.json"))
    assert lst[0] == GpuDevice(index=0, uuid="3dff740f-0000-1000-8024-b4a2e6f1d0c9", bdf="0000:c1:00.0")
    merged = merge_devices(lst, parse_amd_metric_mem_json(amd("metric_mem_rocm61.json")))
    assert merged[1] == GpuDevice(index=1, uuid="8aff740f-0000-1000-80e3-21c9a7b95d04", bdf="0000:c6:00.0",
                                  memory_used_bytes=10 * MIB, memory_total_bytes=65520 * MIB)
    assert parse_amd_list_json('{"gpu_data": [{"gpu": 4, "uuid": "N/A"}]}') == [GpuDevice(index=4)]


# -------------------------------------------------------------------------------------- nvidia-smi


def test_nvidia_real_captures() -> None:
    assert parse_nvidia_apps_csv((H200 / "apps_idle.csv").read_text()) == []
    busy = [GpuProcess(gpu=H200_UUID, pid=525, name="python3", vram_bytes=3472 * MIB, source="nvidia-smi")]
    assert parse_nvidia_apps_csv((H200 / "apps_busy.csv").read_text()) == busy
    assert parse_nvidia_apps_csv((H200 / "apps_busy_header.csv").read_text()) == busy
    assert parse_nvidia_gpus_csv((H200 / "gpus_busy.csv").read_text()) == [
        GpuDevice(index=0, uuid=H200_UUID, memory_used_bytes=3481 * MIB, memory_total_bytes=143771 * MIB)]


def test_nvidia_apps_commas_empty_names_na_memory() -> None:
    text = ("GPU-a, 1, my, weird, name, 10\n"
            "GPU-a, 2, , 20\n"
            "GPU-b, 3, N/A, [N/A]\r\n"
            "\n")
    assert parse_nvidia_apps_csv(text) == [
        GpuProcess("GPU-a", 1, "my, weird, name", 10 * MIB, "nvidia-smi"),
        GpuProcess("GPU-a", 2, None, 20 * MIB, "nvidia-smi"),
        GpuProcess("GPU-b", 3, None, None, "nvidia-smi"),
    ]


@pytest.mark.parametrize("text", ["GPU-a, 1, 10", "GPU-a, x, n, 10", "GPU-a, 1, n, lots", "garbage"])
def test_nvidia_apps_malformed(text: str) -> None:
    with pytest.raises(ServiceError, match="nvidia-smi --query-compute-apps"):
        parse_nvidia_apps_csv(text)


def test_nvidia_gpus_header_na_and_bus_id() -> None:
    text = ("index, uuid, memory.used [MiB], memory.total [MiB]\n"
            "0, GPU-a, [N/A], 81559\n1, GPU-b, 5, 81559, 00000000:18:00.0\n")
    assert parse_nvidia_gpus_csv(text) == [
        GpuDevice(0, "GPU-a", None, None, 81559 * MIB),
        GpuDevice(1, "GPU-b", "00000000:18:00.0", 5 * MIB, 81559 * MIB),
    ]
    with pytest.raises(ServiceError, match="4 fields"):
        parse_nvidia_gpus_csv("0, GPU-a, 5\n")
    with pytest.raises(ServiceError, match="not an integer"):
        parse_nvidia_gpus_csv("x, GPU-a, 5, 6\n")


_NAMES = st.text(alphabet=st.characters(exclude_characters="\n\r", exclude_categories=["Cs"]), max_size=40)


def _expected_name(name: str) -> str | None:
    return None if name.strip().lower() in ("", "n/a", "[n/a]", "[not supported]", "not supported") else name


@settings(max_examples=300, deadline=None)
@given(rows=st.lists(st.tuples(st.uuids(), st.integers(1, 2**22), _NAMES, st.integers(0, 200_000)),
                     max_size=6))
def test_nvidia_apps_roundtrip_arbitrary_names(rows: list[tuple[Any, int, str, int]]) -> None:
    text = "".join(f"GPU-{u}, {pid}, {name}, {mib}\n" for u, pid, name, mib in rows)
    assert parse_nvidia_apps_csv(text) == [
        GpuProcess(f"GPU-{u}", pid, _expected_name(name), mib * MIB, "nvidia-smi") for u, pid, name, mib in rows]


_JSON_LEAF = st.one_of(st.none(), st.booleans(), st.integers(), st.text(max_size=8))
_JSON = st.recursive(_JSON_LEAF, lambda inner: st.one_of(st.lists(inner, max_size=3),
                                                         st.dictionaries(st.text(max_size=6), inner, max_size=3)),
                     max_leaves=4)
_KNOWN = {"name", "pid", "memory_usage", "mem_usage", "process_name", "process_info", "gpu", "process_list"}
_EXTRA = st.dictionaries(st.text(min_size=1, max_size=12).filter(lambda k: k not in _KNOWN), _JSON, max_size=4)


@settings(max_examples=80, deadline=None)
@given(gpus=st.lists(st.tuples(st.integers(0, 15), st.lists(st.tuples(
    st.integers(1, 2**22), st.integers(0, 2**40), _EXTRA, st.sampled_from(["python3", "N/A", "x y"])),
    max_size=3), _EXTRA, _EXTRA), max_size=4, unique_by=lambda g: g[0]), wrap=st.booleans())
def test_amd_process_random_extra_keys_parse(gpus: list[Any], wrap: bool) -> None:
    doc: list[dict[str, Any]] = []
    expected = {}
    for gpu, procs, gpu_extra, entry_extra in gpus:
        plist: list[Any] = []
        for pid, vram, extra, name in procs:
            info = {**extra, "name": name, "pid": pid,
                    "memory_usage": {"gtt_mem": {"value": 0, "unit": "B"}, "cpu_mem": {"value": 0, "unit": "B"},
                                     "vram_mem": {"value": vram, "unit": "B"}},
                    "mem_usage": {"value": vram, "unit": "B"}}
            plist.append({**entry_extra, "process_info": info})
            expected[(gpu, pid)] = GpuProcess(gpu, pid, None if name == "N/A" else name, vram, "amd-smi")
        doc.append({**gpu_extra, "gpu": gpu,
                    "process_list": plist or [{"process_info": "No running processes detected"}]})
    text = json.dumps({"gpu_data": doc} if wrap else doc)
    assert parse_amd_process_json(text) == list(expected.values())


# ---------------------------------------------------------------------------------------------- NVML


def test_nvml_real_capture() -> None:
    procs, devs = parse_nvml_json((H200 / "nvml_busy.json").read_text())
    assert procs == [GpuProcess(gpu=0, pid=525, name=None, vram_bytes=3640655872, source="nvml")]
    assert procs[0].vram_bytes == 3472 * MIB
    assert devs == [GpuDevice(index=0, uuid=H200_UUID, memory_used_bytes=4294836224,
                              memory_total_bytes=150754820096)]


def test_nvml_records_sentinel_none_and_errors() -> None:
    procs, _ = parse_nvml_records([{"index": 1, "procs": [{"pid": 9, "usedGpuMemory": 2**64 - 1},
                                                          {"pid": 10, "usedGpuMemory": None, "name": "w"}]}])
    assert [(p.gpu, p.pid, p.vram_bytes, p.name) for p in procs] == [(1, 9, None, None), (1, 10, None, "w")]
    for bad in ("x", [{"uuid": "u"}], [{"index": 0, "procs": "none"}], [{"index": 0, "procs": [{}]}]):
        with pytest.raises(ServiceError, match="NVML"):
            parse_nvml_records(bad)


# ---------------------------------------------------------------------------------- injected, keys


def test_injected_owners() -> None:
    text = json.dumps([{"gpu": 0, "pid": 11, "name": "decoy", "vram_bytes": 5},
                       {"gpu": "1", "pid": "12"}, {"gpu": "GPU-abc", "pid": 13, "name": "N/A"}])
    assert parse_injected_owners(text, "f.json") == [
        GpuProcess(0, 11, "decoy", 5, "injected"), GpuProcess(1, 12, None, None, "injected"),
        GpuProcess("GPU-abc", 13, None, None, "injected")]
    for bad in ('{"gpu": 0}', '[{"pid": 1}]', '[{"gpu": true, "pid": 1}]', '[{"gpu": "", "pid": 1}]'):
        with pytest.raises(ServiceError, match=r"injected GPU owners file f\.json"):
            parse_injected_owners(bad, "f.json")


def test_gpu_keys_relate_index_and_uuid() -> None:
    devs = [GpuDevice(0, "GPU-AAA"), GpuDevice(1, "GPU-bbb")]
    assert gpu_keys("GPU-aaa", devs) == {"0", "gpu-aaa"}
    assert gpu_keys(1, devs) == {"1", "gpu-bbb"}
    assert gpu_keys(" 07 ", []) == {"7"}


def test_format_bytes() -> None:
    assert format_bytes(None) == "?"
    assert format_bytes(512) == "512 B"
    assert format_bytes(3472 * MIB) == "3.39 GiB"
    assert format_bytes(2 * MIB) == "2.00 MiB"
