"""The ``dsv4h`` command line: thin commands over the library.

This is the one place that turns ``DsvError`` into an exit code and a hint.
"""

from __future__ import annotations

import sys

import typer
from rich.console import Console

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
]


_COMMANDS: list[tuple[str, str]] = [
    ("abba_cmd", "abba"),
    ("freeze_cmd", "freeze"),
    ("freeze_cmd", "reveal"),
]


def main() -> None:
    """Console-script entry point: run the app, map ``DsvError`` to its exit code and hint."""
    _register()
    try:
        app()
    except DsvError as exc:
        err_console.print(f"[bold red]error:[/] {exc.message}", highlight=False)
        if exc.hint:
            err_console.print(f"[bold]hint:[/] {exc.hint}", highlight=False)
        sys.exit(exc.exit_code)
