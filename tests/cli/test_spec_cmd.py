"""``dsv4h spec targets`` (issue 26): the record note's arithmetic as JSON and as a table; bad numbers
are refused with one error naming the option (exit 2, SpecError)."""

from __future__ import annotations

import json

import pytest
from rich.console import Console
from testkit import run_cli


def test_targets_json_has_the_record_notes_figures() -> None:
    code, out, err = run_cli("spec", "targets", "--rate", "63.851301", "--tokens-per-cycle", "1.7768",
                             "--goal", "100", "--goal", "200", "--json")
    assert (code, err) == (0, "")
    data = json.loads(out)
    assert data["rate"] == 63.851301 and data["tokens_per_cycle"] == 1.7768
    assert round(data["cycle_ms"], 2) == 27.83
    g100, g200 = data["goals"]
    assert g100["goal"] == 100 and g100["cycle_needed_ms"] == pytest.approx(17.768)
    assert round(g100["time_cut"], 4) == round(1 - 63.851301 / 100, 4) == 0.3615
    assert round(g200["tokens_per_cycle_needed"], 3) == 5.565


def test_targets_json_without_tokens_per_cycle() -> None:
    code, out, _ = run_cli("spec", "targets", "--rate", "78.287226", "--goal", "100", "--json")
    assert code == 0
    data = json.loads(out)
    assert data["cycle_ms"] is None and data["tokens_per_cycle"] is None
    assert round(data["goals"][0]["time_cut"], 4) == 0.2171
    assert data["goals"][0]["tokens_per_cycle_needed"] is None


def test_targets_table(monkeypatch: pytest.MonkeyPatch) -> None:
    from harness.cli import spec_cmd

    wide = Console(record=True, width=200, color_system=None)
    monkeypatch.setattr(spec_cmd, "console", wide)
    code, _, _ = run_cli("spec", "targets", "--rate", "63.851301", "--tokens-per-cycle", "1.7768",
                         "--goal", "100", "--goal", "200")
    assert code == 0
    text = wide.export_text()
    assert "cycle 27.83 ms at 1.7768 tokens/cycle" in text
    rows = {cells[0]: cells for line in text.splitlines()
            if len(cells := [c.strip() for c in line.strip().strip("│").split("│")]) == 6}
    assert rows["100"] == ["100", "10.000", "36.1%", "17.77", "10.06", "2.783"]
    assert rows["200"] == ["200", "5.000", "68.1%", "8.88", "18.94", "5.565"]


@pytest.mark.parametrize(("args", "option"), [
    (["--rate", "0", "--goal", "100"], "--rate"),
    (["--rate", "-5", "--goal", "100"], "--rate"),
    (["--rate", "60", "--tokens-per-cycle", "0.5", "--goal", "100"], "--tokens-per-cycle"),
    (["--rate", "60", "--goal", "100", "--goal", "0"], "--goal"),
    (["--rate", "nan", "--goal", "100"], "--rate"),
])
def test_bad_numbers_name_the_option(args: list[str], option: str) -> None:
    code, out, err = run_cli("spec", "targets", *args)
    assert code == 2
    assert err.startswith(f"error: {option} must be")
    assert out == ""


def test_missing_goal_is_a_usage_error() -> None:
    code, _, _ = run_cli("spec", "targets", "--rate", "60")
    assert code == 2
