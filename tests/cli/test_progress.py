"""The live progress lines: round status shown literally, failed rounds, attached services."""

from __future__ import annotations

from types import SimpleNamespace

from rich.console import Console

from harness.cli.progress import LiveReporter, round_line


def printed(*lines: object) -> str:
    console = Console(record=True, width=200, color_system=None)
    for line in lines:
        console.print(line)
    return console.export_text()


def test_round_line_shows_its_status_in_brackets() -> None:
    cell = SimpleNamespace(label="decode C32")
    text = printed(round_line({"cell": cell, "round": 0, "rate": 1041.78, "status": "ok"}),
                   round_line({"cell": cell, "round": 1, "rate": 512.0, "status": "short"}),
                   round_line({"cell": cell, "round": 2, "rate": float("nan"), "status": "failed",
                               "error": "1 of 32 requests failed in wave 0"}))
    lines = text.splitlines()
    assert lines[0] == "  decode C32   round 1: 1,041.78 tok/s [ok]", lines[0]
    assert lines[1].endswith("[short]")
    assert "round 3:" in lines[2] and lines[2].endswith("[failed] 1 of 32 requests failed in wave 0")


def test_reporter_prints_failed_rounds_and_detached_services() -> None:
    console = Console(record=True, width=200, color_system=None)
    rep = LiveReporter(console)
    cell = SimpleNamespace(label="decode C8")
    rep("round-done", cell=cell, round=0, status="failed", rate=float("nan"), error="4 of 8 requests failed in wave 1")
    rep("service-stopped", service=SimpleNamespace(url="http://127.0.0.1:30021"), detached=True)
    rep("service-stopped", service=SimpleNamespace(url="http://127.0.0.1:30022"), detached=False)
    text = console.export_text()
    assert "[failed] 4 of 8 requests failed in wave 1" in text
    assert "detached from the service at http://127.0.0.1:30021 (not owned, left running)" in text
    assert text.count("service stopped") == 1
