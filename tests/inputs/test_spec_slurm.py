"""The spec's slurm: section (harness.inputs.spec.slurm): valid values load, each wrong one names the file and field."""

from __future__ import annotations

from pathlib import Path

import pytest

from harness.errors import SpecError
from harness.inputs.spec import SlurmSpec, load_spec

REPO = Path(__file__).resolve().parents[2]
BASE = f"""name: s
claim_class: native-ar
service: {{backend: sim, sim: {{profile: fast}}}}
corpora: {{decode: {REPO / 'corpora' / 'sim-code-512'}}}
decode: {{tiers: [1], rounds: 1, min_resident_seconds: 0.1, max_new_tokens: 16}}
"""


def _load(tmp_path: Path, section: str) -> SlurmSpec | None:
    p = tmp_path / "spec.yaml"
    p.write_text(BASE + section)
    return load_spec(p).spec.slurm


def test_absent_and_full(tmp_path: Path) -> None:
    assert _load(tmp_path, "") is None
    s = _load(tmp_path, 'slurm: {partition: gpu, nodes: 2, gpus_per_node: 8, time_limit: "1-02:30:00", account: perf,'
                        ' cpus_per_task: 16, extra_sbatch: ["--qos=high", "--exclusive", "--constraint=h200"],'
                        ' workspace_root: /scratch/dsv4h}\n')
    assert s == SlurmSpec(partition="gpu", nodes=2, gpus_per_node=8, time_limit="1-02:30:00", account="perf",
                          cpus_per_task=16, extra_sbatch=["--qos=high", "--exclusive", "--constraint=h200"],
                          workspace_root="/scratch/dsv4h")
    assert (s.stop_grace_s, s.job_name) == (60, None)


@pytest.mark.parametrize("limit", ["30", "30:00", "01:30:00", "2-0", "2-01:30", "2-01:30:00"])
def test_slurm_time_forms(tmp_path: Path, limit: str) -> None:
    s = _load(tmp_path, f'slurm: {{time_limit: "{limit}"}}\n')
    assert s is not None and s.time_limit == limit


@pytest.mark.parametrize(("section", "field", "words"), [
    ('slurm: {time_limit: "90 minutes"}', "slurm.time_limit", "not a Slurm time"),
    ("slurm: {gpus: 8}", "slurm.gpus", "unknown key"),
    ("slurm: {nodes: 0}", "slurm.nodes", "greater than or equal to 1"),
    ("slurm: {partition: 'gpu; rm -rf /'}", "slurm.partition", "pattern"),
    ('slurm: {extra_sbatch: ["#SBATCH --qos=high"]}', "slurm.extra_sbatch", "give the option alone"),
    ('slurm: {extra_sbatch: ["--output=/tmp/x"]}', "slurm.extra_sbatch", "sets --output"),
    ('slurm: {extra_sbatch: ["--comment=$(id)"]}', "slurm.extra_sbatch", "not one sbatch option"),
    ('slurm: {extra_sbatch: ["--qos=a\\nrm"]}', "slurm.extra_sbatch", "not one sbatch option"),
    ("slurm: {workspace_root: scratch/ws}", "slurm.workspace_root", "absolute path"),
    ("slurm: {stop_grace_s: -1}", "slurm.stop_grace_s", "greater than or equal to 0"),
])
def test_wrong_values_name_file_and_field(tmp_path: Path, section: str, field: str, words: str) -> None:
    with pytest.raises(SpecError) as info:
        _load(tmp_path, section + "\n")
    text = str(info.value) + (info.value.hint or "")
    assert "spec.yaml" in text
    assert field in text
    assert words in text
