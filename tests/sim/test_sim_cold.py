"""The simulator's cold-shape compile cost (harness.sim.cold): shapes, costs and the profile key."""

from __future__ import annotations

from pathlib import Path

import pytest
import yaml

from harness.errors import SpecError
from harness.sim import load_profile_file
from harness.sim.cold import ColdShapes, ColdShapeSpec, batch_tier, length_bucket
from harness.sim.profiles import PROFILE_DIR


def test_buckets_and_tiers() -> None:
    assert [length_bucket((1024, 4096), n) for n in (1, 1024, 1025, 4096, 4097)] == [0, 0, 1, 1, 2]
    assert length_bucket((), 10**6) == 0
    assert [batch_tier((1, 2, 4, 8), n) for n in (1, 3, 8, 9)] == [1, 4, 8, 9]
    assert batch_tier((), 5) == 5


def test_each_new_shape_costs_compile_s_once() -> None:
    shapes = ColdShapes(ColdShapeSpec(compile_s=0.25, input_len_edges=(1024,), batch_tiers=(1, 2, 4)))
    assert shapes.forward_cost_s([512]) == 0.25  # (0, 1)
    assert shapes.forward_cost_s([600]) == 0.0  # same shape
    assert shapes.forward_cost_s([512, 2000, 700]) == 0.5  # (0, 4) and (1, 4): two new shapes
    assert shapes.forward_cost_s([100, 200, 300, 400]) == 0.0  # (0, 4) again
    assert shapes.forward_cost_s([]) == 0.0
    assert shapes.compiles == 3 and shapes.seen == {(0, 1), (0, 4), (1, 4)}


def _profile(tmp_path: Path, cold: object) -> Path:
    prof = yaml.safe_load((PROFILE_DIR / "fast.yaml").read_text()) | {"name": "fast-cold", "cold_shape": cold}
    path = tmp_path / "fast-cold.yaml"
    path.write_text(yaml.safe_dump(prof))
    return path


def test_profile_key_loads_and_errors_name_file_and_field(tmp_path: Path) -> None:
    good = load_profile_file(_profile(tmp_path, {"compile_s": 0.5, "batch_tiers": [1, 2, 4]}))
    assert good.cold_shape == ColdShapeSpec(compile_s=0.5, batch_tiers=(1, 2, 4))
    assert load_profile_file(PROFILE_DIR / "fast.yaml").cold_shape is None
    for bad, field in (({"compile_s": 0}, "compile_s"), ({"compile_s": 1, "batch_tiers": [4, 2]}, "batch_tiers"),
                       ({"compile_s": 1, "input_len_edges": [0]}, "input_len_edges"),
                       ({"compile_s": 1, "compile": 2}, "compile")):
        path = _profile(tmp_path, bad)
        with pytest.raises(SpecError, match=field) as err:
            load_profile_file(path)
        assert "fast-cold.yaml" in str(err.value) + str(err.value.hint or ""), err.value
