"""What was served, recorded by real runs on the simulator (harness.service.identity.stack): the model identity
(headers, not weights), a declared source tree with its dirty state, every live process's mapped
libraries with hashes at start and end; a required library the workers do not map refuses the run
before measurement; an ABBA screen whose control and candidate serve different stacks in an
undeclared component is refused; ``dsv4h identity diff`` names the one component that differs."""

from __future__ import annotations

import hashlib
import json
import struct
import subprocess
from pathlib import Path
from typing import Any

import numpy as np
import pytest
import yaml
from typer.testing import CliRunner

from harness.cli import app
from harness.errors import SpecError
from harness.inputs.spec import AbbaSpec, load_spec, loaded_abba
from harness.run.abba import run_abba
from harness.run.campaign import run_campaign
from harness.run.events import AbbaWave

REPO = Path(__file__).resolve().parents[2]


def model_dir(d: Path) -> tuple[Path, str]:
    """A one-shard safetensors model; returns it and the SHA-256 of its header (length + JSON)."""
    d.mkdir()
    (d / "config.json").write_text(json.dumps({"model_type": "llama", "hidden_size": 4}))
    data = np.arange(8, dtype=np.float32).tobytes()
    header = json.dumps({"w": {"dtype": "F32", "shape": [2, 4], "data_offsets": [0, len(data)]}}).encode()
    head = struct.pack("<Q", len(header)) + header
    (d / "model.safetensors").write_bytes(head + data)
    return d, hashlib.sha256(head).hexdigest()


def git_tree(d: Path) -> Path:
    d.mkdir()
    def git(*args: str) -> None:
        subprocess.run(["git", "-C", str(d), *args], check=True, capture_output=True)
    git("init", "-q")
    git("config", "user.email", "t@example.invalid")
    git("config", "user.name", "t")
    (d / "kernel.py").write_text("x = 1\n")
    git("add", "kernel.py")
    git("commit", "-q", "-m", "one")
    (d / "kernel.py").write_text("x = 2\n")  # dirty
    return d


def service(tmp: Path, **over: Any) -> dict[str, Any]:
    return {"name": "sim-stack", "backend": "sim", "sim": {"profile": "fast", "time_scale": 3},
            "startup_timeout_s": 60} | over


def matrix(tmp: Path, name: str, svc: dict[str, Any]) -> Path:
    spec = tmp / f"{name}.yaml"
    spec.write_text(yaml.safe_dump({
        "name": name, "claim_class": "native-ar", "service": svc,
        "corpora": {"decode": str(REPO / "corpora" / "sim-code-512")},
        "decode": {"tiers": [2], "rounds": 3, "min_resident_seconds": 0.2, "warmup_waves": 1, "max_new_tokens": 32}}))
    return spec


