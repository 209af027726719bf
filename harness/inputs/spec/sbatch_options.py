"""Which sbatch option an ``extra_sbatch`` entry is, resolved the way sbatch resolves it (pure).

sbatch parses its options with ``getopt_long``: a long option may be written as any prefix of its
name that is an exact name or matches exactly one option (``--out=x`` is ``--output=x``), and short
options cluster (``-vo x`` is ``-v -o x``). So a reserved option is recognised under every spelling:
:func:`option_problem` resolves a long name against :data:`SBATCH_LONG` (the long options of
sbatch(1), Slurm 24.11), and refuses an entry that resolves to a reserved option or whose prefix is
ambiguous between options one of which is reserved (sbatch refuses an ambiguous prefix anyway). A
name sbatch does not know (and that no known option begins with) is left to sbatch.

Reserved (:data:`RESERVED`): the options dsv4h writes itself (job name, log, stop signal, and the
``slurm:`` fields: nodes, partition, GPUs per node, time, account, CPUs per task), whose later
``#SBATCH`` line would silently override dsv4h's; ``--error`` (the log), ``--wrap`` and ``--parsable``
(``submit`` reads the job id from sbatch's own output); ``--export-file`` (an environment read from a file).

``--export`` is allowed only as ``ALL``, ``NONE`` or a list of variable names to pass through, never
``NAME=value``: an assignment would give the run an environment (``LD_PRELOAD``, ``PYTHONPATH``, a
library path) that neither the spec's fields nor the archive record.
"""

from __future__ import annotations

import re

# sbatch(1) long options (Slurm 24.11)
_LONG_NAMES = """
account acctg-freq array batch bb bbf begin chdir cluster-constraint clusters comment constraint container
container-id contiguous core-spec cores-per-socket cpu-freq cpus-per-gpu cpus-per-task deadline delay-boot
dependency distribution error exclude exclusive export export-file extra extra-node-info get-user-env gid
gpu-bind gpu-freq gpus gpus-per-node gpus-per-socket gpus-per-task gres gres-flags help hint hold ignore-pbs
input job-name kill-on-invalid-dep licenses mail-type mail-user mcs-label mem mem-bind mem-per-cpu mem-per-gpu
mincpus network nice no-kill no-requeue nodefile nodelist nodes ntasks ntasks-per-core ntasks-per-gpu
ntasks-per-node ntasks-per-socket oom-kill-step open-mode output overcommit oversubscribe parsable partition
power prefer priority profile propagate qos quiet reboot requeue reservation resv-ports segment signal
sockets-per-node spread-job switches test-only thread-spec threads-per-core time time-min tmp tres-bind
tres-per-task uid usage use-min-nodes verbose version wait wait-all-nodes wckey wrap
"""
SBATCH_LONG = frozenset(_LONG_NAMES.split())

# reserved long option -> why (what to write instead)
RESERVED: dict[str, str] = {
    "output": "dsv4h sets --output itself (the job's log)",
    "error": "dsv4h keeps the job's stderr in its log (--output)",
    "signal": "dsv4h sets --signal itself (how the job stops; use slurm.stop_grace_s)",
    "wrap": "dsv4h writes the batch script itself",
    "parsable": "dsv4h reads the job id from sbatch's own output",
    "job-name": "use slurm.job_name",
    "nodes": "use slurm.nodes",
    "partition": "use slurm.partition",
    "gpus-per-node": "use slurm.gpus_per_node",
    "time": "use slurm.time_limit",
    "account": "use slurm.account",
    "cpus-per-task": "use slurm.cpus_per_task",
    "export-file": "an environment read from a file is recorded nowhere",
}
# sbatch's short options: those that take no argument, and the reserved ones (letter -> long name)
_SHORT_FLAGS = frozenset("hHkOQsvVW")
_SHORT: dict[str, str] = {"o": "output", "e": "error", "J": "job-name", "N": "nodes", "p": "partition",
                          "t": "time", "A": "account", "c": "cpus-per-task"}
_EXPORT_NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")


def resolve(name: str) -> tuple[str, ...]:
    """The long options ``--name`` may be, as ``getopt_long`` decides: the exact option when ``name``
    is one, else every option ``name`` begins (one: that option; several: ambiguous; none: unknown)."""
    if name in SBATCH_LONG:
        return (name,)
    return tuple(sorted(o for o in SBATCH_LONG if o.startswith(name)))


def _export_problem(value: str | None) -> str | None:
    if value is None:
        return "--export needs a value (ALL, NONE or variable names)"
    for i, item in enumerate(value.split(",")):
        if i == 0 and item in ("ALL", "NONE"):
            continue
        if "=" in item:
            return (f"--export sets {item.split('=', 1)[0][:60]!r}: an environment set here is recorded "
                    "nowhere (set it where the run records it, e.g. the service's env)")
        if not _EXPORT_NAME.fullmatch(item):
            return f"--export item {item[:60]!r} is not ALL, NONE or a variable name"
    return None


def option_problem(entry: str) -> str | None:
    """Why the sbatch option ``entry`` (``--name=value``, ``--name value``, ``-x value``) may not be
    an ``extra_sbatch`` entry (module docstring), or None."""
    head, _, rest = entry.partition(" ")
    if head.startswith("--"):
        name, eq, value = head[2:].partition("=")
        arg = value if eq else (rest or None)
        options = resolve(name)
        if options == ("export",):
            return _export_problem(arg)
        hit = [o for o in options if o in RESERVED or o == "export"]
        if not hit:
            return None
        if len(options) == 1:
            return f"--{name} is sbatch's --{options[0]}: {RESERVED[options[0]]}"
        return (f"--{name} is ambiguous (sbatch: {', '.join('--' + o for o in options[:6])}) and may mean "
                f"--{hit[0]}; write the option in full")
    for letter in head[1:]:
        if letter in _SHORT:
            return f"-{letter} is sbatch's --{_SHORT[letter]}: {RESERVED[_SHORT[letter]]}"
        if letter not in _SHORT_FLAGS:
            break  # this letter takes an argument: the rest of the word is its value
    return None
