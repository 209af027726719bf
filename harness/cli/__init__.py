"""The ``dsv4h`` command line: thin commands over the library.

This is the one place that turns errors into an exit code and a hint: ``DsvError`` (its own
code), any ``OSError`` (a full disk, a missing or unreadable path: exit 1 with a hint chosen by
errno), ``MemoryError`` and ``RecursionError``. It is also where dsv4h ends cleanly: SIGTERM and
SIGHUP take Ctrl-C's path (``harness.interrupts``), and whatever ends the process, every server
it launched and still owns is stopped before it exits (``harness.service.process.stop_all_live``).
"""

from __future__ import annotations

import atexit
import contextlib
import errno
import importlib
import os
import sys
import threading

import typer
from rich.console import Console
from rich.markup import escape
from typer import _click as click  # typer 0.26 vendors click: its own Command/Group/Context
from typer.core import TyperCommand, TyperGroup

from harness import __version__
from harness.errors import DsvError


class _LazyGroup(TyperGroup):
    """The root group: a command's module is imported only when that command runs (or shows its own
    help); the root help screen lists the others from ``SUMMARIES``."""

    _listing = False

    def list_commands(self, ctx: click.Context) -> list[str]:
        return [*self.commands, *(n for n in _lazy_names() if n not in self.commands)]

    def get_command(self, ctx: click.Context, cmd_name: str) -> click.Command | None:
        if cmd_name in self.commands or cmd_name not in SUMMARIES:
            return self.commands.get(cmd_name)
        if self._listing:
            return TyperCommand(cmd_name, help=SUMMARIES[cmd_name])
        self.add_command(load_command(cmd_name), cmd_name)
        return self.commands[cmd_name]

    def resolve_command(self, ctx: click.Context, args: list[str]) -> tuple[str | None, click.Command | None,
                                                                             list[str]]:
        if args and args[0] not in self.commands and args[0] not in SUMMARIES:
            for name in _lazy_names():  # a typo: load all, so the suggestions cover every command
                self.get_command(ctx, name)
        return super().resolve_command(ctx, args)

    def format_help(self, ctx: click.Context, formatter: click.HelpFormatter) -> None:
        self._listing = True
        try:
            super().format_help(ctx, formatter)
        finally:
            self._listing = False


app = typer.Typer(
    name="dsv4h",
    cls=_LazyGroup,
    help="Benchmark an LLM serving stack and govern the evidence: formal matrices, ABBA screens, "
    "hashed archives, Delta Lake ledgers and reports.\n\nExample: dsv4h campaign run campaigns/demo-matrix.yaml",
    no_args_is_help=True,
    pretty_exceptions_enable=False,
    add_completion=False,
)

err_console = Console(stderr=True)


@app.callback()
def _root() -> None:
    """dsv4h: honest serving benchmarks with hashed evidence."""


@app.command("version")
def version() -> None:
    """Print the dsv4h version."""
    typer.echo(__version__)


_registered = False


def _register() -> None:
    """Mount every sub-command eagerly (tests and documentation walks use the whole tree). The
    console script does not call this: it loads only the command it runs (``_LazyGroup``)."""
    global _registered
    if _registered:
        return
    _registered = True
    for module, name in _GROUPS:
        app.add_typer(importlib.import_module(f"harness.cli.{module}").app, name=name)
    for module, name in _COMMANDS:
        mod = importlib.import_module(f"harness.cli.{module}")
        app.command(name)(getattr(mod, name))
    app.command("import")(importlib.import_module("harness.cli.peers_cmd").import_)


_GROUPS: list[tuple[str, str]] = [
    ("campaign_cmd", "campaign"),
    ("archive_cmd", "archive"),
    ("ledger_cmd", "ledger"),
    ("evidence_cmd", "evidence"),
    ("gpu_cmd", "gpu"),
    ("corpus_cmd", "corpus"),
    ("sim_cmd", "sim"),
    ("service_cmd", "service"),
    ("patches_cmd", "patches"),
    ("report_cmd", "report"),
    ("oracle_cmd", "oracle"),
    ("compare_cmd", "compare"),
    ("record_cmd", "record"),
    ("closure_cmd", "closure"),
    ("gate_cmd", "gate"),
    ("sweep_cmd", "sweep"),
    ("spec_cmd", "spec"),
    ("identity_cmd", "identity"),
    ("replay_cmd", "replay"),
    ("sla_cmd", "sla"),
]


_COMMANDS: list[tuple[str, str]] = [
    ("abba_cmd", "abba"),
    ("bench_cmd", "bench"),
    ("freeze_cmd", "freeze"),
    ("freeze_cmd", "reveal"),
    ("peers_cmd", "export"),
]