@pytest.mark.slow
def test_a_run_records_the_stack_it_served(tmp_path: Path) -> None:
    mdir, header_sha = model_dir(tmp_path / "model")
    tree = git_tree(tmp_path / "tree")
    svc = service(tmp_path, model_path=str(mdir), source_trees=[{"name": "kernels", "path": str(tree)}],
                  require_libraries=[{"name": "libssl.so*"}])
    out = run_campaign(matrix(tmp_path, "stack", svc), tmp_path / "ws")
    assert out.status == "complete", out.error
    rec = json.loads((out.archive.path / "service.json").read_text())["services"][0]
    stack = rec["stack"]
    model = stack["model"]
    assert model["shard_headers"]["model.safetensors"]["header_sha256"] == header_sha
    assert model["weights"] is None and "not the weight bytes" in model["statement"]
    (st,) = stack["source_trees"]
    head = subprocess.run(["git", "-C", str(tree), "rev-parse", "HEAD"], check=True, capture_output=True,
                          text=True).stdout
    assert st["git"]["commit"] == head.strip() and st["git"]["dirty_paths"] == ["kernel.py"]
    for when in ("at_start", "at_end"):
        snap = stack["mapped"][when]
        libs = [lib for p in snap["pids"].values() for lib in p["libraries"]]
        ssl = [lib for lib in libs if Path(lib["path"]).name.startswith("libssl.so")]
        assert ssl and all(len(lib["sha256"]) == 64 for lib in ssl), when
    assert len(stack["runtime_identity"]["hash"]) == 64
    assert set(stack["runtime_identity"]["components"]) >= {"model", "source_trees", "mapped", "launch"}

    # the same service with one component changed: identity diff names exactly that one
    (tree / "kernel.py").write_text("x = 3\n")
    out2 = run_campaign(matrix(tmp_path, "stack2", svc), tmp_path / "ws")
    assert out2.status == "complete", out2.error
    res = CliRunner().invoke(app, ["identity", "diff", out.archive.archive_id, out2.archive.archive_id,
                                   "-w", str(tmp_path / "ws"), "--json"])
    assert res.exit_code == 0, res.output
    diff = json.loads(res.output)
    assert [d["component"] for d in diff["differences"]] == ["source_trees"], diff

    # the report's service identity section shows the stack: its identity, the model sentence, the tree
    rep = CliRunner().invoke(app, ["report", "build", "-w", str(tmp_path / "ws"), "--out", str(tmp_path / "r")])
    assert rep.exit_code == 0, rep.output
    html = (tmp_path / "r" / "report.html").read_text()
    assert stack["runtime_identity"]["hash"] in html and model["statement"] in html
    assert f"source tree kernels</th><td class=\"mono\">{head.strip()}; 1 dirty path(s)" in html


@pytest.mark.slow
def test_a_required_library_not_mapped_refuses_the_run_before_measurement(tmp_path: Path) -> None:
    svc = service(tmp_path, require_libraries=[{"name": "libnotthere.so*"}])
    out = run_campaign(matrix(tmp_path, "refused", svc), tmp_path / "ws")
    assert out.status == "failed" and out.error is not None
    assert "maps no file named libnotthere.so*" in out.error.message and "pid " in out.error.message
    assert not [r for r in out.archive.records() if r.phase == "measured"]


@pytest.mark.slow
def test_abba_refuses_a_stack_difference_nobody_declared(tmp_path: Path) -> None:
    tree = git_tree(tmp_path / "tree")
    prof = service(tmp_path, source_trees=[{"name": "kernels", "path": str(tree)}])

    def screen(declared: list[str]) -> AbbaSpec:
        return AbbaSpec.model_validate({
            "name": "t-stack", "control": prof | {"name": "ctrl"},
            "candidate": prof | {"name": "cand", "sim": prof["sim"] | {"step_factor": 0.9}},
            "workload": {"corpus": str(REPO / "corpora" / "sim-code-512"), "concurrency": 2, "waves_per_leg": 1,
                         "warmup_waves": 0, "max_new_tokens": 32, "declared_change": declared}})

    def edit_after_a1(event: object) -> None:  # the tree changes between the control and the candidate start
        if isinstance(event, AbbaWave) and event.leg == "A1":
            (tree / "kernel.py").write_text(f"x = {event.wave + 10}\n")

    out = run_abba(loaded_abba(screen(["sim.step_factor"]), REPO), tmp_path / "ws", reporter=edit_after_a1)
    assert out.status == "failed" and isinstance(out.error, SpecError)
    assert "undeclared components: source_trees.kernels" in out.error.message
    assert "leg B1 failed" in out.error.message
    ok = run_abba(loaded_abba(screen(["sim.step_factor", "identity.source_trees.kernels"]), REPO),
                  tmp_path / "ws2", reporter=edit_after_a1)
    assert ok.status == "complete", ok.error


def test_a_stack_requirement_is_checked_at_load(tmp_path: Path) -> None:
    svc = service(tmp_path, require_libraries=[{"name": "libx.so", "sha256": "not-a-hash"}])
    with pytest.raises(SpecError, match="sha256"):
        load_spec(matrix(tmp_path, "bad", svc))
