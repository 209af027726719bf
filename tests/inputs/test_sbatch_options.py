"""extra_sbatch entries resolved as sbatch resolves them (harness.inputs.spec.sbatch_options)."""

from __future__ import annotations

import pytest

from harness.inputs.spec import SlurmSpec
from harness.inputs.spec.sbatch_options import SBATCH_LONG, option_problem, resolve


def test_resolve_is_getopt_long() -> None:
    assert resolve("out") == ("output",)
    assert resolve("gpus") == ("gpus",)  # an exact name wins over the longer options it begins
    assert resolve("node") == ("nodefile", "nodelist", "nodes")
    assert resolve("no-such-option") == ()
    assert {"output", "error", "signal", "wrap", "export"} <= SBATCH_LONG


@pytest.mark.parametrize(("entry", "words"), [
    ("--out=/tmp/x", "--out is sbatch's --output"),
    ("--outp /tmp/x", "--outp is sbatch's --output"),
    ("--err=/tmp/x", "--err is sbatch's --error"),
    ("--sig=B:USR1@1", "--sig is sbatch's --signal"),
    ("--wra=id", "--wra is sbatch's --wrap"),
    ("--parsable", "--parsable is sbatch's --parsable"),
    ("--nodes=4", "use slurm.nodes"),
    ("--node=4", "ambiguous"),
    ("--part=debug", "use slurm.partition"),
    ("--ti=5", "ambiguous (sbatch: --time, --time-min)"),
    ("--accou=perf", "use slurm.account"),
    ("--job=x", "use slurm.job_name"),
    ("--gpus-per-n=8", "use slurm.gpus_per_node"),
    ("-o /tmp/x", "-o is sbatch's --output"),
    ("-vvo/tmp/x", "-o is sbatch's --output"),
    ("-N4", "use slurm.nodes"),
    ("--export=ALL,LD_PRELOAD=/tmp/evil.so", "--export sets 'LD_PRELOAD'"),
    ("--export=PYTHONPATH=/x", "--export sets 'PYTHONPATH'"),
    ("--export ALL,LD_LIBRARY_PATH=/x", "--export sets 'LD_LIBRARY_PATH'"),
    ("--export-file=/tmp/env", "recorded nowhere"),
    ("--exp=ALL", "ambiguous"),
    ("--export", "needs a value"),
    ("--export=ALL,1BAD", "not ALL, NONE or a variable name"),
])
def test_reserved_under_every_spelling(entry: str, words: str) -> None:
    problem = option_problem(entry)
    assert problem is not None and words in problem
    with pytest.raises(ValueError, match="extra_sbatch entry"):
        SlurmSpec(extra_sbatch=[entry])


@pytest.mark.parametrize("entry", ["--qos=high", "--exclusive", "--constraint=h200", "--gpus=8", "--mem=0",
                                   "--export=ALL", "--export=NONE", "--export=ALL,HOME,CUDA_VISIBLE_DEVICES",
                                   "--time-min=30", "--nodelist=n1", "-vvx n3", "-q high", "--brand-new=1"])
def test_other_options_pass(entry: str) -> None:
    assert option_problem(entry) is None
    assert SlurmSpec(extra_sbatch=[entry]).extra_sbatch == [entry]