# The first paragraph of each command's help, as `dsv4h --help` lists it: the root help screen is
# drawn from these without importing the command modules (which pull in pandas, pyarrow, aiohttp).
# tests/cli/test_cli_startup.py keeps them equal to the commands' own help.
SUMMARIES: dict[str, str] = {
    "abba": "Run an ABBA screen: A1 -> B1 -> B2 -> A2 with independently started control services.",
    "bench": "Quick screen of a running server with the peers' flags: random token-ID prompts, closed loop.",
    "freeze": "Record FILE's SHA-256, size, path and wall time in the freezes ledger (before the results "
              "exist).",
    "reveal": "Check FILE was frozen, unchanged, before the results archive was created (exit 7 if not).",
    "export": "Write an archive (measured or imported) in a peer tool's format or as CSV.",
    "import": "Import a peer tool's result as an archive of claim class 'external' (its own metric "
              "definitions\nnamed, the source file hashed and kept; never combined with measured claims). "
              "A file that is not the\ntool's result, or whose fields have the wrong types, ranges or "
              "counts, is refused with one error\nnaming the field; nothing is written then. A file imported "
              "before into the workspace (same tool,\nsame SHA-256) is refused, naming its archive; --again "
              "imports it a second time, recorded as such.",
    "campaign": "Formal matrix campaigns.",
    "archive": "Hashed result archives.",
    "ledger": "Delta Lake ledgers (ledgers/delta/<table>/). Read a table with harness.ledger.read(ws, "
              "table), deltalake.DeltaTable(dir).to_pandas(), polars.read_delta(dir) or DuckDB delta_scan(dir) "
              "(ledgers/README.md). A plain Parquet read of a table directory (pandas.read_parquet(dir)) "
              "fails on purpose, naming a marker file: the directory also holds the files later versions "
              "replaced, whose rows it would count twice; 'dsv4h ledger export --parquet DIR' writes one plain "
              "Parquet file per table. A crash-damaged ledger (exit 6 naming a log entry): 'dsv4h ledger "
              "repair'.",
    "evidence": "Evidence rules (docs/evidence-rules.md) as findings.",
    "gpu": "GPU owners and memory, read with amd-smi, NVML (pynvml) or nvidia-smi.",
    "corpus": "Frozen token-ID corpora: build from source files with a tokenizer, verify against the "
              "manifest, show what is inside.",
    "sim": "Run the built-in SGLang-compatible simulator (results against it are labelled 'simulated').",
    "service": "Service profiles: print launch commands; start, check and stop owned services by hand.",
    "patches": "Model patches (model_patches/series.yaml) on an installed SGLang tree: status, apply, "
               "revert. Apply is idempotent and all-or-nothing; a tree that differs from the series' "
               "base is refused.",
    "report": "Reports: verify archives, freeze a snapshot, render figures and tables.",
    "oracle": "Oracles: exact fixed-input greedy completions (sentinels) checked, captured and repeated "
              "against a service.",
    "compare": "Numeric comparisons (report 10.3, kernel level): bitwise equality, max abs error, "
               "relative L2, cosine, NaN/Inf counts.",
    "record": "Records: a three-suite median with its same-build control and the gates it passed.",
    "closure": "Closures: rejected directions with their evidence; reopened only with new evidence.",
    "gate": "Gates: a quantity of one archive compared with a threshold (campaigns/gates/*.yaml).",
    "sweep": "Open-loop rate sweeps (Poisson/gamma/constant arrivals, goodput under SLOs).",
    "spec": "Speculative decoding: targets for a measured decode rate (docs/speculative.md).",
    "identity": "Runtime identity: what a run served (model, source trees, launch, packages, server config, "
                "mapped libraries, patches, speculation), shown and compared.",
    "replay": "Trace replays: a Mooncake trace's requests at its timestamps / speed, prefix hits checked.",
    "sla": "SLA search: the highest request rate whose p99 TTFT/TPOT/E2E meet declared limits.",
}


def _lazy_names() -> list[str]:
    """Every lazily loaded command, in the order `dsv4h --help` lists them (commands, then groups)."""
    return [name for _, name in _COMMANDS] + ["import"] + [name for _, name in _GROUPS]


def load_command(name: str) -> click.Command:
    """The click command for one top-level name, built exactly as ``_register`` mounts it (a holder
    Typer with a callback always becomes a group, so a sub-app stays a group)."""
    holder = typer.Typer(add_completion=False)
    holder.callback()(_root)
    groups = dict((n, m) for m, n in _GROUPS)
    if name in groups:
        holder.add_typer(importlib.import_module(f"harness.cli.{groups[name]}").app, name=name)
    elif name == "import":
        holder.command(name)(importlib.import_module("harness.cli.peers_cmd").import_)
    else:
        module = dict((n, m) for m, n in _COMMANDS)[name]
        holder.command(name)(getattr(importlib.import_module(f"harness.cli.{module}"), name))
    group = typer.main.get_command(holder)
    assert isinstance(group, TyperGroup)
    return group.commands[name]


