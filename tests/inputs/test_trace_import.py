"""A frozen corpus from a Mooncake trace (harness.inputs.corpus.trace_import, ``dsv4h corpus import-trace``):
shared blocks identical, hashed and verified like every corpus, the trace checked against it."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest
from testkit import run_cli

from harness.errors import CorpusError
from harness.inputs.corpus import load_corpus, verify_corpus
from harness.inputs.corpus.trace_import import check_trace_matches, import_trace, trace_params
from harness.inputs.trace import read_trace

ROOT = Path(__file__).resolve().parents[2]
SMALL = ROOT / "tests" / "fixtures" / "traces" / "mooncake-small.jsonl"
B = 512


def test_the_fixture_imports_with_identical_shared_blocks(tmp_path: Path) -> None:
    c = import_trace(SMALL, tmp_path / "mc", block_size=B, seed=0)
    assert verify_corpus(c.path) == [] and len(c) == 20
    trace = read_trace(SMALL, block_size=B)
    blocks: dict[tuple[int, int], list[int]] = {}
    for case, r in zip(c.cases, trace, strict=True):
        ids = case.ids_list()
        assert len(ids) == r.input_length and case.output_tokens == r.output_length
        assert case.provenance["line_start"] == r.line
        for k, h in enumerate(r.hash_ids):
            part = ids[k * B:(k + 1) * B]
            full = blocks.setdefault((k, h), part)
            assert full[:len(part)] == part[:len(full)]  # the same block; a partial one its beginning
            if len(part) > len(full):
                blocks[(k, h)] = part
    assert c.cases[0].ids_list()[:1024] == c.cases[1].ids_list()[:1024]  # lines 1 and 2 share blocks 0, 1
    assert c.cases[0].ids_list()[1024:1100] != c.cases[1].ids_list()[1024:1100]  # then 2 vs 3
    assert trace_params(c) == {"block_size": B, "file": SMALL.name, "format": "mooncake", "id_range": [1000, 30000],
                               "seed": 0}
    again = import_trace(SMALL, tmp_path / "again", block_size=B, seed=0, name="mc")
    assert again.manifest_sha256 == c.manifest_sha256  # deterministic
    assert import_trace(SMALL, tmp_path / "s1", block_size=B, seed=1, name="mc").manifest_sha256 != c.manifest_sha256


def test_the_replay_checks_the_trace_is_the_corpus_source(tmp_path: Path) -> None:
    c = import_trace(SMALL, tmp_path / "mc", block_size=B)
    assert len(check_trace_matches(c, SMALL)) == 20
    other = tmp_path / "other.jsonl"
    other.write_text(SMALL.read_text() + json.dumps({"timestamp": 9999, "input_length": 5, "output_length": 1,
                                                      "hash_ids": []}) + "\n")
    with pytest.raises(CorpusError, match="is not the trace corpus"):
        check_trace_matches(c, other)


def test_a_changed_corpus_file_is_refused(tmp_path: Path) -> None:
    c = import_trace(SMALL, tmp_path / "mc", block_size=B)
    shutil.copytree(c.path, tmp_path / "edited")
    cases = (tmp_path / "edited" / "cases.jsonl").read_text().replace("[", "[7,", 1)
    (tmp_path / "edited" / "cases.jsonl").write_text(cases)
    assert verify_corpus(tmp_path / "edited") != []
    with pytest.raises(CorpusError):
        load_corpus(tmp_path / "edited")


def test_cli_imports_and_names_the_bad_line(tmp_path: Path) -> None:
    code, out, err = run_cli("corpus", "import-trace", str(SMALL), "--block-size", "512", "--out", str(tmp_path / "mc"))
    assert code == 0 and "imported mc: 20 cases" in out
    bad = tmp_path / "bad.jsonl"
    bad.write_text(SMALL.read_text().splitlines()[0] + "\n" + '{"timestamp": 5, "input_length": 600, '
                   '"output_length": 3, "hash_ids": [1, 2, 3]}\n')
    code, _, err = run_cli("corpus", "import-trace", str(bad), "--out", str(tmp_path / "b"))
    assert code != 0 and f"{bad}: line 2: field 'hash_ids': 3 blocks, but input_length 600 needs only 2" in err
    assert not (tmp_path / "b").exists()
    code, _, err = run_cli("corpus", "import-trace", str(SMALL))
    assert code != 0 and "give --name or --out" in err
