"""Distribution corpora and ShareGPT import (harness.inputs.corpus.synth): verified, extendable."""

from __future__ import annotations

from pathlib import Path

import pytest

from harness.errors import CorpusError
from harness.inputs.corpus import load_corpus, verify_corpus
from harness.inputs.corpus.synth import Distribution, build_distribution_corpus, import_sharegpt, sharegpt_turns

ROOT = Path(__file__).resolve().parents[2]
TOK = ROOT / "corpora" / "tokenizers" / "tiny-bpe-512"
SHAREGPT = ROOT / "tests" / "fixtures" / "peers" / "sharegpt-small.json"


def test_distribution_parse() -> None:
    assert str(Distribution.parse("uniform:16:128")) == "uniform:16:128"
    with pytest.raises(CorpusError, match="cannot read"):
        Distribution.parse("zipf:1")
    with pytest.raises(CorpusError, match="out of range"):
        Distribution.parse("uniform:9:3")


def test_distribution_corpus_builds_verifies_and_extends(tmp_path: Path) -> None:
    small = build_distribution_corpus(tmp_path / "s", tokenizer=TOK, n_cases=6, inputs="uniform:20:40",
                                      outputs="fixed:8", seed=3)
    assert verify_corpus(small.path) == []
    assert all(20 <= c.n_tokens <= 40 and c.output_tokens == 8 for c in small.cases)
    big = build_distribution_corpus(tmp_path / "b", tokenizer=TOK, n_cases=9, inputs="uniform:20:40",
                                    outputs="fixed:8", seed=3, extend=small.path)
    assert [c.sha256 for c in big.cases[:6]] == [c.sha256 for c in small.cases]
    assert big.manifest.history[-1].action == "extend" and len(big) == 9
    with pytest.raises(CorpusError, match="would change"):
        build_distribution_corpus(tmp_path / "x", tokenizer=TOK, n_cases=9, inputs="uniform:20:40",
                                  outputs="fixed:8", seed=4, extend=small.path)


def test_sharegpt_turns_multi_turn_with_history() -> None:
    import json

    turns = list(sharegpt_turns(json.loads(SHAREGPT.read_text())))
    assert [(c, t) for c, t, _, _ in turns] == [("conv-a", 1), ("conv-a", 2), ("conv-b", 1)]
    second = turns[1][2]
    assert second.startswith("User: How do I read") and "Assistant: Open it" in second
    assert second.endswith("User: And how do I strip the newline?\nAssistant: ")
    assert turns[2][2].startswith("System: You are terse.\nUser: Sort")


def test_sharegpt_import_is_a_verified_corpus(tmp_path: Path) -> None:
    c = import_sharegpt(tmp_path / "chats", source=SHAREGPT, tokenizer=TOK)
    assert verify_corpus(c.path) == [] and len(c) == 3
    assert c.manifest.cases[1].provenance.path == "sharegpt-small.json#conv-a"
    assert c.manifest.cases[1].provenance.line_start == 2
    assert all(x.output_tokens and x.output_tokens > 0 for x in c.cases)
    assert c.manifest.source.revision and load_corpus(c.path).manifest_sha256 == c.manifest_sha256
