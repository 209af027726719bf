"""A service profile's ``launch``, ``identity`` and ``devices`` sections, and spec format 1's flat
spelling read into them (harness.inputs.spec.service_sections)."""

from __future__ import annotations

import re
from pathlib import Path

import pytest
import yaml

from harness.errors import SpecError
from harness.inputs.spec import ServiceProfile, load_profile, sectioned_dump, sectioned_key
from harness.inputs.spec.service_sections import FLAT_KEYS, SECTIONS

REPO = Path(__file__).resolve().parents[2]

# campaigns/profiles/sglang-tp8-native.yaml as spec format 1 wrote it (flat), less its comments
FLAT_NATIVE = """\
name: sglang-tp8-native
backend: sglang
model_path: /models/DeepSeek-V4-Flash
tp_size: 8
ep_size: 1
host: 127.0.0.1
port: 30021
mem_fraction_static: 0.96
max_total_tokens: 1048576
chunked_prefill_size: 32768
max_running_requests: 64
cuda_graph_bs: [1, 2, 4, 8, 16, 32, 64]
trust_remote_code: true
numa: interleave
extra_args: ["--prefill-max-requests", "16"]
patches: ../../model_patches/series.yaml
expect:
  tp_size: 8
  ep_size: 1
  chunked_prefill_size: 32768
  max_total_num_tokens: 1048576
  prefill_max_requests: 16
startup_timeout_s: 1800
"""


def test_the_flat_spelling_loads_as_the_shipped_sectioned_profile(tmp_path: Path) -> None:
    (tmp_path / "campaigns" / "profiles").mkdir(parents=True)
    flat = tmp_path / "campaigns" / "profiles" / "flat.yaml"
    flat.write_text(FLAT_NATIVE)
    old = load_profile(flat)
    assert (old.launch.port, old.identity.tp_size, old.launch.numa, old.launch.startup_timeout_s) == (
        30021, 8, "interleave", 1800.0)
    shipped = load_profile(REPO / "campaigns" / "profiles" / "sglang-tp8-native.yaml")
    assert old.model_dump(exclude={"launch": {"patches"}}) == shipped.model_dump(exclude={"launch": {"patches"}})
    assert old.launch.patches == str(tmp_path / "model_patches" / "series.yaml")


def test_sections_are_written_and_flat_keys_never() -> None:
    dumped = ServiceProfile.model_validate({"backend": "sim", "port": 30001, "gpus": [0], "expect": {"x": 1}}
                                           ).model_dump(mode="json")
    assert [k for k in dumped if k in FLAT_KEYS] == []
    assert (dumped["launch"]["port"], dumped["devices"]["gpus"], dumped["identity"]["expect"]) == (30001, [0], {"x": 1})
    assert list(dumped)[-3:] == ["launch", "identity", "devices"]


def test_every_flat_key_has_one_section() -> None:
    assert len(FLAT_KEYS) == sum(len(m.model_fields) for m in SECTIONS.values()) == 40
    assert not set(FLAT_KEYS) & set(ServiceProfile.model_fields)
    assert (FLAT_KEYS["port"], FLAT_KEYS["tp_size"], FLAT_KEYS["power_source"]) == (
        "launch.port", "identity.tp_size", "devices.power_source")


def test_a_key_given_both_ways_is_refused_naming_the_file(tmp_path: Path) -> None:
    path = tmp_path / "twice.yaml"
    path.write_text("backend: sim\nport: 30001\nlaunch: {port: 30002}\n")
    with pytest.raises(SpecError) as err:
        load_profile(path)
    assert str(path) in err.value.message
    assert "'port' is given twice, at the top level and in 'launch': keep 'launch.port'" in err.value.message


def test_flat_and_sectioned_keys_mix_into_one_section() -> None:
    p = ServiceProfile.model_validate({"backend": "sim", "port": 30001, "launch": {"host": "0.0.0.0"}})
    assert (p.launch.host, p.launch.port) == ("0.0.0.0", 30001)


def test_an_unknown_key_suggests_its_sectioned_spelling(tmp_path: Path) -> None:
    path = tmp_path / "typo.yaml"
    path.write_text("backend: sim\nprot: 30001\n")
    with pytest.raises(SpecError) as err:
        load_profile(path)
    assert f"{path}: invalid specification\n  prot: unknown key 'prot' (did you mean 'launch.port'?)" == (
        err.value.message)
    assert err.value.hint == "rename 'prot' to 'launch.port'"


def test_an_unknown_key_inside_a_section_names_its_path(tmp_path: Path) -> None:
    path = tmp_path / "inside.yaml"
    path.write_text("backend: sim\ndevices: {gpu: [0]}\n")
    with pytest.raises(SpecError) as err:
        load_profile(path)
    assert "devices.gpu: unknown key 'gpu' (did you mean 'gpus'?)" in err.value.message
    assert err.value.hint == "rename 'devices.gpu' to 'devices.gpus'"


def test_a_section_that_is_not_a_mapping_is_its_own_error() -> None:
    with pytest.raises(ValueError, match=r"launch\n.*valid dictionary"):
        ServiceProfile.model_validate({"backend": "sim", "port": 1, "launch": 5})


def test_backend_errors_name_the_sectioned_keys() -> None:
    with pytest.raises(ValueError, match=r"backend 'sglang' needs 'identity\.model_path'"):
        ServiceProfile.model_validate({"backend": "sglang"})
    with pytest.raises(ValueError, match=r"backend 'command' needs 'launch\.command'"):
        ServiceProfile.model_validate({"backend": "command", "protocol": "openai-chat"})


def test_checks_gpus_reads_the_devices_section() -> None:
    assert ServiceProfile.model_validate({"backend": "sim"}).checks_gpus is False
    assert ServiceProfile.model_validate({"backend": "sim", "check_gpu_owners": True}).checks_gpus is True
    assert ServiceProfile.model_validate({"backend": "attach", "url": "http://127.0.0.1:1"}).checks_gpus is True


def test_sectioned_key_and_dump() -> None:
    assert [sectioned_key(k) for k in ("env.NCCL_ALGO", "extra_args", "tp_size", "sim.step_factor", "name",
                                       "identity.mapped.libccl.so*", "launch.env")] == [
        "launch.env.NCCL_ALGO", "launch.extra_args", "identity.tp_size", "sim.step_factor", "name",
        "identity.mapped.libccl.so*", "launch.env"]
    assert sectioned_dump({"name": "s", "tp_size": 8, "env": {"A": "1"}}) == {
        "name": "s", "identity": {"tp_size": 8}, "launch": {"env": {"A": "1"}}}
    # a recorded profile with a key both ways (never written so) is read as recorded, not raised on
    assert sectioned_dump({"port": 1, "launch": {"port": 2}}) == {"port": 1, "launch": {"port": 2}}


def test_the_readme_profile_example_loads() -> None:
    text = (REPO / "README.md").read_text(encoding="utf-8")
    (block,) = [b for b in re.findall(r"```yaml\n(.*?)```", text, flags=re.DOTALL) if "launch:" in b]
    p = ServiceProfile.model_validate(yaml.safe_load(block))
    assert (p.launch.port, p.identity.tp_size, p.devices.gpu_owners_source) == (30021, 8, "nvidia-smi")
