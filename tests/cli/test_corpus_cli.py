"""``dsv4h corpus``: build, verify, show, train-tokenizer through the CLI (and exit codes end to end)."""

from __future__ import annotations

import shutil
import subprocess
import sys
from pathlib import Path

import pytest
from typer.testing import CliRunner

from harness.cli.corpus_cmd import app
from harness.errors import CorpusError, SpecError
from harness.inputs.corpus import CASES_FILE, load_corpus

REPO = Path(__file__).resolve().parents[2]
TINY = REPO / "corpora" / "tokenizers" / "tiny-bpe-512"
runner = CliRunner()


def _source(root: Path) -> Path:
    src = root / "src"
    src.mkdir()
    for i in range(4):
        body = "".join(f"def f{i}_{j}(a, b):\n    return a * {j} + b - {i}\n\n" for j in range(20))
        (src / f"m{i}.py").write_text(body)
    return src


@pytest.mark.parametrize("command", ["build", "verify", "show", "train-tokenizer"])
def test_help_has_an_example(command: str) -> None:
    result = runner.invoke(app, [command, "--help"])
    assert result.exit_code == 0 and "Example" in result.output


def test_build_verify_show(tmp_path: Path) -> None:
    src = _source(tmp_path)
    out = tmp_path / "corpora" / "demo"
    result = runner.invoke(app, ["build", "--source", str(src), "--tokenizer", str(TINY), "--tokens", "50-56",
                                 "--cases", "4", "--out", str(out), "--revision", "r9"])
    assert result.exit_code == 0, result.output
    c = load_corpus(out)
    assert len(c) == 4 and c.manifest.source.revision == "r9"

    result = runner.invoke(app, ["build", "--source", str(src), "--tokenizer", str(TINY), "--cases", "6",
                                 "--extend", str(out), "--out", str(tmp_path / "corpora" / "demo6")])
    assert result.exit_code == 0, result.output
    assert load_corpus(tmp_path / "corpora" / "demo6").cases[3].sha256 == c.cases[3].sha256

    result = runner.invoke(app, ["verify", str(out)])
    assert result.exit_code == 0 and "4 cases" in result.output and c.manifest_sha256 in result.output

    result = runner.invoke(app, ["show", str(out)])
    assert result.exit_code == 0, result.output
    for text in ("length histogram", "tiny-bpe-512", "c003", "m0.py", "history"):
        assert text in result.output


def test_verify_names_changed_cases(tmp_path: Path) -> None:
    bad = tmp_path / "bad"
    shutil.copytree(REPO / "corpora" / "tiny-code-128", bad)
    lines = (bad / CASES_FILE).read_text().splitlines()
    lines[5] = lines[5].replace('"input_ids":[', '"input_ids":[1,', 1)
    (bad / CASES_FILE).write_text("\n".join(lines) + "\n")
    result = runner.invoke(app, ["verify", str(bad)])
    assert isinstance(result.exception, CorpusError) and "changed: c005" in str(result.exception)
    # End to end: the console script maps the error to exit code 3 with a hint.
    proc = subprocess.run([sys.executable, "-m", "harness.cli", "corpus", "verify", str(bad)],
                          capture_output=True, text=True, check=False)
    assert proc.returncode == 3 and "c005" in proc.stderr and "hint" in proc.stderr


def test_verify_by_name_and_bad_options(tmp_path: Path) -> None:
    result = runner.invoke(app, ["verify", "tiny-code-128"])
    assert result.exit_code == 0 and "16 cases" in result.output
    result = runner.invoke(app, ["verify", "no-such-corpus"])
    assert isinstance(result.exception, CorpusError)
    result = runner.invoke(app, ["build", "--tokenizer", str(TINY), "--cases", "2", "--out", str(tmp_path / "x"),
                                 "--tokens", "10"])
    assert isinstance(result.exception, SpecError)  # neither --source nor --stdlib
    result = runner.invoke(app, ["build", "--source", str(tmp_path), "--tokenizer", str(TINY), "--cases", "2",
                                 "--out", str(tmp_path / "x"), "--tokens", "9-3"])
    assert isinstance(result.exception, SpecError)


def test_train_tokenizer_cli(tmp_path: Path) -> None:
    src = _source(tmp_path)
    out = tmp_path / "tok"
    result = runner.invoke(app, ["train-tokenizer", "--source", str(src), "--out", str(out), "--vocab-size", "300",
                                 "--specials", "tiny", "--revision", "test-src"])
    assert result.exit_code == 0, result.output
    assert (out / "tokenizer.json").is_file() and "test-src" in (out / "training.json").read_text()