_ERRNO_HINTS = {
    errno.ENOSPC: "the disk is full: free space there and run the command again; an interrupted run's data "
                  "stays in its workspace (archives/.partial-*): 'dsv4h archive list' shows it and "
                  "'dsv4h archive recover' finalizes it",
    errno.EDQUOT: "the disk quota is exhausted: free space and run the command again",
    errno.EACCES: "check the permissions of that path (or choose another workspace with -w)",
    errno.EPERM: "check the permissions of that path (or choose another workspace with -w)",
    errno.ENOENT: "check the path: it does not exist",
    errno.ENOTDIR: "a part of that path is a file, not a directory: choose a directory (e.g. -w for a workspace)",
    errno.EISDIR: "that path is a directory where a file was expected",
    errno.ENAMETOOLONG: "the path or a name in it is too long; use shorter names",
    errno.EROFS: "the file system is read-only: choose a writable workspace with -w",
    errno.EMFILE: "too many open files: raise the limit (ulimit -n) or run fewer things at once",
}


def error_lines(exc: BaseException) -> tuple[str, str | None, int] | None:
    """(message, hint, exit code) for an error the CLI reports on one line, or None for a bug."""
    if isinstance(exc, DsvError):
        return exc.message, exc.hint, exc.exit_code
    if isinstance(exc, OSError):
        where = f": {exc.filename}" if exc.filename else ""
        what = exc.strerror or str(exc)
        hint = _ERRNO_HINTS.get(exc.errno or 0, "check the path and the file system, then run the command again")
        return f"{what}{where}", hint, 1
    if isinstance(exc, MemoryError):
        return "out of memory", "lower the sizes in the spec (tiers, waves, tokens) or free memory", 1
    if isinstance(exc, RecursionError):
        return "input nested too deeply", "flatten the input file", 1
    return None


def report_error(message: str, hint: str | None) -> None:
    """Print one ``error:`` line (and a ``hint:`` line); user text is never read as markup. What the
    command wrote to stdout is flushed first, so in a shared log the error starts its own line
    after the output it concerns."""
    sys.stdout.flush()
    # soft-wrapped: a message or hint that carries a command, an id or a path stays one line
    err_console.print(f"[bold red]error:[/] {escape(message)}", highlight=False, soft_wrap=True)
    if hint:
        err_console.print(f"[bold]hint:[/] {escape(hint)}", highlight=False, soft_wrap=True)


def run() -> int:
    """Run the app and return its exit status: errors mapped to exit codes and hints, and no
    launched server left running however the command ends. A bug (any other exception) propagates
    with its traceback."""
    from harness.interrupts import exit_status, install, received
    from harness.service.process import stop_all_live

    install()
    try:
        app()
    except SystemExit as exc:
        if exc.code == 1 and received() is not None:  # click turned a stopping signal into "Aborted!"
            return exit_status()
        return _status(exc.code)
    except (DsvError, OSError, MemoryError, RecursionError) as exc:
        lines = error_lines(exc)
        assert lines is not None
        report_error(lines[0], lines[1])
        return lines[2]
    finally:
        stop_all_live()
    return 0


def _status(code: object) -> int:
    """The process status ``SystemExit(code)`` stands for (a message is printed, status 1)."""
    if code is None:
        return 0
    if isinstance(code, int):
        return code
    print(code, file=sys.stderr)
    return 1


def main() -> None:
    """Console-script entry point: :func:`run`, then end the process without tearing the
    interpreter down.

    Python-level exit handlers still run (``atexit``: owned servers, logging) and both streams are
    flushed; what is skipped is native teardown. Arrow C++ (pyarrow) can abort there with
    ``terminate called without an active exception`` when its thread pool is destroyed while a
    worker is still joinable (apache/arrow#34314, delta-rs#2184): 3 in 139 runs of ``dsv4h archive
    recover`` that had finished their work, a success turned into status 134 (0 in 200 since).
    """
    code = run()
    _exit_now(code)


def _exit_now(code: int) -> None:
    # what interpreter shutdown would wait for: non-daemon threads, then atexit handlers
    for thread in threading.enumerate():
        if thread is not threading.main_thread() and not thread.daemon:
            thread.join()
    atexit._run_exitfuncs()
    for stream in (sys.stdout, sys.stderr):
        with contextlib.suppress(OSError, ValueError):  # a closed pipe (`dsv4h ... | head`): nothing to say
            stream.flush()
    os._exit(code & 0xFF)  # as sys.exit would: the status modulo 256
