"""Known answers for the pure Slurm command building of multi-node services (harness.service.launch.slurm)."""

from __future__ import annotations

import pytest

from harness.errors import ServiceError, SpecError
from harness.inputs.spec import ServiceProfile
from harness.service.launch.command import sim_command
from harness.service.launch.slurm import (
    Placement,
    RankRecord,
    check_records,
    cpus_per_task,
    dist_init_addr,
    fill_rank,
    hostnames_argv,
    node_argv,
    parse_hostnames,
    placement,
    rank_template,
    ranks_srun_argv,
    scancel_argv,
    tasks_per_node,
    wrapper_argv,
)


def test_ranks_srun_one_task_per_node() -> None:
    where = placement(2, ["gpu-a", "gpu-b", "gpu-c"])
    assert where == Placement(("gpu-a", "gpu-b"), 2, 1)
    task = wrapper_argv("/py", "/ws/multinode/x", ["/py", "-m", "sglang.launch_server", "--node-rank", "{node_rank}"])
    assert ranks_srun_argv("4711", where, task) == [
        "srun", "--jobid=4711", "--nodes=2", "--ntasks=2", "--ntasks-per-node=1", "--nodelist=gpu-a,gpu-b",
        "--overlap", "--kill-on-bad-exit=1", "--label", "--unbuffered",
        "/py", "-m", "harness.service.launch.slurm_rank", "--record-dir", "/ws/multinode/x", "--",
        "/py", "-m", "sglang.launch_server", "--node-rank", "{node_rank}"]


def test_two_ranks_on_one_node_is_the_test_override() -> None:
    assert tasks_per_node({}) == 1
    assert tasks_per_node({"DSV4H_SLURM_TASKS_PER_NODE": "2"}) == 2
    where = placement(2, ["vm"], 2)
    assert where == Placement(("vm",), 2, 2)
    assert [where.node_of(r) for r in (0, 1)] == ["vm", "vm"]
    assert ranks_srun_argv("17", where, ["t"])[:6] == [
        "srun", "--jobid=17", "--nodes=1", "--ntasks=2", "--ntasks-per-node=2", "--nodelist=vm"]
    assert cpus_per_task({"SLURM_CPUS_ON_NODE": "2"}, 2) == 1
    assert ranks_srun_argv("17", where, ["t"], cpus_per_task=1)[:7] == [
        "srun", "--jobid=17", "--nodes=1", "--ntasks=2", "--ntasks-per-node=2", "--cpus-per-task=1", "--nodelist=vm"]
    with pytest.raises(SpecError, match="positive integer"):
        tasks_per_node({"DSV4H_SLURM_TASKS_PER_NODE": "0"})
    with pytest.raises(SpecError, match="not a multiple"):
        placement(3, ["vm", "vm2"], 2)


def test_cpus_per_task_splits_the_nodes_cpus_over_its_ranks() -> None:
    assert cpus_per_task({"SLURM_CPUS_ON_NODE": "96"}, 1) == 96
    assert cpus_per_task({"SLURM_CPUS_ON_NODE": "3"}, 2) == 1
    assert cpus_per_task({"SLURM_CPUS_ON_NODE": "1"}, 4) == 1
    assert cpus_per_task({"SLURM_JOB_CPUS_PER_NODE": "2"}, 2) == 1
    assert cpus_per_task({"SLURM_JOB_CPUS_PER_NODE": "64(x2),32"}, 1) == 32
    assert cpus_per_task({}, 1) is None
    assert cpus_per_task({"SLURM_CPUS_ON_NODE": "x"}, 1) is None


def test_an_allocation_too_small_is_refused() -> None:
    with pytest.raises(ServiceError, match="spans 2 node\\(s\\) but the Slurm allocation has 1 \\(vm\\)"):
        placement(2, ["vm"])


def test_probe_scancel_and_hostnames_argv() -> None:
    assert node_argv("17", "gpu-b", ["nvidia-smi", "-L"]) == [
        "srun", "--jobid=17", "--nodes=1", "--ntasks=1", "-w", "gpu-b", "--overlap", "nvidia-smi", "-L"]
    assert scancel_argv("17", "3") == ["scancel", "17.3"]
    assert hostnames_argv("gpu-[a-b]") == ["scontrol", "show", "hostnames", "gpu-[a-b]"]
    assert parse_hostnames("gpu-a\ngpu-b\n\n") == ["gpu-a", "gpu-b"]
    assert dist_init_addr(None, "gpu-a", 25000) == "gpu-a:25000"
    assert dist_init_addr("10.0.0.1:29500", "gpu-a", 25000) == "10.0.0.1:29500"


def test_rank_template_of_a_simulator_profile() -> None:
    prof = ServiceProfile(name="two", backend="sim", launch={"nnodes": 2, "dist_init_addr": "127.0.0.1:25000"},
                          sim={"profile": "fast"})
    argv = list(sim_command(prof, port=0, python="/py", node_rank=0).argv)
    assert argv[-6:] == ["--nnodes", "2", "--node-rank", "0", "--dist-init-addr", "127.0.0.1:25000"]
    template = rank_template(argv)
    assert template[-6:] == ["--nnodes", "2", "--node-rank", "{node_rank}", "--dist-init-addr", "127.0.0.1:25000"]
    assert fill_rank(template, 1)[-6:] == ["--nnodes", "2", "--node-rank", "1", "--dist-init-addr", "127.0.0.1:25000"]
    with pytest.raises(ServiceError, match="no --node-rank"):
        rank_template(["/py", "-m", "x"])
    with pytest.raises(SpecError, match=r"node rank 2 is not one of 0\.\.1"):
        sim_command(prof, node_rank=2)


def _rec(rank: int, job: str = "17", step: str = "0") -> RankRecord:
    return RankRecord(rank=rank, nnodes=2, job_id=job, step_id=step, node="vm", pid=100 + rank, create_time=1.5,
                      argv=["x"])


def test_records_name_every_rank_of_one_step() -> None:
    assert check_records([_rec(1), _rec(0)], 2, "17") == "0"
    with pytest.raises(ServiceError, match=r"rank records \[0\] are not ranks 0..1"):
        check_records([_rec(0)], 2, "17")
    with pytest.raises(ServiceError, match="not one step of job 17"):
        check_records([_rec(0), _rec(1, step="1")], 2, "17")
    with pytest.raises(ServiceError, match="not one step of job 17"):
        check_records([_rec(0, job="18"), _rec(1, job="18")], 2, "17")
