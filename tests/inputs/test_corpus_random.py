"""Random token-ID prompts for quick screens: exact lengths, id ranges, seeding, and the frozen corpus."""

from __future__ import annotations

from pathlib import Path

import pytest

from harness.errors import SpecError
from harness.hashing import ids_sha256
from harness.inputs.corpus import load_corpus
from harness.inputs.corpus.random_ids import (
    SAFE_ID_RANGE,
    RandomPrompts,
    corpus_files,
    draw,
    id_range,
    write_random_corpus,
)


def test_exact_lengths_and_safe_ids_by_default() -> None:
    got = draw(RandomPrompts(5, 32, 16))
    assert [len(ids) for ids, _ in got] == [32] * 5 and [n for _, n in got] == [16] * 5
    assert all(SAFE_ID_RANGE[0] <= i < SAFE_ID_RANGE[1] for ids, _ in got for i in ids)
    assert len({tuple(ids) for ids, _ in got}) == 5  # every prompt differs


def test_seeded_and_prefix_stable() -> None:
    a = draw(RandomPrompts(3, 8, 4, seed=7))
    assert draw(RandomPrompts(3, 8, 4, seed=7)) == a
    assert draw(RandomPrompts(5, 8, 4, seed=7))[:3] == a
    assert draw(RandomPrompts(3, 8, 4, seed=8)) != a


def test_range_ratio_bounds_like_vllm() -> None:
    p = RandomPrompts(200, 100, 10, range_ratio=0.5)
    assert p.bounds(100) == (50, 150) and p.bounds(10) == (5, 15)
    got = draw(p)
    lens = [len(ids) for ids, _ in got]
    outs = [n for _, n in got]
    assert min(lens) >= 50 and max(lens) <= 150 and len(set(lens)) > 10
    assert min(outs) >= 5 and max(outs) <= 15


def test_id_range_from_the_vocabulary() -> None:
    assert id_range(None) == SAFE_ID_RANGE
    assert id_range(50) == (10, 50) and id_range(5) == (4, 5)
    got = draw(RandomPrompts(4, 64, 1, id_low=10, id_high=50))
    assert all(10 <= i < 50 for ids, _ in got for i in ids)
    with pytest.raises(SpecError, match="vocabulary size 1"):
        id_range(1)


@pytest.mark.parametrize(("kwargs", "flag"), [({"num_prompts": 0}, "--num-prompts"),
                                              ({"input_len": 0}, "--random-input-len"),
                                              ({"output_len": -1}, "--random-output-len"),
                                              ({"range_ratio": 1.0}, "--random-range-ratio")])
def test_bad_values_name_their_flag(kwargs: dict[str, float], flag: str) -> None:
    base: dict[str, float] = {"num_prompts": 2, "input_len": 4, "output_len": 4}
    with pytest.raises(SpecError, match=flag):
        draw(RandomPrompts(**(base | kwargs)))  # type: ignore[arg-type]


def test_frozen_corpus_loads_verified(tmp_path: Path) -> None:
    p = RandomPrompts(3, 12, 6, seed=3)
    manifest, lines = corpus_files(p)
    assert lines.count(b"\n") == 3
    corpus = write_random_corpus(tmp_path / "prompts", p)
    assert [c.n_tokens for c in corpus.cases] == [12, 12, 12]
    assert [c.output_tokens for c in corpus.cases] == [6, 6, 6]
    assert [c.sha256 for c in corpus.cases] == [ids_sha256(ids) for ids, _ in draw(p)]
    assert load_corpus(tmp_path / "prompts").manifest_sha256 == corpus.manifest_sha256
    assert corpus.manifest.tokenizer.vocab_size == SAFE_ID_RANGE[1]
    assert manifest["history"][0]["n_cases"] == 3
