"""``dsv4h campaign run|plan`` given a ``kind: rate-sweep`` spec: the same run as ``dsv4h sweep run``
(one code path), then ``dsv4h report build`` shows the sweep section and the corpus record."""

from __future__ import annotations

import json
from pathlib import Path

from testkit import only_archive, run_dsv4h, tiny_sweep_spec
from typer.testing import CliRunner

from harness.cli.campaign_cmd import app, spec_kind
from harness.errors import SpecError

ROOT = Path(__file__).resolve().parents[2]
runner = CliRunner()

def _spec(tmp_path: Path) -> Path:
    return tiny_sweep_spec(tmp_path, "sweep-via-campaign")


def test_spec_kind_and_refused_options(tmp_path: Path) -> None:
    spec = _spec(tmp_path)
    assert spec_kind(spec) == "rate-sweep" and spec_kind(ROOT / "campaigns/demo-matrix.yaml") == "formal-matrix"
    result = runner.invoke(app, ["run", str(spec), "-w", str(tmp_path / "ws"), "--resume", "abc"])
    assert isinstance(result.exception, SpecError)
    assert "kind rate-sweep takes neither --resume nor --workers" in result.exception.message
    assert not (tmp_path / "ws" / "archives").exists()  # refused before anything ran
    result = runner.invoke(app, ["plan", str(spec), "--json"])
    assert result.exit_code == 0, result.output
    rows = json.loads(result.output)
    assert [(r["rate_req_s"], r["round"]) for r in rows][:4] == [(4.0, "warmup"), (4.0, "0"), (4.0, "1"), (4.0, "2")]


def test_campaign_run_runs_a_rate_sweep_and_the_report_shows_it(tmp_path: Path) -> None:
    spec = _spec(tmp_path)
    ws = tmp_path / "ws"
    proc = run_dsv4h("campaign", "run", str(spec), "-w", str(ws))
    assert f"{spec}: kind rate-sweep: running it as 'dsv4h sweep run {spec}' does" in proc.stdout.replace("\n", "")
    assert "rate 4: request throughput" in proc.stdout and "rate 8: request throughput" in proc.stdout
    archive = only_archive(ws)
    manifest = json.loads((archive / "manifest.json").read_text())
    assert (manifest["run"]["kind"], manifest["run"]["protocol_class"]) == ("rate-sweep", "rate-sweep")
    corpus = json.loads((archive / "corpora.json").read_text())["sweep"]
    assert {k: corpus[k] for k in ("record_format", "tokenizer", "vocab_size", "token_range", "input_tokens")} == {
        "record_format": 2, "tokenizer": "dsv4h-sim-bpe-8k", "vocab_size": 8192, "token_range": [511, 512],
        "input_tokens": [511, 512]}
    assert corpus["token_ids"][0] >= 0 and corpus["token_ids"][1] < 8192 and len(corpus["tokenizer_sha256"]) == 64

    out = tmp_path / "report"
    run_dsv4h("report", "build", "-w", str(ws), "--out", str(out), "--jobs", "1")
    html = (out / "report.html").read_text()
    assert 'id="sweeps"' in html and f'data-figure="sweep-{archive.name}"' in html
    assert "This report holds 1 archive: 1 rate sweep (sweep-via-campaign)." in html
    assert "dsv4h-sim-bpe-8k (vocab 8192, sha256 " in html
    # the card's knee: of a valid sweep whose knee is a steady rate; a busy machine may leave no steady
    # rate (the knee withheld, docs/saturation.md) or invalidate the sweep (exit 7): then none is shown
    sweep = json.loads((archive / "sweep.json").read_text())
    if proc.returncode == 0 and sweep.get("knee"):
        assert "goodput at the knee" in html
    else:
        assert "goodput at the knee" not in html
    intro = html[:html.index("<h2>Contents</h2>")]  # description and summary card
    assert "ABBA" not in intro and "formal P/D" not in intro  # the workspace holds neither; nothing said
