"""Small builders shared by tests in several folders."""

from __future__ import annotations

from typing import Any

from harness.store.runblock import RunBlock


def run_block(**fields: Any) -> RunBlock:
    """A complete run block for a hand-made archive; ``fields`` override the defaults."""
    base: dict[str, Any] = {"campaign": "test", "kind": "formal-matrix", "claim_class": "native-ar",
                            "protocol_class": "formal", "backend": "sim", "service_name": "sim",
                            "created_wall": "2026-11-30T00:00:00+0000", "run_token": "test"}
    return RunBlock.model_validate(base | fields)


def run_cli(*args: str) -> tuple[int, str, str]:
    """Run the dsv4h command line in this process as ``harness.cli.main`` would: (exit status,
    stdout, the error and hint lines ``main`` prints). An error ``main`` would not map (a bug) is raised."""
    from typer.testing import CliRunner

    from harness.cli import _register, app, error_lines

    _register()
    result = CliRunner().invoke(app, list(args))
    exc = result.exception
    if exc is None or isinstance(exc, SystemExit):
        return result.exit_code, result.stdout, ""
    lines = error_lines(exc)
    if lines is None:
        raise exc
    message, hint, code = lines
    return code, result.stdout, f"error: {message}\n" + (f"hint: {hint}\n" if hint else "")
