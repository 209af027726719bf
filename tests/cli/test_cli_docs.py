"""Every CLI command is documented: help text with an example, and a mention in the README."""

from __future__ import annotations

from pathlib import Path

import typer
from typer.main import get_command

from harness import cli

README = (Path(__file__).resolve().parents[2] / "README.md").read_text()


def commands() -> list[tuple[str, object]]:
    cli._register()
    root = get_command(cli.app)
    out = []

    def walk(cmd: object, path: str) -> None:
        subs = getattr(cmd, "commands", None)
        if subs:
            for name, sub in subs.items():
                walk(sub, f"{path} {name}".strip())
        else:
            out.append((path, cmd))

    walk(root, "")
    return out


def test_every_command_has_help_with_an_example() -> None:
    missing = [path for path, cmd in commands()
               if path != "version" and "Example" not in (getattr(cmd, "help", "") or "")]
    assert missing == []


def test_every_command_group_is_in_the_readme() -> None:
    groups = {path.split()[0] for path, _ in commands()} - {"version"}
    absent = [g for g in sorted(groups) if f"dsv4h {g}" not in README]
    assert absent == []


def test_app_is_typer() -> None:
    assert isinstance(cli.app, typer.Typer)
