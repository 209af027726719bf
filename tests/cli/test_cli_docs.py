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


def test_help_screens_show_plain_metavars_and_argument_help() -> None:
    """Every --help at 80 columns names arguments in capitals (``SPEC``), never as ``{spec}`` or a
    type placeholder such as ``<bool>``/``<path>``, and shows each argument's own help text."""
    from typer.testing import CliRunner

    runner = CliRunner()
    bad: list[str] = []
    for path, cmd in commands():
        result = runner.invoke(cli.app, [*path.split(), "--help"], env={"COLUMNS": "80"}, terminal_width=80)
        assert result.exit_code == 0, (path, result.output)
        text = result.output
        usage = next((line for line in text.splitlines() if "Usage:" in line), "")
        if "{" in usage or any(tag in text for tag in ("<bool>", "<path>", "<str>", "<int>", "<float>")):
            bad.append(path)
        for param in getattr(cmd, "params", []):
            helptext = getattr(param, "help", None)
            if param.param_type_name == "argument" and helptext and helptext.split()[0] not in text:
                bad.append(f"{path}: argument {param.name} help not shown")
    assert bad == []
