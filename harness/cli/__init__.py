"""The ``dsv4h`` command line: thin commands over the library.

This is the one place that turns errors into an exit code and a hint: ``DsvError`` (its own
code), any ``OSError`` (a full disk, a missing or unreadable path: exit 1 with a hint chosen by
errno), ``MemoryError`` and ``RecursionError``. It is also where dsv4h ends cleanly: SIGTERM and
SIGHUP take Ctrl-C's path (``harness.interrupts``), and whatever ends the process, every server
it launched and still owns is stopped before it exits (``harness.service.process.stop_all_live``).
"""

from __future__ import annotations

import errno
import sys

import typer
from rich.console import Console
from rich.markup import escape

from harness import __version__
from harness.errors import DsvError

app = typer.Typer(
    name="dsv4h",
    help="Benchmark an LLM serving stack and govern the evidence: formal matrices, ABBA screens, "
    "hashed archives, Parquet ledgers and reports.\n\nExample: dsv4h campaign run campaigns/demo-matrix.yaml",
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
    # Sub-command groups live in their own modules; imported here so `dsv4h --help` lists them.
    import importlib

    global _registered
    if _registered:
        return
    _registered = True
    for module, name in _GROUPS:
        mod = importlib.import_module(f"harness.cli.{module}")
        app.add_typer(mod.app, name=name)
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
]


_COMMANDS: list[tuple[str, str]] = [
    ("abba_cmd", "abba"),
    ("freeze_cmd", "freeze"),
    ("freeze_cmd", "reveal"),
    ("peers_cmd", "export"),
]


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
    err_console.print(f"[bold red]error:[/] {escape(message)}", highlight=False)
    if hint:
        err_console.print(f"[bold]hint:[/] {escape(hint)}", highlight=False)


def main() -> None:
    """Console-script entry point: run the app, map errors to exit codes and hints, and leave no
    launched server running however the process ends."""
    from harness.interrupts import exit_status, install, received
    from harness.service.process import stop_all_live

    _register()
    install()
    try:
        app()
    except SystemExit as exc:
        if exc.code == 1 and received() is not None:  # click turned a stopping signal into "Aborted!"
            sys.exit(exit_status())
        raise
    except (DsvError, OSError, MemoryError, RecursionError) as exc:
        lines = error_lines(exc)
        assert lines is not None
        report_error(lines[0], lines[1])
        sys.exit(lines[2])
    finally:
        stop_all_live()
